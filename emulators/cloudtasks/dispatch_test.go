package cloudtasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/kubernetes/shared/wait"
	"google.golang.org/api/iterator"
)

func TestBackoff(t *testing.T) {
	// The example of the RetryConfig documentation: 10s, 20s, 40s, 80s,
	// 160s, 240s, 300s, 300s.
	doc := &cloudtaskspb.RetryConfig{
		MinBackoff: durationpb.New(10 * time.Second), MaxBackoff: durationpb.New(300 * time.Second), MaxDoublings: 3,
	}
	tests := []struct {
		name     string
		rc       *cloudtaskspb.RetryConfig
		failures int
		want     time.Duration
	}{
		{"doc 1", doc, 1, 10 * time.Second},
		{"doc 2", doc, 2, 20 * time.Second},
		{"doc 3", doc, 3, 40 * time.Second},
		{"doc 4", doc, 4, 80 * time.Second},
		{"doc 5", doc, 5, 160 * time.Second},
		{"doc 6", doc, 6, 240 * time.Second},
		{"doc 7", doc, 7, 300 * time.Second},
		{"doc 8", doc, 8, 300 * time.Second},
		{"no doublings is linear", &cloudtaskspb.RetryConfig{
			MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Hour),
		}, 4, 4 * time.Second},
		{"huge retry count saturates", &cloudtaskspb.RetryConfig{
			MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Hour), MaxDoublings: 1000,
		}, 5000, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.rc, tt.failures); got != tt.want {
				t.Errorf("backoff(%v, %d) = %v, want %v", tt.rc, tt.failures, got, tt.want)
			}
		})
	}
}

func TestExhausted(t *testing.T) {
	rc := func(attempts int32, d time.Duration) *cloudtaskspb.RetryConfig {
		return &cloudtaskspb.RetryConfig{MaxAttempts: attempts, MaxRetryDuration: durationpb.New(d)}
	}
	tests := []struct {
		name     string
		rc       *cloudtaskspb.RetryConfig
		attempts int
		elapsed  time.Duration
		want     bool
	}{
		{"below max attempts", rc(3, 0), 2, time.Hour, false},
		{"at max attempts", rc(3, 0), 3, 0, true},
		{"unlimited", rc(-1, 0), 1000, 1000 * time.Hour, false},
		{"duration only, before", rc(-1, time.Minute), 50, 59 * time.Second, false},
		{"duration only, after", rc(-1, time.Minute), 2, time.Minute, true},
		{"both, attempts reached only", rc(3, time.Minute), 3, time.Second, false},
		{"both, duration reached only", rc(3, time.Minute), 2, time.Hour, false},
		{"both reached", rc(3, time.Minute), 3, time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exhausted(tt.rc, tt.attempts, tt.elapsed); got != tt.want {
				t.Errorf("exhausted(%v, %d, %v) = %v, want %v", tt.rc, tt.attempts, tt.elapsed, got, tt.want)
			}
		})
	}
}

func TestScheduleTime(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock))
	createQueue(t, c, nil)
	rec := newRecorder(t)
	task := httpTask("", rec.URL())
	task.ScheduleTime = timestamppb.New(clock.Now().Add(time.Hour))
	createTask(t, c, task)

	for _, step := range []struct {
		advance time.Duration
		want    int
	}{
		{0, 0},
		{59 * time.Minute, 0},
		{time.Minute - time.Nanosecond, 0},
		{time.Nanosecond, 1},
	} {
		clock.Step(step.advance)
		srv.Wake()
		waitIdle(t, srv)
		if got := len(rec.Requests()); got != step.want {
			t.Errorf("requests after reaching %v = %d, want %d", clock.Now(), got, step.want)
		}
	}
}

