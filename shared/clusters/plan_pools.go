package clusters

import (
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planPool converges one pool that should exist. It compares the spec
// with what the provider reports of the pool (drift.go), never with what
// a run last asked or recorded: Status.Provider.NodeCount follows the
// provider's size whenever it is read, and stands in for it only when
// it cannot be.
func (p *planner) planPool(i int) {
	np := &p.d.Pools[i]
	pr := &np.Status.Provider
	p.setNodes(np)
	if inFlight(pr.Operation, pr.Intent) {
		// A pool being brought back keeps saying why.
		p.waiting[i] = p.waiting[i] || lifecycle.NodePoolRepairing(np)
		p.d.Converging = true
		return
	}
	op, ok := p.obs.Pools[np.Spec.Name]
	if !ok {
		if i == p.failed {
			return
		}
		// Not at the provider: create it (again, if it vanished).
		if pr.Created {
			p.drifted(i, "the pool is gone; creating it again")
		}
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
		// First seen: until its size is read, it stands at the size it
		// was created with, the spec's.
		pr.Created, pr.NodeCount = true, np.Spec.NodeCount
	}
	if what := shapeDrift(&np.Spec, op.Shape, p.d.Cluster.Spec.Zones); what != "" {
		// Nothing is called for it until the tenant deletes it.
		p.emit(lifecycle.NodePoolFixedDrift(np, what, p.now))
		return
	}
	sizes := op.sizes()
	switch {
	case op.Autoscaling != nil:
		// The autoscaler owns the size.
		pr.NodeCount = -1
	case sizes != nil:
		pr.NodeCount = -1 // zones of different sizes: none is the pool's
		if sameSizes(sizes) {
			for _, n := range sizes {
				pr.NodeCount = n
			}
		}
	}
	var change, what string
	switch {
	case !sameAutoscaling(np.Spec.Autoscaling, op.Autoscaling):
		change = SetAutoscaling
		what = "autoscaling " + autoscalingWords(op.Autoscaling) + ", spec " + autoscalingWords(np.Spec.Autoscaling) + "; setting it"
	case np.Spec.Autoscaling == nil && sizes != nil:
		if what = sizeDrift(sizes, np.Spec.NodeCount); what != "" {
			change = SetSize
			what += "; resizing"
		}
	case np.Spec.Autoscaling == nil && pr.NodeCount != np.Spec.NodeCount:
		// The size could not be read: the one last seen or set stands
		// in for it.
		change = SetSize
	}
	if op.Status == StatusProvisioning || op.Status == StatusReconciling || op.Status == StatusStopping {
		// The provider is changing the pool: a change to make waits,
		// and says for what when the provider started it itself (a
		// repair). What the pool shows meanwhile is in flux (a surge
		// upgrade grows its groups for a while; another client's
		// resize is half done): it is compared once the change is
		// over, and a pool already being brought back keeps saying so.
		switch {
		case change != "" && !lifecycle.NodePoolShowsDrift(np):
			p.held(i)
		case lifecycle.NodePoolRepairing(np):
			p.waiting[i] = true
		}
		p.d.Converging = true
		return
	}
	if change == SetSize && sizes != nil && lifecycle.NodePoolShowsDrift(np) {
		p.d.sizeDrift = true
	}
	if what != "" && i != p.failed {
		p.drifted(i, what)
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

// drifted notes that pool i differs at the provider from its spec in a
// way a call undoes (what: how, and what is done about it): a pool that
// was ready, or already being brought back, goes updating and says so
// until it is ready again (lifecycle.NodePoolDrifted); a tenant's change
// under way says nothing.
func (p *planner) drifted(i int, what string) {
	np := &p.d.Pools[i]
	if !lifecycle.NodePoolShowsDrift(np) {
		return
	}
	lifecycle.NodePoolDrifted(np, what, p.now)
	p.waiting[i] = true
	p.d.Converging = true
}

// sameSizes reports whether every zone has the same size.
func sameSizes(sizes map[string]int) bool {
	first := -1
	for _, n := range sizes {
		if first >= 0 && n != first {
			return false
		}
		first = n
	}
	return true
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
