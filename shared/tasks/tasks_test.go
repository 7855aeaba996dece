package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/tasks"
)

const queue = "projects/p/locations/us-central1/queues/reconcile"

type received struct {
	mu      sync.Mutex
	bodies  []tasks.Payload
	authz   []string
	links   []string
	hints   []string
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
		rec.links = append(rec.links, r.Header.Get(tasks.LinkHeader))
		rec.hints = append(rec.hints, r.Header.Get(tasks.HintHeader))
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
	k := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}
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
	if got := rec.bodies[0]; got != (tasks.Payload{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}) {
		t.Errorf("payload = %+v, want the kick's", got)
	}
	if rec.authz[0] != "Bearer token-for-sa@aud" {
		t.Errorf("Authorization = %q, want the OIDC token for sa and aud", rec.authz[0])
	}
}

// The same scheduling done twice (a redelivered task) makes one task, due
// when asked, addressed to the reconcile function.
func TestScheduleIsDeduplicated(t *testing.T) {
	q, srv, _ := setup(t)
	k := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	for range 3 {
		if err := q.Schedule(context.Background(), k, later, queue+"/tasks/parent"); err != nil {
			t.Fatalf("Schedule() = %v", err)
		}
	}
	if err := q.Schedule(context.Background(), k, later.Add(time.Minute), queue+"/tasks/other"); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	got := srv.Tasks(queue)
	if len(got) != 2 {
		t.Fatalf("tasks = %d, want 2 (one per parent)", len(got))
	}
	want := map[string]time.Time{
		queue + "/tasks/" + tasks.TaskID(k, queue+"/tasks/parent"): later,
		queue + "/tasks/" + tasks.TaskID(k, queue+"/tasks/other"):  later.Add(time.Minute),
	}
	for _, task := range got {
		at, ok := want[task.GetName()]
		if !ok {
			t.Errorf("task %s, want one of %v", task.GetName(), want)
			continue
		}
		if !task.GetScheduleTime().AsTime().Equal(at) {
			t.Errorf("task %s scheduled at %v, want %v", task.GetName(), task.GetScheduleTime().AsTime(), at)
		}
		if u := task.GetHttpRequest().GetUrl(); u != q.URL() {
			t.Errorf("task %s URL = %q, want %q", task.GetName(), u, q.URL())
		}
	}
}

func TestTaskID(t *testing.T) {
	k := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}
	other := k
	other.Token = "t2"
	ids := map[string]string{
		"kick":             tasks.TaskID(k, ""),
		"after a":          tasks.TaskID(k, "a"),
		"after b":          tasks.TaskID(k, "b"),
		"other chain":      tasks.TaskID(other, "a"),
		"other chain kick": tasks.TaskID(other, ""),
	}
	seen := map[string]string{}
	for what, id := range ids {
		if prev, ok := seen[id]; ok {
			t.Errorf("TaskID(%s) = TaskID(%s) = %q, want distinct", what, prev, id)
		}
		seen[id] = what
		if !strings.HasPrefix(id, "kcl_1-") {
			t.Errorf("TaskID(%s) = %q, want it to start with the subject's ID", what, id)
		}
	}
	// A redelivered task schedules the same successor.
	if again := tasks.TaskID(chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}, "a"); again != ids["after a"] {
		t.Errorf("TaskID is not a function of the kick and its parent: %q then %q", ids["after a"], again)
	}
}

func TestScheduleFailure(t *testing.T) {
	q, srv, _ := setup(t)
	srv.FailNext("CreateTask", 1, codes.Unavailable, "The service is currently unavailable.")
	if err := q.Kick(context.Background(), chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t2"}); err == nil {
		t.Errorf("Kick() with Cloud Tasks down = nil, want an error")
	}
}

