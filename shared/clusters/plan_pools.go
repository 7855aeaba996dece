package clusters

import (
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planPool converges one pool that should exist.
func (p *planner) planPool(i int) {
	np := &p.d.Pools[i]
	pr := &np.Status.Provider
	p.setNodes(np)
	if inFlight(pr.Operation, pr.Intent) {
		p.d.Converging = true
		return
	}
	op, ok := p.obs.Pools[np.Spec.Name]
	if !ok {
		if i == p.failed {
			return
		}
		// Not at the provider: create it (again, if it vanished).
		if p.held(i) {
			return
		}
		if p.act(CreateNodePool, i) {
			// What the provider makes is read afresh once it exists.
			pr.Created = false
			lifecycle.NodePoolChanging(np, p.now)
		} else if np.Status.State != resource.StateError {
			p.d.Converging = true
		}
		return
	}
	if !pr.Created {
		pr.Created = true
		pr.NodeCount = op.NodeCount
		if op.Autoscaling != nil {
			pr.NodeCount = -1
		}
	}
	var change string
	switch {
	case !sameAutoscaling(np.Spec.Autoscaling, op.Autoscaling):
		change = SetAutoscaling
	case np.Spec.Autoscaling == nil && pr.NodeCount != np.Spec.NodeCount:
		change = SetSize
	}
	if op.Status == StatusProvisioning || op.Status == StatusReconciling || op.Status == StatusStopping {
		// The provider is changing the pool: a change to make waits,
		// and says for what when the provider started it itself (a
		// repair).
		if change != "" {
			p.held(i)
		}
		p.d.Converging = true
		return
	}
	failing := op.Status == StatusError || op.Status == StatusRunningWithError
	switch {
	case change != "" && i != p.failed:
		// A pool the provider shows in error is tried again with the
		// change it still lacks: a change by the tenant, or a retry of
		// one the provider failed (a stockout), at the steady pace.
		if p.held(i) {
			return
		}
		if p.act(change, i) {
			lifecycle.NodePoolChanging(np, p.now)
		} else if failing && np.Status.State == resource.StateError {
			p.emit(lifecycle.NodePoolError(np, p.failure(np, op), p.now))
			return
		}
		p.d.Converging = true
	case failing:
		p.emit(lifecycle.NodePoolError(np, p.failure(np, op), p.now))
	case change != "":
		// The operation that failed just now shows its error until the
		// next run retries it.
	default:
		p.emit(lifecycle.NodePoolReady(np, p.now))
	}
}

// planPoolDelete deletes a pool at the provider, and marks it deleted once
// the provider no longer has it.
func (p *planner) planPoolDelete(i int) {
	np := &p.d.Pools[i]
	p.setNodes(np)
	if inFlight(np.Status.Provider.Operation, np.Status.Provider.Intent) {
		p.d.Converging = true
		return
	}
	var op ObservedPool
	ok := false
	if p.obs != nil {
		op, ok = p.obs.Pools[np.Spec.Name]
	}
	if !ok {
		p.emit(lifecycle.NodePoolDeleted(&p.d.Cluster, np, p.now))
		return
	}
	p.d.Converging = true
	if op.Status != StatusStopping && !p.held(i) {
		p.act(DeleteNodePool, i)
	}
}

func sameAutoscaling(want, got *resource.Autoscaling) bool {
	if want == nil || got == nil {
		return want == nil && got == nil
	}
	return *want == *got
}
