package clusters

import (
	"testing"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

const grant = "Better Compute cannot act in project p: grant roles/iam.serviceAccountTokenCreator on sa@p.iam.gserviceaccount.com to reconciler@bc-dev.iam.gserviceaccount.com"

// A run that cannot act in the cluster's project as its account shows
// what to grant as the cluster's error, once, and leaves everything else
// for the run that can act again, at the steady pace.
func TestPlanDenied(t *testing.T) {
	announced := func(c *model.Cluster) { c.Status.Message, c.Status.Announced = grant, grant }
	tests := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "ready cluster",
			in:   Input{Cluster: clusterDoc(ready), Pools: []model.NodePool{poolDoc("a", ready, 2)}, Access: grant},
			want: want{cluster: failed, message: grant, pools: []resource.State{ready}, events: []string{"cluster.error"}},
		},
		{
			name: "still denied: announced once",
			in:   Input{Cluster: clusterDoc(failed, announced), Pools: []model.NodePool{poolDoc("a", ready, 2)}, Access: grant},
			want: want{cluster: failed, message: grant, pools: []resource.State{ready}},
		},
		{
			name: "new cluster: nothing is created",
			in:   Input{Cluster: clusterDoc(pending), Pools: []model.NodePool{poolDoc("a", pending, 2)}, Access: grant},
			want: want{cluster: failed, message: grant, pools: []resource.State{pending}, events: []string{"cluster.error"}},
		},
		{
			name: "a resize waits, its pool updating",
			in: Input{
				Cluster: clusterDoc(ready),
				Pools:   []model.NodePool{poolDoc("a", ready, 2, func(p *model.NodePool) { p.Spec.NodeCount, p.Spec.Generation = 3, 2 })},
				Access:  grant,
			},
			want: want{cluster: failed, message: grant, pools: []resource.State{updating}, events: []string{"cluster.error"}},
		},
		{
			name: "deleting cluster waits unseen",
			in:   Input{Cluster: clusterDoc(deleting), Pools: []model.NodePool{poolDoc("a", deleting, 2)}, Access: grant},
			want: want{cluster: deleting, pools: []resource.State{deleting}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.in, t0)
			checkDecision(t, d, tc.want)
		})
	}
	// A count that cannot be read is absent, as API.md §4 says.
	counted := poolDoc("a", ready, 2, func(p *model.NodePool) { two := 2; lifecycle.NodePoolNodes(p, &two) })
	if d := Plan(Input{Cluster: clusterDoc(ready), Pools: []model.NodePool{counted}, Access: grant}, t0); d.Pools[0].Status.CurrentNodeCount != nil {
		t.Errorf("currentNodeCount after a denied run = %d; want absent", *d.Pools[0].Status.CurrentNodeCount)
	}
	// What is in flight stays recorded for the run that can look at it.
	in := Input{Cluster: clusterDoc(updating, withClusterOp(DeleteCluster)), Pools: []model.NodePool{poolDoc("a", ready, 2, withPoolOp(SetSize, 3))}, Access: grant}
	d := Plan(in, t0)
	if d.Cluster.Status.Provider.Operation == "" || d.Pools[0].Status.Provider.Operation == "" {
		t.Errorf("operations in flight after a denied run: cluster %q, pool %q; want both kept", d.Cluster.Status.Provider.Operation, d.Pools[0].Status.Provider.Operation)
	}
}
