package store_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

type runEnv struct {
	fs      *firestore.Client
	st      *store.Store
	clk     *testingclock.FakePassiveClock
	caller  auth.Principal
	cluster resource.Cluster
	pool    resource.NodePool
	kick    chain.Kick
}

func newRunEnv(t *testing.T) *runEnv {
	t.Helper()
	ctx := context.Background()
	fs := fsemu.ForTest(t, "runs")
	clk := testingclock.NewFakePassiveClock(time.Now().UTC().Truncate(time.Microsecond))
	st, err := store.New(fs, lifecycle.Rules{}, store.WithClock(clk))
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
	e := &runEnv{fs: fs, st: st, clk: clk, caller: auth.User("acme", "alice")}
	res, err := st.CreateCluster(ctx, e.caller, store.CreateClusterRequest{
		PoolID:      "pool",
		Spec:        model.ClusterSpec{Name: "c", Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools:   []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
		RequestHash: "h",
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

// run loads the cluster's run in a transaction of its own, as the lease
// does.
func (e *runEnv) run(t *testing.T) store.ClusterRun {
	t.Helper()
	var run store.ClusterRun
	err := e.fs.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(e.st.ClusterRef("acme", e.cluster.ID))
		if err != nil {
			return err
		}
		run, err = loadRun(e.st, chain.NewReader(ctx, tx), snap)
		return err
	})
	if err != nil {
		t.Fatalf("load the cluster's run: %v", err)
	}
	return run
}

// loadRun reads through r the cluster of snap and its pools that are not
// deleted, as the clusters' reconciler does when it takes the lease.
func loadRun(st *store.Store, r *chain.Reader, snap *firestore.DocumentSnapshot) (store.ClusterRun, error) {
	var run store.ClusterRun
	if err := snap.DataTo(&run.Cluster); err != nil {
		return run, fmt.Errorf("decode cluster: %w", err)
	}
	pools, err := st.LoadNodePools(r, snap.Ref)
	run.Pools = pools
	return run, err
}

// save saves after over before, as the end of a run does, and returns the
// events committed.
func (e *runEnv) save(t *testing.T, before, after store.ClusterRun, events []event.Event) []event.Event {
	t.Helper()
	var committed []event.Event
	err := e.fs.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(e.st.ClusterRef("acme", e.cluster.ID))
		if err != nil {
			return err
		}
		committed, _, err = e.st.SaveClusterRun(tx, snap, before, after, events)
		return err
	})
	if err != nil {
		t.Fatalf("SaveClusterRun = %v", err)
	}
	return committed
}

func (e *runEnv) poolDoc(t *testing.T) model.NodePool {
	t.Helper()
	snap, err := e.st.NodePoolRef("acme", e.cluster.ID, e.pool.ID).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var p model.NodePool
	if err := snap.DataTo(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// decide is a run's decision over what it read: every object as the run
// begins it, then the pool ready.
func decide(read store.ClusterRun, now time.Time) (store.ClusterRun, []event.Event) {
	after := store.ClusterRun{Cluster: lifecycle.BeginRun(read.Cluster)}
	var events []event.Event
	for _, p := range read.Pools {
		p = lifecycle.BeginNodePoolRun(p)
		events = append(events, lifecycle.NodePoolReady(&p, now)...)
		after.Pools = append(after.Pools, p)
	}
	ev, _ := lifecycle.SettleCluster(&after.Cluster, after.Pools, false, now)
	return after, append(events, ev...)
}

func TestLoadNodePools(t *testing.T) {
	e := newRunEnv(t)
	run := e.run(t)
	if run.Cluster.ID != e.cluster.ID || len(run.Pools) != 1 || run.Pools[0].ID != e.pool.ID {
		t.Fatalf("loaded cluster %s, pools %+v; want %s with its pool %s", run.Cluster.ID, run.Pools, e.cluster.ID, e.pool.ID)
	}
}

// A run's outcome is saved: statuses whole, its events committed.
func TestSaveClusterRun(t *testing.T) {
	e := newRunEnv(t)
	read := e.run(t)
	after, events := decide(read, e.clk.Now())
	committed := e.save(t, read, after, events)
	if len(committed) != 2 {
		t.Errorf("committed %d events, want nodepool.ready and cluster.ready", len(committed))
	}
	p := e.poolDoc(t)
	if !reflect.DeepEqual(p.Status, after.Pools[0].Status) || !reflect.DeepEqual(p.Spec, read.Pools[0].Spec) {
		t.Errorf("stored pool = spec %+v status %+v, want the spec unchanged and status %+v", p.Spec, p.Status, after.Pools[0].Status)
	}
	if st := p.View().State; st != resource.StateReady {
		t.Errorf("pool state = %s, want ready", st)
	}
}

// Statuses are saved whole: every field of a status reaches Firestore,
// with no list of field paths to keep, so a field added to a status later
// is saved too. The test fills every field of the pool's and cluster's
// statuses by reflection, whatever they are.
func TestSaveClusterRunWritesStatusWhole(t *testing.T) {
	e := newRunEnv(t)
	read := e.run(t)
	after := store.ClusterRun{Cluster: read.Cluster.Clone(), Pools: []model.NodePool{read.Pools[0].Clone()}}
	fill(t, reflect.ValueOf(&after.Pools[0].Status).Elem(), e.clk.Now())
	fill(t, reflect.ValueOf(&after.Cluster.Status).Elem(), e.clk.Now())
	// Deleted is the one status the save treats apart (reservations).
	after.Pools[0].Status.State = resource.StateReady
	after.Cluster.Status.State = resource.StateReady
	e.save(t, read, after, nil)
	if got := e.poolDoc(t).Status; !reflect.DeepEqual(got, after.Pools[0].Status) {
		t.Errorf("stored pool status = %+v, want %+v", got, after.Pools[0].Status)
	}
	snap, err := e.st.ClusterRef("acme", e.cluster.ID).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var c model.Cluster
	if err := snap.DataTo(&c); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Status, after.Cluster.Status) {
		t.Errorf("stored cluster status = %+v, want %+v", c.Status, after.Cluster.Status)
	}
}

// fill sets every field of v to a value that is not its zero value.
func fill(t *testing.T, v reflect.Value, now time.Time) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(now.Add(time.Duration(len(v.Type().Name())) * time.Second)))
			return
		}
		for i := range v.NumField() {
			fill(t, v.Field(i), now)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), now)
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	default:
		t.Fatalf("fill: a status field of kind %s; teach fill about it", v.Kind())
	}
}

