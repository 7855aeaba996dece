package clusters

import (
	"fmt"
	"strings"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planCluster plans a cluster's phases: delete it, create it, read what the
// provider shows of it, then its pools.
func (p *planner) planCluster() {
	c := &p.d.Cluster
	if c.Spec.Deleting {
		p.planDelete()
		return
	}
	obs, s := p.obs, &c.Status
	switch {
	case obs == nil && s.Provider.ID == "":
		if !p.busy {
			p.act(CreateCluster, -1)
		}
		lifecycle.ClusterCreating(c, p.now)
		p.d.Converging = true
		return
	case obs == nil:
		// Deleted behind Better Compute's back. It is not made again (it
		// may have been deleted on purpose, to stop what it cost): it
		// stays in error until the tenant deletes it. Its pools being
		// deleted are, with nothing left to delete; the others are in
		// error with it, whatever the tenant changes meanwhile.
		for i := range p.d.Pools {
			if np := &p.d.Pools[i]; np.Spec.Deleting {
				p.emit(lifecycle.NodePoolDeleted(c, np, p.now))
			} else {
				p.emit(lifecycle.NodePoolError(np, "the provider no longer has the pool's cluster", p.now))
			}
		}
		p.emit(lifecycle.ClusterError(c, fmt.Sprintf("the provider no longer has cluster %s: it was deleted outside Better Compute; delete this cluster to free its name, and create it again if it is still wanted", c.Spec.ProviderName), p.now))
		return
	case s.Provider.ID != "" && obs.ID != s.Provider.ID:
		p.emit(lifecycle.ClusterError(c, fmt.Sprintf("provider cluster %s was replaced by another cluster of the same name; it is left alone", c.Spec.ProviderName), p.now))
		return
	}
	lifecycle.ObserveCluster(c, obs.ID, obs.Version, obs.Endpoint, obs.CA)
	switch obs.Status {
	case StatusProvisioning:
		lifecycle.ClusterProvisioning(c, p.now)
		p.d.Converging = true
		return
	case StatusError, StatusDegraded:
		p.emit(lifecycle.ClusterError(c, fmt.Sprintf("the provider reports the cluster %s: %s", strings.ToLower(obs.Status), obs.Message), p.now))
		return
	case StatusStopping:
		p.emit(lifecycle.ClusterError(c, "the provider is deleting the cluster", p.now))
		return
	}

	for i := range p.d.Pools {
		if p.d.Pools[i].Spec.Deleting {
			p.planPoolDelete(i)
		}
	}
	// Pools in error are retried last, so that a pool the provider keeps
	// refusing never holds back the others' calls.
	for _, failed := range []bool{false, true} {
		for i := range p.d.Pools {
			np := &p.d.Pools[i]
			if !np.Spec.Deleting && np.Status.State != resource.StateDeleted && (np.Status.State == resource.StateError) == failed {
				p.planPool(i)
			}
		}
	}
	p.settle()
}

// planDelete deletes the cluster's pools, then the cluster.
func (p *planner) planDelete() {
	c := &p.d.Cluster
	if id := c.Status.Provider.ID; id != "" && p.obs != nil && p.obs.ID != id {
		// Someone else's cluster now has the name: ours is gone.
		p.obs = nil
	}
	if p.obs != nil {
		for i := range p.d.Pools {
			p.planPoolDelete(i)
		}
	}
	if p.obs == nil {
		// The provider has no such cluster, so none of its pools either.
		for i := range p.d.Pools {
			p.emit(lifecycle.NodePoolDeleted(c, &p.d.Pools[i], p.now))
		}
		p.emit(lifecycle.ClusterDeleted(c, p.now))
		p.d.Deleted = true
		p.d.Converging = false
		return
	}
	p.d.Converging = true
	if anyOurs(p.obs.Pools, p.d.Pools) {
		return
	}
	if p.obs.Status != StatusStopping {
		p.act(DeleteCluster, -1)
	}
}

func anyOurs(observed map[string]ObservedPool, pools []model.NodePool) bool {
	for _, np := range pools {
		if _, ok := observed[np.Spec.Name]; ok {
			return true
		}
	}
	return false
}
