package cloudtasks

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ctapi "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	testingclock "k8s.io/utils/clock/testing"
)

const (
	testLocation = "projects/p1/locations/us-central1"
	testQueue    = testLocation + "/queues/q1"
)

func newFakeClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
}

// start runs an emulator and an official client connected to it over gRPC.
func start(t *testing.T, opts ...Option) (*Server, *ctapi.Client) {
	t.Helper()
	srv, err := NewServer(append([]Option{WithLogger(discard())}, opts...)...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, newClient(t, srv)
}

// newClient connects the official client to srv.
func newClient(t *testing.T, srv *Server) *ctapi.Client {
	t.Helper()
	client, err := ctapi.NewClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// createQueue creates testQueue (or name) with retry settings fast enough
// for tests.
func createQueue(t *testing.T, c *ctapi.Client, q *cloudtaskspb.Queue) *cloudtaskspb.Queue {
	t.Helper()
	if q == nil {
		q = &cloudtaskspb.Queue{}
	}
	if q.Name == "" {
		q.Name = testQueue
	}
	if q.RetryConfig == nil {
		q.RetryConfig = &cloudtaskspb.RetryConfig{
			MinBackoff: durationpb.New(time.Millisecond),
			MaxBackoff: durationpb.New(time.Millisecond),
		}
	}
	parent := q.Name[:strings.Index(q.Name, "/queues/")]
	got, err := c.CreateQueue(ctx(t), &cloudtaskspb.CreateQueueRequest{Parent: parent, Queue: q})
	if err != nil {
		t.Fatalf("CreateQueue(%q): %v", q.Name, err)
	}
	return got
}

func httpTask(name, url string) *cloudtaskspb.Task {
	return &cloudtaskspb.Task{
		Name: name,
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: url,
		}},
	}
}

func createTask(t *testing.T, c *ctapi.Client, task *cloudtaskspb.Task) *cloudtaskspb.Task {
	t.Helper()
	got, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task})
	if err != nil {
		t.Fatalf("CreateTask(%q): %v", task.Name, err)
	}
	return got
}

// ctx is a context bounded so that a hung test fails instead of timing out
// the whole run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func waitIdle(t *testing.T, srv *Server) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitIdle(c); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
}

func code(err error) codes.Code { return status.Code(err) }

// received is one request seen by a recorder.
type received struct {
	Method string
	Header http.Header
	Body   string
	At     time.Time
}

// recorder is an HTTP target that records requests and answers with the
// next status of its script (200 once the script is used up).
type recorder struct {
	mu     sync.Mutex
	reqs   []received
	script []int
	srv    *httptest.Server
}

func newRecorder(t *testing.T, script ...int) *recorder {
	r := &recorder{script: script}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, received{req.Method, req.Header.Clone(), string(body), time.Now()})
		code := http.StatusOK
		if len(r.script) > 0 {
			code, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) URL() string { return r.srv.URL + "/run" }

func (r *recorder) Requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

// storedQueue returns a copy of the queue the emulator holds under name,
// nil if none.
func storedQueue(srv *Server, name string) *cloudtaskspb.Queue {
	g := srv.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	if q, ok := g.queues[name]; ok {
		return copyQueue(q.pb)
	}
	return nil
}
