package substrates

import (
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

const (
	cpuPool2 = cpuPool + "-2"
	cpuPool3 = cpuPool + "-3"
)

// oldPool is the flavor's first pool, of the shape it had before its
// change (n2-standard-8), ready, with nodes n1 and n2.
func oldPool() model.NodePool {
	p := readyPool()
	p.Spec.MachineType = "n2-standard-8"
	return p
}

// newPool is a pool made for the flavor as it is asked for now, named
// name, in state st.
func newPool(id, name string, st resource.State) model.NodePool {
	p := readyPool()
	p.ID, p.Spec.Name, p.Status.State = id, name, st
	return p
}

// replacing is a ready substrate whose flavor changed shape, its
// replacement (bc-pool-gpu-cpu-2) made and in state st, its objects held
// on both pools; the old pool's nodes n1 and n2 joined, the new one has
// Nodes m1 and m2.
func replacing(st resource.State) Input {
	in := applied()
	in.Substrate.Status.State = resource.StateUpdating
	in.Substrate.Status.Serials = map[string]int{"cpu": 2}
	in.Substrate.Status.NodePools = []resource.SubstrateNodePool{
		{Flavor: "cpu", Name: cpuPool2, NodePoolID: "knp_2", State: st},
		{Flavor: "cpu", Name: cpuPool, NodePoolID: "knp_1", State: resource.StateReady}}
	in.Pools = []model.NodePool{oldPool(), newPool("knp_2", cpuPool2, st)}
	in.Seen.Nodes = append(nodesOf(cpuPool, "n1", "n2"), nodesOf(cpuPool2, "m1", "m2")...)
	return in
}

// joined adds the named nodes to the joined ones.
func joined(in Input, names ...string) Input {
	for _, n := range names {
		in.Seen.Joined = append(in.Seen.Joined, resource.SubstrateNode{Name: n})
	}
	return in
}

func TestPlanReplacement(t *testing.T) {
	both := []string{cpuPool2, cpuPool}
	for _, c := range []struct {
		name string
		in   func() Input
		want want
	}{
		{"a pool of another shape: the new one is made first, named by the next serial", func() Input {
			in := applied()
			in.Pools[0].Spec.MachineType = "n2-standard-8"
			return in
		}, want{action: &Action{Kind: ReplaceNodePool, Pool: 0, Name: cpuPool2}, state: resource.StateReady, lease: true, nodePools: 0, serials: map[string]int{"cpu": 2}}},
		{"the new pool not ready yet: updating, both listed, the old one last", func() Input {
			return replacing(resource.StatePending)
		}, want{state: resource.StateUpdating, converge: true, pools: both, serials: map[string]int{"cpu": 2}}},
		{"the new pool ready: bcd's objects are applied on both pools", func() Input {
			in := replacing(resource.StateReady)
			in.Seen = nil
			return in
		}, want{observe: true, state: resource.StateUpdating, pools: both}},
		{"the new pool's nodes not all joined: the old one stays, the substrate says so", func() Input {
			return joined(replacing(resource.StateReady), "m1")
		}, want{state: resource.StateUpdating, converge: true, pools: both,
			message: "replacing node pool " + cpuPool + " with " + cpuPool2 + ": 1 of 2 nodes joined"}},
		{"the new pool's nodes joined: the old one is deleted", func() Input {
			return joined(replacing(resource.StateReady), "m1", "m2")
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 0, Retire: true, Name: cpuPool2}, state: resource.StateUpdating, lease: true, pools: both}},
		{"the new pool's nodes counted in each of its zones", func() Input {
			in := joined(replacing(resource.StateReady), "m1", "m2")
			in.Cluster.Spec.Zones = []string{"us-central1-a", "us-central1-b"}
			return in
		}, want{state: resource.StateUpdating, converge: true, pools: both, message: "2 of 4 nodes joined"}},
		{"the old pool being deleted: wait for it", func() Input {
			in := joined(replacing(resource.StateReady), "m1", "m2")
			in.Pools[0].Spec.Deleting = true
			return in
		}, want{state: resource.StateUpdating, converge: true, pools: both,
			message: "node pool " + cpuPool + ", replaced with " + cpuPool2 + ", is being deleted"}},
		{"the old pool gone: ready again, announced", func() Input {
			in := joined(replacing(resource.StateReady), "m1", "m2")
			in.Pools = in.Pools[1:]
			in.Seen.Nodes = nodesOf(cpuPool2, "m1", "m2")
			in.Seen.Joined = in.Seen.Joined[2:]
			return in
		}, want{state: resource.StateReady, events: []string{"kubernetes.substrate.updated"}, pools: []string{cpuPool2}, serials: map[string]int{"cpu": 2}}},
		{"a change during a replacement replaces the newest", func() Input {
			in := replacing(resource.StatePending)
			in.Substrate.Spec.Flavors[0].NodePool.MachineType = "c2-standard-8"
			return in
		}, want{action: &Action{Kind: ReplaceNodePool, Pool: 1, Name: cpuPool3}, state: resource.StateUpdating, lease: true, nodePools: 0, serials: map[string]int{"cpu": 3}}},
		{"the newest made: the one between, replaced before it served, is deleted", func() Input {
			in := replacing(resource.StateReady)
			in.Substrate.Spec.Flavors[0].NodePool.MachineType = "c2-standard-8"
			newest := newPool("knp_3", cpuPool3, resource.StatePending)
			newest.Spec.MachineType = "c2-standard-8"
			in.Pools[1].Spec.MachineType = "e2-standard-4"
			in.Pools = append(in.Pools, newest)
			return in
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 1, Retire: true, Name: cpuPool3}, state: resource.StateUpdating, lease: true, nodePools: 0, serials: map[string]int{"cpu": 3}}},
		{"a resize during a replacement resizes the new pool", func() Input {
			in := replacing(resource.StatePending)
			in.Pools[1].Spec.NodeCount = 1
			return in
		}, want{action: &Action{Kind: ResizeNodePool, Pool: 1}, state: resource.StateUpdating, lease: true, nodePools: 0}},
		{"a stockout of the new pool: error naming it, the old one stays", func() Input {
			in := joined(replacing(resource.StateError), "m1")
			in.Pools[1].Status.Message = "us-central1-a: no e2-standard-4 available (ZONE_RESOURCE_POOL_EXHAUSTED); 1 of 2 nodes"
			return in
		}, want{state: resource.StateError, events: []string{"kubernetes.substrate.error"}, pools: both,
			message: "node pool " + cpuPool2 + ": us-central1-a: no e2-standard-4 available"}},
		{"the cluster in error for the new pool's stockout: the pool's error, the old one stays", func() Input {
			in := joined(replacing(resource.StateError), "m1")
			in.Pools[1].Status.Message = "ZONE_RESOURCE_POOL_EXHAUSTED"
			in.Cluster.Status.State, in.Cluster.Status.Message = resource.StateError, "node pool "+cpuPool2+": ZONE_RESOURCE_POOL_EXHAUSTED"
			return in
		}, want{state: resource.StateError, events: []string{"kubernetes.substrate.error"}, pools: both,
			message: "node pool " + cpuPool2 + ": ZONE_RESOURCE_POOL_EXHAUSTED"}},
		{"a further change replaces the pool that got no nodes, though its cluster shows its error", func() Input {
			in := joined(replacing(resource.StateError), "m1")
			in.Cluster.Status.State, in.Cluster.Status.Message = resource.StateError, "node pool "+cpuPool2+": ZONE_RESOURCE_POOL_EXHAUSTED"
			in.Substrate.Spec.Flavors[0].NodePool.MachineType = "c2-standard-8"
			return in
		}, want{action: &Action{Kind: ReplaceNodePool, Pool: 1, Name: cpuPool3}, state: resource.StateUpdating, lease: true, nodePools: 0}},
		{"the old pool in error, its cluster too: the replacement completes", func() Input {
			in := joined(replacing(resource.StateReady), "m1", "m2")
			in.Pools[0].Status.State = resource.StateError
			in.Cluster.Status.State = resource.StateError
			return in
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 0, Retire: true, Name: cpuPool2}, state: resource.StateUpdating, lease: true, pools: both}},
		{"a replacement made by a run that did not save is found by its name", func() Input {
			in := replacing(resource.StatePending)
			in.Substrate.Status.Serials, in.Substrate.Status.NodePools = nil, nil
			return in
		}, want{state: resource.StateUpdating, converge: true, pools: both, serials: map[string]int{"cpu": 2}}},
		{"a replacement whose serial was saved before it was listed is found", func() Input {
			in := replacing(resource.StatePending)
			in.Substrate.Status.NodePools = in.Substrate.Status.NodePools[1:]
			return in
		}, want{state: resource.StateUpdating, converge: true, pools: both, serials: map[string]int{"cpu": 2}}},
		{"no room in the cluster: the replacement waits, saying so", func() Input {
			in := applied()
			in.Pools[0].Spec.MachineType = "n2-standard-8"
			in.Cluster.Spec.PoolsCreated = resource.MaxNodePools
			return in
		}, want{state: resource.StateUpdating, converge: true, nodePools: 0,
			message: "waiting for room in cluster bc-pool-gpu to replace node pool " + cpuPool}},
		{"no room during a replacement: the newest, replaced again, makes room", func() Input {
			in := replacing(resource.StatePending)
			in.Substrate.Spec.Flavors[0].NodePool.MachineType = "c2-standard-8"
			in.Cluster.Spec.PoolsCreated = resource.MaxNodePools
			return in
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 1, Retire: true}, state: resource.StateUpdating, lease: true, nodePools: 0}},
		{"a name of the next serial held by a tenant's pool is skipped", func() Input {
			in := applied()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID, in.Adopted = resource.SubstrateAdopt, "kcl_1", true
			in.Pools[0].Spec.MachineType = "n2-standard-8"
			own := newPool("knp_9", cpuPool2, resource.StateReady)
			own.Spec.ManagedBy = ""
			in.Pools = append(in.Pools, own)
			return in
		}, want{action: &Action{Kind: ReplaceNodePool, Pool: 0, Name: cpuPool3}, state: resource.StateReady, lease: true, nodePools: 0, serials: map[string]int{"cpu": 3}}},
		{"a name of the next serial that is another flavor's first pool is skipped", func() Input {
			in := applied()
			in.Pools[0].Spec.MachineType = "n2-standard-8"
			other := flavorCPU()
			other.Name, other.NodePool.Name = "cpu-2", cpuPool2
			in.Substrate.Spec.Flavors = append(in.Substrate.Spec.Flavors, other)
			in.Pools = append(in.Pools, newPool("knp_2", cpuPool2, resource.StateReady))
			return in
		}, want{action: &Action{Kind: ReplaceNodePool, Pool: 0, Name: cpuPool3}, state: resource.StateReady, lease: true, nodePools: 0}},
		{"a teardown during a replacement deletes both pools", func() Input {
			in := tearingDown()
			in.Tried, in.Removed = true, true
			in.Pools = replacing(resource.StatePending).Pools
			return in
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 0}, state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
		{"a teardown during a replacement waits for both pools", func() Input {
			in := tearingDown()
			in.Tried, in.Removed = true, true
			in.Pools = replacing(resource.StatePending).Pools
			in.Pools[0].Spec.Deleting = true
			return in
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 1}, state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in()
			before := jsonOf(in)
			d := Plan(in, planNow)
			if jsonOf(in) != before {
				t.Errorf("Plan changed its input")
			}
			if c.want.pools != nil {
				c.want.nodePools = -1 // the names are checked
			}
			checkDecision(t, d, c.want)
		})
	}
}

// The nodes of every pool of a flavor, old and new, are the substrate's:
// a join of either is its flavor's.
func TestFlavorOf(t *testing.T) {
	in := replacing(resource.StateReady)
	s := &in.Substrate
	for _, tc := range []struct {
		pool, flavor string
		ok           bool
	}{
		{cpuPool, "cpu", true},
		{cpuPool2, "cpu", true},
		{"own", "", false},
	} {
		if f, ok := FlavorOf(s, tc.pool); f != tc.flavor || ok != tc.ok {
			t.Errorf("FlavorOf(%q) = %q, %v; want %q, %v", tc.pool, f, ok, tc.flavor, tc.ok)
		}
	}
	s.Status.NodePools = nil // before its first run saved
	if f, ok := FlavorOf(s, cpuPool); f != "cpu" || !ok {
		t.Errorf("FlavorOf(%q) with no pools listed = %q, %v", cpuPool, f, ok)
	}
}
