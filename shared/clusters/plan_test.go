package clusters

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

const (
	providerID = "gke-id-1"
	v1         = "1.33.4-gke.1000"
	v2         = "1.33.5-gke.1200"
	opName     = "projects/p/locations/us-central1/operations/op-1"
)

// clusterDoc returns a standard cluster in state st (deleting: the tenant
// deleted it), already created at the provider (and ready once) unless st
// is pending or provisioning, changed by opts.
func clusterDoc(st resource.State, opts ...func(*model.Cluster)) model.Cluster {
	c := model.Cluster{
		ID: "kcl_1", TenantID: "acme", CreatedAt: t0.Add(-time.Hour), Active: true,
		Spec: model.ClusterSpec{
			Name: "prod", Mode: resource.ModeStandard, Region: "us-central1", ProviderName: "kcl-1",
			Project: "p", Version: 1, Generation: 1, UpdatedAt: t0.Add(-time.Hour),
		},
		Status: model.ClusterStatus{State: st, ObservedGeneration: 1, UpdatedAt: t0.Add(-time.Hour)},
	}
	if st == resource.StateDeleting {
		c.Spec.Deleting = true
	}
	if st != resource.StatePending && st != resource.StateProvisioning {
		c.Status.Provider = model.ProviderCluster{ID: providerID, EverReady: true}
		c.Status.KubernetesVersion = v1
		c.Status.Endpoint = "203.0.113.10"
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// poolDoc returns a pool of nodeCount nodes in state st (deleting: the
// tenant deleted it); one that is not pending is already at the provider
// with that size.
func poolDoc(name string, st resource.State, nodeCount int, opts ...func(*model.NodePool)) model.NodePool {
	p := model.NodePool{
		ID: "knp_" + name, TenantID: "acme", ClusterID: "kcl_1", CreatedAt: t0.Add(-time.Hour), Active: true,
		Spec: model.NodePoolSpec{
			Name: name, MachineType: "e2-standard-4", NodeCount: nodeCount,
			Version: 1, Generation: 1, UpdatedAt: t0.Add(-time.Hour),
		},
		Status: model.NodePoolStatus{State: st, ObservedGeneration: 1, UpdatedAt: t0.Add(-time.Hour)},
	}
	if st == resource.StateDeleting {
		p.Spec.Deleting = true
	}
	if st != resource.StatePending {
		p.Status.Provider = model.ProviderPool{Created: true, NodeCount: nodeCount}
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// running is a pool the provider runs, its instance groups unread: the
// size last recorded stands in for the provider's (sized reads them).
func running() ObservedPool { return ObservedPool{Status: StatusRunning} }

// sized is a pool the provider runs with n nodes asked in each of zones
// (us-central1-a when none is given), all of them running.
func sized(n int, zones ...string) ObservedPool {
	if len(zones) == 0 {
		zones = []string{"us-central1-a"}
	}
	o := ObservedPool{Status: StatusRunning, Nodes: &PoolNodes{Sizes: map[string]int{}}}
	for _, z := range zones {
		o.Nodes.Sizes[z] = n
		o.Nodes.Running += n
		o.Nodes.Target += n
	}
	return o
}

func observed(status string, pools map[string]ObservedPool) *ObservedCluster {
	if pools == nil {
		pools = map[string]ObservedPool{}
	}
	return &ObservedCluster{ID: providerID, Status: status, Version: v1, Endpoint: "203.0.113.10", Pools: pools}
}

func withPoolOp(kind string, intentCount int) func(*model.NodePool) {
	return func(p *model.NodePool) {
		p.Status.Provider.Operation, p.Status.Provider.OperationKind = opName, kind
		p.Status.Provider.Intent = &model.Intent{Kind: kind, At: t0.Add(-time.Minute), NodeCount: intentCount}
	}
}

func withClusterOp(kind string) func(*model.Cluster) {
	return func(c *model.Cluster) {
		c.Status.Provider.Operation, c.Status.Provider.OperationKind = opName, kind
		c.Status.Provider.Intent = &model.Intent{Kind: kind, At: t0.Add(-time.Minute)}
	}
}

func autoscale(min, max int) *resource.Autoscaling {
	return &resource.Autoscaling{MinNodes: min, MaxNodes: max}
}

// eventNames names a decision's events "type" or "type pool-name", short
// type names without the kubernetes. prefix.
func eventNames(d Decision) []string {
	var out []string
	for _, e := range d.Events {
		s := strings.TrimPrefix(e.Type, "kubernetes.")
		if e.NodePoolID != "" {
			s += " " + strings.TrimPrefix(e.NodePoolID, "knp_")
		}
		out = append(out, s)
	}
	return out
}

func poolStates(d Decision) []resource.State {
	var out []resource.State
	for i := range d.Pools {
		st, _ := model.NodePoolState(&d.Pools[i])
		out = append(out, st)
	}
	return out
}

type want struct {
	action     *Action // nil: no call
	cluster    resource.State
	message    string // a substring of the cluster's message; "" wants none
	pools      []resource.State
	events     []string
	converging bool
	deleted    bool
}

func checkDecision(t *testing.T, d Decision, w want) {
	t.Helper()
	if !reflect.DeepEqual(d.Action, w.action) {
		t.Errorf("Action = %+v, want %+v", d.Action, w.action)
	}
	st, msg := model.ClusterState(&d.Cluster)
	if st != w.cluster {
		t.Errorf("cluster state = %q (%q), want %q", st, msg, w.cluster)
	}
	if w.message == "" && msg != "" {
		t.Errorf("cluster message = %q, want none", msg)
	}
	if !strings.Contains(msg, w.message) {
		t.Errorf("cluster message = %q, want it to contain %q", msg, w.message)
	}
	if got := poolStates(d); !slices.Equal(got, w.pools) {
		t.Errorf("pool states = %v, want %v", got, w.pools)
	}
	if got := eventNames(d); !slices.Equal(got, w.events) {
		t.Errorf("events = %q, want %q", got, w.events)
	}
	if d.Converging != w.converging {
		t.Errorf("Converging = %v, want %v", d.Converging, w.converging)
	}
	if d.Deleted != w.deleted {
		t.Errorf("Deleted = %v, want %v", d.Deleted, w.deleted)
	}
	for _, e := range d.Events {
		if e.ClusterID != "kcl_1" || e.TenantID != "acme" || e.ID == "" || !e.Time.Equal(t0) {
			t.Errorf("event %s = {id %q, tenant %q, cluster %q, time %v}, want an id, tenant acme, cluster kcl_1, time %v", e.Type, e.ID, e.TenantID, e.ClusterID, e.Time, t0)
		}
	}
}

const (
	pending      = resource.StatePending
	provisioning = resource.StateProvisioning
	ready        = resource.StateReady
	updating     = resource.StateUpdating
	deleting     = resource.StateDeleting
	deleted      = resource.StateDeleted
	failed       = resource.StateError
)

func TestPlan(t *testing.T) {
	gone := OpOutcome{Done: true}
	tests := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "new cluster is created with its pools",
			in:   Input{Cluster: clusterDoc(pending), Pools: []model.NodePool{poolDoc("a", pending, 2)}},
			want: want{action: &Action{Kind: CreateCluster, Pool: -1}, cluster: provisioning, pools: []resource.State{pending}, converging: true},
		},
		{
			name: "cluster create in flight",
			in: Input{
				Cluster:  clusterDoc(provisioning, withClusterOp(CreateCluster)),
				Pools:    []model.NodePool{poolDoc("a", pending, 2)},
				Observed: &ObservedCluster{ID: providerID, Status: StatusProvisioning, Pools: map[string]ObservedPool{"a": {Status: StatusProvisioning}}},
				Op:       &OpOutcome{},
			},
			want: want{cluster: provisioning, pools: []resource.State{pending}, converging: true},
		},
		{
			name: "cluster in error created again without a refused pool stays in error while provisioning",
			in: Input{
				Cluster:  clusterDoc(failed, withClusterOp(CreateCluster), func(c *model.Cluster) { c.Status.Provider.EverReady = false }),
				Pools:    []model.NodePool{poolDoc("a", pending, 1), poolDoc("gpu", failed, 1)},
				Observed: &ObservedCluster{ID: providerID, Status: StatusProvisioning, Pools: map[string]ObservedPool{"a": {Status: StatusProvisioning}}},
				Op:       &OpOutcome{},
			},
			want: want{cluster: failed, message: "", pools: []resource.State{pending, failed}, converging: true},
		},
		{
			name: "cluster and pools become ready, announced once",
			in: Input{
				Cluster:  clusterDoc(provisioning, withClusterOp(CreateCluster)),
				Pools:    []model.NodePool{poolDoc("a", pending, 2), poolDoc("b", pending, 1)},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "b": running()}),
				Op:       &gone,
			},
			want: want{cluster: ready, pools: []resource.State{ready, ready}, events: []string{"nodepool.ready a", "nodepool.ready b", "cluster.ready"}},
		},
		{
			name: "ready cluster refreshed: nothing to do",
			in: Input{
				Cluster:  clusterDoc(ready),
				Pools:    []model.NodePool{poolDoc("a", ready, 2)},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{cluster: ready, pools: []resource.State{ready}},
		},
		{
			name: "autopilot cluster becomes ready without pools",
			in: Input{
				Cluster:  clusterDoc(provisioning, withClusterOp(CreateCluster), func(c *model.Cluster) { c.Spec.Mode = resource.ModeAutopilot }),
				Observed: observed(StatusRunning, nil),
				Op:       &gone,
			},
			want: want{cluster: ready, events: []string{"cluster.ready"}},
		},
		{
			name: "pool added to a ready cluster is created",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", pending, 1)},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{action: &Action{Kind: CreateNodePool, Pool: 1}, cluster: updating, pools: []resource.State{ready, pending}, converging: true},
		},
		{
			name: "added pool ready: cluster updated",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", pending, 1, withPoolOp(CreateNodePool, 1))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "b": running()}),
				Op:       &gone,
			},
			want: want{cluster: ready, pools: []resource.State{ready, ready}, events: []string{"nodepool.ready b", "cluster.updated"}},
		},
		{
			name: "resize without autoscaling sets the size",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "resize done: pool ready again, cluster updated",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}), // initial count stays
				Op:       &gone,
			},
			want: want{cluster: ready, pools: []resource.State{ready}, events: []string{"nodepool.ready a", "cluster.updated"}},
		},
		{
			name: "resize of a ready pool done out of band by the API's pool goes updating",
			in: Input{
				Cluster:  clusterDoc(ready),
				Pools:    []model.NodePool{poolDoc("a", ready, 2, func(p *model.NodePool) { p.Spec.NodeCount = 4 })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "autoscaling turned on",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.Autoscaling = autoscale(1, 4) })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{action: &Action{Kind: SetAutoscaling, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "autoscaling bounds changed",
			in: Input{
				Cluster: clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools: []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) {
					p.Spec.Autoscaling = autoscale(1, 8)
					p.Status.Provider.NodeCount = -1
				})},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusRunning, Autoscaling: autoscale(1, 4)}}),
			},
			want: want{action: &Action{Kind: SetAutoscaling, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "never a size while autoscaling is on",
			in: Input{
				Cluster: clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools: []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) {
					p.Spec.Autoscaling = autoscale(1, 4)
					p.Spec.NodeCount = 3
					p.Status.Provider.NodeCount = -1
				})},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusRunning, Autoscaling: autoscale(1, 4)}}),
			},
			want: want{cluster: ready, pools: []resource.State{ready}, events: []string{"nodepool.ready a", "cluster.updated"}},
		},
		{
			name: "autoscaling turned off: autoscaling first, not the size",
			in: Input{
				Cluster: clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools: []model.NodePool{poolDoc("a", updating, 3, func(p *model.NodePool) {
					p.Status.Provider.NodeCount = -1
				})},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusRunning, Autoscaling: autoscale(1, 4)}}),
			},
			want: want{action: &Action{Kind: SetAutoscaling, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "autoscaling off done: then the size",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 3, withPoolOp(SetAutoscaling, 3))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
				Op:       &gone,
			},
			want: want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "operation in flight: no other call",
			in: Input{
				Cluster: clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools: []model.NodePool{
					poolDoc("a", updating, 3, withPoolOp(SetSize, 3)),
					poolDoc("b", pending, 1),
					poolDoc("c", deleting, 1),
				},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusReconciling}, "c": running()}),
				Op:       &OpOutcome{},
			},
			want: want{cluster: updating, pools: []resource.State{updating, pending, deleting}, converging: true},
		},
		{
			name: "intent recorded without operation: no other call",
			in: Input{
				Cluster: clusterDoc(updating),
				Pools: []model.NodePool{
					poolDoc("a", updating, 3, func(p *model.NodePool) { p.Status.Provider.Intent = &model.Intent{Kind: SetSize, NodeCount: 3} }),
					poolDoc("b", pending, 1),
				},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{cluster: updating, pools: []resource.State{updating, pending}, converging: true},
		},
		{
			name: "pool the provider failed to create is in error, and so is its cluster",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("gpu", pending, 1, withPoolOp(CreateNodePool, 1))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "gpu": {Status: StatusError, Message: "no g2 in zone"}}),
				Op:       &OpOutcome{Done: true, Err: &Fault{Message: "g2-standard-8 is not offered in us-central1-f"}},
			},
			want: want{cluster: failed, message: `node pool "gpu": no g2 in zone`, pools: []resource.State{ready, failed}, events: []string{"nodepool.error gpu", "cluster.error"}},
		},
		{
			name: "pool in error stays in error without new events",
			in: Input{
				Cluster:  clusterDoc(failed, func(c *model.Cluster) { c.Status.Message = `node pool "gpu": no g2 in zone` }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("gpu", failed, 1, func(p *model.NodePool) { p.Status.Message = "no g2 in zone" })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "gpu": {Status: StatusError, Message: "no g2 in zone"}}),
			},
			want: want{cluster: failed, message: `node pool "gpu"`, pools: []resource.State{ready, failed}},
		},
		{
			name: "pool in error does not hold back another pool's call",
			in: Input{
				Cluster: clusterDoc(failed, func(c *model.Cluster) { c.Status.Message = `node pool "gpu": refused` }),
				Pools: []model.NodePool{
					poolDoc("gpu", failed, 1, func(p *model.NodePool) {
						p.Status.Message = "refused"
						p.Status.Provider = model.ProviderPool{}
					}),
					poolDoc("b", pending, 1),
				},
				Observed: observed(StatusRunning, nil),
			},
			want: want{action: &Action{Kind: CreateNodePool, Pool: 1}, cluster: failed, message: `node pool "gpu": refused`, pools: []resource.State{failed, pending}, converging: true},
		},
		{
			name: "pool refused before is retried when nothing else is to do",
			in: Input{
				Cluster: clusterDoc(failed, func(c *model.Cluster) { c.Status.Message = `node pool "gpu": refused` }),
				Pools: []model.NodePool{poolDoc("gpu", failed, 1, func(p *model.NodePool) {
					p.Status.Message = "refused"
					p.Status.Provider = model.ProviderPool{}
				})},
				Observed: observed(StatusRunning, nil),
			},
			want: want{action: &Action{Kind: CreateNodePool, Pool: 0}, cluster: failed, message: `node pool "gpu": refused`, pools: []resource.State{failed}, converging: true},
		},
		{
			name: "pool in error at the provider is resized when the tenant changes it",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 1 })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusRunningWithError, Message: "ZONE_RESOURCE_POOL_EXHAUSTED"}}),
			},
			want: want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "refused resize is not retried in the run that learns of it",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
				Op:       &OpOutcome{Done: true, Err: &Fault{Message: "quota"}},
			},
			want: want{cluster: failed, message: `node pool "a": quota`, pools: []resource.State{failed}, events: []string{"nodepool.error a", "cluster.error"}},
		},
		{
			name: "transient operation error: retried, never shown",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
				Op:       &OpOutcome{Done: true, Err: &Fault{Transient: true, Message: "backend unavailable"}},
			},
			want: want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "lost create operation: planned from what the provider shows",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", pending, 2, withPoolOp(CreateNodePool, 2))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusProvisioning}}),
				Op:       &OpOutcome{Lost: true},
			},
			want: want{cluster: updating, pools: []resource.State{pending}, converging: true},
		},
		{
			name: "lost create operation whose pool is there: ready",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", pending, 2, withPoolOp(CreateNodePool, 2))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
				Op:       &OpOutcome{Lost: true},
			},
			want: want{cluster: ready, pools: []resource.State{ready}, events: []string{"nodepool.ready a", "cluster.updated"}},
		},
		{
			name: "lost resize that the provider shows done: not made again",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": sized(3)}),
				Op:       &OpOutcome{Lost: true},
			},
			want: want{cluster: ready, pools: []resource.State{ready}, events: []string{"nodepool.ready a", "cluster.updated"}},
		},
		{
			name: "lost resize that the provider does not show: made again",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": sized(2)}),
				Op:       &OpOutcome{Lost: true},
			},
			want: want{action: &Action{Kind: SetSize, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "pool broken at the provider: error",
			in: Input{
				Cluster:  clusterDoc(ready),
				Pools:    []model.NodePool{poolDoc("a", ready, 2)},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusError, Message: "repair failed"}}),
			},
			want: want{cluster: failed, message: `node pool "a": repair failed`, pools: []resource.State{failed}, events: []string{"nodepool.error a", "cluster.error"}},
		},
		{
			name: "pool that recovered at the provider: ready, cluster updated",
			in: Input{
				Cluster:  clusterDoc(failed, func(c *model.Cluster) { c.Status.Message = `node pool "a": repair failed` }),
				Pools:    []model.NodePool{poolDoc("a", failed, 2, func(p *model.NodePool) { p.Status.Message = "repair failed" })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{cluster: ready, pools: []resource.State{ready}, events: []string{"nodepool.ready a", "cluster.updated"}},
		},
		{
			name: "pool removed behind our back is created again",
			in: Input{
				Cluster:  clusterDoc(ready),
				Pools:    []model.NodePool{poolDoc("a", ready, 2)},
				Observed: observed(StatusRunning, nil),
			},
			want: want{action: &Action{Kind: CreateNodePool, Pool: 0}, cluster: updating, pools: []resource.State{updating}, converging: true},
		},
		{
			name: "deleted pool is deleted at the provider",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", deleting, 1)},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "b": running()}),
			},
			want: want{action: &Action{Kind: DeleteNodePool, Pool: 1}, cluster: updating, pools: []resource.State{ready, deleting}, converging: true},
		},
		{
			name: "pool delete in flight",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", deleting, 1, withPoolOp(DeleteNodePool, 1))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "b": {Status: StatusStopping}}),
				Op:       &OpOutcome{},
			},
			want: want{cluster: updating, pools: []resource.State{ready, deleting}, converging: true},
		},
		{
			name: "pool gone at the provider: deleted, cluster updated",
			in: Input{
				Cluster: clusterDoc(updating, func(c *model.Cluster) {
					c.Spec.Generation++
					c.Status.PoolsDeleted = 10 - 2
					c.Spec.PoolsCreated = 10
				}),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", deleting, 1, withPoolOp(DeleteNodePool, 1))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
				Op:       &gone,
			},
			want: want{cluster: ready, pools: []resource.State{ready, deleted}, events: []string{"nodepool.deleted b", "cluster.updated"}},
		},
		{
			name: "deleting the refused pool clears the cluster's error",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("gpu", deleting, 1, func(p *model.NodePool) { p.Status.Provider = model.ProviderPool{} })},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}),
			},
			want: want{cluster: ready, pools: []resource.State{ready, deleted}, events: []string{"nodepool.deleted gpu", "cluster.updated"}},
		},
		{
			name: "failed operation of a pool being deleted keeps it deleting",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", deleting, 1, withPoolOp(SetSize, 3))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "b": running()}),
				Op:       &OpOutcome{Done: true, Err: &Fault{Message: "refused"}},
			},
			want: want{action: &Action{Kind: DeleteNodePool, Pool: 1}, cluster: updating, pools: []resource.State{ready, deleting}, converging: true},
		},
		{
			name: "cluster delete: pools first, one at a time",
			in: Input{
				Cluster:  clusterDoc(deleting),
				Pools:    []model.NodePool{poolDoc("a", deleting, 2), poolDoc("b", deleting, 1)},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": running(), "b": running(), "default-pool": running()}),
			},
			want: want{action: &Action{Kind: DeleteNodePool, Pool: 0}, cluster: deleting, pools: []resource.State{deleting, deleting}, converging: true},
		},
		{
			name: "cluster delete: a pool deleted, the next one",
			in: Input{
				Cluster:  clusterDoc(deleting, func(c *model.Cluster) { c.Status.PoolsDeleted = 10 - 2; c.Spec.PoolsCreated = 10 }),
				Pools:    []model.NodePool{poolDoc("a", deleting, 2, withPoolOp(DeleteNodePool, 2)), poolDoc("b", deleting, 1)},
				Observed: observed(StatusRunning, map[string]ObservedPool{"b": running()}),
				Op:       &gone,
			},
			want: want{action: &Action{Kind: DeleteNodePool, Pool: 1}, cluster: deleting, pools: []resource.State{deleted, deleting}, events: []string{"nodepool.deleted a"}, converging: true},
		},
		{
			name: "cluster delete: pools gone, then the cluster",
			in: Input{
				Cluster:  clusterDoc(deleting, func(c *model.Cluster) { c.Status.PoolsDeleted = 10 - 1; c.Spec.PoolsCreated = 10 }),
				Pools:    []model.NodePool{poolDoc("b", deleting, 1, withPoolOp(DeleteNodePool, 1))},
				Observed: observed(StatusRunning, map[string]ObservedPool{"default-pool": running()}),
				Op:       &gone,
			},
			want: want{action: &Action{Kind: DeleteCluster, Pool: -1}, cluster: deleting, pools: []resource.State{deleted}, events: []string{"nodepool.deleted b"}, converging: true},
		},
		{
			name: "cluster delete in flight",
			in: Input{
				Cluster:  clusterDoc(deleting, withClusterOp(DeleteCluster)),
				Observed: observed(StatusStopping, nil),
				Op:       &OpOutcome{},
			},
			want: want{cluster: deleting, converging: true},
		},
		{
			name: "cluster gone at the provider: deleted",
			in: Input{
				Cluster: clusterDoc(deleting, withClusterOp(DeleteCluster)),
				Op:      &gone,
			},
			want: want{cluster: deleted, events: []string{"cluster.deleted"}, deleted: true},
		},
		{
			name: "cluster deleted before it was created",
			in: Input{
				Cluster: clusterDoc(deleting, func(c *model.Cluster) {
					c.Status.Provider = model.ProviderCluster{}
					c.Status.PoolsDeleted = 10 - 1
					c.Spec.PoolsCreated = 10
				}),
				Pools: []model.NodePool{poolDoc("a", deleting, 1, func(p *model.NodePool) { p.Status.Provider = model.ProviderPool{} })},
			},
			want: want{cluster: deleted, pools: []resource.State{deleted}, events: []string{"nodepool.deleted a", "cluster.deleted"}, deleted: true},
		},
		{
			name: "cluster delete finds another cluster of the name: ours is gone, theirs is left alone",
			in: Input{
				Cluster:  clusterDoc(deleting, func(c *model.Cluster) { c.Status.PoolsDeleted = 10 - 1; c.Spec.PoolsCreated = 10 }),
				Pools:    []model.NodePool{poolDoc("a", deleting, 1)},
				Observed: &ObservedCluster{ID: "someone-else", Status: StatusRunning, Pools: map[string]ObservedPool{"a": running()}},
			},
			want: want{cluster: deleted, pools: []resource.State{deleted}, events: []string{"nodepool.deleted a", "cluster.deleted"}, deleted: true},
		},
		{
			name: "failed cluster create of a cluster being deleted keeps it deleting",
			in: Input{
				Cluster:  clusterDoc(deleting, withClusterOp(CreateCluster), func(c *model.Cluster) { c.Status.Provider.ID = ""; c.Status.Provider.EverReady = false }),
				Observed: &ObservedCluster{ID: providerID, Status: StatusError, Message: "create failed", Pools: map[string]ObservedPool{}},
				Op:       &OpOutcome{Done: true, Err: &Fault{Message: "create failed"}},
			},
			want: want{action: &Action{Kind: DeleteCluster, Pool: -1}, cluster: deleting, converging: true},
		},
		{
			name: "release-channel upgrade: cluster updated",
			in: Input{
				Cluster: clusterDoc(ready),
				Pools:   []model.NodePool{poolDoc("a", ready, 2)},
				Observed: func() *ObservedCluster {
					o := observed(StatusRunning, map[string]ObservedPool{"a": running()})
					o.Version = v2
					return o
				}(),
			},
			want: want{cluster: ready, pools: []resource.State{ready}, events: []string{"cluster.updated"}},
		},
		{
			name: "observed cluster is another one: error, no call",
			in: Input{
				Cluster:  clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ }),
				Pools:    []model.NodePool{poolDoc("a", pending, 2)},
				Observed: &ObservedCluster{ID: "someone-else", Status: StatusRunning, Pools: map[string]ObservedPool{}},
			},
			want: want{cluster: failed, message: "replaced by another cluster", pools: []resource.State{pending}, events: []string{"cluster.error"}},
		},
		{
			name: "cluster gone behind our back: its pools being deleted are deleted",
			in: Input{
				Cluster: clusterDoc(updating, func(c *model.Cluster) { c.Spec.PoolsCreated = 2 }),
				Pools:   []model.NodePool{poolDoc("a", ready, 2), poolDoc("b", deleting, 1)},
			},
			want: want{cluster: failed, message: "delete this cluster", pools: []resource.State{failed, deleted}, events: []string{"nodepool.error a", "nodepool.deleted b", "cluster.error"}},
		},
		{
			name: "cluster gone, its error announced: a tenant's change does not announce it again",
			in: Input{
				Cluster: clusterDoc(failed, func(c *model.Cluster) {
					c.Status.Message = "the provider no longer has cluster kcl-1: it was deleted outside Better Compute; delete this cluster to free its name, and create it again if it is still wanted"
					c.Status.Announced = c.Status.Message
					c.Spec.Generation++ // the tenant resized a pool since
				}),
				Pools: []model.NodePool{poolDoc("a", ready, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3; p.Spec.Generation++ })},
			},
			want: want{cluster: failed, message: "no longer has cluster kcl-1", pools: []resource.State{failed}, events: []string{"nodepool.error a"}},
		},
		{
			name: "cluster gone behind our back: error, no call",
			in: Input{
				Cluster: clusterDoc(ready),
				Pools:   []model.NodePool{poolDoc("a", ready, 2)},
			},
			want: want{cluster: failed, message: "no longer has cluster kcl-1", pools: []resource.State{failed}, events: []string{"nodepool.error a", "cluster.error"}},
		},
		{
			name: "cluster in error at the provider",
			in: Input{
				Cluster:  clusterDoc(ready),
				Pools:    []model.NodePool{poolDoc("a", ready, 2)},
				Observed: &ObservedCluster{ID: providerID, Status: StatusDegraded, Message: "etcd unhappy", Version: v1, Pools: map[string]ObservedPool{"a": running()}},
			},
			want: want{cluster: failed, message: "etcd unhappy", pools: []resource.State{ready}, events: []string{"cluster.error"}},
		},
		{
			name: "cluster refused before is retried and stays in error without new events",
			in: Input{
				Cluster: clusterDoc(failed, func(c *model.Cluster) {
					c.Status.Provider = model.ProviderCluster{}
					c.Status.Message = "the provider refused the cluster: no"
				}),
				Pools: []model.NodePool{poolDoc("a", pending, 2)},
			},
			want: want{action: &Action{Kind: CreateCluster, Pool: -1}, cluster: failed, message: "refused", pools: []resource.State{pending}, converging: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := deepCopy(tt.in)
			d := Plan(tt.in, t0)
			checkDecision(t, d, tt.want)
			if !reflect.DeepEqual(tt.in, before) {
				t.Errorf("Plan changed its input")
			}
		})
	}
}

