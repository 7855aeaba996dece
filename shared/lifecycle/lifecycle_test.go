package lifecycle

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	pending      = resource.StatePending
	provisioning = resource.StateProvisioning
	ready        = resource.StateReady
	updating     = resource.StateUpdating
	deleting     = resource.StateDeleting
	deleted      = resource.StateDeleted
	failed       = resource.StateError
)

func cluster(st resource.State, observed, generation int64) model.Cluster {
	return model.Cluster{ID: "kcl_1", TenantID: "acme", Active: true,
		Spec:   model.ClusterSpec{Name: "prod", Mode: resource.ModeStandard, Version: generation, Generation: generation, PoolsCreated: 1},
		Status: model.ClusterStatus{State: st, Message: "m", ObservedGeneration: observed}}
}

func pool(name string, st resource.State, observed, generation int64) model.NodePool {
	return model.NodePool{ID: "knp_" + name, TenantID: "acme", ClusterID: "kcl_1", Active: true,
		Spec:   model.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: 1, Version: 1, Generation: generation},
		Status: model.NodePoolStatus{State: st, Message: "m", ObservedGeneration: observed}}
}

func types(events []event.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

func TestAddNodePool(t *testing.T) {
	tests := []struct {
		name      string
		change    func(*model.Cluster)
		nameTaken bool
		want      errs.Kind // 0: accepted
	}{
		{name: "accepted"},
		{name: "autopilot", change: func(c *model.Cluster) { c.Spec.Mode = resource.ModeAutopilot }, want: errs.InvalidState},
		{name: "deleting", change: func(c *model.Cluster) { c.Spec.Deleting = true }, want: errs.InvalidState},
		{name: "deleting beats a taken name", change: func(c *model.Cluster) { c.Spec.Deleting = true }, nameTaken: true, want: errs.InvalidState},
		{name: "name taken", nameTaken: true, want: errs.Conflict},
		{name: "quota", change: func(c *model.Cluster) { c.Spec.PoolsCreated = 12; c.Status.PoolsDeleted = 2 }, want: errs.Quota},
		{name: "quota after deletions", change: func(c *model.Cluster) { c.Spec.PoolsCreated = 12; c.Status.PoolsDeleted = 3 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(ready, 1, 1)
			if tt.change != nil {
				tt.change(&c)
			}
			before := c
			err := AddNodePool(&c, &model.NodePoolSpec{Name: "np"}, tt.nameTaken, t0)
			var de *errs.Error
			switch {
			case tt.want == 0 && err != nil:
				t.Fatalf("AddNodePool = %v, want accepted", err)
			case tt.want != 0 && (!errors.As(err, &de) || de.Kind != tt.want):
				t.Fatalf("AddNodePool = %v, want %s", err, tt.want.Code())
			case tt.want != 0:
				return
			}
			if c.Spec.PoolsCreated != before.Spec.PoolsCreated+1 || c.Spec.Version != 2 || c.Spec.Generation != 2 || !c.Spec.UpdatedAt.Equal(t0) {
				t.Errorf("cluster spec after = %+v, want one more pool, version and generation 2, updated now", c.Spec)
			}
			if st, _ := model.ClusterState(&c); st != updating {
				t.Errorf("cluster state = %s, want updating", st)
			}
		})
	}
}

func TestResizeAndDeleteNodePool(t *testing.T) {
	resize := func(p model.NodePoolSpec) (model.NodePoolSpec, error) { p.NodeCount = 3; return p, nil }
	t.Run("resize", func(t *testing.T) {
		c, p := cluster(ready, 1, 1), pool("a", ready, 1, 1)
		if err := ResizeNodePool(&c, &p, resize, t0); err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeCount != 3 || p.Spec.Version != 2 || p.View().State != updating || c.View().State != updating || c.Spec.Version != 2 {
			t.Errorf("after resize: pool %d nodes v%d %s, cluster v%d %s; want 3 v2 updating, v2 updating",
				p.Spec.NodeCount, p.Spec.Version, p.View().State, c.Spec.Version, c.View().State)
		}
	})
	t.Run("resize a deleting pool", func(t *testing.T) {
		c, p := cluster(ready, 1, 1), pool("a", ready, 1, 1)
		DeleteNodePool(&c, &p, t0)
		var de *errs.Error
		if err := ResizeNodePool(&c, &p, resize, t0); !errors.As(err, &de) || de.Kind != errs.InvalidState {
			t.Errorf("ResizeNodePool of a deleting pool = %v, want INVALID_STATE", err)
		}
	})
	t.Run("delete twice", func(t *testing.T) {
		c, p := cluster(ready, 1, 1), pool("a", ready, 1, 1)
		if !DeleteNodePool(&c, &p, t0) || DeleteNodePool(&c, &p, t0) {
			t.Errorf("DeleteNodePool twice, want a change then none")
		}
		if p.View().State != deleting || c.Spec.Version != 2 {
			t.Errorf("after delete: pool %s, cluster v%d; want deleting, v2", p.View().State, c.Spec.Version)
		}
	})
	t.Run("delete cluster", func(t *testing.T) {
		c := cluster(ready, 1, 1)
		a, b := pool("a", ready, 1, 1), pool("b", ready, 1, 1)
		DeleteNodePool(&c, &b, t0)
		genB := b.Spec.Generation
		if !DeleteCluster(&c, []*model.NodePool{&a, &b}, t0) || DeleteCluster(&c, []*model.NodePool{&a, &b}, t0) {
			t.Errorf("DeleteCluster twice, want a change then none")
		}
		if a.View().State != deleting || b.Spec.Generation != genB || c.View().State != deleting {
			t.Errorf("after delete: pools %s %s (b generation %d, was %d), cluster %s; want deleting, b untouched", a.View().State, b.View().State, b.Spec.Generation, genB, c.View().State)
		}
	})
}

func TestNodePoolOutcomes(t *testing.T) {
	p := BeginNodePoolRun(pool("a", pending, 0, 1))
	if ev := NodePoolError(&p, "no capacity", t0); !slices.Equal(types(ev), []string{event.NodePoolError}) {
		t.Errorf("entering error = %v, want nodepool.error", types(ev))
	}
	if ev := NodePoolError(&p, "still no capacity", t0); len(ev) != 0 || p.Status.Message != "still no capacity" {
		t.Errorf("error again = %v, message %q; want no event, the new message", types(ev), p.Status.Message)
	}
	if ev := NodePoolReady(&p, t0); !slices.Equal(types(ev), []string{event.NodePoolReady}) {
		t.Errorf("ready = %v, want nodepool.ready", types(ev))
	}
	if ev := NodePoolReady(&p, t0); len(ev) != 0 {
		t.Errorf("ready again = %v, want none", types(ev))
	}
	NodePoolChanging(&p, t0)
	if p.Status.State != updating {
		t.Errorf("changing a ready pool = %s, want updating", p.Status.State)
	}
	c := BeginRun(cluster(ready, 1, 1))
	if ev := NodePoolDeleted(&c, &p, t0); !slices.Equal(types(ev), []string{event.NodePoolDeleted}) || p.Active || c.Status.PoolsDeleted != 1 {
		t.Errorf("deleted = %v, active %v, pools deleted %d; want nodepool.deleted, inactive, 1", types(ev), p.Active, c.Status.PoolsDeleted)
	}
	if ev := NodePoolDeleted(&c, &p, t0); len(ev) != 0 || c.Status.PoolsDeleted != 1 {
		t.Errorf("deleted again = %v, pools deleted %d; want nothing more", types(ev), c.Status.PoolsDeleted)
	}
}

func TestSettleCluster(t *testing.T) {
	tests := []struct {
		name       string
		cluster    model.Cluster
		pools      []resource.State
		converging bool
		want       resource.State
		wantEvents []string
	}{
		{"first ready", cluster(provisioning, 1, 1), []resource.State{ready}, false, ready, []string{event.ClusterReady}},
		{"still creating", cluster(provisioning, 1, 1), []resource.State{pending}, false, provisioning, nil},
		{"call in flight after ready once", everReady(cluster(ready, 1, 1)), []resource.State{ready}, true, updating, nil},
		{"ready again after a change", everReady(cluster(updating, 1, 1)), []resource.State{ready}, false, ready, []string{event.ClusterUpdated}},
		{"steady", everReady(cluster(ready, 1, 1)), []resource.State{ready}, false, ready, nil},
		{"upgraded while ready", upgraded(everReady(cluster(ready, 1, 1))), []resource.State{ready}, false, ready, []string{event.ClusterUpdated}},
		{"a pool failed", everReady(cluster(ready, 1, 1)), []resource.State{ready, failed}, false, failed, []string{event.ClusterError}},
		{"still failed", everReady(cluster(failed, 1, 1)), []resource.State{failed}, false, failed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := BeginRun(tt.cluster)
			var pools []model.NodePool
			for i, st := range tt.pools {
				pools = append(pools, pool(string(rune('a'+i)), st, 1, 1))
			}
			ev, _ := SettleCluster(&c, pools, tt.converging, t0)
			if c.Status.State != tt.want || !slices.Equal(types(ev), tt.wantEvents) {
				t.Errorf("SettleCluster = %s %v, want %s %v", c.Status.State, types(ev), tt.want, tt.wantEvents)
			}
			if tt.want == failed && c.Status.Message != `node pool "b": m` && c.Status.Message != `node pool "a": m` {
				t.Errorf("message = %q, want the failed pool named", c.Status.Message)
			}
		})
	}
}