// A steady chain's runs go to the steady queue, a change's to the main one,
// and the same scheduling twice makes one task there.
func TestSteadyChainsHaveTheirOwnQueue(t *testing.T) {
	ctx := context.Background()
	const steadyQueue = "projects/p/locations/us-central1/queues/reconcile-steady"
	client := queuesOnEmulator(t, queue, steadyQueue)
	q, err := tasks.New(client, tasks.Config{Queue: queue, SteadyQueues: []string{steadyQueue}, URL: "http://127.0.0.1:1/reconcile", ServiceAccount: "sa"})
	if err != nil {
		t.Fatal(err)
	}
	var st chain.State
	change := st.Restart("clusters", "acme", "kcl_1", time.Now())
	steady := change
	steady.Token = "s" + change.Token
	if change.Steady() || !steady.Steady() {
		t.Fatalf("Steady() = %v, %v; want false, true", change.Steady(), steady.Steady())
	}
	later := time.Now().Add(time.Hour) // listed before they are due
	for _, k := range []chain.Kick{change, steady, steady} {
		if err := q.Schedule(ctx, k, later, "task-1"); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{queue: change.Token, steadyQueue: steady.Token} {
		var got []string
		for _, p := range queued(t, client, name) {
			got = append(got, p.Token)
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s holds tasks of tokens %q, want [%q]", name, got, want)
		}
	}
}

// Steady chains spread over several steady queues by their IDs: every
// task of one chain on one queue (where Cloud Tasks deduplicates its
// names), every queue taking some, a change's runs on the main queue.
func TestSteadyChainsSpreadOverSteadyQueues(t *testing.T) {
	ctx := context.Background()
	steady := []string{queue + "-steady", queue + "-steady-1", queue + "-steady-2"}
	client := queuesOnEmulator(t, append([]string{queue}, steady...)...)
	q, err := tasks.New(client, tasks.Config{Queue: queue, SteadyQueues: steady, URL: "http://127.0.0.1:1/reconcile", ServiceAccount: "sa"})
	if err != nil {
		t.Fatal(err)
	}
	const chains = 30
	later := time.Now().Add(time.Hour)
	var st chain.State
	for i := range chains {
		k := st.Restart("clusters", "acme", fmt.Sprintf("kcl_%02d", i), time.Now())
		change := k
		k.Token = "s" + k.Token
		// Two runs of the chain, the second scheduled twice (a
		// redelivered task), and one run of a change of it.
		for _, after := range []string{"", "task-1", "task-1"} {
			if err := q.Schedule(ctx, k, later, after); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Schedule(ctx, change, later, ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(queued(t, client, queue)); got != chains {
		t.Errorf("%s holds %d tasks, want %d: the changes' runs", queue, got, chains)
	}
	total := 0
	for shard, name := range steady {
		ps := queued(t, client, name)
		if len(ps) == 0 {
			t.Errorf("%s holds no task of %d chains", name, chains)
		}
		count := map[string]int{}
		for _, p := range ps {
			id := p.ID
			count[id]++
			if got := tasks.SteadyShard(id, len(steady)); got != shard {
				t.Errorf("%s holds a run of %s, whose shard is %d", name, id, got)
			}
		}
		for id, n := range count {
			if n != 2 {
				t.Errorf("%s holds %d runs of %s, want 2", name, n, id)
			}
		}
		total += len(ps)
	}
	if total != 2*chains {
		t.Errorf("the steady queues hold %d tasks, want %d", total, 2*chains)
	}
}

// queued is the payloads of the tasks a queue holds.
func queued(t *testing.T, client *cloudtasks.Client, name string) []tasks.Payload {
	t.Helper()
	var ps []tasks.Payload
	it := client.ListTasks(context.Background(), &cloudtaskspb.ListTasksRequest{Parent: name, ResponseView: cloudtaskspb.Task_FULL})
	for {
		task, err := it.Next()
		if err == iterator.Done {
			return ps
		}
		if err != nil {
			t.Fatal(err)
		}
		var p tasks.Payload
		if err := json.Unmarshal(task.GetHttpRequest().GetBody(), &p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
}

// queuesOnEmulator is a client of a Cloud Tasks emulator holding the
// queues named (in projects/p/locations/us-central1), whose tasks stay
// listed until they are due.
func queuesOnEmulator(t *testing.T, names ...string) *cloudtasks.Client {
	t.Helper()
	ctx := context.Background()
	srv, err := ctemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	for _, name := range names {
		if _, err := client.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
			Parent: "projects/p/locations/us-central1", Queue: &cloudtaskspb.Queue{Name: name},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return client
}

// With tenant queues, a changing chain's runs go to its tenant's queue,
// all of one tenant's to one queue, tenants spread over them, and steady
// runs to the steady queue still: one tenant's many converging chains
// wait behind each other on its queue, not on another tenant's.
func TestChangingChainsGoToTheirTenantsQueue(t *testing.T) {
	ctx := context.Background()
	byTenant := []string{queue + "-0", queue + "-1", queue + "-2"}
	steadyQueue := queue + "-steady"
	client := queuesOnEmulator(t, append([]string{queue, steadyQueue}, byTenant...)...)
	q, err := tasks.New(client, tasks.Config{Queue: queue, TenantQueues: byTenant, SteadyQueues: []string{steadyQueue},
		URL: "http://127.0.0.1:1/reconcile", ServiceAccount: "sa"})
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	var st chain.State
	const tenants, chains = 12, 3
	for i := range tenants {
		for j := range chains {
			k := st.Restart("clusters", fmt.Sprintf("tenant-%d", i), fmt.Sprintf("kcl_%d_%d", i, j), time.Now())
			if err := q.Schedule(ctx, k, later, ""); err != nil {
				t.Fatal(err)
			}
			k.Token = "s" + k.Token
			if err := q.Schedule(ctx, k, later, "task-1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := len(queued(t, client, queue)); got != 0 {
		t.Errorf("%s holds %d tasks, want none: every change's run is on its tenant's queue", queue, got)
	}
	if got := len(queued(t, client, steadyQueue)); got != tenants*chains {
		t.Errorf("%s holds %d tasks, want the %d steady runs", steadyQueue, got, tenants*chains)
	}
	total := 0
	for shard, name := range byTenant {
		ps := queued(t, client, name)
		if len(ps) == 0 {
			t.Errorf("%s holds no task of %d tenants", name, tenants)
		}
		for _, p := range ps {
			if got := tasks.TenantShard(p.TenantID, len(byTenant)); got != shard {
				t.Errorf("%s holds a run of tenant %s, whose shard is %d", name, p.TenantID, got)
			}
		}
		total += len(ps)
	}
	if total != tenants*chains {
		t.Errorf("the tenant queues hold %d tasks, want %d", total, tenants*chains)
	}
}
