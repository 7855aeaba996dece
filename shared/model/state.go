package model

import "github.com/better-compute/kubernetes/shared/resource"

// ClusterState is the cluster's public state and message:
//   - deleted once the reconciler found it gone after a delete;
//   - deleting from the tenant's delete on;
//   - pending until the reconciler first looks at it;
//   - provisioning, updating or ready with a message when something is in
//     the way of its change (lifecycle.ClusterWaiting, lifecycle.RunFailed);
//   - updating when the tenant changed it (or one of its pools) since the
//     reconciler last looked, unless it is still being created;
//   - otherwise what the reconciler last decided: provisioning, ready,
//     updating (a change converging, see lifecycle.SettleCluster) or error.
func ClusterState(c *Cluster) (resource.State, string) {
	s := &c.Status
	switch {
	case s.State == resource.StateDeleted:
		return resource.StateDeleted, ""
	case c.Spec.Deleting:
		return resource.StateDeleting, ""
	case s.State == "" || s.State == resource.StatePending:
		return resource.StatePending, ""
	case s.ObservedGeneration < c.Spec.Generation && s.State != resource.StateProvisioning:
		return resource.StateUpdating, ""
	}
	return s.State, s.Message
}

// ActiveNodePools is the number of the cluster's pools that are not
// deleted: the ones that count against the quota.
func ActiveNodePools(c *Cluster) int {
	return c.Spec.PoolsCreated - c.Status.PoolsDeleted
}

// NodePoolState is the pool's public state and message:
//   - deleted once the reconciler found it gone after a delete;
//   - deleting from the tenant's delete (of the pool or its cluster) on,
//     with what the delete waits for once a run has looked at it (and
//     not since changed);
//   - pending until the provider first had it, whatever the tenant changes
//     meanwhile, with what it waits for once a run has looked at it (and
//     not since changed);
//   - updating when the tenant resized it since the reconciler last looked;
//   - otherwise what the reconciler last decided: ready, updating (a change
//     at the provider) or error.
func NodePoolState(p *NodePool) (resource.State, string) {
	s := &p.Status
	switch {
	case s.State == resource.StateDeleted:
		return resource.StateDeleted, ""
	case p.Spec.Deleting && s.State == resource.StateDeleting && s.ObservedGeneration >= p.Spec.Generation:
		return resource.StateDeleting, s.Message
	case p.Spec.Deleting:
		return resource.StateDeleting, ""
	case s.State == resource.StatePending && s.ObservedGeneration >= p.Spec.Generation:
		return resource.StatePending, s.Message
	case s.State == "" || s.State == resource.StatePending:
		return resource.StatePending, ""
	case s.ObservedGeneration < p.Spec.Generation:
		return resource.StateUpdating, ""
	}
	return s.State, s.Message
}

// Resize is an accepted change of a pool's size: given a copy of the
// pool's spec, it returns it with the new node count and autoscaling (its
// other fields are not read), or an INVALID_INPUT error.
type Resize func(NodePoolSpec) (NodePoolSpec, error)
