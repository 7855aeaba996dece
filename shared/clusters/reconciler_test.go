package clusters_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// kickRecorder keeps the successors runs schedule, and schedules none.
type kickRecorder struct {
	mu    sync.Mutex
	kicks []chain.Kick
}

func (r *kickRecorder) Schedule(_ context.Context, k chain.Kick, _ time.Time, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kicks = append(r.kicks, k)
	return nil
}

// last is the successor scheduled last.
func (r *kickRecorder) last(t *testing.T) chain.Kick {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.kicks) == 0 {
		t.Fatal("no run was scheduled")
	}
	return r.kicks[len(r.kicks)-1]
}

// eventRecorder keeps the events the runs deliver.
type eventRecorder struct {
	mu     sync.Mutex
	events []event.Event
}

func (r *eventRecorder) Deliver(_ context.Context, events []event.Event) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, events...)
	return len(events), nil
}

// since returns the types of the events delivered after the first n, of
// pool poolID and its cluster alone ("": every event), and how many
// were delivered in all.
func (r *eventRecorder) since(n int, poolID string) ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events[n:] {
		if poolID == "" || e.NodePoolID == poolID || e.NodePoolID == "" {
			out = append(out, e.Type)
		}
	}
	return out, len(r.events)
}

// The store is what the reconciler reads and writes through.
var _ clusters.Store = (*store.Store)(nil)

type env struct {
	clk    *testingclock.FakeClock
	fs     *firestore.Client
	gke    *gkeemu.Server
	st     *store.Store
	runner *chain.Runner
	sched  *kickRecorder
	caller auth.Principal
	kick   chain.Kick
	id     string
	events *eventRecorder
	// compute serves the pools' instance groups (newDriftEnv); nil
	// when the runs read none.
	compute *gkeemu.ComputeServer
}

const opTime = 10 * time.Second

// newEnv starts the emulators and a ready cluster with one pool.
func newEnv(t *testing.T, opts ...clusters.Option) *env {
	t.Helper()
	return newEnvFor(t, func(*env) []clusters.Option { return opts })
}

