package substrates

import (
	"slices"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// decided is a decision of action a, made at planNow.
func decided(in Input, a Action) *Decision {
	return &Decision{Action: &a, Substrate: in.Substrate.Clone(), now: planNow}
}

func TestEffect(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    func() Input
		a     Action
		o     Outcome
		check func(t *testing.T, in, next Input)
		err   string // a part of Effect's error; "" for none
	}{
		{"createCluster: the cluster and its first pools, pending, as the store records them", func() Input {
			in := converging()
			in.Substrate.Status.ClusterID, in.Cluster, in.Pools = "", nil, nil
			in.Substrate.Spec.Zones = nil
			return in
		}, Action{Kind: CreateCluster}, Outcome{ClusterID: "kcl_9", Zones: []string{"us-central1-a", "us-central1-b"}, PoolIDs: []string{"knp_9"}},
			func(t *testing.T, _, next Input) {
				c := next.Cluster
				if c == nil || c.ID != "kcl_9" || c.Spec.Name != "bc-pool-gpu" || c.Spec.ManagedBy != subID || c.Spec.ManagedPool != "pool-gpu" ||
					!slices.Equal(c.Spec.Zones, []string{"us-central1-a", "us-central1-b"}) || c.Spec.PoolsCreated != 1 {
					t.Fatalf("cluster %s", jsonOf(c))
				}
				if st, _ := model.ClusterState(c); st != resource.StatePending {
					t.Errorf("cluster %s, want pending", st)
				}
				if len(next.Pools) != 1 || next.Pools[0].ID != "knp_9" || next.Pools[0].Spec.Name != cpuPool || next.Pools[0].Spec.ManagedBy != subID {
					t.Errorf("pools %s", jsonOf(next.Pools))
				}
				if next.Substrate.Status.ClusterID != "kcl_9" || next.Acted {
					t.Errorf("substrate's cluster %q, acted %v; want kcl_9, not acted", next.Substrate.Status.ClusterID, next.Acted)
				}
			}, ""},
		{"adoptCluster: adopted, recorded on the cluster", func() Input {
			in := converging()
			in.Substrate.Spec.Mode, in.Substrate.Spec.AdoptClusterID = resource.SubstrateAdopt, "kcl_1"
			in.Substrate.Status.ClusterID = ""
			return in
		}, Action{Kind: AdoptCluster}, Outcome{},
			func(t *testing.T, in, next Input) {
				if !next.Adopted || next.Cluster.AdoptedBy[subID] != "pool-gpu" || next.Substrate.Status.ClusterID != "kcl_1" {
					t.Errorf("adopted %v, cluster's adopters %v, substrate's cluster %q", next.Adopted, next.Cluster.AdoptedBy, next.Substrate.Status.ClusterID)
				}
				if in.Cluster.AdoptedBy != nil {
					t.Errorf("the input's cluster changed: %v", in.Cluster.AdoptedBy)
				}
			}, ""},
		{"createNodePool: the pool, pending, counted by its cluster", func() Input {
			in := converging()
			in.Pools = nil
			return in
		}, Action{Kind: CreateNodePool, Pool: -1, Name: cpuPool}, Outcome{PoolIDs: []string{"knp_2"}},
			func(t *testing.T, in, next Input) {
				if len(next.Pools) != 1 || next.Pools[0].ID != "knp_2" || next.Pools[0].Spec.NodeCount != 2 || !next.Acted {
					t.Fatalf("pools %s, acted %v", jsonOf(next.Pools), next.Acted)
				}
				if st, _ := model.NodePoolState(&next.Pools[0]); st != resource.StatePending {
					t.Errorf("pool %s, want pending", st)
				}
				if next.Cluster.Spec.PoolsCreated != in.Cluster.Spec.PoolsCreated+1 || next.Cluster.Spec.Generation != 2 {
					t.Errorf("cluster counts %d pools at generation %d", next.Cluster.Spec.PoolsCreated, next.Cluster.Spec.Generation)
				}
			}, ""},
		{"replaceNodePool: the new pool beside the old one", func() Input {
			in := converging()
			in.Pools[0].Spec.MachineType = "n2-standard-8"
			return in
		}, Action{Kind: ReplaceNodePool, Pool: 0, Name: cpuPool + "-2"}, Outcome{PoolIDs: []string{"knp_2"}},
			func(t *testing.T, _, next Input) {
				if len(next.Pools) != 2 || next.Pools[1].Spec.Name != cpuPool+"-2" || next.Pools[1].Spec.MachineType != "e2-standard-4" || next.Pools[0].Spec.Deleting {
					t.Errorf("pools %s", jsonOf(next.Pools))
				}
			}, ""},
		{"a pool the cluster refuses (its zones): the store's read was newer", func() Input {
			in := converging()
			in.Cluster.Spec.Region, in.Cluster.Spec.Zones = "us-central1", []string{"us-central1-a"}
			in.Substrate.Spec.Flavors[0].NodePool.Zones = []string{"us-central1-b"}
			in.Pools = nil
			return in
		}, Action{Kind: CreateNodePool, Pool: -1, Name: cpuPool}, Outcome{PoolIDs: []string{"knp_2"}}, nil, "zones[0]"},
		{"resizeNodePool: the flavor's size, the pool updating", func() Input {
			in := converging()
			in.Pools[0].Spec.NodeCount = 1
			return in
		}, Action{Kind: ResizeNodePool, Flavor: 0, Pool: 0}, Outcome{},
			func(t *testing.T, in, next Input) {
				p := &next.Pools[0]
				if st, _ := model.NodePoolState(p); p.Spec.NodeCount != 2 || st != resource.StateUpdating || !next.Acted {
					t.Errorf("pool of %d nodes, %s, acted %v; want 2, updating, acted", p.Spec.NodeCount, st, next.Acted)
				}
				if in.Pools[0].Spec.NodeCount != 1 {
					t.Errorf("the input's pool changed")
				}
			}, ""},
		{"deleteNodePool: deleting", converging, Action{Kind: DeleteNodePool, Pool: 0}, Outcome{},
			func(t *testing.T, _, next Input) {
				if st, _ := model.NodePoolState(&next.Pools[0]); st != resource.StateDeleting || !next.Acted {
					t.Errorf("pool %s, acted %v", st, next.Acted)
				}
			}, ""},
		{"applyObjects with a new token: applied, held, the token recorded", func() Input {
			in := converging()
			in.Substrate.Spec.Generation = 3
			in.Seen = &Seen{Joined: []resource.SubstrateNode{{Name: "n1"}}}
			return in
		}, Action{Kind: ApplyObjects, Mint: true}, Outcome{Token: model.JoinToken{Hash: "h2", MintedAt: planNow}},
			func(t *testing.T, in, next Input) {
				st := next.Substrate.Status
				if st.Applied != 3 || st.Token.Hash != "h2" || !next.Seen.Held || len(next.Seen.Joined) != 1 {
					t.Errorf("applied %d, token %q, seen %+v", st.Applied, st.Token.Hash, next.Seen)
				}
				if in.Seen.Held {
					t.Errorf("the input's Seen changed")
				}
			}, ""},
		{"applyObjects with the token it has: kept", func() Input {
			in := applied()
			in.Seen.Held = false
			return in
		}, Action{Kind: ApplyObjects}, Outcome{},
			func(t *testing.T, _, next Input) {
				if next.Substrate.Status.Token.Hash != "h1" || !next.Seen.Held {
					t.Errorf("token %q, held %v", next.Substrate.Status.Token.Hash, next.Seen.Held)
				}
			}, ""},
		{"deleteCluster: the cluster and its pools deleting", func() Input {
			in := converging()
			in.Substrate.Spec.Deleting = true
			return in
		}, Action{Kind: DeleteCluster}, Outcome{},
			func(t *testing.T, _, next Input) {
				if !next.Cluster.Spec.Deleting || !next.Pools[0].Spec.Deleting {
					t.Errorf("cluster deleting %v, pool deleting %v", next.Cluster.Spec.Deleting, next.Pools[0].Spec.Deleting)
				}
			}, ""},
		{"removeObjects: tried, and gone as the cluster says", tearingDown, Action{Kind: RemoveObjects}, Outcome{Gone: false},
			func(t *testing.T, _, next Input) {
				if !next.Tried || next.Removed {
					t.Errorf("tried %v, removed %v; want tried, not removed", next.Tried, next.Removed)
				}
			}, ""},
		{"releaseCluster: no longer adopted", func() Input {
			in := tearingDown()
			in.Cluster.AdoptedBy = map[string]string{subID: "pool-gpu", "ksb_other": "pool-x"}
			return in
		}, Action{Kind: ReleaseCluster}, Outcome{},
			func(t *testing.T, in, next Input) {
				if next.Adopted || len(next.Cluster.AdoptedBy) != 1 || len(in.Cluster.AdoptedBy) != 2 {
					t.Errorf("adopted %v, adopters %v (input's %v)", next.Adopted, next.Cluster.AdoptedBy, in.Cluster.AdoptedBy)
				}
			}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in()
			before := jsonOf(in)
			next, err := Effect(in, decided(in, c.a), c.o)
			if jsonOf(in) != before {
				t.Errorf("Effect changed its input")
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Effect = %v, want an error holding %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Effect = %v", err)
			}
			c.check(t, in, next)
		})
	}
}

// What each action leaves is what the next plan of the run builds on:
// planned on its effect, the run goes on to its next step.
func TestEffectThenPlan(t *testing.T) {
	in := converging()
	in.Pools = nil
	d := Plan(in, planNow)
	next, err := Effect(in, &d, Outcome{PoolIDs: []string{"knp_2"}})
	if err != nil {
		t.Fatal(err)
	}
	d = Plan(next, planNow)
	checkDecision(t, d, want{state: resource.StateProvisioning, converge: true, pools: []string{cpuPool}, nodePools: 1})
	if d.Substrate.Status.NodePools[0].NodePoolID != "knp_2" || d.Substrate.Status.NodePools[0].State != resource.StatePending {
		t.Errorf("status node pools %+v, want knp_2 pending", d.Substrate.Status.NodePools)
	}
}
