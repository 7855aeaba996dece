package cloudtasks

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The headers Cloud Tasks adds to every dispatched request, spelled as the
// service spells them.
const (
	HeaderQueueName        = "X-CloudTasks-QueueName"
	HeaderTaskName         = "X-CloudTasks-TaskName"
	HeaderRetryCount       = "X-CloudTasks-TaskRetryCount"
	HeaderExecutionCount   = "X-CloudTasks-TaskExecutionCount"
	HeaderETA              = "X-CloudTasks-TaskETA"
	HeaderPreviousResponse = "X-CloudTasks-TaskPreviousResponse"
)

// attempt is what one dispatch needs, copied under the lock so the HTTP
// call runs without it.
type attempt struct {
	t          *task
	queueID    string
	taskID     string
	req        *cloudtaskspb.HttpRequest
	deadline   time.Duration
	retries    int
	executions int
	prevStatus int
	eta        time.Time
	record     *cloudtaskspb.Attempt
}

// dispatchLoop sends due tasks until close, sleeping until the earliest
// schedule time or rate-limit token, or until woken by a state change.
func (g *GServer) dispatchLoop() {
	defer close(g.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		next, ok := g.dispatchDue()
		var fire <-chan time.Time
		if ok {
			timer.Reset(max(0, next.Sub(g.now())))
			fire = timer.C
		}
		select {
		case <-g.done:
			timer.Stop()
			return
		case <-g.wake:
		case <-fire:
		}
		timer.Stop()
	}
}

// dispatchDue starts every due task that its queue's state, concurrency and
// rate limits allow, and returns when the dispatcher should look again
// (ok is false when only a state change can make more work).
func (g *GServer) dispatchDue() (next time.Time, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return time.Time{}, false
	}
	now := g.now()
	later := func(at time.Time) {
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	names := make([]string, 0, len(g.queues))
	for name, q := range g.queues {
		if q.pb.State == cloudtaskspb.Queue_RUNNING {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		q := g.queues[name]
		rl := q.pb.RateLimits
		if elapsed := now.Sub(q.refilled); elapsed > 0 {
			q.tokens = min(float64(rl.MaxBurstSize), q.tokens+elapsed.Seconds()*rl.MaxDispatchesPerSecond)
			q.refilled = now
		}
		// Tasks in flight are not waiting: their completion wakes the loop.
		// A queue held back by its limits needs no wake-up for its later
		// tasks, which could not start before the limit allows anyway.
		for len(q.waiting) > 0 {
			t := q.waiting[0]
			if t.due.After(now) {
				later(t.due)
				break
			}
			if q.inflight >= int(rl.MaxConcurrentDispatches) {
				break // a completion wakes the loop
			}
			if q.tokens < 1 {
				wait := (1 - q.tokens) / rl.MaxDispatchesPerSecond
				later(now.Add(time.Duration(math.Ceil(wait * float64(time.Second)))))
				break
			}
			q.tokens--
			g.startAttemptLocked(t, now)
		}
	}
	return next, ok
}

// taskHeap is a heap (container/heap) of a queue's waiting tasks in the
// order Cloud Tasks dispatches them: schedule time, then name. Each task
// keeps its index so that it can be removed in O(log n).
type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }

func (h taskHeap) Less(i, j int) bool {
	if c := h[i].due.Compare(h[j].due); c != 0 {
		return c < 0
	}
	return h[i].pb.Name < h[j].pb.Name
}

func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

// wait makes t, which is neither in flight nor waiting, wait for its
// schedule time.
func (q *queue) wait(t *task) { heap.Push(&q.waiting, t) }

// unwait takes t out of the waiting tasks if it is there. heap.Remove never
// compares the task it removes, so its schedule time may already have
// changed.
func (q *queue) unwait(t *task) {
	if t.index >= 0 {
		heap.Remove(&q.waiting, t.index)
	}
}

// schedule sets the time t is due.
func (t *task) schedule(at *timestamppb.Timestamp) {
	t.pb.ScheduleTime = at
	t.due = at.AsTime()
}