// deepCopy copies in so that a change Plan made through a shared pointer,
// map or slice shows; nil stays nil.
func deepCopy(in Input) Input {
	out := in
	out.Cluster = in.Cluster.Clone()
	out.Pools = nil
	for _, p := range in.Pools {
		out.Pools = append(out.Pools, p.Clone())
	}
	if in.Observed != nil {
		o := *in.Observed
		o.Pools = maps.Clone(in.Observed.Pools)
		out.Observed = &o
	}
	return out
}

// TestPlanBookkeeping checks what a decision records beside states: the
// provider's identity and version, sizes, counts and expiry.
func TestPlanBookkeeping(t *testing.T) {
	t.Run("ready records the provider's cluster", func(t *testing.T) {
		c := clusterDoc(provisioning, withClusterOp(CreateCluster))
		d := Plan(Input{Cluster: c, Observed: observed(StatusRunning, nil), Op: &OpOutcome{Done: true}}, t0)
		pc := d.Cluster.Status.Provider
		if pc.ID != providerID || !pc.EverReady || pc.Operation != "" || pc.Intent != nil {
			t.Errorf("Provider = %+v, want ID %q, ever ready, no operation", pc, providerID)
		}
		if d.Cluster.Status.KubernetesVersion != v1 || d.Cluster.Status.Endpoint != "203.0.113.10" || !d.Cluster.Status.UpdatedAt.Equal(t0) {
			t.Errorf("cluster = version %q endpoint %q updated %v, want %q, 203.0.113.10, %v", d.Cluster.Status.KubernetesVersion, d.Cluster.Status.Endpoint, d.Cluster.Status.UpdatedAt, v1, t0)
		}
	})
	t.Run("steady refresh leaves the documents as they were", func(t *testing.T) {
		// The reconciler writes nothing but its lease when the decision
		// equals what it read.
		c := clusterDoc(ready, func(c *model.Cluster) {
			c.Spec.Labels = map[string]string{}
			c.Spec.Zones = []string{"us-central1-a"}
		})
		p := poolDoc("a", ready, 2, func(p *model.NodePool) {
			p.Spec.Labels, p.Spec.Zones, p.Spec.Taints = map[string]string{"team": "ml"}, []string{"us-central1-a"}, []resource.Taint{}
		})
		in := Input{Cluster: c, Pools: []model.NodePool{p}, Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()})}
		d := Plan(in, t0)
		if !reflect.DeepEqual(d.Cluster, in.Cluster) || !reflect.DeepEqual(d.Pools, in.Pools) {
			t.Errorf("Plan(ready) = %+v %+v, want the documents unchanged: %+v %+v", d.Cluster, d.Pools, in.Cluster, in.Pools)
		}
	})
	t.Run("resize done records the size set", func(t *testing.T) {
		p := poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))
		d := Plan(Input{Cluster: clusterDoc(updating), Pools: []model.NodePool{p}, Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()}), Op: &OpOutcome{Done: true}}, t0)
		if got := d.Pools[0].Status.Provider; got.NodeCount != 3 || got.Operation != "" || got.Intent != nil {
			t.Errorf("Provider = %+v, want node count 3 and no operation", got)
		}
	})
	t.Run("autoscaling on hands the size to the autoscaler", func(t *testing.T) {
		p := poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.Autoscaling = autoscale(1, 4) }, withPoolOp(SetAutoscaling, 2))
		obs := observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusRunning, Autoscaling: autoscale(1, 4)}})
		d := Plan(Input{Cluster: clusterDoc(updating), Pools: []model.NodePool{p}, Observed: obs, Op: &OpOutcome{Done: true}}, t0)
		if got := d.Pools[0].Status.Provider.NodeCount; got != -1 {
			t.Errorf("Provider.NodeCount = %d, want -1", got)
		}
	})
	t.Run("deleted pool", func(t *testing.T) {
		c := clusterDoc(updating, func(c *model.Cluster) { c.Status.PoolsDeleted = 10 - 3; c.Spec.PoolsCreated = 10 })
		p := poolDoc("b", deleting, 1)
		d := Plan(Input{Cluster: c, Pools: []model.NodePool{p}, Observed: observed(StatusRunning, nil)}, t0)
		got := d.Pools[0]
		if got.Active || got.ExpireAt == nil || !got.ExpireAt.Equal(t0.Add(model.DeletedTTL)) {
			t.Errorf("pool = active %v expireAt %v, want inactive, expiring at %v", got.Active, got.ExpireAt, t0.Add(model.DeletedTTL))
		}
		if n := model.ActiveNodePools(&d.Cluster); n != 2 {
			t.Errorf("ActiveNodePools = %d, want 2", n)
		}
	})
	t.Run("deleted cluster", func(t *testing.T) {
		d := Plan(Input{Cluster: clusterDoc(deleting)}, t0)
		if d.Cluster.Active || d.Cluster.ExpireAt == nil {
			t.Errorf("cluster = active %v expireAt %v, want inactive with an expiry", d.Cluster.Active, d.Cluster.ExpireAt)
		}
	})
	t.Run("event data is the resource after the change", func(t *testing.T) {
		p := poolDoc("a", pending, 2)
		d := Plan(Input{Cluster: clusterDoc(updating), Pools: []model.NodePool{p}, Observed: observed(StatusRunning, map[string]ObservedPool{"a": running()})}, t0)
		if len(d.Events) == 0 || d.Events[0].Type != event.NodePoolReady || !strings.Contains(string(d.Events[0].Data), `"state":"ready"`) {
			t.Fatalf("events = %v, want nodepool.ready first with the ready pool", eventNames(d))
		}
	})
}