// newEnvFor is newEnv with the reconciler's options made once the
// emulators run.
func newEnvFor(t *testing.T, options func(*env) []clusters.Option) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{clk: testingclock.NewFakeClock(time.Now().UTC().Truncate(time.Microsecond)), caller: auth.User("acme", "alice")}
	e.fs = fsemu.ForTest(t, "p")
	var err error
	if e.gke, err = gkeemu.NewServer(gkeemu.WithClock(e.clk), gkeemu.WithOperationTime(opTime)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.gke.Close() })
	gconn, err := grpc.NewClient(e.gke.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	gke, err := container.NewClusterManagerClient(ctx, option.WithGRPCConn(gconn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gke.Close() })
	if e.st, err = store.New(e.fs, lifecycle.Rules{}, store.WithClock(e.clk)); err != nil {
		t.Fatal(err)
	}
	err = e.st.LoadSeed(ctx, &store.Seed{
		Accounts:     []store.Account{{ID: "acc", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}},
		Pools:        []store.Pool{{ID: "pool", TenantID: "acme", AccountID: "acc"}},
		RoleBindings: []auth.Binding{{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := clusters.New(e.st, gke, append([]clusters.Option{clusters.WithClock(e.clk)}, options(e)...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.sched = &kickRecorder{}
	e.events = &eventRecorder{}
	e.runner, err = chain.NewRunner(e.st, e.sched, e.events, chain.Config{
		ConvergingInterval: time.Second, SteadyInterval: time.Minute, LeaseTTL: 30 * time.Second, Clock: e.clk,
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.st.CreateCluster(ctx, e.caller, store.CreateClusterRequest{
		PoolID:      "pool",
		Spec:        model.ClusterSpec{Name: "c", Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools:   []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
		RequestHash: "h",
	})
	if err != nil {
		t.Fatal(err)
	}
	e.id, e.kick = res.Cluster.ID, *res.Kick
	e.converge(t)
	return e
}

// current is k with the chain token its cluster's document holds now: the
// run Cloud Tasks would deliver next (a run that finds its cluster steady
// hands it to a new, steady chain).
func (e *env) current(t *testing.T, k chain.Kick) chain.Kick {
	t.Helper()
	snap, err := e.st.ClusterRef(k.TenantID, k.ID).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := snap.DataAt(chain.Field + ".token")
	if err != nil {
		t.Fatal(err)
	}
	k.Token = tok.(string)
	return k
}

// converge runs the cluster until it is ready, moving the clock past each
// provider operation.
func (e *env) converge(t *testing.T) resource.Cluster {
	t.Helper()
	for range 20 {
		if err := e.runner.Run(context.Background(), e.current(t, e.kick), ""); err != nil {
			t.Fatalf("Run = %v", err)
		}
		c, err := e.st.GetCluster(context.Background(), e.caller, e.id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State == resource.StateReady {
			pools, err := e.st.ListNodePools(context.Background(), e.caller, e.id)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(pools, func(p resource.NodePool) bool { return p.State != resource.StateReady }) {
				return c
			}
		}
		e.clk.Step(opTime + time.Second)
	}
	t.Fatalf("cluster %s not ready after 20 runs", e.id)
	return resource.Cluster{}
}

// recordIntent leaves on the pool the intent of a call, as a run that died
// right after recording it does.
func (e *env) recordIntent(t *testing.T, poolID, kind string, nodeCount int) {
	t.Helper()
	in := model.Intent{Kind: kind, At: e.clk.Now(), NodeCount: nodeCount}
	_, err := e.st.NodePoolRef("acme", e.id, poolID).Update(context.Background(), []firestore.Update{{Path: "status.provider.intent", Value: in}})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) ops(typ containerpb.Operation_Type) int {
	n := 0
	for _, op := range e.gke.Operations() {
		if op.GetOperationType() == typ {
			n++
		}
	}
	return n
}

// A run killed between recording its intent and recording the provider's
// operation is followed by one that finds the operation instead of calling
// again; an intent whose call never happened is dropped and the call made
// once. A resize shows it: the provider's pool looks the same until the
// resize is done, so only the intent tells a run that it was asked.
func TestIntentLeftByAKilledRun(t *testing.T) {
	for _, called := range []bool{true, false} {
		name := map[bool]string{true: "call made", false: "call never made"}[called]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			pool, err := e.st.ListNodePools(ctx, e.caller, e.id)
			if err != nil {
				t.Fatal(err)
			}
			a := pool[0]
			res, err := e.st.UpdateNodePool(ctx, e.caller, e.id, a.ID, func(p model.NodePoolSpec) (model.NodePoolSpec, error) {
				p.NodeCount = 3
				return p, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			e.kick = *res.Kick
			e.recordIntent(t, a.ID, clusters.SetSize, 3)
			if called {
				// The killed run's call reached the provider.
				_, err := containerClient(t, e).SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{
					Name:      "projects/p/locations/us-central1/clusters/" + resource.ProviderClusterName(e.id) + "/nodePools/a",
					NodeCount: 3,
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			before := e.gke.Calls("SetNodePoolSize")
			e.converge(t)
			want := 1
			if called {
				want = 0
			}
			if got := e.gke.Calls("SetNodePoolSize") - before; got != want {
				t.Errorf("SetNodePoolSize calls by the runs = %d, want %d", got, want)
			}
			if n := e.ops(containerpb.Operation_SET_NODE_POOL_SIZE); n != 1 {
				t.Errorf("SET_NODE_POOL_SIZE operations = %d, want 1", n)
			}
			counts, err := e.gke.NodeCounts("projects/p/locations/us-central1/clusters/" + resource.ProviderClusterName(e.id) + "/nodePools/a")
			if err != nil || counts["us-central1-a"] != 3 {
				t.Errorf("node counts at the provider = %v, %v; want 3", counts, err)
			}
		})
	}
}

func containerClient(t *testing.T, e *env) *container.ClusterManagerClient {
	t.Helper()
	conn, err := grpc.NewClient(e.gke.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClusterManagerClient(context.Background(), option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Steady refreshes of clusters of one project share a listing, which can
// only confirm: a refresh whose listing shows something to do looks at its
// cluster again before acting.
func TestListingConfirmsOnly(t *testing.T) {
	e := newEnv(t, clusters.WithListing(time.Minute))
	ctx := context.Background()
	first := e.kick
	res, err := e.st.CreateCluster(ctx, e.caller, store.CreateClusterRequest{
		PoolID:      "pool",
		Spec:        model.ClusterSpec{Name: "d", Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools:   []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
		RequestHash: "h2",
	})
	if err != nil {
		t.Fatal(err)
	}
	second := *res.Kick
	e.id, e.kick = res.Cluster.ID, second
	e.converge(t)
	e.clk.Step(2 * time.Minute) // past any listing made while converging
	gets, lists := e.gke.Calls("GetCluster"), e.gke.Calls("ListClusters")
	for _, k := range []chain.Kick{first, second, first} {
		if err := e.runner.Run(ctx, e.current(t, k), ""); err != nil {
			t.Fatal(err)
		}
	}
	if g, l := e.gke.Calls("GetCluster")-gets, e.gke.Calls("ListClusters")-lists; g != 0 || l != 1 {
		t.Errorf("three steady refreshes of two clusters made %d GetCluster and %d ListClusters, want 0 and 1", g, l)
	}
	// A pool breaks at the provider; the next listing shows it, and the
	// refresh looks at the cluster itself before deciding.
	pool := "projects/p/locations/us-central1/clusters/" + resource.ProviderClusterName(e.id) + "/nodePools/a"
	if err := e.gke.BreakNodePool(pool, "repair failed"); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(2 * time.Minute)
	gets = e.gke.Calls("GetCluster")
	if err := e.runner.Run(ctx, e.current(t, second), ""); err != nil {
		t.Fatal(err)
	}
	if g := e.gke.Calls("GetCluster") - gets; g != 1 {
		t.Errorf("GetCluster calls of a refresh whose listing shows a change = %d, want 1", g)
	}
	c, err := e.st.GetCluster(ctx, e.caller, e.id)
	if err != nil || c.State != resource.StateError {
		t.Errorf("cluster after its pool broke = %v, %v; want error", c.State, err)
	}
}