func TestScheduleTimeRealClock(t *testing.T) {
	srv, c := start(t)
	createQueue(t, c, nil)
	rec := newRecorder(t)
	at := time.Now().Add(200 * time.Millisecond)
	task := httpTask("", rec.URL())
	task.ScheduleTime = timestamppb.New(at)
	createTask(t, c, task)
	wait.Until(t, "dispatch", func() bool { return srv.Stats().Succeeded == 1 })
	if got := rec.Requests()[0].At; got.Before(at) {
		t.Errorf("dispatched at %v, before its schedule time %v", got, at)
	}
}

func TestRetryWithBackoff(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock))
	createQueue(t, c, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{
		MinBackoff: durationpb.New(10 * time.Second), MaxBackoff: durationpb.New(300 * time.Second), MaxDoublings: 3,
	}})
	rec := newRecorder(t, 500, 404, 503)
	t0 := clock.Now()
	task := createTask(t, c, httpTask(testQueue+"/tasks/retried", rec.URL()))

	steps := []struct {
		wait         time.Duration // clock advance before this attempt
		retryCount   string
		executions   string
		previous     string
		lastCode     codes.Code
		nextBackoff  time.Duration
		responses    int32
		wantComplete bool
	}{
		{0, "0", "0", "", codes.Internal, 10 * time.Second, 1, false},
		{10 * time.Second, "1", "0", "500", codes.NotFound, 20 * time.Second, 2, false},
		// A 503 is throttled: twice the plain backoff.
		{20 * time.Second, "2", "1", "404", codes.Unavailable, 80 * time.Second, 3, false},
		{80 * time.Second, "3", "1", "503", codes.OK, 0, 4, true},
	}
	for i, st := range steps {
		// Just before the retry is due nothing happens.
		if st.wait > 0 {
			clock.Step(st.wait - time.Millisecond)
			srv.Wake()
			waitIdle(t, srv)
			if got := len(rec.Requests()); got != i {
				t.Fatalf("attempt %d: requests before backoff elapsed = %d, want %d", i+1, got, i)
			}
			clock.Step(time.Millisecond)
			srv.Wake()
		}
		waitIdle(t, srv)
		reqs := rec.Requests()
		if len(reqs) != i+1 {
			t.Fatalf("attempt %d: requests = %d, want %d", i+1, len(reqs), i+1)
		}
		h := reqs[i].Header
		if h.Get(HeaderRetryCount) != st.retryCount || h.Get(HeaderExecutionCount) != st.executions || h.Get(HeaderPreviousResponse) != st.previous {
			t.Errorf("attempt %d: retry %q, execution %q, previous %q; want %q, %q, %q", i+1,
				h.Get(HeaderRetryCount), h.Get(HeaderExecutionCount), h.Get(HeaderPreviousResponse),
				st.retryCount, st.executions, st.previous)
		}
		got, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name})
		if st.wantComplete {
			if code(err) != codes.NotFound {
				t.Errorf("GetTask(completed) = %v, %v; want NotFound", got, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("GetTask(%q): %v", task.Name, err)
		}
		if got.DispatchCount != int32(i+1) || got.ResponseCount != st.responses {
			t.Errorf("attempt %d: dispatch_count %d, response_count %d; want %d, %d", i+1, got.DispatchCount, got.ResponseCount, i+1, st.responses)
		}
		if c := codes.Code(got.LastAttempt.GetResponseStatus().GetCode()); c != st.lastCode {
			t.Errorf("attempt %d: last_attempt status %v, want %v", i+1, c, st.lastCode)
		}
		if want := clock.Now().Add(st.nextBackoff); !got.ScheduleTime.AsTime().Equal(want) {
			t.Errorf("attempt %d: next schedule_time %v, want %v", i+1, got.ScheduleTime.AsTime(), want)
		}
		if first := got.FirstAttempt.GetDispatchTime().AsTime(); !first.Equal(t0) {
			t.Errorf("attempt %d: first_attempt dispatch_time %v, want %v", i+1, first, t0)
		}
	}
	if s := srv.Stats(); s != (Stats{Dispatched: 4, Succeeded: 1, Failed: 3}) {
		t.Errorf("Stats = %+v, want 4 dispatched, 3 failed, 1 succeeded", s)
	}
}

