package clusters

import "github.com/better-compute/kubernetes/shared/lifecycle"

// inFlight reports whether the cluster or a pool records a call in flight.
func (p *planner) inFlight() bool {
	c := &p.d.Cluster.Status
	busy := inFlight(c.Provider.Operation, c.Provider.Intent)
	for i := range p.d.Pools {
		busy = busy || inFlight(p.d.Pools[i].Status.Provider.Operation, p.d.Pools[i].Status.Provider.Intent)
	}
	return busy
}

// applyOp folds the outcome of the recorded operation into the objects.
// The operation is on the cluster or on at most one pool: one at a time.
// A failure never takes a pool or cluster out of deleting: the tenant's
// delete stands and is retried.
func (p *planner) applyOp(op *OpOutcome) {
	c := &p.d.Cluster.Status
	if op == nil || (!op.Done && !op.Lost) {
		p.busy = p.inFlight()
		return
	}
	// Once the finished one is folded in, any other call still recorded
	// in flight holds the next call back until a later run polls it:
	// only one is ever recorded, but a second one would otherwise go
	// unnoticed (the run polls the first recorded only).
	defer func() { p.busy = p.inFlight() }()
	if c.Provider.Operation != "" {
		kind := c.Provider.OperationKind
		c.Provider.Operation, c.Provider.OperationKind, c.Provider.Intent = "", "", nil
		if op.Err != nil && !op.Err.Transient && kind == CreateCluster && !p.d.Cluster.Spec.Deleting {
			p.emit(lifecycle.ClusterError(&p.d.Cluster, "the provider refused the cluster: "+op.Err.Message, p.now))
		}
		return
	}
	for i := range p.d.Pools {
		np := &p.d.Pools[i]
		pr := &np.Status.Provider
		if pr.Operation == "" {
			continue
		}
		kind, intent := pr.OperationKind, pr.Intent
		pr.Operation, pr.OperationKind, pr.Intent = "", "", nil
		switch {
		case op.Err != nil && !op.Err.Transient:
			if !np.Spec.Deleting {
				p.failed = i
				p.emit(lifecycle.NodePoolError(np, op.Err.Message, p.now))
			}
		case op.Lost && kind == SetSize && intent != nil && p.resized(np.Spec.Name, intent.NodeCount):
			// The pool's instance groups have the size the lost
			// resize asked: it was made.
			pr.NodeCount = intent.NodeCount
		case op.Err != nil && kind == SetSize && intent != nil && isStockout(op.Err.Message):
			// The provider keeps the new size and goes on creating the
			// nodes a stockout withheld: nothing to call again.
			pr.NodeCount = intent.NodeCount
		case op.Err != nil || op.Lost:
			// Retried from what the provider shows.
		case kind == SetSize && intent != nil:
			pr.NodeCount = intent.NodeCount
		case kind == SetAutoscaling:
			// The autoscaler owns the size until autoscaling is off.
			pr.NodeCount = -1
		}
		return
	}
}

// resized reports whether the provider shows pool at size n per zone (its
// instance groups' target size), as it does once a resize to n is done,
// and is not still changing it.
func (p *planner) resized(pool string, n int) bool {
	if p.obs == nil {
		return false
	}
	op, ok := p.obs.Pools[pool]
	return ok && op.Autoscaling == nil && op.sizes() != nil && sizeDrift(op.sizes(), n) == "" && op.Status == StatusRunning
}