// A tenant's change during a run wins over the run's outcome: the pool's
// spec is the API's, the run's status is saved (it answers the generation
// it saw), the pool shows updating, and the event of the state it would
// have had is dropped.
func TestSaveClusterRunKeepsConcurrentChanges(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	read := e.run(t)
	after, events := decide(read, e.clk.Now())
	// The tenant resizes the pool during the run.
	_, err := e.st.UpdateNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID, func(p model.NodePoolSpec) (model.NodePoolSpec, error) {
		p.NodeCount = 5
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	committed := e.save(t, read, after, events)
	for _, ev := range committed {
		t.Errorf("committed %s, want every event dropped (the pool and its cluster changed)", ev.Type)
	}
	p := e.poolDoc(t)
	if p.Spec.NodeCount != 5 || p.Spec.Version != 2 {
		t.Errorf("pool spec = %d nodes v%d, want the tenant's 5 nodes v2", p.Spec.NodeCount, p.Spec.Version)
	}
	if st := p.View().State; st != resource.StateUpdating {
		t.Errorf("pool state = %s, want updating (the resize is not converged)", st)
	}
	if p.Status.State != resource.StateReady || p.Status.ObservedGeneration != read.Pools[0].Spec.Generation {
		t.Errorf("pool status = %s for generation %d, want ready for %d", p.Status.State, p.Status.ObservedGeneration, read.Pools[0].Spec.Generation)
	}
}

// A pool the run finds deleted frees its name and its place in the quota.
func TestSaveClusterRunDeletedPool(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	if _, err := e.st.DeleteNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID); err != nil {
		t.Fatal(err)
	}
	read := e.run(t)
	after := store.ClusterRun{Cluster: lifecycle.BeginRun(read.Cluster), Pools: []model.NodePool{lifecycle.BeginNodePoolRun(read.Pools[0])}}
	events := lifecycle.NodePoolDeleted(&after.Cluster, &after.Pools[0], e.clk.Now())
	if got := e.save(t, read, after, events); len(got) != 1 {
		t.Errorf("committed %d events, want nodepool.deleted", len(got))
	}
	pools, err := e.st.ListNodePools(ctx, e.caller, e.cluster.ID)
	if err != nil || len(pools) != 0 {
		t.Errorf("ListNodePools = %v, %v; want none", pools, err)
	}
	// The name is free again.
	_, err = e.st.CreateNodePool(ctx, e.caller, store.CreateNodePoolRequest{
		ClusterID: e.cluster.ID, Spec: model.NodePoolSpec{Name: e.pool.Name, MachineType: "e2-standard-4", NodeCount: 1},
		RequestHash: "h2",
	})
	if err != nil {
		t.Errorf("CreateNodePool with the freed name = %v", err)
	}
}