// TestPlanSequences runs the planner over several runs, feeding each
// decision into the next, to check what only shows across runs.
func TestPlanSequences(t *testing.T) {
	t.Run("upgrade during a resize is announced once the cluster is ready", func(t *testing.T) {
		c := clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ })
		p := poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))
		obs := observed(StatusReconciling, map[string]ObservedPool{"a": {Status: StatusReconciling}})
		obs.Version = v2
		d := Plan(Input{Cluster: c, Pools: []model.NodePool{p}, Observed: obs, Op: &OpOutcome{}}, t0)
		if len(d.Events) != 0 || d.Cluster.Status.State != updating {
			t.Fatalf("during the resize: state %q, events %v; want updating, none", d.Cluster.Status.State, eventNames(d))
		}
		// The tenant's change was announced as the cluster settles; a
		// version that moved meanwhile must not be forgotten either.
		d.Cluster.Status.Upgraded = false
		obs.Status = StatusRunning
		obs.Pools["a"] = running()
		d = Plan(Input{Cluster: d.Cluster, Pools: d.Pools, Observed: obs, Op: &OpOutcome{Done: true}}, t0)
		if got := eventNames(d); !slices.Equal(got, []string{"nodepool.ready a", "cluster.updated"}) {
			t.Errorf("events = %q, want nodepool.ready a, cluster.updated", got)
		}
		if d.Cluster.Status.KubernetesVersion != v2 {
			t.Errorf("KubernetesVersion = %q, want %q", d.Cluster.Status.KubernetesVersion, v2)
		}
	})
	t.Run("refused pool: error announced once across retries", func(t *testing.T) {
		c := clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ })
		pools := []model.NodePool{poolDoc("a", ready, 2), poolDoc("gpu", pending, 1)}
		obs := observed(StatusRunning, map[string]ObservedPool{"a": running()})
		var all []string
		for run := range 3 {
			d := Plan(Input{Cluster: c, Pools: pools, Observed: obs}, t0)
			if d.Action == nil || d.Action.Kind != CreateNodePool || d.Action.Pool != 1 {
				t.Fatalf("run %d: Action = %+v, want CreateNodePool of gpu", run, d.Action)
			}
			Refused(&d, `Node pool "gpu": invalid machine type "e2-nonexistent".`, t0)
			checkDecision(t, d, want{
				action: d.Action, cluster: failed, message: `Node pool "gpu": invalid machine type`,
				pools: []resource.State{ready, failed}, events: eventNames(d),
			})
			all = append(all, eventNames(d)...)
			c, pools = d.Cluster, d.Pools
		}
		if !slices.Equal(all, []string{"nodepool.error gpu", "cluster.error"}) {
			t.Errorf("events over three runs = %q, want nodepool.error gpu, cluster.error once", all)
		}
	})
	t.Run("refused pool does not slow down the others", func(t *testing.T) {
		c := clusterDoc(updating, func(c *model.Cluster) { c.Spec.Generation++ })
		pools := []model.NodePool{poolDoc("gpu", pending, 1), poolDoc("b", pending, 1)}
		d := Plan(Input{Cluster: c, Pools: pools, Observed: observed(StatusRunning, nil)}, t0)
		Refused(&d, "no such machine type", t0)
		if !d.Converging {
			t.Errorf("Converging = false after a refusal while pool b waits, want true")
		}
	})
	t.Run("refused cluster create blames the pool it names", func(t *testing.T) {
		c := clusterDoc(pending)
		pools := []model.NodePool{poolDoc("a", pending, 1), poolDoc("gpu", pending, 1)}
		d := Plan(Input{Cluster: c, Pools: pools}, t0)
		Refused(&d, `Node pool "gpu": invalid machine type "e2-nonexistent".`, t0)
		checkDecision(t, d, want{
			action: d.Action, cluster: failed, message: `Node pool "gpu"`,
			pools: []resource.State{pending, failed}, events: []string{"nodepool.error gpu", "cluster.error"}, converging: true,
		})
		// The next run creates the cluster without the refused pool.
		d = Plan(Input{Cluster: d.Cluster, Pools: d.Pools}, t0)
		if d.Action == nil || d.Action.Kind != CreateCluster || len(d.Events) != 0 || d.Cluster.Status.State != failed {
			t.Fatalf("next run: Action %+v, events %v, state %q; want CreateCluster, none, error", d.Action, eventNames(d), d.Cluster.Status.State)
		}
		var names []string
		for _, np := range cluster(&d.Cluster, d.Pools).GetNodePools() {
			names = append(names, np.GetName())
		}
		if !slices.Equal(names, []string{"a"}) {
			t.Errorf("CreateCluster pools = %v, want [a]", names)
		}
	})
	t.Run("refused cluster create naming no pool", func(t *testing.T) {
		d := Plan(Input{Cluster: clusterDoc(pending), Pools: []model.NodePool{poolDoc("a", pending, 1)}}, t0)
		Refused(&d, "Location is not a GKE location.", t0)
		checkDecision(t, d, want{
			action: d.Action, cluster: failed, message: "the provider refused the cluster: Location",
			pools: []resource.State{pending}, events: []string{"cluster.error"},
		})
	})
}