func TestMaxAttempts(t *testing.T) {
	srv, c := start(t)
	createQueue(t, c, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{
		MaxAttempts: 3, MinBackoff: durationpb.New(time.Millisecond), MaxBackoff: durationpb.New(time.Millisecond),
	}})
	rec := newRecorder(t, 500, 500, 500, 500, 500)
	task := createTask(t, c, httpTask(testQueue+"/tasks/doomed", rec.URL()))
	wait.Until(t, "the task to be dropped", func() bool { return srv.Stats().Dropped == 1 })
	waitIdle(t, srv)
	if got := len(rec.Requests()); got != 3 {
		t.Errorf("requests = %d, want max_attempts = 3", got)
	}
	if _, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name}); code(err) != codes.NotFound {
		t.Errorf("GetTask(dropped) = %v, want NotFound", err)
	}
	// A dropped task's name is tombstoned like an executed one's.
	if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: httpTask(task.Name, rec.URL())}); code(err) != codes.AlreadyExists {
		t.Errorf("CreateTask(dropped name) = %v, want AlreadyExists", err)
	}
}

func TestExecutedNameIsTombstoned(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock))
	createQueue(t, c, nil)
	rec := newRecorder(t)
	name := testQueue + "/tasks/once"
	createTask(t, c, httpTask(name, rec.URL()))
	waitIdle(t, srv)
	if len(rec.Requests()) != 1 {
		t.Fatalf("requests = %d, want 1", len(rec.Requests()))
	}
	// The name stays reserved for the tombstone period, then is free again.
	for _, step := range []struct {
		advance time.Duration
		want    codes.Code
	}{
		{0, codes.AlreadyExists},
		{59 * time.Minute, codes.AlreadyExists},
		{time.Minute, codes.OK},
	} {
		clock.Step(step.advance)
		_, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: httpTask(name, rec.URL())})
		if code(err) != step.want {
			t.Errorf("CreateTask(executed name) after +%v = %v, want %v", step.advance, err, step.want)
		}
	}
}

func TestMaxConcurrentDispatches(t *testing.T) {
	const limit, tasks = 3, 12
	srv, c := start(t)
	createQueue(t, c, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: limit}})

	var inflight, peak, calls atomic.Int32
	release := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
	}))
	t.Cleanup(target.Close)
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // runs before target.Close, which waits for handlers

	for range tasks {
		createTask(t, c, httpTask("", target.URL))
	}
	wait.Until(t, "the first wave to arrive", func() bool { return inflight.Load() >= limit })
	// With every request held, one more scan must not start another.
	srv.GServer.dispatchDue()
	if got := srv.Stats().Dispatched; got != limit {
		t.Errorf("dispatched with %d requests held = %d, want %d", limit, got, limit)
	}
	unblock()
	wait.Until(t, "all tasks to complete", func() bool { return srv.Stats().Succeeded == tasks })
	if got := peak.Load(); got != limit {
		t.Errorf("peak concurrent requests = %d, want %d", got, limit)
	}
	if got := calls.Load(); got != tasks {
		t.Errorf("requests = %d, want %d", got, tasks)
	}
}

func TestMaxDispatchesPerSecond(t *testing.T) {
	const rate, tasks = 10, 14 // burst 10, then one every 100 ms
	srv, c := start(t)
	begin := time.Now()
	createQueue(t, c, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: rate}})
	rec := newRecorder(t)
	for range tasks {
		createTask(t, c, httpTask("", rec.URL()))
	}
	wait.Until(t, "all tasks to complete", func() bool { return srv.Stats().Succeeded == tasks })
	for i, r := range rec.Requests() {
		// A token bucket of size rate admits at most rate + rate*elapsed.
		allowed := rate + rate*r.At.Sub(begin).Seconds()
		if float64(i+1) > allowed+0.01 {
			t.Errorf("request %d arrived %v after start, above the %v/s rate", i+1, r.At.Sub(begin), rate)
		}
	}
}