// startAttemptLocked records a new attempt of t and sends it in the
// background.
func (g *GServer) startAttemptLocked(t *task, now time.Time) {
	q := t.queue
	q.unwait(t)
	t.pb.DispatchCount++
	record := &cloudtaskspb.Attempt{
		ScheduleTime: proto.Clone(t.pb.ScheduleTime).(*timestamppb.Timestamp),
		DispatchTime: timestamppb.New(now),
	}
	if t.pb.FirstAttempt == nil {
		t.pb.FirstAttempt = &cloudtaskspb.Attempt{DispatchTime: timestamppb.New(now)}
	}
	t.pb.LastAttempt = proto.Clone(record).(*cloudtaskspb.Attempt)
	a := attempt{
		t:          t,
		queueID:    queueID(q.pb.Name),
		taskID:     t.pb.Name[strings.LastIndex(t.pb.Name, "/")+1:],
		req:        proto.Clone(t.pb.GetHttpRequest()).(*cloudtaskspb.HttpRequest),
		deadline:   durationOr(t.pb.DispatchDeadline, defaultDeadline),
		retries:    int(t.pb.DispatchCount) - 1,
		executions: t.executions,
		prevStatus: t.lastStatus,
		eta:        t.due,
		record:     record,
	}
	t.inflight++
	q.inflight++
	g.inflight++
	g.stats.Dispatched++
	g.cfg.logger.Info("Dispatching task", "queue", q.pb.Name, "task", a.taskID,
		"url", a.req.Url, "attempt", t.pb.DispatchCount)
	g.attempts.Add(1)
	go g.run(a)
	if r := g.cfg.duplicateRate; r > 0 && rand.Float64() < r {
		// The same attempt again, headers and all, as Cloud Tasks sends
		// a duplicate: both count as in flight, and the task's outcome is
		// the first to succeed, or the last to finish.
		t.inflight++
		q.inflight++
		g.inflight++
		g.stats.Dispatched++
		g.stats.Duplicated++
		g.cfg.logger.Info("Dispatching task twice", "queue", q.pb.Name, "task", a.taskID, "attempt", t.pb.DispatchCount)
		g.attempts.Add(1)
		go g.run(a)
	}
	g.notifyLocked()
}

