package clusters

import (
	"reflect"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// TestPlanWaits: a change held by an operation the provider started
// itself waits without a call, says why in the pool's and the cluster's
// message, and moves on with the message cleared once the operation ends.
func TestPlanWaits(t *testing.T) {
	const upgradeMsg = "waiting for the provider's operation operation-9 (UPGRADE_MASTER) to finish"
	const repairMsg = "waiting for the provider's operation operation-7 (REPAIR_CLUSTER) to finish"
	upgrade := []ObservedOperation{{ID: "operation-9", Type: "UPGRADE_MASTER"}}
	repairA := []ObservedOperation{{ID: "operation-7", Type: "REPAIR_CLUSTER", Pool: "a"}}
	resized := func(n int) func(*model.NodePool) {
		return func(p *model.NodePool) { p.Spec.NodeCount, p.Spec.Generation = n, 2 }
	}
	touched := func(c *model.Cluster) { c.Spec.Generation = 2 }
	saying := func(msg string) func(*model.NodePool) {
		return func(p *model.NodePool) { p.Status.Message = msg }
	}
	withOps := func(o *ObservedCluster, ops []ObservedOperation) *ObservedCluster {
		o.Operations = ops
		return o
	}
	tests := []struct {
		name     string
		in       Input
		want     want
		messages []string // the pools' messages
	}{
		{
			name: "an upgrade by the provider holds a resize",
			in: Input{
				Cluster:  clusterDoc(ready, touched),
				Pools:    []model.NodePool{poolDoc("a", ready, 2, resized(3))},
				Observed: withOps(observed(StatusReconciling, map[string]ObservedPool{"a": running()}), upgrade),
			},
			want:     want{cluster: updating, message: upgradeMsg, pools: []resource.State{updating}, converging: true},
			messages: []string{upgradeMsg},
		},
		{
			name: "the resize is made once the upgrade ends, the message cleared",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Status.Message = upgradeMsg }),
				Pools:    []model.NodePool{poolDoc("a", updating, 3, saying(upgradeMsg), func(p *model.NodePool) { p.Status.Provider.NodeCount = 2 })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want:     want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
			messages: []string{""},
		},
		{
			name: "an upgrade holds nothing when nothing is to change",
			in: Input{
				Cluster:  clusterDoc(ready),
				Pools:    []model.NodePool{poolDoc("a", ready, 2)},
				Observed: withOps(observed(StatusReconciling, map[string]ObservedPool{"a": running()}), upgrade),
			},
			want:     want{cluster: ready, pools: []resource.State{ready}},
			messages: []string{""},
		},
		{
			name: "a repair of one pool holds it alone",
			in: Input{
				Cluster: clusterDoc(ready, touched),
				Pools:   []model.NodePool{poolDoc("a", ready, 2, resized(3)), poolDoc("b", ready, 1, resized(2))},
				Observed: withOps(observed(StatusRunning, map[string]ObservedPool{
					"a": {Status: StatusReconciling}, "b": running(),
				}), repairA),
			},
			want:     want{action: &Action{Kind: SetSize, Pool: 1}, cluster: updating, message: repairMsg, pools: []resource.State{updating, updating}, converging: true},
			messages: []string{repairMsg, ""},
		},
		{
			name: "a new pool's create waits, pending",
			in: Input{
				Cluster:  clusterDoc(ready, touched),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", pending, 1)},
				Observed: withOps(observed(StatusReconciling, map[string]ObservedPool{"a": running()}), upgrade),
			},
			want:     want{cluster: updating, message: upgradeMsg, pools: []resource.State{ready, pending}, converging: true},
			messages: []string{"", upgradeMsg},
		},
		{
			name: "a pool's delete waits, deleting",
			in: Input{
				Cluster:  clusterDoc(ready, touched),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", deleting, 1)},
				Observed: withOps(observed(StatusReconciling, map[string]ObservedPool{"a": running(), "b": running()}), upgrade),
			},
			want:     want{cluster: updating, message: upgradeMsg, pools: []resource.State{ready, deleting}, converging: true},
			messages: []string{"", upgradeMsg},
		},
		{
			name: "a pool in error keeps its error while it waits",
			in: Input{
				Cluster: clusterDoc(failed),
				Pools:   []model.NodePool{poolDoc("a", failed, 3, saying("no e2-standard-4 available"), func(p *model.NodePool) { p.Status.Provider.NodeCount = 2 })},
				Observed: withOps(observed(StatusReconciling, map[string]ObservedPool{
					"a": {Status: StatusRunningWithError, Message: "no e2-standard-4 available"},
				}), upgrade),
			},
			want:     want{cluster: failed, message: "no e2-standard-4 available", pools: []resource.State{failed}, converging: true},
			messages: []string{"no e2-standard-4 available"},
		},
		{
			name: "our own operation in flight is no wait",
			in: Input{
				Cluster:  clusterDoc(updating),
				Pools:    []model.NodePool{poolDoc("a", updating, 3, withPoolOp(SetSize, 3))},
				Observed: withOps(observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusReconciling}}), upgrade),
				Op:       &OpOutcome{},
			},
			want:     want{cluster: updating, pools: []resource.State{updating}, converging: true},
			messages: []string{""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Plan(tt.in, t0)
			checkDecision(t, d, tt.want)
			var got []string
			for i := range d.Pools {
				_, msg := model.NodePoolState(&d.Pools[i])
				got = append(got, msg)
			}
			if !reflect.DeepEqual(got, tt.messages) {
				t.Errorf("pool messages = %q, want %q", got, tt.messages)
			}
		})
	}
}

// TestPlanEndsRetrying: a run that observes the provider ends the
// transient failures before it, and their messages.
func TestPlanEndsRetrying(t *testing.T) {
	r := model.Retry{Since: t0.Add(-5 * time.Minute), Reason: "GKE is unavailable"}
	msg := lifecycle.RetryMessage(r)
	in := Input{
		Cluster: clusterDoc(updating, func(c *model.Cluster) { c.Status.Retrying, c.Status.Message = &r, msg }),
		Pools: []model.NodePool{poolDoc("a", updating, 3, func(p *model.NodePool) {
			p.Status.Provider.NodeCount, p.Status.Message = 2, msg
		})},
		Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
	}
	d := Plan(in, t0)
	checkDecision(t, d, want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true})
	if d.Cluster.Status.Retrying != nil {
		t.Errorf("Retrying = %+v, want none", d.Cluster.Status.Retrying)
	}
	if _, m := model.NodePoolState(&d.Pools[0]); m != "" {
		t.Errorf("pool message = %q, want none", m)
	}
	if in.Cluster.Status.Retrying == nil {
		t.Error("Plan changed its input")
	}
}