func TestPauseAndResume(t *testing.T) {
	srv, c := start(t)
	createQueue(t, c, nil)
	if _, err := c.PauseQueue(ctx(t), &cloudtaskspb.PauseQueueRequest{Name: testQueue}); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	rec := newRecorder(t)
	createTask(t, c, httpTask("", rec.URL()))
	waitIdle(t, srv)
	if got := len(rec.Requests()); got != 0 {
		t.Errorf("requests while paused = %d, want 0", got)
	}
	if _, err := c.ResumeQueue(ctx(t), &cloudtaskspb.ResumeQueueRequest{Name: testQueue}); err != nil {
		t.Fatalf("ResumeQueue: %v", err)
	}
	waitIdle(t, srv)
	if got := len(rec.Requests()); got != 1 {
		t.Errorf("requests after resume = %d, want 1", got)
	}
}

func TestFailedAttempts(t *testing.T) {
	blocked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(blocked.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	tests := []struct {
		name   string
		task   func() *cloudtaskspb.Task
		tokens TokenSource
		want   codes.Code
	}{
		{"dispatch deadline", func() *cloudtaskspb.Task {
			task := httpTask("", blocked.URL)
			// The shortest deadline Cloud Tasks takes, which the
			// emulator's attempt timeout cuts to 50 ms.
			task.DispatchDeadline = durationpb.New(15 * time.Second)
			return task
		}, nil, codes.DeadlineExceeded},
		{"connection refused", func() *cloudtaskspb.Task { return httpTask("", closedURL) }, nil, codes.Unavailable},
		{"no token source", func() *cloudtaskspb.Task {
			task := httpTask("", closedURL)
			task.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "sa@p1"}}
			return task
		}, nil, codes.PermissionDenied},
		{"token source error", func() *cloudtaskspb.Task {
			task := httpTask("", closedURL)
			task.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "sa@p1"}}
			return task
		}, func(context.Context, string, string) (string, error) { return "", errors.New("issuer down") }, codes.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A frozen clock keeps the retry from running, so the first
			// attempt's outcome can be read.
			clock := newFakeClock()
			srv, c := start(t, WithClock(clock), WithTokenSource(tt.tokens), WithAttemptTimeout(50*time.Millisecond))
			createQueue(t, c, nil)
			task := createTask(t, c, tt.task())
			waitIdle(t, srv)
			got, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name})
			if err != nil {
				t.Fatalf("GetTask(%q): %v", task.Name, err)
			}
			if c := codes.Code(got.LastAttempt.GetResponseStatus().GetCode()); c != tt.want {
				t.Errorf("last_attempt status = %v (%v), want %v", c, got.LastAttempt.GetResponseStatus().GetMessage(), tt.want)
			}
			if got.DispatchCount != 1 || got.ResponseCount != 0 || got.LastAttempt.GetResponseTime() != nil {
				t.Errorf("dispatch_count %d, response_count %d, response_time %v; want 1, 0, none",
					got.DispatchCount, got.ResponseCount, got.LastAttempt.GetResponseTime())
			}
			if !got.ScheduleTime.AsTime().After(clock.Now()) {
				t.Errorf("schedule_time %v, want a retry after %v", got.ScheduleTime.AsTime(), clock.Now())
			}
		})
	}
}

