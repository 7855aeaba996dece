package substrates

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

var planNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const (
	subID   = "ksb_1"
	cpuPool = "bc-pool-gpu-cpu"
)

// flavorCPU is the pool's one flavor: 2 nodes of e2-standard-4.
func flavorCPU() model.Flavor {
	return model.Flavor{Name: "cpu", NodePool: model.NodePoolSpec{Name: cpuPool, MachineType: "e2-standard-4", NodeCount: 2, DiskGiB: 100, DiskType: "pd-balanced"}}
}

// substrate is a create-mode substrate of generation 1 with one flavor,
// its cluster recorded.
func substrate() model.Substrate {
	return model.Substrate{ID: subID, TenantID: "acme", PoolID: "pool-gpu", Active: true,
		Spec: model.SubstrateSpec{PoolVersion: 1, AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "us-central1",
			Flavors: []model.Flavor{flavorCPU()}, Generation: 1},
		Status: model.SubstrateStatus{State: resource.StateProvisioning, ClusterID: "kcl_1"}}
}

func readyCluster() *model.Cluster {
	return &model.Cluster{ID: "kcl_1", TenantID: "acme", Active: true,
		Spec:   model.ClusterSpec{Name: "bc-pool-gpu", Mode: resource.ModeStandard, Generation: 1},
		Status: model.ClusterStatus{State: resource.StateReady, ObservedGeneration: 1}}
}

// readyPool is the flavor's pool as the substrate made it, ready.
func readyPool() model.NodePool {
	spec := lifecycle.Managed(flavorCPU().NodePool, subID, "pool-gpu")
	spec.Generation = 1
	return model.NodePool{ID: "knp_1", TenantID: "acme", ClusterID: "kcl_1", Active: true, Spec: spec,
		Status: model.NodePoolStatus{State: resource.StateReady, ObservedGeneration: 1}}
}

// converging is a substrate whose cluster and pool are ready.
func converging() Input {
	return Input{Substrate: substrate(), PreviousGone: true, Cluster: readyCluster(), Pools: []model.NodePool{readyPool()}}
}

// applied is a ready substrate whose objects are held, with two joined
// nodes that are both Nodes of its pool.
func applied() Input {
	in := converging()
	in.Substrate.Status.State = resource.StateReady
	in.Substrate.Status.EverReady = true
	in.Substrate.Status.Applied = 1
	in.Substrate.Status.Token = model.JoinToken{Hash: "h1"}
	in.Substrate.Status.NodePools = []resource.SubstrateNodePool{{Flavor: "cpu", Name: cpuPool, NodePoolID: "knp_1", State: resource.StateReady}}
	in.Seen = &Seen{Held: true, Nodes: nodesOf(cpuPool, "n1", "n2"), Joined: []resource.SubstrateNode{{Name: "n1"}, {Name: "n2"}}}
	return in
}

// tearingDown is an adopt-mode substrate being torn down, its objects
// removed and its pools gone.
func tearingDown() Input {
	in := converging()
	in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID = resource.SubstrateAdopt, "kcl_1"
	in.Substrate.Spec.Deleting = true
	in.Substrate.Status.Token = model.JoinToken{Hash: "h1"}
	in.Adopted = true
	in.Cluster.Spec.ManagedBy = ""
	in.Pools = nil
	in.Seen = &Seen{}
	return in
}