func everReady(c model.Cluster) model.Cluster { c.Status.Provider.EverReady = true; return c }
func upgraded(c model.Cluster) model.Cluster  { c.Status.Upgraded = true; return c }

func TestPoolMessage(t *testing.T) {
	tests := []struct{ name, msg, want string }{
		{"gpu", "quota exceeded", `node pool "gpu": quota exceeded`},
		{"gpu", `Node pool "gpu": invalid machine type`, `Node pool "gpu": invalid machine type`},
		{"gpu", `Node pool "cpu": invalid machine type`, `node pool "gpu": Node pool "cpu": invalid machine type`},
		{"gpu", "", `node pool "gpu": `},
	}
	for _, tt := range tests {
		if got := poolMessage(tt.name, tt.msg); got != tt.want {
			t.Errorf("poolMessage(%q, %q) = %q, want %q", tt.name, tt.msg, got, tt.want)
		}
	}
}

// A cluster's error is announced when it enters it, not again when it
// re-enters the same error after a tenant's change showed it updating; once
// it was ready, the same error is announced anew.
func TestClusterErrorAnnouncedOnce(t *testing.T) {
	c := BeginRun(everReady(cluster(ready, 1, 1)))
	if ev := ClusterError(&c, "lost", t0); !slices.Equal(types(ev), []string{event.ClusterError}) {
		t.Fatalf("entering error = %v, want cluster.error", types(ev))
	}
	c.Spec.Generation++ // a tenant's change: shown updating
	c = BeginRun(c)
	if st, _ := model.ClusterState(&c); st != updating {
		t.Fatalf("after a change = %s, want updating", st)
	}
	if ev := ClusterError(&c, "lost", t0); len(ev) != 0 {
		t.Errorf("the same error again = %v, want no event", types(ev))
	}
	if ev := ClusterError(&c, "another", t0); len(ev) != 0 {
		t.Errorf("another message while in error = %v, want no event", types(ev))
	}
	SettleCluster(&c, nil, false, t0)
	if ev := ClusterError(&c, "lost", t0); !slices.Equal(types(ev), []string{event.ClusterError}) {
		t.Errorf("the error after being ready = %v, want cluster.error", types(ev))
	}
}