func TestFaultInjection(t *testing.T) {
	srv, c := start(t)
	createQueue(t, c, nil)
	task := httpTask(testQueue+"/tasks/f", "http://example.test/x")
	task.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))

	srv.FailNext("CreateTask", 2, codes.Unavailable, "The service is currently unavailable.")
	for i, want := range []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK, codes.AlreadyExists} {
		_, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task})
		if code(err) != want {
			t.Errorf("CreateTask call %d = %v, want %v", i+1, err, want)
		}
		if want == codes.Unavailable && status.Convert(err).Message() != "The service is currently unavailable." {
			t.Errorf("CreateTask call %d = %v, want the message injected", i+1, err)
		}
	}
	if n := srv.Calls("CreateTask"); n != 4 {
		t.Errorf("Calls(CreateTask) = %d, want 4", n)
	}
	// The official client retries GetTask on UNAVAILABLE, so callers see
	// only the success; faults injected one after the other add up.
	gets := srv.Calls("GetTask")
	srv.FailNext("GetTask", 1, codes.Unavailable, "The service is currently unavailable.")
	srv.FailNext("GetTask", 1, codes.Unavailable, "The service is currently unavailable.")
	if _, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name}); err != nil {
		t.Errorf("GetTask after 2 injected UNAVAILABLE = %v, want success through client retries", err)
	}
	if n := srv.Calls("GetTask") - gets; n != 3 {
		t.Errorf("GetTask attempts = %d, want 3 (two failed, one served)", n)
	}
	srv.FailNext("GetTask", 1, codes.PermissionDenied, "The principal lacks cloudtasks.tasks.get.")
	if _, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name}); code(err) != codes.PermissionDenied {
		t.Errorf("GetTask with injected PERMISSION_DENIED = %v, want PermissionDenied", err)
	}
	const latency = 100 * time.Millisecond
	srv.SetLatency("ListTasks", latency)
	begin := time.Now()
	if _, err := c.ListTasks(ctx(t), &cloudtaskspb.ListTasksRequest{Parent: testQueue}).Next(); err != nil && err != iterator.Done {
		t.Errorf("delayed ListTasks = %v", err)
	}
	if took := time.Since(begin); took < latency {
		t.Errorf("delayed ListTasks took %v, want at least %v", took, latency)
	}
}

func TestCloseWaitsForInFlight(t *testing.T) {
	srv, err := NewServer(WithLogger(discard()))
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	c := newClient(t, srv)
	createQueue(t, c, nil)
	arrived, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		finished.Store(true)
	}))
	t.Cleanup(target.Close)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	createTask(t, c, httpTask("", target.URL))
	<-arrived

	closed := make(chan struct{})
	go func() {
		_ = srv.Close()
		close(closed)
	}()
	wait.Until(t, "Close to begin", func() bool {
		srv.GServer.mu.Lock()
		defer srv.GServer.mu.Unlock()
		return srv.GServer.closed
	})
	select {
	case <-closed:
		t.Fatal("Close returned while a request was in flight")
	default:
	}
	releaseOnce.Do(func() { close(release) })
	<-closed
	if !finished.Load() {
		t.Error("Close returned before the in-flight request finished")
	}
}

func TestDeleteQueueInFlight(t *testing.T) {
	srv, c := start(t)
	createQueue(t, c, nil)
	arrived, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(target.Close)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	createTask(t, c, httpTask(testQueue+"/tasks/gone", target.URL))
	<-arrived
	if err := c.DeleteQueue(ctx(t), &cloudtaskspb.DeleteQueueRequest{Name: testQueue}); err != nil {
		t.Fatalf("DeleteQueue(a task in flight): %v", err)
	}
	releaseOnce.Do(func() { close(release) })
	waitIdle(t, srv)
	// The failed attempt must not bring the deleted task back for a retry.
	if got := srv.Tasks(testQueue); len(got) != 0 {
		t.Errorf("Tasks after deleting the queue of an in-flight task = %v, want none", got)
	}
	if s := srv.Stats(); s != (Stats{Dispatched: 1, Failed: 1}) {
		t.Errorf("Stats = %+v, want one failed dispatch", s)
	}
}

