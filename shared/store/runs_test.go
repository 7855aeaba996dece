package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// clock is a settable clock for the store.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

type runEnv struct {
	fs      *firestore.Client
	st      *store.Store
	clk     *clock
	caller  store.Caller
	cluster resource.Cluster
	pool    resource.NodePool
	kick    store.Kick
}

func newRunEnv(t *testing.T) *runEnv {
	t.Helper()
	ctx := context.Background()
	srv, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := firestore.NewClient(ctx, "runs", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	clk := &clock{t: time.Now().UTC().Truncate(time.Microsecond)}
	st, err := store.New(fs, store.WithNow(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	err = st.LoadSeed(ctx, &store.Seed{
		Accounts:     []store.Account{{ID: "acc", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}},
		Pools:        []store.Pool{{ID: "pool", TenantID: "acme", AccountID: "acc"}},
		RoleBindings: []auth.Binding{{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &runEnv{fs: fs, st: st, clk: clk, caller: store.Caller{TenantID: "acme", Principal: "alice"}}
	res, err := st.CreateCluster(ctx, e.caller, store.CreateClusterRequest{
		PoolID:         "pool",
		Spec:           resource.Cluster{Name: "c", Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools:      []resource.NodePool{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
		RequestHash:    "h",
		CheckPlacement: func(map[string][]string) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.cluster, e.kick = res.Cluster, *res.Kick
	pools, err := st.ListNodePools(ctx, e.caller, e.cluster.ID)
	if err != nil || len(pools) != 1 {
		t.Fatalf("ListNodePools() = %v, %v", pools, err)
	}
	e.pool = pools[0]
	return e
}

func (e *runEnv) lease(t *testing.T, owner string) *store.Lease {
	t.Helper()
	l, err := e.st.TakeLease(context.Background(), "acme", e.cluster.ID, e.kick.Token, owner, time.Minute, e.clk.t.Add(time.Hour))
	if err != nil {
		t.Fatalf("TakeLease(%s) = %v", owner, err)
	}
	return l
}

func (e *runEnv) poolDoc(t *testing.T) store.NodePoolDoc {
	t.Helper()
	snap, err := e.st.NodePoolRef("acme", e.cluster.ID, e.pool.ID).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var p store.NodePoolDoc
	if err := snap.DataTo(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTakeLease(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	l := e.lease(t, "run-1")
	if len(l.Pools) != 1 || l.Pools[0].ID != e.pool.ID {
		t.Fatalf("lease pools = %v, want the cluster's one pool", l.Pools)
	}
	if _, err := e.st.TakeLease(ctx, "acme", e.cluster.ID, e.kick.Token, "run-2", time.Minute, e.clk.t); !errors.Is(err, store.ErrBusy) {
		t.Errorf("TakeLease while held = %v, want ErrBusy", err)
	}
	if _, err := e.st.TakeLease(ctx, "acme", e.cluster.ID, "other-token", "run-2", time.Minute, e.clk.t); !errors.Is(err, store.ErrStale) {
		t.Errorf("TakeLease with a stale token = %v, want ErrStale", err)
	}
	if _, err := e.st.TakeLease(ctx, "acme", "kcl_01jd0000000000000000000000", "x", "run-2", time.Minute, e.clk.t); !errors.Is(err, store.ErrStale) {
		t.Errorf("TakeLease of a missing cluster = %v, want ErrStale", err)
	}
	// Past its expiry the lease is free, and the first run has lost it.
	e.clk.t = e.clk.t.Add(2 * time.Minute)
	e.lease(t, "run-2")
	if err := e.st.RecordIntent(ctx, l, e.pool.ID, &store.Intent{Kind: "setSize"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RecordIntent after losing the lease = %v, want ErrLeaseLost", err)
	}
	if _, _, err := e.st.FinishRun(ctx, l, store.Finish{Cluster: l.Cluster, Pools: l.Pools}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishRun after losing the lease = %v, want ErrLeaseLost", err)
	}
}

// A tenant's change during a run wins over the run's outcome: the pool
// keeps the API's state, only the run's bookkeeping is written, and the
// event of the state it would have had is dropped.
func TestFinishRunKeepsConcurrentChanges(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	l := e.lease(t, "run-1")

	n := 3
	if _, err := e.st.UpdateNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID, func(p resource.NodePool) (resource.NodePool, error) {
		p.NodeCount = n
		return p, nil
	}); err != nil {
		t.Fatal(err)
	}

	after := l.Pools[0]
	after.State = resource.StateReady
	after.Provider.Created = true
	after.Provider.NodeCount = 1
	c := l.Cluster
	c.State = resource.StateReady
	ev := outbox.NodePoolEvent(outbox.NodePoolReady, after.NodePool, e.clk.t)
	committed, current, err := e.st.FinishRun(ctx, l, store.Finish{Cluster: c, Pools: []store.NodePoolDoc{after}, Events: []outbox.Event{ev}, NextAt: e.clk.t})
	if err != nil {
		t.Fatalf("FinishRun() = %v", err)
	}
	if len(committed) != 0 {
		t.Errorf("committed events = %v, want the stale ready dropped", committed)
	}
	if current {
		t.Errorf("FinishRun() current = true, want false: the update kicked a new chain")
	}
	got := e.poolDoc(t)
	if got.State != resource.StatePending || got.NodeCount != n || got.Version != 2 {
		t.Errorf("pool = %s count %d v%d, want the API's pending count %d v2", got.State, got.NodeCount, got.Version, n)
	}
	if !got.Provider.Created || got.Provider.NodeCount != 1 {
		t.Errorf("pool provider = %+v, want the run's bookkeeping written", got.Provider)
	}
}

// With no change by the API, the run's outcome is written whole, a pool it
// deleted frees its name and its slot, and the events are committed.
func TestFinishRunWritesOutcome(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	l := e.lease(t, "run-1")
	after := l.Pools[0]
	after.State = resource.StateDeleted
	after.Active = false
	c := l.Cluster
	c.ActivePoolCount-- // as the planner counts; the store applies it as an increment
	ev := outbox.NodePoolEvent(outbox.NodePoolDeleted, after.NodePool, e.clk.t)
	committed, current, err := e.st.FinishRun(ctx, l, store.Finish{Cluster: c, Pools: []store.NodePoolDoc{after}, Events: []outbox.Event{ev}, NextAt: e.clk.t.Add(time.Minute)})
	if err != nil || !current || len(committed) != 1 {
		t.Fatalf("FinishRun() = %v, %v, %v; want the event committed and the chain current", committed, current, err)
	}
	if got := e.poolDoc(t); got.State != resource.StateDeleted || got.Active {
		t.Errorf("pool = %s active %v, want deleted", got.State, got.Active)
	}
	snap, err := e.st.ClusterRef("acme", e.cluster.ID).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cl store.ClusterDoc
	if err := snap.DataTo(&cl); err != nil {
		t.Fatal(err)
	}
	if cl.ActivePoolCount != 0 || cl.Reconcile.LeaseOwner != "" {
		t.Errorf("cluster count %d lease %q, want 0 and released", cl.ActivePoolCount, cl.Reconcile.LeaseOwner)
	}
	if _, err := e.st.CreateNodePool(ctx, e.caller, store.CreateNodePoolRequest{
		ClusterID: e.cluster.ID, Spec: resource.NodePool{Name: "a", MachineType: "e2-standard-4"}, RequestHash: "x",
		CheckZones: func(string, []string) error { return nil },
	}); err != nil {
		t.Errorf("CreateNodePool(the deleted pool's name) = %v, want the name free again", err)
	}
	if snap, err := outbox.Ref(e.fs, ev).Get(ctx); err != nil || !snap.Exists() {
		t.Errorf("outbox event %s not written: %v", ev.ID, err)
	}
}

func TestDropLease(t *testing.T) {
	e := newRunEnv(t)
	l := e.lease(t, "run-1")
	if err := e.st.DropLease(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	// Another run may start at once.
	e.kick.Token = l.Token
	e.lease(t, "run-2")
}

func TestOverdueAndRekick(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	// The create's kick made the cluster due now; a minute later it is
	// overdue.
	e.clk.t = e.clk.t.Add(time.Minute)
	before := e.clk.t.Add(-30 * time.Second)
	overdue, err := e.st.Overdue(ctx, before, 10)
	if err != nil || len(overdue) != 1 || overdue[0].ID != e.cluster.ID {
		t.Fatalf("Overdue() = %v, %v; want the cluster", overdue, err)
	}
	k, err := e.st.Rekick(ctx, "acme", e.cluster.ID, before)
	if err != nil || k == nil || k.Token == e.kick.Token {
		t.Fatalf("Rekick() = %v, %v; want a new chain token", k, err)
	}
	if k2, err := e.st.Rekick(ctx, "acme", e.cluster.ID, before); err != nil || k2 != nil {
		t.Errorf("second Rekick() = %v, %v; want nothing to do", k2, err)
	}
	if overdue, err := e.st.Overdue(ctx, before, 10); err != nil || len(overdue) != 0 {
		t.Errorf("Overdue() after the rekick = %v, %v; want none", overdue, err)
	}
}
