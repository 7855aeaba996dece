package substrates

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// flavorPools are one flavor's node pools: the newest that is not being
// deleted, which serves the flavor as it is asked for, and the older ones
// that it replaces (deleting ones included), by creation. Indices are in
// Input.Pools; newest is -1 when the flavor has none.
type flavorPools struct {
	newest int
	older  []int
}

// planPools makes, resizes, replaces and deletes the substrate's node
// pools so that each flavor has one as it asks, and records them in the
// status, each flavor's newest first. A pool that cannot change in place
// is replaced without losing capacity: its replacement is made first, and
// it is deleted only once that one is ready and its nodes joined
// (planRetire). It reports whether planning goes on: false when it chose
// an action, waits or failed.
func (p *planner) planPools() bool {
	s := &p.d.Substrate
	pools := p.in.Pools
	s.Status.NodePools = nil
	p.flavors = make([]flavorPools, len(s.Spec.Flavors))
	claimed, ok := p.claim()
	if !ok {
		return false
	}
	s.Status.Serials = p.serials
	for fi, f := range s.Spec.Flavors {
		fp := &p.flavors[fi]
		fp.newest = -1
		var live []int
		for _, i := range claimed[fi] {
			if pools[i].Spec.Deleting {
				fp.older = append(fp.older, i)
			} else {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			p.create(CreateNodePool, fi, -1)
			return false
		}
		fp.newest = live[len(live)-1]
		np := &pools[fp.newest]
		switch {
		case !sameShape(np.Spec, f.NodePool):
			if p.full() {
				if len(live) > 1 {
					// It holds no capacity the older one does not: it
					// makes room for its own replacement.
					p.act(Action{Kind: DeleteNodePool, Pool: fp.newest, Retire: true})
					return false
				}
				p.d.wait("")
				p.d.setState(p.d.Substrate.Status.State, fmt.Sprintf("waiting for room in cluster %s to replace node pool %s: it has %d node pools, the most it may have",
					p.in.Cluster.Spec.Name, np.Spec.Name, resource.MaxNodePools))
				return false
			}
			p.create(ReplaceNodePool, fi, fp.newest)
			return false
		case np.Spec.NodeCount != f.NodePool.NodeCount || !reflect.DeepEqual(np.Spec.Autoscaling, f.NodePool.Autoscaling):
			p.act(Action{Kind: ResizeNodePool, Flavor: fi, Pool: fp.newest})
			return false
		}
		// Between the oldest and the newest, a pool replaced before it
		// served is not waited for.
		if len(live) > 2 {
			p.act(Action{Kind: DeleteNodePool, Pool: live[1], Retire: true, Name: np.Spec.Name})
			return false
		}
		fp.older = append(fp.older, live[:len(live)-1]...)
		slices.Sort(fp.older)
		p.record(f, fp.newest)
		for _, i := range slices.Backward(fp.older) {
			p.record(f, i)
		}
		if st, msg := model.NodePoolState(np); st == resource.StateError {
			p.d.fail(fmt.Sprintf("node pool %s: %s", np.Spec.Name, msg))
			return false
		}
	}
	for i, np := range pools {
		if np.Spec.ManagedBy == s.ID && !np.Spec.Deleting && !slices.ContainsFunc(claimed, func(c []int) bool { return slices.Contains(c, i) }) {
			p.act(Action{Kind: DeleteNodePool, Pool: i})
			return false
		}
	}
	return true
}

// claim finds each flavor's node pools among the cluster's, by creation,
// with the flavors' serials. A flavor's pools are named by its serials
// (FlavorPoolName): the first, those the status lists for it, and the
// ones named by the serials around the recorded one (made by a run that
// did not save), and sets the flavors' serials. ok is false when a pool
// named as a flavor's first was not made by the substrate: the substrate
// fails.
func (p *planner) claim() (claimed [][]int, ok bool) {
	s := &p.d.Substrate
	pools := p.in.Pools
	byName := map[string]int{}
	for i, np := range pools {
		byName[np.Spec.Name] = i
	}
	flavorOf := map[int]int{} // pool → flavor
	firsts := map[string]bool{}
	for _, f := range s.Spec.Flavors {
		firsts[f.NodePool.Name] = true
	}
	serials := map[string]int{}
	for fi, f := range s.Spec.Flavors {
		serials[f.Name] = p.in.Substrate.Status.Serials[f.Name]
		i, found := byName[f.NodePool.Name]
		if !found {
			continue
		}
		if pools[i].Spec.ManagedBy != s.ID {
			p.d.fail(fmt.Sprintf("node pool %s of cluster %s exists and was not made by the substrate", f.NodePool.Name, p.in.Cluster.Spec.Name))
			return nil, false
		}
		flavorOf[i] = fi
		serials[f.Name] = max(serials[f.Name], 1)
	}
	mine := func(name string) (int, bool) {
		i, found := byName[name]
		_, taken := flavorOf[i]
		return i, found && !taken && !firsts[name] && pools[i].Spec.ManagedBy == s.ID
	}
	for fi, f := range s.Spec.Flavors {
		for _, np := range p.in.Substrate.Status.NodePools {
			if i, ok := mine(np.Name); ok && np.Flavor == f.Name {
				flavorOf[i] = fi
			}
		}
		// From a few serials before the recorded one: a decision records
		// the serial of the pool it makes before it lists the pool.
		from := max(serials[f.Name], 1)
		for n := max(from-resource.MaxNodePools, 2); n <= from+resource.MaxNodePools+1; n++ {
			if i, ok := mine(FlavorPoolName(s.PoolID, f.Name, n)); ok {
				flavorOf[i] = fi
				serials[f.Name] = n
			}
		}
	}
	claimed = make([][]int, len(s.Spec.Flavors))
	for i := range pools {
		if fi, ok := flavorOf[i]; ok {
			claimed[fi] = append(claimed[fi], i)
		}
	}
	p.serials = serials
	return claimed, true
}

// create chooses to make flavor fi's next node pool (a replacement of
// pool replaces when that is not -1), named by the flavor's next serial
// whose name is free.
func (p *planner) create(kind string, fi, replaces int) {
	s := &p.d.Substrate
	f := s.Spec.Flavors[fi]
	n := p.serials[f.Name]
	name := ""
	for {
		n++
		name = FlavorPoolName(s.PoolID, f.Name, n)
		if !p.taken(name, fi) {
			break
		}
	}
	p.serials[f.Name] = n
	p.act(Action{Kind: kind, Flavor: fi, Pool: replaces, Name: name})
}

// taken reports whether a pool of the cluster has the name, or it is
// another flavor's first pool's.
func (p *planner) taken(name string, fi int) bool {
	for _, np := range p.in.Pools {
		if np.Spec.Name == name {
			return true
		}
	}
	for i, f := range p.d.Substrate.Spec.Flavors {
		if i != fi && f.NodePool.Name == name {
			return true
		}
	}
	return false
}

// full reports whether the cluster has as many node pools as it may.
func (p *planner) full() bool {
	return max(len(p.in.Pools), model.ActiveNodePools(p.in.Cluster)) >= resource.MaxNodePools
}

// record lists pool i of flavor f in the status.
func (p *planner) record(f model.Flavor, i int) {
	np := &p.in.Pools[i]
	st, _ := model.NodePoolState(np)
	p.d.Substrate.Status.NodePools = append(p.d.Substrate.Status.NodePools,
		resource.SubstrateNodePool{Flavor: f.Name, Name: np.Spec.Name, NodePoolID: np.ID, State: st})
}

// planRetire deletes the pools that a flavor's newest replaces, once that
// one is ready and its nodes joined: the substrate's joined nodes never
// drop below what the smaller of the two holds. Meanwhile the substrate
// says what it waits for. It reports whether planning goes on: true when
// no pool is being replaced.
func (p *planner) planRetire() bool {
	pools := p.in.Pools
	msg := ""
	for _, fp := range p.flavors {
		if len(fp.older) == 0 {
			continue
		}
		np := &pools[fp.newest]
		old := pools[fp.older[len(fp.older)-1]].Spec.Name
		joined, want := p.joinedOf(np.Spec.Name), wantedNodes(np, p.in.Cluster)
		if joined < want {
			if msg == "" {
				msg = fmt.Sprintf("replacing node pool %s with %s: %d of %d nodes joined", old, np.Spec.Name, joined, want)
			}
			continue
		}
		for _, i := range fp.older {
			if !pools[i].Spec.Deleting {
				p.act(Action{Kind: DeleteNodePool, Pool: i, Retire: true, Name: np.Spec.Name})
				return false
			}
		}
		if msg == "" {
			msg = fmt.Sprintf("node pool %s, replaced with %s, is being deleted", old, np.Spec.Name)
		}
	}
	if msg == "" {
		return true
	}
	p.d.wait("")
	p.d.setState(p.d.Substrate.Status.State, msg)
	return false
}

// joinedOf counts the joined nodes that are Nodes of the named pool.
func (p *planner) joinedOf(pool string) int {
	joined := map[string]bool{}
	for _, n := range p.in.Seen.Joined {
		joined[n.Name] = !slices.Contains(p.d.Left, n.Name)
	}
	count := 0
	for _, n := range p.in.Seen.Nodes {
		if n.NodePool == pool && joined[n.Name] {
			count++
		}
	}
	return count
}

// wantedNodes is how many nodes a pool is made with: its node count in
// each of its zones (the cluster's when it names none).
func wantedNodes(np *model.NodePool, c *model.Cluster) int {
	zones := len(np.Spec.Zones)
	if zones == 0 {
		zones = len(c.Spec.Zones)
	}
	return np.Spec.NodeCount * max(zones, 1)
}

// FlavorOf is the flavor whose node pool is named so, as the substrate
// lists its pools (or names its flavors' first ones); ok is false when
// the pool is not one of the substrate's.
func FlavorOf(s *model.Substrate, nodePool string) (flavor string, ok bool) {
	for _, np := range s.Status.NodePools {
		if np.Name == nodePool {
			return np.Flavor, true
		}
	}
	for _, f := range s.Spec.Flavors {
		if f.NodePool.Name == nodePool {
			return f.Name, true
		}
	}
	return "", false
}

// sameShape reports whether a pool's spec has the flavor's fields that a
// pool cannot change in place (all but its size).
func sameShape(a, b model.NodePoolSpec) bool {
	return reflect.DeepEqual(shape(a), shape(b))
}

// shape is what of a pool's spec the tenant asks for and cannot change in
// place, an empty collection the same as none.
func shape(s model.NodePoolSpec) model.NodePoolSpec {
	p := model.NodePoolSpec{MachineType: s.MachineType, DiskGiB: s.DiskGiB, DiskType: s.DiskType, Spot: s.Spot,
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
