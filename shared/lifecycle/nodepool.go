package lifecycle

import (
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// NewNodePool is a pool as its create (or its cluster's) records it:
// pending, version 1, with empty collections rather than nil ones. It
// shares no memory with spec.
func NewNodePool(id, tenantID, clusterID string, spec model.NodePoolSpec, now time.Time) model.NodePool {
	spec = spec.Clone()
	if spec.Zones == nil {
		spec.Zones = []string{}
	}
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	if spec.Taints == nil {
		spec.Taints = []resource.Taint{}
	}
	spec.Deleting = false
	spec.Version, spec.Generation = 1, 1
	spec.UpdatedAt = now
	return model.NodePool{ID: id, TenantID: tenantID, ClusterID: clusterID, CreatedAt: now, Active: true, Spec: spec}
}

// AddNodePool is kubernetesNodePools.create of the pool spec on the
// cluster, checked in the contract's order: the cluster's mode and state
// (INVALID_STATE), the name (CONFLICT), the quota, the zones (among the
// cluster's, INVALID_INPUT naming zones[i]). The cluster counts the pool
// and goes updating.
func AddNodePool(c *model.Cluster, spec *model.NodePoolSpec, nameTaken bool, now time.Time) error {
	if c.Spec.Mode != resource.ModeStandard {
		return errs.E(errs.InvalidState, "cluster %s is %s: its nodes are run by the provider and it has no node pools", c.ID, c.Spec.Mode)
	}
	if err := checkNodePoolsAllowed(c); err != nil {
		return err
	}
	if nameTaken {
		return errs.E(errs.Conflict, "node pool name %q is taken in cluster %s", spec.Name, c.ID)
	}
	if model.ActiveNodePools(c) >= resource.MaxNodePools {
		return errs.E(errs.Quota, "cluster %s has %d node pools, the most it may have", c.ID, resource.MaxNodePools)
	}
	if fields := CheckZones("zones", spec.Zones, c.Spec.Region, c.Spec.Zones); len(fields) > 0 {
		return errs.InvalidFields(fields)
	}
	c.Spec.PoolsCreated++
	touchCluster(c, now)
	return nil
}

// ResizeNodePool is kubernetesNodePools.update: the pool's version goes up
// and it shows updating (pending stays pending), and so does its cluster.
// A pool or cluster being deleted is INVALID_STATE.
func ResizeNodePool(c *model.Cluster, p *model.NodePool, resize model.Resize, now time.Time) error {
	if err := checkNodePoolsAllowed(c); err != nil {
		return err
	}
	if p.Spec.Deleting {
		return errs.E(errs.InvalidState, "node pool %s is being deleted", p.ID)
	}
	resized, err := resize(p.Spec.Clone())
	if err != nil {
		return err
	}
	p.Spec.NodeCount = resized.NodeCount
	p.Spec.Autoscaling = resized.Autoscaling
	p.Spec.Version++
	touchNodePool(p, now)
	touchCluster(c, now)
	return nil
}

// DeleteNodePool is kubernetesNodePools.delete: the pool goes deleting and
// its cluster updating. It reports whether anything changed (a pool already
// deleting is returned unchanged).
func DeleteNodePool(c *model.Cluster, p *model.NodePool, now time.Time) bool {
	if p.Spec.Deleting {
		return false
	}
	p.Spec.Deleting = true
	touchNodePool(p, now)
	touchCluster(c, now)
	return true
}

func touchNodePool(p *model.NodePool, now time.Time) {
	p.Spec.Generation++
	p.Spec.UpdatedAt = now
}

// BeginNodePoolRun is the pool as a reconcile run works on it (BeginRun).
func BeginNodePoolRun(p model.NodePool) model.NodePool {
	p = p.Clone()
	p.Status.State, p.Status.Message = model.NodePoolState(&p)
	p.Status.ObservedGeneration = p.Spec.Generation
	return p
}

// NodePoolChanging is a pool the provider is about to change: a ready one
// goes updating; a pending one stays pending, and one in error stays in
// error until the provider accepts the change.
func NodePoolChanging(p *model.NodePool, now time.Time) {
	if p.Status.State == resource.StateReady {
		setNodePoolState(p, resource.StateUpdating, "", now)
	}
}

// NodePoolReady is a pool the provider shows running as asked.
// kubernetes.nodepool.ready follows each time it becomes ready.
func NodePoolReady(p *model.NodePool, now time.Time) []event.Event {
	if p.Status.State == resource.StateReady {
		return nil
	}
	setNodePoolState(p, resource.StateReady, "", now)
	return []event.Event{event.ForNodePool(event.NodePoolReady, p.View(), now)}
}

// NodePoolError is a pool the provider refused or shows failing, with the
// provider's message. kubernetes.nodepool.error follows when it enters the
// error.
func NodePoolError(p *model.NodePool, msg string, now time.Time) []event.Event {
	if msg == "" {
		msg = "the provider reports an error"
	}
	s := &p.Status
	if s.State == resource.StateError && s.Message == msg {
		return nil
	}
	entering := s.State != resource.StateError
	setNodePoolState(p, resource.StateError, msg, now)
	if !entering {
		return nil
	}
	return []event.Event{event.ForNodePool(event.NodePoolError, p.View(), now)}
}

// NodePoolDeleted is a deleting pool the provider no longer has: deleted,
// no longer counted by its cluster, kept for DeletedTTL,
// kubernetes.nodepool.deleted.
func NodePoolDeleted(c *model.Cluster, p *model.NodePool, now time.Time) []event.Event {
	if p.Status.State == resource.StateDeleted {
		return nil
	}
	setNodePoolState(p, resource.StateDeleted, "", now)
	p.Active = false
	expire := now.Add(model.DeletedTTL)
	p.ExpireAt = &expire
	c.Status.PoolsDeleted++
	return []event.Event{event.ForNodePool(event.NodePoolDeleted, p.View(), now)}
}

func setNodePoolState(p *model.NodePool, st resource.State, msg string, now time.Time) {
	p.Status.State, p.Status.Message, p.Status.UpdatedAt = st, msg, now
}

// NodePoolNodes records n, the nodes the provider runs for the pool (nil
// when they could not be read). Nothing else changes: the pool's state
// and events follow the provider's status alone.
func NodePoolNodes(p *model.NodePool, n *int) {
	p.Status.CurrentNodeCount = nil
	if n != nil {
		v := *n
		p.Status.CurrentNodeCount = &v
	}
}

// NodePoolCreated is what the create of p announces:
// kubernetes.nodepool.created (the first pools of a cluster's create are
// announced by the cluster's event).
func NodePoolCreated(p *model.NodePool, now time.Time) []event.Event {
	return []event.Event{event.ForNodePool(event.NodePoolCreated, p.View(), now)}
}