// TestPlanSecondCallInFlight: when two pools record a call in flight,
// the first one's being done does not free the planner for a new call
// while the second runs (one provider operation at a time per cluster).
func TestPlanSecondCallInFlight(t *testing.T) {
	a := poolDoc("a", updating, 2, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))
	b := poolDoc("b", pending, 1, withPoolOp(CreateNodePool, 1))
	c := poolDoc("c", pending, 1)
	obs := observed(StatusRunning, map[string]ObservedPool{"a": running()})
	d := Plan(Input{Cluster: clusterDoc(updating), Pools: []model.NodePool{a, b, c}, Observed: obs, Op: &OpOutcome{Done: true}}, t0)
	if d.Action != nil {
		t.Errorf("action %+v while pool b's create is in flight, want none", *d.Action)
	}
	if got := d.Pools[1].Status.Provider.Operation; got == "" {
		t.Errorf("pool b's operation cleared, want it kept for the next run to poll")
	}
}

// The planner compares each pool with what the provider reports of it,
// never with what a run last recorded: a pool changed at the provider is
// brought back, saying what differed; a field that no call changes in
// place is its error, naming the field.
func TestPlanDrift(t *testing.T) {
	shape := func(o ObservedPool, f func(*model.NodePoolSpec)) ObservedPool {
		o.Shape = &model.NodePoolSpec{Name: "a", MachineType: "e2-standard-4", Zones: []string{"us-central1-a"}}
		f(o.Shape)
		return o
	}
	autoscaled := func(o ObservedPool, a *resource.Autoscaling) ObservedPool { o.Autoscaling = a; return o }
	reconciling := func(o ObservedPool) ObservedPool { o.Status = StatusReconciling; return o }
	recorded := func(n int) func(*model.NodePool) {
		return func(p *model.NodePool) { p.Status.Provider.NodeCount = n }
	}
	tests := []struct {
		name       string
		pool       model.NodePool
		obs        *ObservedPool // nil: not at the provider
		other      *ObservedPool // pool b, with an operation in flight, when set
		action     string        // "": no call
		state      resource.State
		message    string
		events     []string
		recorded   int // Provider.NodeCount after the run
		converging bool
	}{
		{
			name: "resized at the provider: resized back, saying so",
			pool: poolDoc("a", ready, 1), obs: new(sized(3)),
			action: SetSize, state: updating, message: "changed at the provider: 3 nodes per zone, spec 1; resizing", recorded: 3, converging: true,
		},
		{
			name: "the size recorded differs, the provider's does not: ready, the record follows the provider",
			pool: poolDoc("a", ready, 2, recorded(5)), obs: new(sized(2)),
			state: ready, recorded: 2,
		},
		{
			name: "zones of different sizes: said zone by zone",
			pool: poolDoc("a", ready, 2), obs: new(sizes(map[string]int{"us-central1-a": 2, "us-central1-b": 1})),
			action: SetSize, state: updating, message: "changed at the provider: us-central1-a 2 nodes, us-central1-b 1 node, spec 2 per zone; resizing", recorded: -1, converging: true,
		},
		{
			name: "the tenant's resize under way: made, not called drift",
			pool: poolDoc("a", ready, 1, func(p *model.NodePool) { p.Spec.NodeCount = 3; p.Spec.Generation++ }), obs: new(sized(1)),
			action: SetSize, state: updating, recorded: 1, converging: true,
		},
		{
			name: "a stockout: the size asked is the spec's, nodes missing: no resize",
			pool: poolDoc("a", ready, 2),
			obs: &ObservedPool{Status: StatusRunningWithError, Message: stockoutZoneB,
				Nodes: &PoolNodes{Running: 3, Target: 4, Short: []string{"us-central1-b"}, Sizes: map[string]int{"us-central1-a": 2, "us-central1-b": 2}}},
			state: failed, message: "us-central1-b: no e2-standard-4 available (GCE_STOCKOUT); 3 of 4 nodes", events: []string{"nodepool.error a", "cluster.error"}, recorded: 2,
		},
		{
			name:  "the autoscaler's count is its own",
			pool:  poolDoc("a", ready, 1, func(p *model.NodePool) { p.Spec.Autoscaling = autoscale(1, 4) }, recorded(-1)),
			obs:   new(autoscaled(sized(4), autoscale(1, 4))),
			state: ready, recorded: -1,
		},
		{
			name: "given autoscaling at the provider: turned off",
			pool: poolDoc("a", ready, 1), obs: new(autoscaled(sized(1), autoscale(1, 5))),
			action: SetAutoscaling, state: updating, message: "changed at the provider: autoscaling 1-5 nodes per zone, spec off; setting it", recorded: -1, converging: true,
		},
		{
			name:   "autoscaling turned off at the provider: set again",
			pool:   poolDoc("a", ready, 1, func(p *model.NodePool) { p.Spec.Autoscaling = autoscale(1, 4) }, recorded(-1)),
			obs:    new(sized(2)),
			action: SetAutoscaling, state: updating, message: "changed at the provider: autoscaling off, spec 1-4 nodes per zone; setting it", recorded: 2, converging: true,
		},
		{
			name:   "deleted at the provider: made again",
			pool:   poolDoc("a", ready, 1),
			action: CreateNodePool, state: updating, message: "changed at the provider: the pool is gone; creating it again", recorded: 1, converging: true,
		},
		{
			name: "changed while another call is in flight: updating, saying so, never ready",
			pool: poolDoc("a", ready, 1), obs: new(sized(3)), other: new(running()),
			state: updating, message: "changed at the provider: 3 nodes per zone, spec 1; resizing", recorded: 3, converging: true,
		},
		{
			name: "being brought back: says so while its call is in flight",
			pool: poolDoc("a", updating, 1, withPoolOp(SetSize, 1), func(p *model.NodePool) {
				p.Status.Message = "changed at the provider: 3 nodes per zone, spec 1; resizing"
			}),
			obs: &ObservedPool{Status: StatusReconciling}, state: updating, message: "changed at the provider: 3 nodes per zone, spec 1; resizing", recorded: 1, converging: true,
		},
		{
			name: "brought back: ready, announced",
			pool: poolDoc("a", updating, 1, func(p *model.NodePool) {
				p.Status.Message = "changed at the provider: 3 nodes per zone, spec 1; resizing"
			}),
			obs: new(sized(1)), state: ready, events: []string{"nodepool.ready a", "cluster.updated"}, recorded: 1,
		},
		{
			name: "the provider changing the pool (a surge upgrade): compared once it is over",
			pool: poolDoc("a", ready, 1), obs: new(reconciling(sized(2))),
			state: ready, recorded: 2, converging: true,
		},
		{
			name: "the size cannot be read: the one recorded stands in",
			pool: poolDoc("a", ready, 2), obs: new(running()),
			state: ready, recorded: 2,
		},
		{
			name: "machine type changed at the provider: error naming it, no call",
			pool: poolDoc("a", ready, 1), obs: new(shape(sized(1), func(s *model.NodePoolSpec) { s.MachineType = "n2-standard-8" })),
			state: failed, message: "changed at the provider: machineType n2-standard-8, spec e2-standard-4; it cannot be changed back in place: delete the pool and create it again",
			events: []string{"nodepool.error a", "cluster.error"}, recorded: 1,
		},
		{
			name: "zones changed at the provider: error naming them",
			pool: poolDoc("a", ready, 1), obs: new(shape(sized(1), func(s *model.NodePoolSpec) { s.Zones = []string{"us-central1-a", "us-central1-b"} })),
			state: failed, message: "changed at the provider: zones us-central1-a,us-central1-b, spec us-central1-a; it cannot be changed back in place: delete the pool and create it again",
			events: []string{"nodepool.error a", "cluster.error"}, recorded: 1,
		},
		{
			name: "labels changed at the provider: error naming them, a resize not made",
			pool: poolDoc("a", ready, 1), obs: new(shape(sized(3), func(s *model.NodePoolSpec) { s.Labels = map[string]string{"team": "other"} })),
			state: failed, message: "changed at the provider: labels team=other, spec none; it cannot be changed back in place: delete the pool and create it again",
			events: []string{"nodepool.error a", "cluster.error"}, recorded: 1,
		},
		{
			name: "taints changed at the provider: error naming them",
			pool: poolDoc("a", ready, 1), obs: new(shape(sized(1), func(s *model.NodePoolSpec) {
				s.Taints = []resource.Taint{{Key: "gpu", Value: "true", Effect: "NoSchedule"}}
			})),
			state: failed, message: "changed at the provider: taints gpu=true:NoSchedule, spec none; it cannot be changed back in place: delete the pool and create it again",
			events: []string{"nodepool.error a", "cluster.error"}, recorded: 1,
		},
		{
			name: "accelerators changed at the provider: error naming them",
			pool: poolDoc("a", ready, 1), obs: new(shape(sized(1), func(s *model.NodePoolSpec) {
				s.Accelerators = &resource.Accelerators{Type: "nvidia-l4", Count: 1}
			})),
			state: failed, message: "changed at the provider: accelerators 1 nvidia-l4, spec none; it cannot be changed back in place: delete the pool and create it again",
			events: []string{"nodepool.error a", "cluster.error"}, recorded: 1,
		},
		{
			name: "a machine type's own GPUs the spec does not name are not a difference",
			pool: poolDoc("a", ready, 1, func(p *model.NodePool) { p.Spec.MachineType = "g2-standard-8" }),
			obs: new(shape(sized(1), func(s *model.NodePoolSpec) {
				s.MachineType = "g2-standard-8"
				s.Accelerators = &resource.Accelerators{Type: "nvidia-l4", Count: 1}
			})),
			state: ready, recorded: 1,
		},
		{
			name: "labels and taints GKE manages are not differences",
			pool: poolDoc("a", ready, 1), obs: new(shape(sized(1), func(s *model.NodePoolSpec) {
				s.Labels = map[string]string{"cloud.google.com/gke-nodepool": "a"}
				s.Taints = []resource.Taint{{Key: "cloud.google.com/gke-queued", Value: "true", Effect: "NoSchedule"}}
			})),
			state: ready, recorded: 1,
		},
		{
			name: "a field changed at the provider: deleting the pool still works",
			pool: poolDoc("a", deleting, 1, func(p *model.NodePool) {
				p.Status.State = failed
				p.Status.Message = "changed at the provider: machineType n2-standard-8"
			}),
			obs:    new(shape(sized(1), func(s *model.NodePoolSpec) { s.MachineType = "n2-standard-8" })),
			action: DeleteNodePool, state: deleting, recorded: 1, converging: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clusterDoc(ready, func(c *model.Cluster) { c.Spec.Zones = []string{"us-central1-a"} })
			if tt.pool.Status.State == updating {
				c.Status.State = updating
			}
			pools := map[string]ObservedPool{}
			if tt.obs != nil {
				pools["a"] = *tt.obs
			}
			in := Input{Cluster: c, Pools: []model.NodePool{tt.pool}}
			if tt.other != nil {
				pools["b"] = *tt.other
				in.Pools = append(in.Pools, poolDoc("b", updating, 1, func(p *model.NodePool) { p.Spec.NodeCount = 2 }, withPoolOp(SetSize, 2)))
				in.Op = &OpOutcome{}
			}
			in.Observed = observed(StatusRunning, pools)
			d := Plan(in, t0)
			var want *Action
			if tt.action != "" {
				want = &Action{Kind: tt.action, Pool: 0}
			}
			if !reflect.DeepEqual(d.Action, want) {
				t.Errorf("Action = %+v, want %+v", d.Action, want)
			}
			p := &d.Pools[0]
			if st, msg := model.NodePoolState(p); st != tt.state || msg != tt.message {
				t.Errorf("pool = %s %q, want %s %q", st, msg, tt.state, tt.message)
			}
			if got := eventNames(d); !slices.Equal(got, tt.events) {
				t.Errorf("events = %q, want %q", got, tt.events)
			}
			if got := p.Status.Provider.NodeCount; got != tt.recorded {
				t.Errorf("Provider.NodeCount = %d, want %d", got, tt.recorded)
			}
			if d.Converging != tt.converging {
				t.Errorf("Converging = %v, want %v", d.Converging, tt.converging)
			}
		})
	}
}

// sizes is a pool the provider runs with the sizes per zone asked.
func sizes(per map[string]int) ObservedPool {
	o := ObservedPool{Status: StatusRunning, Nodes: &PoolNodes{Sizes: per}}
	for _, n := range per {
		o.Nodes.Running += n
		o.Nodes.Target += n
	}
	return o
}
