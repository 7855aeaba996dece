package substrates

import (
	"fmt"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planCluster converges a substrate that its pool asks for: the cluster
// made or adopted first, then its node pools, then bcd's objects.
func (p *planner) planCluster() {
	s := &p.d.Substrate
	in := p.in
	if s.Spec.Problem != "" {
		p.d.fail(s.Spec.Problem)
		return
	}
	if s.Spec.After != "" && !in.PreviousGone {
		p.d.wait(fmt.Sprintf("waiting for the pool's previous substrate %s to be deleted", s.Spec.After))
		return
	}
	c := in.Cluster
	switch s.Spec.Mode {
	case resource.SubstrateCreate:
		if s.Status.ClusterID == "" {
			p.act(Action{Kind: CreateCluster})
			p.d.progress()
			return
		}
		if c == nil || !c.Active {
			p.d.fail(fmt.Sprintf("the substrate's cluster %s is gone", s.Status.ClusterID))
			return
		}
	case resource.SubstrateAdopt:
		if c == nil || !c.Active {
			p.d.fail(fmt.Sprintf("cluster %s to adopt does not exist", s.Spec.AdoptClusterID))
			return
		}
		if !in.Adopted {
			p.act(Action{Kind: AdoptCluster})
			p.d.progress()
			return
		}
		s.Status.ClusterID = s.Spec.AdoptClusterID
	}
	switch st, msg := model.ClusterState(c); st {
	case resource.StateError:
		if !p.poolsFailing() {
			p.d.fail(fmt.Sprintf("cluster %s: %s", c.Spec.Name, msg))
			return
		}
	case resource.StateDeleting, resource.StateDeleted:
		p.d.fail(fmt.Sprintf("cluster %s is being deleted", c.Spec.Name))
		return
	}
	if !p.planPools() {
		return
	}
	if in.Acted {
		p.d.progress()
		return
	}
	if st, _ := model.ClusterState(c); st != resource.StateReady && (st != resource.StateError || !p.poolsFailing()) {
		p.d.wait("")
		return
	}
	for _, fp := range p.flavors {
		if st, _ := model.NodePoolState(&in.Pools[fp.newest]); st != resource.StateReady {
			p.d.wait("")
			return
		}
	}
	p.planObjects()
}

// poolsFailing reports whether one of the cluster's node pools is in
// error. The cluster then shows their error, but its control plane
// serves: the substrate's pools say their own error, and one that a
// replacement retires does not stop the substrate (a stockout of a new
// pool is replaced by the next change).
func (p *planner) poolsFailing() bool {
	for _, np := range p.in.Pools {
		if np.Status.State == resource.StateError {
			return true
		}
	}
	return false
}
