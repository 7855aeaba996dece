package cloudtasks

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The ways Cloud Tasks delivers that a client must survive: duplicates,
// a create whose answer is lost, throttled retries, tombstones.

func TestDuplicateDelivery(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock), WithDuplicateRate(1))
	createQueue(t, c, nil)
	rec := newRecorder(t, 500, 500)
	task := createTask(t, c, httpTask(testQueue+"/tasks/dup", rec.URL()))
	waitIdle(t, srv)
	reqs := rec.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want the attempt delivered twice", len(reqs))
	}
	for _, h := range []string{HeaderTaskName, HeaderRetryCount, HeaderExecutionCount, HeaderETA} {
		if a, b := reqs[0].Header.Get(h), reqs[1].Header.Get(h); a != b {
			t.Errorf("%s: %q and %q, want the same attempt twice", h, a, b)
		}
	}
	got, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name})
	if err != nil || got.DispatchCount != 1 {
		t.Fatalf("GetTask after two failed deliveries = %v, %v; want the task waiting, dispatch_count 1", got, err)
	}
	checkWaiting(t, srv)

	// The retry is delivered twice too; the first success completes it.
	clock.Step(time.Second)
	srv.Wake()
	waitIdle(t, srv)
	if n := len(rec.Requests()); n != 4 {
		t.Errorf("requests after the retry = %d, want 4", n)
	}
	if _, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name}); code(err) != codes.NotFound {
		t.Errorf("GetTask after success = %v, want NotFound", err)
	}
	if s := srv.Stats(); s != (Stats{Dispatched: 4, Succeeded: 2, Failed: 2, Duplicated: 2}) {
		t.Errorf("Stats = %+v, want 4 dispatched (2 duplicates), 2 failed, 2 succeeded", s)
	}

	srv.SetDuplicateRate(0)
	createTask(t, c, httpTask(testQueue+"/tasks/once", rec.URL()))
	waitIdle(t, srv)
	if n := len(rec.Requests()); n != 5 {
		t.Errorf("requests with the rate at 0 = %d, want one more", n)
	}
}

func TestDuplicateRate(t *testing.T) {
	srv, c := start(t, WithDuplicateRate(0.5))
	createQueue(t, c, nil)
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)
	const tasks = 400
	for range tasks {
		createTask(t, c, httpTask("", target.URL))
	}
	waitIdle(t, srv)
	// Binomial(400, 0.5): 140..260 is six standard deviations.
	if s := srv.Stats(); s.Duplicated < 140 || s.Duplicated > 260 || s.Dispatched != tasks+s.Duplicated {
		t.Errorf("Stats = %+v, want about half of %d attempts duplicated", s, tasks)
	}
}

func TestAmbiguousCreate(t *testing.T) {
	for _, lost := range []codes.Code{codes.DeadlineExceeded, codes.Unavailable} {
		t.Run(lost.String(), func(t *testing.T) {
			srv, c := start(t)
			createQueue(t, c, nil)
			rec := newRecorder(t)
			srv.LoseNext("CreateTask", 1, lost, "the answer was lost")
			task := httpTask(testQueue+"/tasks/ambiguous", rec.URL())
			if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task}); code(err) != lost {
				t.Fatalf("CreateTask = %v, want %v", err, lost)
			}
			// The caller's retry meets the task it created.
			if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task}); code(err) != codes.AlreadyExists {
				t.Errorf("CreateTask again = %v, want AlreadyExists", err)
			}
			waitIdle(t, srv)
			if n := len(rec.Requests()); n != 1 {
				t.Errorf("requests = %d, want the task run once", n)
			}
			if srv.Lost("CreateTask") != 1 || srv.Calls("CreateTask") != 2 {
				t.Errorf("Lost = %d, Calls = %d; want 1 and 2", srv.Lost("CreateTask"), srv.Calls("CreateTask"))
			}
		})
	}
}

func TestDispatchDeadlineBounds(t *testing.T) {
	_, c := start(t)
	createQueue(t, c, nil)
	tests := []struct {
		deadline time.Duration
		want     codes.Code
	}{
		{time.Second, codes.InvalidArgument},
		{15*time.Second - time.Millisecond, codes.InvalidArgument},
		{15 * time.Second, codes.OK},
		{30 * time.Minute, codes.OK},
		{30*time.Minute + time.Second, codes.InvalidArgument},
	}
	for _, tt := range tests {
		task := httpTask("", "http://example.test/x")
		task.DispatchDeadline = durationpb.New(tt.deadline)
		task.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
		if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task}); code(err) != tt.want {
			t.Errorf("CreateTask(dispatch_deadline %v) = %v, want %v", tt.deadline, err, tt.want)
		}
	}
}