// run performs one attempt and records its outcome.
func (g *GServer) run(a attempt) {
	defer g.attempts.Done()
	deadline := a.deadline
	if d := g.cfg.attemptTimeout; d > 0 && d < deadline {
		deadline = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	code, retryAfter, err := g.send(ctx, a)
	g.finish(a, code, retryAfter, err)
}

// errToken marks a failure to mint the OIDC token: no request was sent.
var errToken = errors.New("mint OIDC token")

// send makes the HTTP request of an attempt and returns the response's
// status code and Retry-After header.
func (g *GServer) send(ctx context.Context, a attempt) (code int, retryAfter string, err error) {
	method := a.req.HttpMethod.String()
	req, err := http.NewRequestWithContext(ctx, method, a.req.Url, bytes.NewReader(a.req.Body))
	if err != nil {
		return 0, "", fmt.Errorf("build request for %s: %w", a.req.Url, err)
	}
	for k, v := range a.req.Headers {
		if !reservedHeader(k) {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("User-Agent", "Google-Cloud-Tasks")
	// Direct map writes keep the service's spelling on the wire.
	req.Header[HeaderQueueName] = []string{a.queueID}
	req.Header[HeaderTaskName] = []string{a.taskID}
	req.Header[HeaderRetryCount] = []string{strconv.Itoa(a.retries)}
	req.Header[HeaderExecutionCount] = []string{strconv.Itoa(a.executions)}
	req.Header[HeaderETA] = []string{strconv.FormatFloat(float64(a.eta.UnixMicro())/1e6, 'f', 6, 64)}
	if a.retries > 0 && a.prevStatus != 0 {
		req.Header[HeaderPreviousResponse] = []string{strconv.Itoa(a.prevStatus)}
	}
	if oidc := a.req.GetOidcToken(); oidc != nil {
		audience := oidc.Audience
		if audience == "" {
			audience = a.req.Url
		}
		if g.cfg.tokens == nil {
			return 0, "", fmt.Errorf("%w for %s: no token source configured", errToken, oidc.ServiceAccountEmail)
		}
		tok, err := g.cfg.tokens(ctx, audience, oidc.ServiceAccountEmail)
		if err != nil {
			return 0, "", fmt.Errorf("%w for %s: %w", errToken, oidc.ServiceAccountEmail, err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := g.cfg.httpClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", method, a.req.Url, err)
	}
	defer resp.Body.Close()
	// Drained so the connection is reused; bounded against huge replies.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// reservedHeader reports whether Cloud Tasks ignores or replaces a task
// header of that name.
func reservedHeader(name string) bool {
	c := http.CanonicalHeaderKey(name)
	switch c {
	case "Host", "Content-Length", "User-Agent":
		return true
	}
	return strings.HasPrefix(c, "X-Google-") || strings.HasPrefix(c, "X-Appengine-") || strings.HasPrefix(c, "X-Cloudtasks-")
}

// finish records an attempt's outcome: a 2xx deletes the task; anything
// else reschedules it after its backoff, or drops it once its retries are
// exhausted.
func (g *GServer) finish(a attempt, code int, retryAfter string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := a.t
	t.inflight--
	t.queue.inflight--
	g.inflight--
	defer g.notifyLocked()
	defer g.wakeDispatcher()

	ok := err == nil && code >= 200 && code < 300
	if ok {
		g.stats.Succeeded++
	} else {
		g.stats.Failed++
	}
	if g.tasks[t.pb.Name] != t {
		return // its queue was deleted while it was in flight
	}
	now := g.now()
	record := a.record
	record.ResponseStatus = responseStatus(code, err)
	if err == nil {
		record.ResponseTime = timestamppb.New(now)
		t.pb.ResponseCount++
		t.lastStatus = code
		if code < 500 {
			t.executions++
		}
	}
	t.pb.LastAttempt = record
	log := g.cfg.logger.With("queue", t.queue.pb.Name, "task", a.taskID, "attempt", t.pb.DispatchCount)
	if ok {
		log.Debug("Task completed", "status", code)
		g.removeTaskLocked(t)
		return
	}
	reason := fmt.Sprintf("HTTP %d", code)
	if err != nil {
		reason = err.Error()
	}
	rc := t.pb.RetryConfig
	if rc == nil {
		rc = t.queue.pb.RetryConfig
	}
	if exhausted(rc, int(t.pb.DispatchCount), now.Sub(t.pb.FirstAttempt.DispatchTime.AsTime())) {
		log.Warn("Dropping task: retries exhausted", "reason", reason)
		g.stats.Dropped++
		g.removeTaskLocked(t)
		return
	}
	wait := backoff(rc, int(t.pb.DispatchCount))
	if err == nil && (code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable) {
		wait = throttledBackoff(wait, retryAfter, now)
	}
	t.schedule(timestamppb.New(now.Add(wait)))
	if t.inflight == 0 { // else the last attempt to finish decides
		t.queue.wait(t)
	}
	log.Warn("Retrying task", "reason", reason, "backoff", wait)
}

// responseStatus is the google.rpc.Status Cloud Tasks records for an
// attempt's outcome.
func responseStatus(code int, err error) *spb.Status {
	switch {
	case errors.Is(err, errToken):
		return &spb.Status{Code: int32(codes.PermissionDenied), Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &spb.Status{Code: int32(codes.DeadlineExceeded), Message: err.Error()}
	case err != nil:
		return &spb.Status{Code: int32(codes.Unavailable), Message: err.Error()}
	}
	c := codes.Unknown
	switch {
	case code >= 200 && code < 300:
		c = codes.OK
	case code == http.StatusBadRequest:
		c = codes.InvalidArgument
	case code == http.StatusUnauthorized:
		c = codes.Unauthenticated
	case code == http.StatusForbidden:
		c = codes.PermissionDenied
	case code == http.StatusNotFound:
		c = codes.NotFound
	case code == http.StatusConflict:
		c = codes.Aborted
	case code == http.StatusTooManyRequests:
		c = codes.ResourceExhausted
	case code == http.StatusNotImplemented:
		c = codes.Unimplemented
	case code == http.StatusServiceUnavailable:
		c = codes.Unavailable
	case code == http.StatusGatewayTimeout:
		c = codes.DeadlineExceeded
	case code >= 400 && code < 500:
		c = codes.FailedPrecondition
	case code >= 500:
		c = codes.Internal
	}
	return &spb.Status{Code: int32(c), Message: fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))}
}

// exhausted reports whether a task that failed its attempts-th attempt,
// elapsed after its first one, must be dropped: Cloud Tasks stops only when
// every limit that is set (max_attempts other than -1, a positive
// max_retry_duration) is reached, and never when neither is set.
func exhausted(rc *cloudtaskspb.RetryConfig, attempts int, elapsed time.Duration) bool {
	limitAttempts := rc.MaxAttempts >= 0
	maxDuration := durationOr(rc.MaxRetryDuration, 0)
	limitDuration := maxDuration > 0
	if !limitAttempts && !limitDuration {
		return false
	}
	return (!limitAttempts || attempts >= int(rc.MaxAttempts)) &&
		(!limitDuration || elapsed >= maxDuration)
}

// throttledBackoff is the wait before the retry of an attempt answered
// 429 or 503, whose plain backoff is wait. Cloud Tasks documents that it
// then "uses a higher backoff rate" and that the Retry-After header "is
// considered", without numbers: the emulator doubles the plain backoff
// and waits at least what Retry-After asks (seconds, or an HTTP date read
// on the emulator's clock), up to the 30 days a task may be scheduled
// ahead.
func throttledBackoff(wait time.Duration, retryAfter string, now time.Time) time.Duration {
	wait *= 2
	var asked time.Duration
	if s, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && s > 0 {
		asked = time.Duration(min(s, int(maxScheduleAhead/time.Second))) * time.Second
	} else if at, err := http.ParseTime(retryAfter); err == nil {
		asked = at.Sub(now)
	}
	return min(max(wait, asked), maxScheduleAhead)
}

// backoff is the wait before the retry that follows the failures-th failed
// attempt: min_backoff doubled max_doublings times, then growing linearly by
// the last doubled interval, capped at max_backoff.
func backoff(rc *cloudtaskspb.RetryConfig, failures int) time.Duration {
	lo, hi := durationOr(rc.MinBackoff, 0), durationOr(rc.MaxBackoff, 0)
	retries := float64(failures - 1)
	doublings := math.Min(retries, float64(rc.MaxDoublings))
	step := float64(lo) * math.Pow(2, doublings)
	// Float arithmetic saturates instead of overflowing on long retry runs.
	wait := step * (1 + retries - doublings)
	if wait >= float64(hi) {
		return hi
	}
	return time.Duration(wait)
}