func TestLogs(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock), WithLogger(logger))
	createQueue(t, c, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 2}})
	rec := newRecorder(t, 503, 500)
	createTask(t, c, httpTask(testQueue+"/tasks/logged", rec.URL()))
	waitIdle(t, srv)
	clock.Step(time.Hour)
	srv.Wake()
	waitIdle(t, srv)

	type line struct {
		Level, Msg, Queue, Task, Reason string
		Attempt                         int
	}
	var got []line
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var l line
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("decode log: %v", err)
		}
		got = append(got, l)
	}
	want := []line{
		{"INFO", "Dispatching task", testQueue, "logged", "", 1},
		{"WARN", "Retrying task", testQueue, "logged", "HTTP 503", 1},
		{"INFO", "Dispatching task", testQueue, "logged", "", 2},
		{"WARN", "Dropping task: retries exhausted", testQueue, "logged", "HTTP 500", 2},
	}
	if len(got) != len(want) {
		t.Fatalf("logs = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("log %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDispatchOrder(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock))
	// One at a time, so requests arrive in the order they were started.
	createQueue(t, c, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 1}})
	if _, err := c.PauseQueue(ctx(t), &cloudtaskspb.PauseQueueRequest{Name: testQueue}); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	rec := newRecorder(t)
	t0 := clock.Now()
	for _, tk := range []struct {
		id    string
		after time.Duration
	}{
		{"d", 3 * time.Second},
		{"c", time.Second},
		{"a", 2 * time.Second},
		{"b", time.Second},
		{"e", time.Second + time.Nanosecond},
		{"first", 0},
		{"later", time.Hour},
	} {
		task := httpTask(testQueue+"/tasks/"+tk.id, rec.URL())
		task.ScheduleTime = timestamppb.New(t0.Add(tk.after))
		createTask(t, c, task)
	}
	checkWaiting(t, srv)
	clock.Step(3 * time.Second)
	if _, err := c.ResumeQueue(ctx(t), &cloudtaskspb.ResumeQueueRequest{Name: testQueue}); err != nil {
		t.Fatalf("ResumeQueue: %v", err)
	}
	waitIdle(t, srv)
	checkWaiting(t, srv)
	clock.Step(time.Hour)
	srv.Wake()
	waitIdle(t, srv)

	var got []string
	for _, r := range rec.Requests() {
		got = append(got, r.Header.Get(HeaderTaskName))
	}
	// Schedule time first, then name.
	want := []string{"first", "b", "c", "e", "a", "d", "later"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("dispatch order = %v, want %v", got, want)
	}
	checkWaiting(t, srv)
}

// checkWaiting fails t unless each queue's waiting tasks are exactly its
// tasks not in flight, in heap order, each with its index.
func checkWaiting(t *testing.T, srv *Server) {
	t.Helper()
	g := srv.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, q := range g.queues {
		waiting := 0
		for _, tk := range q.tasks {
			if tk.inflight > 0 {
				if tk.index != -1 {
					t.Errorf("queue %s: task %s in flight has index %d", name, tk.pb.Name, tk.index)
				}
				continue
			}
			waiting++
			if tk.index < 0 || tk.index >= len(q.waiting) || q.waiting[tk.index] != tk {
				t.Errorf("queue %s: task %s not waiting at its index %d", name, tk.pb.Name, tk.index)
			}
			if !tk.due.Equal(tk.pb.ScheduleTime.AsTime()) {
				t.Errorf("queue %s: task %s due %v, schedule_time %v", name, tk.pb.Name, tk.due, tk.pb.ScheduleTime.AsTime())
			}
		}
		if len(q.waiting) != waiting {
			t.Errorf("queue %s: %d waiting, want %d", name, len(q.waiting), waiting)
		}
		for i := 1; i < len(q.waiting); i++ {
			if q.waiting.Less(i, (i-1)/2) {
				t.Errorf("queue %s: waiting[%d] sorts before its parent", name, i)
			}
		}
	}
}
