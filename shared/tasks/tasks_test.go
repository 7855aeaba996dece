package tasks_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
)

const queue = "projects/p/locations/us-central1/queues/reconcile"

type received struct {
	mu      sync.Mutex
	bodies  []tasks.Payload
	authz   []string
	granted chan struct{}
}

func setup(t *testing.T) (*tasks.Queue, *ctemu.Server, *received) {
	t.Helper()
	rec := &received{granted: make(chan struct{}, 100)}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p tasks.Payload
		_ = json.Unmarshal(b, &p)
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, p)
		rec.authz = append(rec.authz, r.Header.Get("Authorization"))
		rec.mu.Unlock()
		rec.granted <- struct{}{}
	}))
	t.Cleanup(target.Close)
	srv, err := ctemu.NewServer(ctemu.WithTokenSource(func(_ context.Context, aud, sa string) (string, error) {
		return "token-for-" + sa + "@" + aud, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client, err := cloudtasks.NewClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{
		Parent: "projects/p/locations/us-central1", Queue: &cloudtaskspb.Queue{Name: queue},
	}); err != nil {
		t.Fatal(err)
	}
	q, err := tasks.New(client, tasks.Config{Queue: queue, URL: target.URL, ServiceAccount: "sa", Audience: "aud"})
	if err != nil {
		t.Fatal(err)
	}
	return q, srv, rec
}

func TestKickDispatchesTheChainToken(t *testing.T) {
	q, _, rec := setup(t)
	k := store.Kick{TenantID: "acme", ClusterID: "kcl_1", Token: "t1"}
	if err := q.Kick(context.Background(), k); err != nil {
		t.Fatalf("Kick() = %v", err)
	}
	select {
	case <-rec.granted:
	case <-time.After(10 * time.Second):
		t.Fatal("task not dispatched within 10s")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.bodies[0]; got != (tasks.Payload{TenantID: "acme", ClusterID: "kcl_1", Token: "t1"}) {
		t.Errorf("payload = %+v, want the kick's", got)
	}
	if rec.authz[0] != "Bearer token-for-sa@aud" {
		t.Errorf("Authorization = %q, want the OIDC token for sa and aud", rec.authz[0])
	}
}

// The same scheduling done twice (a redelivered task) makes one task.
func TestScheduleIsDeduplicated(t *testing.T) {
	q, srv, _ := setup(t)
	k := store.Kick{TenantID: "acme", ClusterID: "kcl_1", Token: "t1"}
	later := time.Now().Add(time.Hour)
	for range 3 {
		if err := q.Schedule(context.Background(), k, later, queue+"/tasks/parent"); err != nil {
			t.Fatalf("Schedule() = %v", err)
		}
	}
	if err := q.Schedule(context.Background(), k, later, queue+"/tasks/other"); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	if got := len(srv.Tasks(queue)); got != 2 {
		t.Errorf("tasks = %d, want 2 (one per parent)", got)
	}
	if tasks.TaskID(k, "a") == tasks.TaskID(k, "b") || tasks.TaskID(k, "a") != tasks.TaskID(k, "a") {
		t.Errorf("TaskID is not a function of its parent")
	}
}

func TestScheduleFailure(t *testing.T) {
	q, srv, _ := setup(t)
	srv.FailNext("CreateTask", 1, codes.Unavailable)
	if err := q.Kick(context.Background(), store.Kick{TenantID: "acme", ClusterID: "kcl_1", Token: "t2"}); err == nil {
		t.Errorf("Kick() with Cloud Tasks down = nil, want an error")
	}
}