// want is what a case expects of the decision; empty fields are not
// checked, except Action (nil: none).
type want struct {
	action    *Action
	state     resource.State
	message   string // a part of the status message
	events    []string
	observe   bool
	lease     bool
	converge  bool
	done      bool
	left      []string
	revoked   []string
	applied   int64 // the status's applied generation (0: not checked)
	nodePools int   // -1: not checked
	// pools are the names of the status's node pools, in order; serials
	// the status's serials (nil: not checked).
	pools   []string
	serials map[string]int
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		name string
		in   func() Input
		want want
	}{
		// The substrate's spec.
		{"a problem is the substrate's error, announced once", func() Input {
			in := converging()
			in.Substrate.Spec.Problem = "account acc-x does not exist"
			return in
		}, want{state: resource.StateError, message: "account acc-x does not exist", events: []string{event.SubstrateError}, nodePools: -1}},
		{"a problem already shown and announced: no event", func() Input {
			in := converging()
			in.Substrate.Spec.Problem = "account acc-x does not exist"
			in.Substrate.Status.State, in.Substrate.Status.Message = resource.StateError, "account acc-x does not exist"
			in.Substrate.Status.Announced = "account acc-x does not exist"
			return in
		}, want{state: resource.StateError, nodePools: -1}},
		{"waiting for the previous substrate to be deleted", func() Input {
			in := converging()
			in.Substrate.Status.ClusterID = ""
			in.Substrate.Spec.After, in.PreviousGone = "ksb_0", false
			return in
		}, want{state: resource.StatePending, message: "waiting for the pool's previous substrate ksb_0 to be deleted", converge: true, nodePools: -1}},
		{"the previous substrate deleted: the cluster is made", func() Input {
			in := converging()
			in.Substrate.Status.ClusterID = ""
			in.Cluster, in.Pools = nil, nil
			in.Substrate.Spec.After = "ksb_0"
			return in
		}, want{action: &Action{Kind: CreateCluster}, state: resource.StateProvisioning, lease: true, converge: true, nodePools: -1}},

		// The cluster.
		{"create: the cluster is made", func() Input {
			in := converging()
			in.Substrate.Status.ClusterID = ""
			in.Cluster, in.Pools = nil, nil
			return in
		}, want{action: &Action{Kind: CreateCluster}, state: resource.StateProvisioning, lease: true, converge: true, nodePools: -1}},
		{"create: once ready, a change shows updating", func() Input {
			in := converging()
			in.Substrate.Status.ClusterID, in.Substrate.Status.EverReady = "", true
			in.Cluster, in.Pools = nil, nil
			return in
		}, want{action: &Action{Kind: CreateCluster}, state: resource.StateUpdating, lease: true, converge: true, nodePools: -1}},
		{"create: the cluster made is gone", func() Input {
			in := converging()
			in.Cluster = nil
			return in
		}, want{state: resource.StateError, message: "the substrate's cluster kcl_1 is gone", events: []string{event.SubstrateError}, nodePools: -1}},
		{"adopt: no such cluster", func() Input {
			in := converging()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID = resource.SubstrateAdopt, "kcl_9"
			in.Substrate.Status.ClusterID, in.Cluster = "", nil
			return in
		}, want{state: resource.StateError, message: "cluster kcl_9 to adopt does not exist", events: []string{event.SubstrateError}, nodePools: -1}},
		{"adopt: the cluster is adopted", func() Input {
			in := converging()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID = resource.SubstrateAdopt, "kcl_1"
			in.Substrate.Status.ClusterID = ""
			return in
		}, want{action: &Action{Kind: AdoptCluster}, state: resource.StateProvisioning, lease: true, converge: true, nodePools: -1}},
		{"adopt: adopted, its pools are made", func() Input {
			in := converging()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID = resource.SubstrateAdopt, "kcl_1"
			in.Substrate.Status.ClusterID, in.Adopted, in.Pools = "", true, nil
			return in
		}, want{action: &Action{Kind: CreateNodePool, Pool: -1, Name: cpuPool}, lease: true, nodePools: -1}},
		{"the cluster in error", func() Input {
			in := converging()
			in.Cluster.Status.State, in.Cluster.Status.Message = resource.StateError, "stockout"
			return in
		}, want{state: resource.StateError, message: "cluster bc-pool-gpu: stockout", events: []string{event.SubstrateError}, nodePools: -1}},
		{"the cluster being deleted", func() Input {
			in := converging()
			in.Cluster.Spec.Deleting = true
			return in
		}, want{state: resource.StateError, message: "cluster bc-pool-gpu is being deleted", events: []string{event.SubstrateError}, nodePools: -1}},
		{"the cluster not ready yet: wait", func() Input {
			in := converging()
			in.Cluster.Status.State = resource.StateProvisioning
			return in
		}, want{state: resource.StateProvisioning, converge: true, nodePools: 1}},

		// The node pools.
		{"a flavor without its pool: made", func() Input {
			in := converging()
			in.Pools = nil
			return in
		}, want{action: &Action{Kind: CreateNodePool, Flavor: 0, Pool: -1, Name: cpuPool}, lease: true, nodePools: 0, serials: map[string]int{"cpu": 1}}},
		{"a same-named pool the substrate did not make", func() Input {
			in := converging()
			in.Pools[0].Spec.ManagedBy = ""
			return in
		}, want{state: resource.StateError, message: "node pool " + cpuPool + " of cluster bc-pool-gpu exists and was not made by the substrate",
			events: []string{event.SubstrateError}, nodePools: 0}},
		{"a pool of another shape: its replacement is made first", func() Input {
			in := converging()
			in.Pools[0].Spec.MachineType = "n2-standard-8"
			return in
		}, want{action: &Action{Kind: ReplaceNodePool, Pool: 0, Name: cpuPool + "-2"}, lease: true, nodePools: 0, serials: map[string]int{"cpu": 2}}},
		{"a pool of another size: resized", func() Input {
			in := converging()
			in.Pools[0].Spec.NodeCount = 1
			return in
		}, want{action: &Action{Kind: ResizeNodePool, Flavor: 0, Pool: 0}, lease: true, nodePools: 0}},
		{"a pool autoscaled otherwise: resized", func() Input {
			in := converging()
			in.Pools[0].Spec.Autoscaling = &resource.Autoscaling{MinNodes: 1, MaxNodes: 3}
			return in
		}, want{action: &Action{Kind: ResizeNodePool, Flavor: 0, Pool: 0}, lease: true, nodePools: 0}},
		{"a flavor whose only pool is being deleted: the next one is made", func() Input {
			in := converging()
			in.Pools[0].Spec.MachineType, in.Pools[0].Spec.Deleting = "n2-standard-8", true
			return in
		}, want{action: &Action{Kind: CreateNodePool, Pool: -1, Name: cpuPool + "-2"}, lease: true, nodePools: 0}},
		{"a pool in error", func() Input {
			in := converging()
			in.Pools[0].Status.State, in.Pools[0].Status.Message = resource.StateError, "quota exceeded"
			return in
		}, want{state: resource.StateError, message: "node pool " + cpuPool + ": quota exceeded", events: []string{event.SubstrateError}, nodePools: 1}},
		{"a pool of a flavor no longer asked for: deleted", func() Input {
			in := converging()
			old := readyPool()
			old.ID, old.Spec.Name = "knp_0", "bc-pool-gpu-old"
			in.Pools = append(in.Pools, old)
			return in
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 1}, lease: true, nodePools: 1}},
		{"a tenant's own pool in an adopted cluster is left alone", func() Input {
			in := converging()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID, in.Adopted = resource.SubstrateAdopt, "kcl_1", true
			own := readyPool()
			own.ID, own.Spec.Name, own.Spec.ManagedBy = "knp_0", "own", ""
			in.Pools = append(in.Pools, own)
			return in
		}, want{observe: true, nodePools: 1}},
		{"a pool not ready yet: wait", func() Input {
			in := converging()
			in.Pools[0].Status.State = resource.StatePending
			return in
		}, want{state: resource.StateProvisioning, converge: true, nodePools: 1}},
		{"the run changed the pools: they are looked at next run", func() Input {
			in := converging()
			in.Acted = true
			return in
		}, want{state: resource.StateProvisioning, converge: true, nodePools: 1}},

		// bcd's objects.
		{"cluster and pools ready: read the cluster's Kubernetes API", converging,
			want{observe: true, nodePools: 1}},
		{"no token: one is minted and the objects applied", func() Input {
			in := converging()
			in.Seen = &Seen{}
			return in
		}, want{action: &Action{Kind: ApplyObjects, Mint: true}, lease: true, nodePools: 1}},
		{"objects not held: applied", func() Input {
			in := applied()
			in.Seen.Held = false
			return in
		}, want{action: &Action{Kind: ApplyObjects}, lease: true, nodePools: 1}},
		{"a new generation whose objects are held: applied already, nothing to write to the cluster", func() Input {
			in := applied()
			in.Substrate.Spec.Generation = 2
			return in
		}, want{state: resource.StateReady, applied: 2, nodePools: 1}},
		{"a new generation whose objects are not held: applied", func() Input {
			in := applied()
			in.Substrate.Spec.Generation = 2
			in.Seen.Held = false
			return in
		}, want{action: &Action{Kind: ApplyObjects}, lease: true, applied: 1, nodePools: 1}},
		{"applied: ready, announced the first time", func() Input {
			in := applied()
			in.Substrate.Status.State, in.Substrate.Status.EverReady = resource.StateProvisioning, false
			return in
		}, want{state: resource.StateReady, events: []string{event.SubstrateReady}, nodePools: 1}},
		{"applied again after a change: updated", func() Input {
			in := applied()
			in.Substrate.Status.State = resource.StateUpdating
			return in
		}, want{state: resource.StateReady, events: []string{event.SubstrateUpdated}, nodePools: 1}},
		{"steady: nothing to do, no lease", applied,
			want{state: resource.StateReady, nodePools: 1}},

		// The nodes.
		{"a joined node that is no longer a Node leaves", func() Input {
			in := applied()
			in.Seen.Nodes = nodesOf(cpuPool, "n1")
			return in
		}, want{state: resource.StateReady, events: []string{event.SubstrateNodeLeft}, left: []string{"n2"}, nodePools: 1}},

		// Teardown.
		{"teardown: read the joined nodes first", func() Input {
			in := tearingDown()
			in.Seen = nil
			return in
		}, want{observe: true, state: resource.StateDeleting, lease: true, nodePools: -1}},
		{"teardown: nodes leave, the token is revoked, the cluster is deleted", func() Input {
			in := tearingDown()
			in.Substrate.Spec.Mode, in.Adopted = resource.SubstrateCreate, false
			in.Seen.Joined = []resource.SubstrateNode{{Name: "n1"}}
			return in
		}, want{action: &Action{Kind: DeleteCluster}, state: resource.StateDeleting, events: []string{event.SubstrateNodeLeft},
			left: []string{"n1"}, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
		{"teardown: the cluster made is being deleted: wait", func() Input {
			in := tearingDown()
			in.Substrate.Spec.Mode, in.Adopted = resource.SubstrateCreate, false
			in.Cluster.Spec.Deleting = true
			return in
		}, want{state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
		{"teardown: the adopted cluster's objects are removed", func() Input {
			in := tearingDown()
			return in
		}, want{action: &Action{Kind: RemoveObjects}, state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
		{"teardown: the objects still going: wait", func() Input {
			in := tearingDown()
			in.Tried = true
			return in
		}, want{state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
		{"teardown: the substrate's pools are deleted", func() Input {
			in := tearingDown()
			in.Tried, in.Removed = true, true
			own := readyPool()
			own.ID, own.Spec.Name, own.Spec.ManagedBy = "knp_0", "own", ""
			in.Pools = []model.NodePool{own, readyPool()}
			return in
		}, want{action: &Action{Kind: DeleteNodePool, Pool: 1}, state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
		{"teardown: the substrate's pools being deleted: wait", func() Input {
			in := tearingDown()
			in.Cluster.Status.State = resource.StateError // no objects to remove
			p := readyPool()
			p.Spec.Deleting = true
			in.Pools = []model.NodePool{p}
			return in
		}, want{state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, converge: true, nodePools: -1}},
		{"teardown: the adopted cluster is released", func() Input {
			in := tearingDown()
			in.Tried, in.Removed = true, true
			return in
		}, want{action: &Action{Kind: ReleaseCluster}, state: resource.StateDeleting, revoked: []string{"h1"}, lease: true, nodePools: -1}},
		{"teardown: released, the substrate is deleted", func() Input {
			in := tearingDown()
			in.Tried, in.Removed, in.Adopted = true, true, false
			return in
		}, want{state: resource.StateDeleted, events: []string{event.SubstrateDeleted}, revoked: []string{"h1"}, lease: true, done: true, nodePools: 0}},
		{"teardown: no cluster, the substrate is deleted", func() Input {
			in := tearingDown()
			in.Cluster = nil
			return in
		}, want{state: resource.StateDeleted, events: []string{event.SubstrateDeleted}, revoked: []string{"h1"}, lease: true, done: true, nodePools: 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in()
			before := jsonOf(in)
			d := Plan(in, planNow)
			if jsonOf(in) != before {
				t.Errorf("Plan changed its input")
			}
			checkDecision(t, d, c.want)
		})
	}
}

func checkDecision(t *testing.T, d Decision, w want) {
	t.Helper()
	switch {
	case w.action == nil && d.Action != nil:
		t.Errorf("action %+v, want none", *d.Action)
	case w.action != nil && (d.Action == nil || *d.Action != *w.action):
		t.Errorf("action %+v, want %+v", d.Action, *w.action)
	}
	st := d.Substrate.Status
	if w.state != "" && st.State != w.state {
		t.Errorf("state %s, want %s", st.State, w.state)
	}
	if !strings.Contains(st.Message, w.message) {
		t.Errorf("message %q, want it to hold %q", st.Message, w.message)
	}
	var events []string
	for _, e := range d.Events {
		events = append(events, e.Type)
	}
	if !slices.Equal(events, w.events) {
		t.Errorf("events %v, want %v", events, w.events)
	}
	if d.Observe != w.observe || d.Lease != w.lease || d.Converging != w.converge || d.Done != w.done {
		t.Errorf("observe %v, lease %v, converging %v, done %v; want %v, %v, %v, %v", d.Observe, d.Lease, d.Converging, d.Done, w.observe, w.lease, w.converge, w.done)
	}
	if !slices.Equal(d.Left, w.left) || !slices.Equal(d.Revoked, w.revoked) {
		t.Errorf("left %v, revoked %v; want %v, %v", d.Left, d.Revoked, w.left, w.revoked)
	}
	if w.applied != 0 && st.Applied != w.applied {
		t.Errorf("applied generation %d, want %d", st.Applied, w.applied)
	}
	if w.nodePools >= 0 && len(st.NodePools) != w.nodePools {
		t.Errorf("status node pools %+v, want %d", st.NodePools, w.nodePools)
	}
	if w.pools != nil {
		var names []string
		for _, np := range st.NodePools {
			names = append(names, np.Name)
		}
		if !slices.Equal(names, w.pools) {
			t.Errorf("status node pools %v, want %v", names, w.pools)
		}
	}
	if w.serials != nil && !maps.Equal(st.Serials, w.serials) {
		t.Errorf("serials %v, want %v", st.Serials, w.serials)
	}
}

// A refused action leaves the substrate in error with the refusal.
func TestRefused(t *testing.T) {
	in := converging()
	in.Pools = nil
	d := Plan(in, planNow)
	Refused(&d, "cluster bc-pool-gpu is being deleted")
	checkDecision(t, d, want{state: resource.StateError, message: "is being deleted", events: []string{event.SubstrateError}, lease: true, nodePools: 0})
}

// nodesOf are Nodes of the pool.
func nodesOf(pool string, names ...string) []kubeapply.Node {
	var out []kubeapply.Node
	for _, n := range names {
		out = append(out, kubeapply.Node{Name: n, NodePool: pool})
	}
	return out
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
