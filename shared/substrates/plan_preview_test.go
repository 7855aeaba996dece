package substrates

import (
	"slices"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// fresh is a create-mode substrate still to be recorded: no ID, nothing
// made.
func fresh() Input {
	s := substrate()
	s.ID, s.Status = "", model.SubstrateStatus{State: resource.StatePending}
	return Input{Substrate: s}
}

// settled is applied() as a preview starts from it: what a run would
// read, without the Kubernetes API.
func settled() Input {
	in := applied()
	in.Seen = nil
	return in
}

func TestPreview(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      func() Input
		actions []string
		reason  string // a part of the last action's reason
		state   resource.State
		joined  int64
		check   func(t *testing.T, acts []resource.PlanAction, s model.Substrate)
	}{
		{"a new substrate: its cluster, then bcd's objects", fresh,
			[]string{resource.PlanCreateCluster, resource.PlanApplyObjects}, "with a new join token", resource.StateReady, 4,
			func(t *testing.T, acts []resource.PlanAction, s model.Substrate) {
				if !strings.Contains(acts[0].Reason, "bc-pool-gpu (standard, us-central1), with node pools "+cpuPool) {
					t.Errorf("createCluster reason %q", acts[0].Reason)
				}
				if s.ID != "" || s.Status.ClusterID != "" || len(s.Status.NodePools) != 1 || s.Status.NodePools[0].Name != cpuPool || s.Status.NodePools[0].NodePoolID != "" {
					t.Errorf("substrate %s: want no IDs, one node pool", jsonOf(s.View()))
				}
			}},
		{"steady: nothing to do", settled, []string{resource.PlanNone}, "the substrate is as the pool asks", resource.StateReady, 2, nil},
		{"the policy the substrate has, as a new generation: nothing to do, as a run", func() Input {
			in := settled()
			in.Substrate.Spec.Generation = 2
			return in
		}, []string{resource.PlanNone}, "the substrate is as the pool asks", resource.StateReady, 2,
			func(t *testing.T, _ []resource.PlanAction, s model.Substrate) {
				if s.Status.Applied != 2 {
					t.Errorf("applied generation %d, want 2", s.Status.Applied)
				}
			}},
		{"another size: resized in place", func() Input {
			in := settled()
			in.Substrate.Spec.Flavors[0].NodePool.NodeCount = 3
			return in
		}, []string{resource.PlanResizeNodePool}, "resized in place", resource.StateReady, 3,
			func(t *testing.T, acts []resource.PlanAction, _ model.Substrate) {
				if a := acts[0]; a.NodePool != cpuPool || a.Flavor != "cpu" || a.From["nodeCount"] != 2 || a.To["nodeCount"] != 3 {
					t.Errorf("resize %+v", a)
				}
			}},
		{"another shape: replaced, bcd's objects on both pools, then on the new one", func() Input {
			in := settled()
			in.Pools[0].Spec.MachineType = "n2-standard-8"
			return in
		}, []string{resource.PlanReplaceNodePool, resource.PlanApplyObjects, resource.PlanApplyObjects}, "node pools " + cpuPool2, resource.StateReady, 2,
			func(t *testing.T, acts []resource.PlanAction, s model.Substrate) {
				a := acts[0]
				if a.NodePool != cpuPool || a.From["machineType"] != "n2-standard-8" || a.To["machineType"] != "e2-standard-4" ||
					a.From["nodePool"] != cpuPool || a.To["nodePool"] != cpuPool2 || !strings.HasPrefix(a.Reason, "machineType cannot change in place") {
					t.Errorf("replace %+v", a)
				}
				if !strings.Contains(acts[1].Reason, "node pools "+cpuPool2+", "+cpuPool) {
					t.Errorf("the first apply %q: want both pools, the old one last", acts[1].Reason)
				}
				if len(s.Status.NodePools) != 1 || s.Status.NodePools[0].Name != cpuPool2 || s.Status.Serials["cpu"] != 2 {
					t.Errorf("substrate %s, serials %v", jsonOf(s.View()), s.Status.Serials)
				}
			}},
		{"a replacement under way: the old pool is deleted", func() Input {
			in := replacing(resource.StatePending)
			in.Seen = nil
			return in
		}, []string{resource.PlanDeleteNodePool, resource.PlanApplyObjects}, "", resource.StateReady, 2,
			func(t *testing.T, acts []resource.PlanAction, _ model.Substrate) {
				if a := acts[0]; a.NodePool != cpuPool || !strings.Contains(a.Reason, "replaced with node pool "+cpuPool2) {
					t.Errorf("delete %+v", a)
				}
			}},
		{"a flavor added, one removed, in an adopted cluster", func() Input {
			in := settled()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID, in.Adopted = resource.SubstrateAdopt, "kcl_1", true
			in.Substrate.Spec.Flavors[0].Name = "mem"
			in.Substrate.Spec.Flavors[0].NodePool.Name = "bc-pool-gpu-mem"
			in.Substrate.Spec.Generation = 2
			return in
		}, []string{resource.PlanCreateNodePool, resource.PlanDeleteNodePool, resource.PlanApplyObjects}, "node pools bc-pool-gpu-mem", resource.StateReady, 2,
			func(t *testing.T, acts []resource.PlanAction, _ model.Substrate) {
				if a := acts[0]; a.NodePool != "bc-pool-gpu-mem" || a.Flavor != "mem" || a.To["nodeCount"] != 2 {
					t.Errorf("create %+v", a)
				}
				if a := acts[1]; a.NodePool != cpuPool || !strings.Contains(a.Reason, "not the node pool of any of the pool's flavors") {
					t.Errorf("delete %+v", a)
				}
			}},
		{"adopt: the cluster, its node pool, bcd's objects", func() Input {
			in := fresh()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID = resource.SubstrateAdopt, "kcl_1"
			in.Cluster = readyCluster()
			in.Cluster.Spec.AccountID = "acc-gcp"
			return in
		}, []string{resource.PlanAdoptCluster, resource.PlanCreateNodePool, resource.PlanApplyObjects}, "", resource.StateReady, 2, nil},
		{"adopt a cluster that cannot be adopted: the refusal", func() Input {
			in := fresh()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID = resource.SubstrateAdopt, "kcl_1"
			in.Cluster = readyCluster()
			in.Cluster.Spec.AccountID, in.Cluster.Spec.Mode = "acc-gcp", resource.ModeAutopilot
			return in
		}, []string{resource.PlanNone}, "error: cluster kcl_1 is an autopilot cluster", resource.StateError, 0, nil},
		{"teardown", func() Input {
			in := settled()
			in.Substrate.Spec.Deleting = true
			return in
		}, []string{resource.PlanTeardown}, "deletes cluster bc-pool-gpu", resource.StateDeleted, 0, nil},
		{"a same-named pool not made by the substrate: its error", func() Input {
			in := settled()
			in.Pools[0].Spec.ManagedBy = ""
			return in
		}, []string{resource.PlanNone}, "error: node pool " + cpuPool + " of cluster bc-pool-gpu exists and was not made by the substrate", resource.StateError, 0, nil},
		{"objects refused for a foreign one: the same error", func() Input {
			in := settled()
			in.Substrate.Spec.Generation = 2
			in.Substrate.Status.State, in.Substrate.Status.Message = resource.StateError, foreignPrefix+": DaemonSet better-compute-system/bcd"
			return in
		}, []string{resource.PlanNone}, "error: " + foreignPrefix, resource.StateError, 2, nil},
		{"a pool ID that is not a label value: served as any other", func() Input {
			in := fresh()
			in.Substrate.PoolID = "team:gpu"
			return in
		}, []string{resource.PlanCreateCluster, resource.PlanApplyObjects}, "with a new join token", resource.StateReady, 4, nil},
		{"objects the API server would refuse: the run's error", func() Input {
			in := settled()
			in.Substrate.Spec.Generation = 2
			in.Substrate.Spec.Flavors[0].NodePool.Taints = []resource.Taint{{Key: "gpu", Effect: "NO_SCHEDULE"}}
			return in
		}, []string{resource.PlanReplaceNodePool, resource.PlanNone}, "error: bcd's objects cannot be applied: desired substrate objects: taint gpu=", resource.StateError, 2,
			// The new pool's nodes never join: bcd's objects are never
			// applied on it.
			nil},
		{"a stockout of a pool: its error", func() Input {
			in := settled()
			in.Pools[0].Status.State, in.Pools[0].Status.Message = resource.StateError, "us-central1-a: no e2-standard-4 available (ZONE_RESOURCE_POOL_EXHAUSTED)"
			return in
		}, []string{resource.PlanNone}, "ZONE_RESOURCE_POOL_EXHAUSTED", resource.StateError, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in()
			before := jsonOf(in)
			acts, s := Preview(in, []string{"us-central1-a", "us-central1-b"}, planNow)
			if jsonOf(in) != before {
				t.Errorf("Preview changed its input")
			}
			var kinds []string
			for _, a := range acts {
				kinds = append(kinds, a.Action)
				if !slices.Contains(resource.PlanActions, a.Action) || a.Reason == "" {
					t.Errorf("action %+v: not a plan action with a reason", a)
				}
			}
			if !slices.Equal(kinds, c.actions) {
				t.Fatalf("actions %v, want %v: %s", kinds, c.actions, jsonOf(acts))
			}
			if last := acts[len(acts)-1].Reason; !strings.Contains(last, c.reason) {
				t.Errorf("last reason %q, want it to hold %q", last, c.reason)
			}
			if s.Status.State != c.state || s.Joined != c.joined {
				t.Errorf("substrate %s with %d joined, want %s with %d", s.Status.State, s.Joined, c.state, c.joined)
			}
			if c.check != nil {
				c.check(t, acts, s)
			}
		})
	}
}
