package lifecycle

import (
	"slices"
	"testing"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

func TestNodePoolDrifted(t *testing.T) {
	const msg = "3 nodes per zone, spec 1; resizing"
	tests := []struct {
		name    string
		pool    model.NodePool
		state   resource.State
		message string
		drift   bool // NodePoolRepairing afterwards
	}{
		{"ready: updating, saying what differed", pool("a", ready, 1, 1), updating, ChangedAtProvider + msg, true},
		{"already brought back: the new difference", withMessage(pool("a", updating, 1, 1), ChangedAtProvider+"the pool is gone; creating it again"), updating, ChangedAtProvider + msg, true},
		{"the tenant's change under way: says nothing of drift", withMessage(pool("a", updating, 1, 1), ""), updating, "", false},
		{"pending stays pending", withMessage(pool("a", pending, 1, 1), ""), pending, "", false},
		{"error stays error", withMessage(pool("a", failed, 1, 1), "refused"), failed, "refused", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := BeginNodePoolRun(tt.pool)
			NodePoolDrifted(&p, msg, t0)
			if st, m := model.NodePoolState(&p); st != tt.state || m != tt.message {
				t.Errorf("pool = %s %q, want %s %q", st, m, tt.state, tt.message)
			}
			if got := NodePoolRepairing(&p); got != tt.drift {
				t.Errorf("NodePoolRepairing = %v, want %v", got, tt.drift)
			}
		})
	}
}

func TestNodePoolFixedDrift(t *testing.T) {
	p := BeginNodePoolRun(pool("a", ready, 1, 1))
	ev := NodePoolFixedDrift(&p, "machineType n2-standard-8, spec e2-standard-4", t0)
	if !slices.Equal(types(ev), []string{event.NodePoolError}) {
		t.Errorf("events = %v, want nodepool.error", types(ev))
	}
	want := "changed at the provider: machineType n2-standard-8, spec e2-standard-4; it cannot be changed back in place: delete the pool and create it again"
	if st, m := model.NodePoolState(&p); st != failed || m != want {
		t.Errorf("pool = %s %q, want error %q", st, m, want)
	}
	if ev := NodePoolFixedDrift(&p, "machineType n2-standard-8, spec e2-standard-4", t0); len(ev) != 0 {
		t.Errorf("the same again = %v, want no event", types(ev))
	}
	c := BeginRun(cluster(ready, 1, 1))
	if !DeleteNodePool(&c, &p, t0) {
		t.Fatal("DeleteNodePool of a pool in error = false, want it deleting")
	}
	if st, _ := model.NodePoolState(&p); st != deleting {
		t.Errorf("pool after its delete = %s, want deleting", st)
	}
}

func withMessage(p model.NodePool, msg string) model.NodePool {
	p.Status.Message = msg
	return p
}
