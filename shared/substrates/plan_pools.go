package substrates

import (
	"fmt"
	"reflect"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planPools makes, resizes and deletes the substrate's node pools so that
// there is one per flavor, and records them in the status. It reports
// whether planning goes on: false when it chose an action or failed.
func (p *planner) planPools() bool {
	s := &p.d.Substrate
	c := p.in.Cluster
	byName := map[string]int{}
	for i, np := range p.in.Pools {
		byName[np.Spec.Name] = i
	}
	s.Status.NodePools = nil
	wanted := map[string]bool{}
	for fi, f := range s.Spec.Flavors {
		name := f.NodePool.Name
		wanted[name] = true
		ref := resource.SubstrateNodePool{Flavor: f.Name, Name: name, State: resource.StatePending}
		i, ok := byName[name]
		if !ok {
			p.act(Action{Kind: CreateNodePool, Flavor: fi})
			return false
		}
		np := &p.in.Pools[i]
		if np.Spec.ManagedBy != s.ID {
			p.d.fail(fmt.Sprintf("node pool %s of cluster %s exists and was not made by the substrate", name, c.Spec.Name))
			return false
		}
		ref.NodePoolID = np.ID
		ref.State, _ = lifecycle.NodePoolState(np)
		switch {
		case np.Spec.Deleting:
			// Replaced: made again once it is deleted.
		case !sameShape(np.Spec, f.NodePool):
			p.act(Action{Kind: DeleteNodePool, Pool: i})
			return false
		case np.Spec.NodeCount != f.NodePool.NodeCount || !reflect.DeepEqual(np.Spec.Autoscaling, f.NodePool.Autoscaling):
			p.act(Action{Kind: ResizeNodePool, Flavor: fi, Pool: i})
			return false
		}
		s.Status.NodePools = append(s.Status.NodePools, ref)
		if ref.State == resource.StateError {
			_, msg := lifecycle.NodePoolState(np)
			p.d.fail(fmt.Sprintf("node pool %s: %s", name, msg))
			return false
		}
	}
	for i, np := range p.in.Pools {
		if np.Spec.ManagedBy == s.ID && !wanted[np.Spec.Name] && !np.Spec.Deleting {
			p.act(Action{Kind: DeleteNodePool, Pool: i})
			return false
		}
	}
	return true
}

// sameShape reports whether a pool's spec has the flavor's fields that a
// pool cannot change in place (all but its size).
func sameShape(a, b lifecycle.NodePoolSpec) bool {
	return reflect.DeepEqual(shape(a), shape(b))
}

// shape is what of a pool's spec the tenant asks for and cannot change in
// place, an empty collection the same as none.
func shape(s lifecycle.NodePoolSpec) lifecycle.NodePoolSpec {
	p := lifecycle.NodePoolSpec{MachineType: s.MachineType, DiskGiB: s.DiskGiB, DiskType: s.DiskType, Spot: s.Spot,
		Accelerators: s.Accelerators, Zones: s.Zones, Labels: s.Labels, Taints: s.Taints}
	if len(p.Zones) == 0 {
		p.Zones = nil
	}
	if len(p.Labels) == 0 {
		p.Labels = nil
	}
	if len(p.Taints) == 0 {
		p.Taints = nil
	}
	return p
}
