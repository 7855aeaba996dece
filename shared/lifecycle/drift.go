package lifecycle

import (
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// ChangedAtProvider begins the message of a pool whose provider side
// differs from its spec (API.md §4, "Drift"): changed by another client,
// or by a call of the reconciler's own whose answer was lost.
const ChangedAtProvider = "changed at the provider: "

// NodePoolDrifted is a pool whose provider side differs from its spec in
// a way a call undoes (its size per zone, its autoscaling, its
// existence), about to be brought back: what differed and what is done
// about it (what, "3 nodes per zone, spec 1; resizing") follows
// ChangedAtProvider in its message. A ready pool, or one already being
// brought back, goes updating with that message; a pending one stays
// pending and one in error keeps its error until the provider accepts
// the change, as NodePoolChanging. A tenant's change under way is not
// drift: its updating pool says nothing (NodePoolShowsDrift).
func NodePoolDrifted(p *model.NodePool, what string, now time.Time) {
	if !NodePoolShowsDrift(p) {
		NodePoolChanging(p, now)
		return
	}
	setNodePoolState(p, resource.StateUpdating, ChangedAtProvider+what, now)
}

// NodePoolShowsDrift reports whether the pool's difference from its
// provider side is drift rather than the tenant's change under way: the
// pool is ready (the provider matched its spec when last looked at), or
// already updating for drift.
func NodePoolShowsDrift(p *model.NodePool) bool {
	s := &p.Status
	return s.State == resource.StateReady || (s.State == resource.StateUpdating && NodePoolRepairing(p))
}

// NodePoolRepairing reports whether the pool is being brought back to
// its spec after a change at the provider (NodePoolDrifted): its message
// says so until it is ready again.
func NodePoolRepairing(p *model.NodePool) bool {
	return p.Status.State == resource.StateUpdating && strings.HasPrefix(p.Status.Message, ChangedAtProvider)
}

// NodePoolFixedDrift is a pool whose provider side differs from its spec
// in a field no call changes in place (its machine type, disks,
// accelerators, zones, labels or taints): its error, whose message names
// the field (what: "machineType n2-standard-8, spec e2-standard-4"),
// with kubernetes.nodepool.error when it enters it. Deleting the pool
// still works; nothing else is called for it.
func NodePoolFixedDrift(p *model.NodePool, what string, now time.Time) []event.Event {
	return NodePoolError(p, ChangedAtProvider+what+"; it cannot be changed back in place: delete the pool and create it again", now)
}
