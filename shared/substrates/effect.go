package substrates

import (
	"fmt"
	"maps"
	"slices"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// The effect of each action on what the next plan reads: one model, which
// a run applies after it acted and a preview (kubernetesSubstrates.plan)
// after it imagined the action done. What only the store or the cluster
// knows (the IDs of what they made, the token recorded, whether bcd's
// objects were found gone) comes in the action's Outcome; the rest is
// lifecycle's rules, the ones the store itself applies.

// Outcome is what carrying out an action answered that its effect needs.
type Outcome struct {
	// ClusterID and Zones are the cluster made and the zones the store
	// gave it (CreateCluster; no zones: its spec's).
	ClusterID string
	Zones     []string
	// PoolIDs are the IDs of the node pools made, in the order of their
	// specs: one per flavor (CreateCluster), or one (CreateNodePool,
	// ReplaceNodePool).
	PoolIDs []string
	// Token is the join token recorded for the objects applied
	// (ApplyObjects); zero when none was minted.
	Token model.JoinToken
	// Gone: bcd's objects were found gone (RemoveObjects).
	Gone bool
}

// Effect is in once d's action was carried out and answered o: the input
// of the next plan of the same run. It never mutates in. It fails only
// when lifecycle's rules refuse on in what the store accepted on a newer
// read: the run then ends, and the next one reads what the store holds.
func Effect(in Input, d *Decision, o Outcome) (Input, error) {
	a := d.Action
	if a == nil {
		return in, fmt.Errorf("effect of no action")
	}
	next := in.clone()
	now := d.now
	s := &next.Substrate
	switch a.Kind {
	case CreateCluster:
		spec, pools := clusterRequest(s)
		if len(o.Zones) > 0 {
			spec.Zones = slices.Clone(o.Zones)
		}
		spec.PoolID, spec.AccountID = s.PoolID, s.Spec.AccountID
		spec.ManagedBy, spec.ManagedPool = s.ID, s.PoolID
		c := lifecycle.NewCluster(o.ClusterID, s.TenantID, spec, len(pools), now)
		next.Cluster, next.Pools = &c, nil
		for i, np := range pools {
			next.Pools = append(next.Pools, lifecycle.NewNodePool(idOf(o.PoolIDs, i), s.TenantID, c.ID, lifecycle.Managed(np, s.ID, s.PoolID), now))
		}
		s.Status.ClusterID = c.ID
	case AdoptCluster:
		if next.Cluster == nil {
			return in, fmt.Errorf("adopted cluster %s: the run read none", s.Spec.AdoptClusterID)
		}
		if next.Cluster.AdoptedBy == nil {
			next.Cluster.AdoptedBy = map[string]string{}
		}
		next.Cluster.AdoptedBy[s.ID] = s.PoolID
		next.Adopted = true
		s.Status.ClusterID = s.Spec.AdoptClusterID
	case CreateNodePool, ReplaceNodePool:
		spec := poolSpec(s, a)
		if err := lifecycle.AddNodePool(next.Cluster, &spec, false, now); err != nil {
			return in, fmt.Errorf("node pool %s made: %w", spec.Name, err)
		}
		next.Pools = append(next.Pools, lifecycle.NewNodePool(idOf(o.PoolIDs, 0), s.TenantID, next.Cluster.ID, lifecycle.Managed(spec, s.ID, s.PoolID), now))
		next.Acted = true
	case ResizeNodePool:
		p := &next.Pools[a.Pool]
		if err := lifecycle.ResizeNodePool(next.Cluster, p, resizeTo(s.Spec.Flavors[a.Flavor].NodePool), now); err != nil {
			return in, fmt.Errorf("node pool %s resized: %w", p.Spec.Name, err)
		}
		next.Acted = true
	case DeleteNodePool:
		lifecycle.DeleteNodePool(next.Cluster, &next.Pools[a.Pool], now)
		next.Acted = true
	case ApplyObjects:
		s.Status.Applied = s.Spec.Generation
		if o.Token.Hash != "" {
			s.Status.Token = o.Token
		}
		seen := Seen{}
		if next.Seen != nil {
			seen = *next.Seen
		}
		seen.Held = true
		next.Seen = &seen
	case DeleteCluster:
		pools := make([]*model.NodePool, len(next.Pools))
		for i := range next.Pools {
			pools[i] = &next.Pools[i]
		}
		lifecycle.DeleteCluster(next.Cluster, pools, now)
	case RemoveObjects:
		next.Tried, next.Removed = true, o.Gone
	case ReleaseCluster:
		if next.Cluster != nil {
			delete(next.Cluster.AdoptedBy, s.ID)
		}
		next.Adopted = false
	default:
		return in, fmt.Errorf("unknown action %q", a.Kind)
	}
	return next, nil
}

// idOf is ids[i], "" past its end (a store's answer that named fewer).
func idOf(ids []string, i int) string {
	if i < len(ids) {
		return ids[i]
	}
	return ""
}

// clone is a copy of in that shares nothing an effect changes.
func (in Input) clone() Input {
	out := in
	out.Substrate = in.Substrate.Clone()
	if in.Cluster != nil {
		c := in.Cluster.Clone()
		c.AdoptedBy = maps.Clone(in.Cluster.AdoptedBy)
		out.Cluster = &c
	}
	out.Pools = make([]model.NodePool, len(in.Pools))
	for i, p := range in.Pools {
		out.Pools[i] = p.Clone()
	}
	if in.Seen != nil {
		seen := *in.Seen
		out.Seen = &seen
	}
	return out
}

// clusterRequest is the cluster a create-mode substrate asks the store
// for, and its first node pools: one per flavor. The store sets the rest
// (its account, project, zones when the policy names none).
func clusterRequest(s *model.Substrate) (model.ClusterSpec, []model.NodePoolSpec) {
	spec := model.ClusterSpec{Name: ClusterName(s.PoolID), Mode: resource.ModeStandard, Region: s.Spec.Region,
		ReleaseChannel: s.Spec.ReleaseChannel, Labels: map[string]string{}, Zones: slices.Clone(s.Spec.Zones)}
	pools := make([]model.NodePoolSpec, len(s.Spec.Flavors))
	for i, f := range s.Spec.Flavors {
		pools[i] = f.NodePool
	}
	return spec, pools
}

// poolSpec is the node pool that a CreateNodePool or ReplaceNodePool
// makes: its flavor's, named as the action says.
func poolSpec(s *model.Substrate, a *Action) model.NodePoolSpec {
	spec := s.Spec.Flavors[a.Flavor].NodePool
	spec.Name = a.Name
	return spec
}

// resizeTo is a ResizeNodePool's change: the flavor's size.
func resizeTo(want model.NodePoolSpec) model.Resize {
	return func(np model.NodePoolSpec) (model.NodePoolSpec, error) {
		np.NodeCount, np.Autoscaling = want.NodeCount, want.Autoscaling
		return np, nil
	}
}
