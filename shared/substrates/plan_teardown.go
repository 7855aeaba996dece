package substrates

import (
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planTeardown undoes what the substrate made, then deletes it: the
// cluster it made, or in the cluster it adopted, bcd's objects and its
// node pools. Nodes leave and the token is revoked first: nothing joins a
// substrate on its way out. A teardown holds the lease.
func (p *planner) planTeardown() {
	s := &p.d.Substrate
	in := p.in
	p.d.Lease = true
	s.Status.Message = ""
	if s.Status.State != resource.StateDeleting {
		p.d.setState(resource.StateDeleting, "")
	}
	if in.Seen == nil {
		p.d.Observe = true
		return
	}
	for _, n := range in.Seen.Joined {
		p.leave(n)
	}
	if h := s.Status.Token.Hash; h != "" {
		p.d.Revoked = append(p.d.Revoked, h)
		s.Status.Token = model.JoinToken{}
	}
	c := in.Cluster
	switch {
	case s.Status.ClusterID == "" || c == nil || !c.Active:
	case s.Spec.Mode == resource.SubstrateCreate:
		if !c.Spec.Deleting {
			p.act(Action{Kind: DeleteCluster})
		}
		p.d.Converging = true
		return
	default:
		if st, _ := model.ClusterState(c); (st == resource.StateReady || st == resource.StateUpdating) && !in.Removed {
			if !in.Tried {
				p.act(Action{Kind: RemoveObjects})
			}
			p.d.Converging = true
			return
		}
		busy := false
		for i, np := range in.Pools {
			if np.Spec.ManagedBy != s.ID {
				continue
			}
			busy = true
			if !np.Spec.Deleting {
				p.act(Action{Kind: DeleteNodePool, Pool: i})
				break
			}
		}
		if busy {
			p.d.Converging = true
			return
		}
		if in.Adopted {
			p.act(Action{Kind: ReleaseCluster})
			return
		}
	}
	s.Status.NodePools = nil
	p.d.setState(resource.StateDeleted, "")
	s.Active = false
	expire := p.d.now.Add(model.DeletedTTL)
	s.ExpireAt = &expire
	p.d.Events = append(p.d.Events, event.ForSubstrate(event.SubstrateDeleted, s.View(), p.d.now))
	p.d.Done = true
}
