package clusters

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Over a cluster's life, the run that takes it to ready with a tenant's
// change reports when that change was asked (the reconcile lag's start);
// a steady run, and one that only comes back from what the provider did
// alone (an upgrade), report none.
func TestConvergedOverRuns(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	c := lifecycle.NewCluster("kcl_1", "acme", model.ClusterSpec{
		Name: "prod", Mode: resource.ModeStandard, Region: "us-central1", ProviderName: "kcl-1", Project: "p",
	}, 1, at(0))
	pools := []model.NodePool{lifecycle.NewNodePool("knp_a", "acme", "kcl_1", model.NodePoolSpec{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}, at(0))}

	// run plans one run at second s, saves it as the reconciler would
	// (with the operation of its call) and returns what it converged.
	run := func(s int, obs *ObservedCluster, op *OpOutcome) time.Time {
		t.Helper()
		d := Plan(Input{Cluster: c, Pools: pools, Observed: obs, Op: op}, at(s))
		if a := d.Action; a != nil {
			intent := &model.Intent{Kind: a.Kind, At: at(s)}
			if a.Pool < 0 {
				pr := &d.Cluster.Status.Provider
				pr.Operation, pr.OperationKind, pr.Intent = opName, a.Kind, intent
			} else {
				intent.NodeCount = d.Pools[a.Pool].Spec.NodeCount
				pr := &d.Pools[a.Pool].Status.Provider
				pr.Operation, pr.OperationKind, pr.Intent = opName, a.Kind, intent
			}
		}
		before := c
		c, pools = d.Cluster, d.Pools
		return converged(&before, &d.Cluster)
	}
	obs := func(status string, size int, poolStatus string) *ObservedCluster {
		return observed(status, map[string]ObservedPool{"a": {Status: poolStatus, Nodes: &PoolNodes{Running: size, Target: size, Sizes: map[string]int{"us-central1-a": size}}}})
	}
	steps := []struct {
		name string
		do   func() time.Time
		want time.Time
	}{
		{"create called", func() time.Time { return run(1, nil, nil) }, time.Time{}},
		{"provisioning", func() time.Time { return run(10, obs(StatusProvisioning, 1, StatusProvisioning), &OpOutcome{}) }, time.Time{}},
		{"ready: the create converged", func() time.Time { return run(20, obs(StatusRunning, 1, StatusRunning), &OpOutcome{Done: true}) }, at(0)},
		{"steady", func() time.Time { return run(30, obs(StatusRunning, 1, StatusRunning), nil) }, time.Time{}},
		{"resize called", func() time.Time {
			p := &pools[0]
			err := lifecycle.ResizeNodePool(&c, p, func(np model.NodePoolSpec) (model.NodePoolSpec, error) { np.NodeCount = 2; return np, nil }, at(40))
			if err != nil {
				t.Fatal(err)
			}
			return run(50, obs(StatusRunning, 1, StatusRunning), nil)
		}, time.Time{}},
		{"resizing", func() time.Time { return run(60, obs(StatusRunning, 1, StatusReconciling), &OpOutcome{}) }, time.Time{}},
		{"ready: the resize converged", func() time.Time { return run(70, obs(StatusRunning, 2, StatusRunning), &OpOutcome{Done: true}) }, at(40)},
		{"the provider upgrades", func() time.Time { return run(80, obs(StatusReconciling, 2, StatusReconciling), nil) }, time.Time{}},
		{"ready again after the upgrade: nothing the tenant asked", func() time.Time { return run(90, obs(StatusRunning, 2, StatusRunning), nil) }, time.Time{}},
	}
	for _, s := range steps {
		if got := s.do(); !got.Equal(s.want) {
			st, _ := model.ClusterState(&c)
			t.Errorf("%s: converged %v (cluster %s), want %v", s.name, got, st, s.want)
		}
	}
	if st, _ := model.ClusterState(&c); st != resource.StateReady {
		t.Fatalf("cluster ends %s, want ready", st)
	}
}

type budgetCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (b *budgetCounts) BudgetSpent(_ context.Context, project string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n[project]++
}

// Every call taken from a project's budget is counted for that project,
// with or without a limit.
func TestBudgetCountsCalls(t *testing.T) {
	ctx := context.Background()
	for _, perMinute := range []float64{0, 600} {
		m := &budgetCounts{n: map[string]int{}}
		b := &Budget{PerMinute: perMinute, Metrics: m}
		for _, p := range []string{"p1", "p1", "p2"} {
			if err := b.take(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		if m.n["p1"] != 2 || m.n["p2"] != 1 {
			t.Errorf("PerMinute %v: counted %v, want p1: 2, p2: 1", perMinute, m.n)
		}
	}
}
