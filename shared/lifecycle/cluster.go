package lifecycle

import (
	"fmt"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// NewCluster is a cluster as kubernetesClusters.create records it, with
// pools its first node pools: pending, version 1.
func NewCluster(id, tenantID string, spec model.ClusterSpec, pools int, now time.Time) model.Cluster {
	spec.Deleting = false
	spec.PoolsCreated = pools
	spec.Version, spec.Generation = 1, 1
	spec.UpdatedAt = now
	return model.Cluster{ID: id, TenantID: tenantID, CreatedAt: now, Active: true, Spec: spec}
}

// DeleteCluster is kubernetesClusters.delete: the cluster and its pools
// that are not deleting go deleting. It reports whether anything changed
// (a cluster already deleting is returned unchanged).
func DeleteCluster(c *model.Cluster, pools []*model.NodePool, now time.Time) bool {
	if c.Spec.Deleting {
		return false
	}
	for _, p := range pools {
		if !p.Spec.Deleting {
			p.Spec.Deleting = true
			touchNodePool(p, now)
		}
	}
	c.Spec.Deleting = true
	touchCluster(c, now)
	return true
}

// touchCluster records a change of the cluster's desired state by the
// tenant: its version and generation go up, so the cluster shows updating
// (ClusterState) until a run has converged the change.
func touchCluster(c *model.Cluster, now time.Time) {
	c.Spec.Version++
	c.Spec.Generation++
	c.Spec.UpdatedAt = now
}

// checkNodePoolsAllowed is the state rule of adding or changing pools.
func checkNodePoolsAllowed(c *model.Cluster) error {
	if c.Spec.Deleting {
		return errs.E(errs.InvalidState, "cluster %s is being deleted", c.ID)
	}
	return nil
}

// BeginRun is the cluster as a reconcile run works on it: its status
// shows the public state and answers the spec's current generation. The
// run's rules (below and in nodepool.go) move it from there.
func BeginRun(c model.Cluster) model.Cluster {
	c = c.Clone()
	c.Status.State, c.Status.Message = model.ClusterState(&c)
	c.Status.ObservedGeneration = c.Spec.Generation
	return c
}

// ClusterCreating is a cluster whose create is under way or about to be
// asked: provisioning, except that a cluster the provider refused stays in
// error while it is retried, so that its error is announced once.
func ClusterCreating(c *model.Cluster, now time.Time) {
	if c.Status.State != resource.StateError {
		setClusterState(c, resource.StateProvisioning, "", now)
	}
}

// ClusterProvisioning is a cluster the provider is still provisioning:
// provisioning, except that one in error stays in error until it settles
// (a cluster created again without the pools the provider refused), so
// that its error is announced once.
func ClusterProvisioning(c *model.Cluster, now time.Time) {
	ClusterCreating(c, now)
}

// ObserveCluster records the version and endpoint the provider shows. A
// version that moved (a release-channel upgrade) is announced as an update
// once the cluster is ready, even if it is busy or failed right now.
func ObserveCluster(c *model.Cluster, providerID, version, endpoint, ca string) {
	s := &c.Status
	if s.Provider.ID == "" {
		s.Provider.ID = providerID
	}
	if version != "" && s.KubernetesVersion != "" && version != s.KubernetesVersion {
		s.Upgraded = true
	}
	if version != "" {
		s.KubernetesVersion = version
	}
	if endpoint != "" {
		s.Endpoint = endpoint
	}
	if ca != "" {
		s.CACertificate = ca
	}
}

// ClusterError puts the cluster in error with msg. kubernetes.cluster.error
// follows when it enters the error, not when an error's message changes,
// and not when it enters again the error it last announced without having
// been ready since (a tenant's change, shown updating, came in between).
func ClusterError(c *model.Cluster, msg string, now time.Time) []event.Event {
	entering := c.Status.State != resource.StateError
	setClusterState(c, resource.StateError, msg, now)
	if !entering || c.Status.Announced == msg {
		return nil
	}
	c.Status.Announced = msg
	return []event.Event{event.ForCluster(event.ClusterError, c.View(), now)}
}

// ClusterDeleted is a deleting cluster the provider no longer has:
// deleted, kept for DeletedTTL, kubernetes.cluster.deleted.
func ClusterDeleted(c *model.Cluster, now time.Time) []event.Event {
	setClusterState(c, resource.StateDeleted, "", now)
	c.Active = false
	expire := now.Add(model.DeletedTTL)
	c.ExpireAt = &expire
	return []event.Event{event.ForCluster(event.ClusterDeleted, c.View(), now)}
}

// SettleCluster derives a running cluster's state from its pools once a run
// has planned them, and reports whether the cluster is still converging:
//   - error when any pool is, its message naming every failed pool;
//   - provisioning while converging before it was ever ready, updating
//     while converging after (converging: a call in flight or planned, or a
//     pool not yet ready);
//   - ready otherwise, with kubernetes.cluster.ready the first time and
//     kubernetes.cluster.updated when it is ready again after a change or
//     after the provider moved its version.
func SettleCluster(c *model.Cluster, pools []model.NodePool, converging bool, now time.Time) ([]event.Event, bool) {
	return SettleClusterWaiting(c, pools, converging, "", now)
}

// SettleClusterWaiting is SettleCluster for a run whose pools' changes
// wait (waiting says for what): a cluster provisioning or updating says
// so in its message.
func SettleClusterWaiting(c *model.Cluster, pools []model.NodePool, converging bool, waiting string, now time.Time) ([]event.Event, bool) {
	var failed []string
	for i := range pools {
		switch st := pools[i].Status.State; st {
		case resource.StateError:
			failed = append(failed, poolMessage(pools[i].Spec.Name, pools[i].Status.Message))
		case resource.StateReady, resource.StateDeleted:
		default:
			converging = true
		}
	}
	s := &c.Status
	switch {
	case len(failed) > 0:
		return ClusterError(c, strings.Join(failed, "; "), now), converging
	case converging && s.Provider.EverReady:
		setClusterState(c, resource.StateUpdating, waiting, now)
		return nil, true
	case converging:
		setClusterState(c, resource.StateProvisioning, waiting, now)
		return nil, true
	}
	wasReady := s.State == resource.StateReady
	setClusterState(c, resource.StateReady, "", now)
	s.Announced = ""
	switch {
	case !s.Provider.EverReady:
		s.Provider.EverReady = true
		s.Upgraded = false
		return []event.Event{event.ForCluster(event.ClusterReady, c.View(), now)}, false
	case !wasReady || s.Upgraded:
		s.Upgraded = false
		return []event.Event{event.ForCluster(event.ClusterUpdated, c.View(), now)}, false
	}
	return nil, false
}

func setClusterState(c *model.Cluster, st resource.State, msg string, now time.Time) {
	s := &c.Status
	if s.State == st && s.Message == msg {
		return
	}
	s.State, s.Message, s.UpdatedAt = st, msg, now
}

// poolMessage is a failed pool's part of its cluster's message: the
// provider's message, named after the pool unless the provider's already
// names it (`Node pool "gpu": ...`).
func poolMessage(name, msg string) string {
	prefix := fmt.Sprintf("node pool %q: ", name)
	if len(msg) >= len(prefix) && strings.EqualFold(msg[:len(prefix)], prefix) {
		return msg
	}
	return prefix + msg
}

// ClusterCreated is what the create of c announces: kubernetes.cluster.created.
func ClusterCreated(c *model.Cluster, now time.Time) []event.Event {
	return []event.Event{event.ForCluster(event.ClusterCreated, c.View(), now)}
}