func TestThrottledBackoff(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name       string
		plain      time.Duration
		retryAfter string
		want       time.Duration
	}{
		{"no header", time.Second, "", 2 * time.Second},
		{"seconds above", time.Second, "120", 2 * time.Minute},
		{"seconds below", time.Minute, "1", 2 * time.Minute},
		{"date", time.Second, now.Add(time.Hour).Format(http.TimeFormat), time.Hour},
		{"past date", time.Second, now.Add(-time.Hour).Format(http.TimeFormat), 2 * time.Second},
		{"garbage", time.Second, "soon", 2 * time.Second},
		{"huge", time.Second, "99999999999", maxScheduleAhead},
	}
	for _, tt := range tests {
		if got := throttledBackoff(tt.plain, tt.retryAfter, now); got != tt.want {
			t.Errorf("%s: throttledBackoff(%v, %q) = %v, want %v", tt.name, tt.plain, tt.retryAfter, got, tt.want)
		}
	}
}

func TestThrottledRetry(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			clock := newFakeClock()
			srv, c := start(t, WithClock(clock))
			createQueue(t, c, nil) // a 1 ms backoff
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(status)
			}))
			t.Cleanup(target.Close)
			task := createTask(t, c, httpTask(testQueue+"/tasks/throttled", target.URL))
			waitIdle(t, srv)
			got, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name})
			if err != nil {
				t.Fatalf("GetTask: %v", err)
			}
			if want := clock.Now().Add(30 * time.Second); !got.ScheduleTime.AsTime().Equal(want) {
				t.Errorf("retry at %v, want %v (Retry-After: 30)", got.ScheduleTime.AsTime(), want)
			}
		})
	}
}

func TestTaskTombstone(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock))
	createQueue(t, c, nil)
	rec := newRecorder(t)
	task := httpTask(testQueue+"/tasks/done", rec.URL())
	createTask(t, c, task)
	waitIdle(t, srv)
	clock.Step(DefaultTombstone - time.Second)
	_, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task})
	if code(err) != codes.AlreadyExists {
		t.Fatalf("CreateTask within the tombstone = %v, want AlreadyExists", err)
	}
	if want := "The task cannot be created because a task with this name existed too recently."; !strings.Contains(err.Error(), want) {
		t.Errorf("CreateTask within the tombstone = %v, want Cloud Tasks' message %q", err, want)
	}
	clock.Step(time.Second)
	if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task}); err != nil {
		t.Errorf("CreateTask after the tombstone = %v, want it created", err)
	}
}

func TestQueueTombstone(t *testing.T) {
	clock := newFakeClock()
	_, c := start(t, WithClock(clock))
	createQueue(t, c, nil)
	if err := c.DeleteQueue(ctx(t), &cloudtaskspb.DeleteQueueRequest{Name: testQueue}); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	clock.Step(DefaultQueueTombstone - time.Second)
	q := &cloudtaskspb.Queue{Name: testQueue}
	if _, err := c.CreateQueue(ctx(t), &cloudtaskspb.CreateQueueRequest{Parent: testLocation, Queue: q}); code(err) != codes.FailedPrecondition {
		t.Errorf("CreateQueue within the tombstone = %v, want FailedPrecondition", err)
	}
	if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: httpTask("", "http://example.test/x")}); code(err) != codes.FailedPrecondition {
		t.Errorf("CreateTask in the deleted queue = %v, want FailedPrecondition", err)
	}
	clock.Step(time.Second)
	if _, err := c.CreateQueue(ctx(t), &cloudtaskspb.CreateQueueRequest{Parent: testLocation, Queue: q}); err != nil {
		t.Errorf("CreateQueue after the tombstone = %v, want it created", err)
	}
	other := testLocation + "/queues/never"
	if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: other, Task: httpTask("", "http://example.test/x")}); code(err) != codes.NotFound {
		t.Errorf("CreateTask in a queue that never was = %v, want NotFound", err)
	}
}
