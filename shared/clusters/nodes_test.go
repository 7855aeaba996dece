package clusters

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// stockoutZoneB is GKE's operation error and pool status message for a
// stockout (tranquilitybase-io/tb-gcp#589, hashicorp/terraform-provider-google#10121).
const stockoutZoneB = `Google Compute Engine: Not all instances running in IGM after 1m6.219216581s. Expected 2, running 1, transitioning 1. Current errors: [GCE_STOCKOUT]: Instance 'gke-c-a-6c72f0a8-k7xw' creation failed: The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request.  '(resource type:compute)'.`

func TestPoolNodes(t *testing.T) {
	const base = "https://www.googleapis.com/compute/v1/projects/p/zones/"
	groups := map[groupKey]group{
		{"us-central1-a", "gke-a"}: {target: 2, running: 2},
		{"us-central1-b", "gke-b"}: {target: 2, running: 1},
	}
	tests := []struct {
		name string
		urls []string
		want *PoolNodes
	}{
		{"whole", []string{base + "us-central1-a/instanceGroupManagers/gke-a"}, &PoolNodes{Running: 2, Target: 2, Sizes: map[string]int{"us-central1-a": 2}}},
		{"short in one zone", []string{base + "us-central1-a/instanceGroupManagers/gke-a", base + "us-central1-b/instanceGroupManagers/gke-b"}, &PoolNodes{Running: 3, Target: 4, Short: []string{"us-central1-b"}, Sizes: map[string]int{"us-central1-a": 2, "us-central1-b": 2}}},
		{"no groups yet", nil, nil},
		{"a group not listed", []string{base + "us-central1-a/instanceGroupManagers/gke-a", base + "us-central1-c/instanceGroupManagers/gke-c"}, nil},
		{"not a group", []string{"https://example.com/x"}, nil},
		// Compute Engine's other link forms of the same groups.
		{"compute.googleapis.com and beta links", []string{"https://compute.googleapis.com/compute/beta/projects/p/zones/us-central1-a/instanceGroupManagers/gke-a", "https://www.googleapis.com/compute/v1/projects/123456789012/zones/us-central1-b/instanceGroups/gke-b"}, &PoolNodes{Running: 3, Target: 4, Short: []string{"us-central1-b"}, Sizes: map[string]int{"us-central1-a": 2, "us-central1-b": 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := poolNodes(tt.urls, groups); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("poolNodes = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStockoutMessage(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		nodes    *PoolNodes
		every    time.Duration
		want     string
	}{
		{"from the groups", stockoutZoneB, &PoolNodes{Running: 1, Target: 2, Short: []string{"us-central1-a"}}, 5 * time.Minute,
			"us-central1-a: no g2-standard-8 available (GCE_STOCKOUT); 1 of 2 nodes; retried every 5 minutes"},
		{"from the message, counts unknown", stockoutZoneB, nil, 2 * time.Second,
			"us-central1-b: no g2-standard-8 available (GCE_STOCKOUT); retried every 2 seconds"},
		{"groups whole again, zones from the message", stockoutZoneB, &PoolNodes{Running: 2, Target: 2}, 0,
			"us-central1-b: no g2-standard-8 available (GCE_STOCKOUT); 2 of 2 nodes"},
		{"Compute Engine's code", "ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request.", nil, 0,
			"us-central1-b: no g2-standard-8 available (ZONE_RESOURCE_POOL_EXHAUSTED)"},
		{"Compute Engine's words alone", "The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request.", nil, 0,
			"us-central1-b: no g2-standard-8 available (ZONE_RESOURCE_POOL_EXHAUSTED)"},
		// Several zones in one error (GoogleCloudPlatform/cluster-toolkit#6278).
		{"GKE's error naming three zones", "Google Compute Engine: Not all instances running in IGM after 35m. Expected 1, running 0, transitioning 1. Current errors: [GCE_STOCKOUT]: Instance 'gke-c-default-pool-1a2b3c4d-x1y2' creation failed: The zone 'projects/p/zones/us-central1-c' does not have enough resources available to fulfill the request. The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request. The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request.", nil, 0,
			"us-central1-a, us-central1-b, us-central1-c: no g2-standard-8 available (GCE_STOCKOUT)"},
		// A pool's terse form names no zone: the groups say which.
		{"GKE's terse pool message", "Not all instances running in IGM after 35m9s. Expected 18, running 16. [INTERNAL_ERROR]: Instance 'hp0q' creation failed. [GCE_STOCKOUT]: 2 nodes cannot be created due to lack of capacity.", &PoolNodes{Running: 16, Target: 18, Short: []string{"us-central1-b"}}, 0,
			"us-central1-b: no g2-standard-8 available (GCE_STOCKOUT); 16 of 18 nodes"},
		{"a multi-host resize", "Atomic resize failed with [GCE_STOCKOUT]", nil, 0, "no g2-standard-8 available (GCE_STOCKOUT)"},
		{"GCE_STOCKOUT, two zones", "GCE_STOCKOUT in zones/us-east1-c and zones/us-east1-b", nil, time.Hour,
			"us-east1-b, us-east1-c: no g2-standard-8 available (GCE_STOCKOUT); retried every 1 hour"},
		// GKE's operation error, as tranquilitybase-io/tb-gcp#589 quotes it
		// and the simulator words it.
		{"GKE's operation error", "Google Compute Engine: Not all instances running in IGM after 14.691006793s. Expected 1, running 0, transitioning 1. Current errors: [GCE_STOCKOUT]: Instance 'gke-gke-ec-gke-ec-node-pool-34b6625e-k7xw' creation failed: The zone 'projects/p/zones/europe-west3-c' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", nil, time.Minute,
			"europe-west3-c: no g2-standard-8 available (GCE_STOCKOUT); retried every 1 minute"},
		{"no zone named", "GCE_STOCKOUT", nil, 90 * time.Second, "no g2-standard-8 available (GCE_STOCKOUT); retried every 90 seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ok := stockout(tt.provider)
			if !ok {
				t.Fatalf("stockout(%q) = false", tt.provider)
			}
			if got := stockoutMessage(code, tt.provider, "g2-standard-8", tt.nodes, tt.every); got != tt.want {
				t.Errorf("message = %q\nwant      %q", got, tt.want)
			}
		})
	}
	if _, ok := stockout(`Machine type "g2-standard-8" is not available in zone "us-central1-f".`); ok {
		t.Errorf("a machine type a zone lacks is not a stockout")
	}
}

func TestSpell(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute: "5 minutes", time.Minute: "1 minute", 2 * time.Second: "2 seconds",
		90 * time.Minute: "90 minutes", 1500 * time.Millisecond: "1.5s",
	} {
		if got := spell(d); got != want {
			t.Errorf("spell(%v) = %q, want %q", d, got, want)
		}
	}
}

// The pools show the nodes their instance groups run, whatever the
// planner decides; the autoscaler's count is never resized back; a
// stockout is said plainly, with one error event, and its end with one
// ready event.
func TestPlanNodeCounts(t *testing.T) {
	nodes := func(running, target int, short ...string) *PoolNodes {
		return &PoolNodes{Running: running, Target: target, Short: short}
	}
	withNodes := func(op ObservedPool, n *PoolNodes) ObservedPool { op.Nodes = n; return op }
	one := 1
	tests := []struct {
		name       string
		pool       model.NodePool
		obs        ObservedPool
		wantCount  *int
		wantState  resource.State
		wantMsg    string
		wantEvents []string
		wantAction string
	}{
		{
			name: "ready pool shows its nodes", pool: poolDoc("a", resource.StateReady, 2),
			obs: withNodes(running(), nodes(6, 6)), wantCount: new(6), wantState: resource.StateReady,
		},
		{
			name: "count that cannot be read is absent, nothing else changes",
			pool: poolDoc("a", resource.StateReady, 2, func(p *model.NodePool) { p.Status.CurrentNodeCount = &one }),
			obs:  running(), wantCount: nil, wantState: resource.StateReady,
		},
		{
			name: "autoscaled pool follows the autoscaler, no resize",
			pool: poolDoc("a", resource.StateReady, 1, func(p *model.NodePool) {
				p.Spec.Autoscaling = autoscale(1, 4)
				p.Status.Provider.NodeCount = -1
			}),
			obs:       withNodes(ObservedPool{Status: StatusRunning, Autoscaling: autoscale(1, 4)}, nodes(9, 9)),
			wantCount: new(9), wantState: resource.StateReady,
		},
		{
			name: "stockout starts",
			pool: poolDoc("a", resource.StateReady, 2, func(p *model.NodePool) { p.Spec.MachineType = "g2-standard-8" }),
			obs: withNodes(ObservedPool{Status: StatusRunningWithError, Message: stockoutZoneB},
				nodes(3, 4, "us-central1-b")),
			wantCount: new(3), wantState: resource.StateError,
			wantMsg:    "us-central1-b: no g2-standard-8 available (GCE_STOCKOUT); 3 of 4 nodes; retried every 5 minutes",
			wantEvents: []string{"nodepool.error a", "cluster.error"},
		},
		{
			name: "stockout goes on: no event",
			pool: poolDoc("a", resource.StateError, 2, func(p *model.NodePool) {
				p.Spec.MachineType = "g2-standard-8"
				p.Status.Message = "us-central1-b: no g2-standard-8 available (GCE_STOCKOUT); 3 of 4 nodes; retried every 5 minutes"
			}),
			obs: withNodes(ObservedPool{Status: StatusRunningWithError, Message: stockoutZoneB},
				nodes(3, 4, "us-central1-b")),
			wantCount: new(3), wantState: resource.StateError,
			wantMsg: "us-central1-b: no g2-standard-8 available (GCE_STOCKOUT); 3 of 4 nodes; retried every 5 minutes",
		},
		{
			name:      "stockout over",
			pool:      poolDoc("a", resource.StateError, 2, func(p *model.NodePool) { p.Status.Message = "old" }),
			obs:       withNodes(running(), nodes(4, 4)),
			wantCount: new(4), wantState: resource.StateReady, wantEvents: []string{"nodepool.ready a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clusterDoc(resource.StateReady)
			if tt.pool.Status.State == resource.StateError {
				c.Status.State = resource.StateError
			}
			d := Plan(Input{Cluster: c, Pools: []model.NodePool{tt.pool},
				Observed: observed(StatusRunning, map[string]ObservedPool{"a": tt.obs}), RetryEvery: 5 * time.Minute}, t0)
			p := &d.Pools[0]
			if !reflect.DeepEqual(p.Status.CurrentNodeCount, tt.wantCount) {
				t.Errorf("CurrentNodeCount = %v, want %v", deref(p.Status.CurrentNodeCount), deref(tt.wantCount))
			}
			if v := p.View(); !reflect.DeepEqual(v.CurrentNodeCount, tt.wantCount) {
				t.Errorf("View().CurrentNodeCount = %v, want %v", deref(v.CurrentNodeCount), deref(tt.wantCount))
			}
			st, msg := model.NodePoolState(p)
			if st != tt.wantState || msg != tt.wantMsg {
				t.Errorf("pool = %s %q, want %s %q", st, msg, tt.wantState, tt.wantMsg)
			}
			got := slices.DeleteFunc(eventNames(d), func(e string) bool { return e == "cluster.ready" || e == "cluster.updated" })
			if !slices.Equal(got, tt.wantEvents) {
				t.Errorf("events = %v, want %v", got, tt.wantEvents)
			}
			if d.Action != nil {
				t.Errorf("action = %+v, want none", *d.Action)
			}
		})
	}
}

// A resize the provider could not fully make (a stockout) is not made
// again: the provider keeps the size and goes on creating the nodes.
func TestPlanResizeStockout(t *testing.T) {
	p := poolDoc("a", resource.StateUpdating, 1, func(p *model.NodePool) { p.Spec.NodeCount = 3 }, withPoolOp(SetSize, 3))
	d := Plan(Input{
		Cluster:  clusterDoc(resource.StateReady),
		Pools:    []model.NodePool{p},
		Observed: observed(StatusRunning, map[string]ObservedPool{"a": {Status: StatusRunningWithError, Message: stockoutZoneB, Nodes: &PoolNodes{Running: 2, Target: 3, Short: []string{"us-central1-b"}}}}),
		Op:       &OpOutcome{Done: true, Err: &Fault{Transient: true, Message: stockoutZoneB}},
	}, t0)
	if d.Action != nil {
		t.Fatalf("action = %+v, want none: the provider keeps trying", *d.Action)
	}
	if got := d.Pools[0].Status.Provider.NodeCount; got != 3 {
		t.Errorf("provider NodeCount = %d, want 3", got)
	}
	if st, msg := model.NodePoolState(&d.Pools[0]); st != resource.StateError || msg != "us-central1-b: no e2-standard-4 available (GCE_STOCKOUT); 2 of 3 nodes" {
		t.Errorf("pool = %s %q", st, msg)
	}
	if got := eventNames(d); !slices.Contains(got, "nodepool.error a") {
		t.Errorf("events = %v, want nodepool.error a", got)
	}
}

func deref(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}

// gkeStockouts are the forms in which GKE reports that zone
// us-central1-b had 1 of the 2 nodes a pool asked for, as a pool and its
// operation carry them: its instance group manager's words
// (tranquilitybase-io/tb-gcp#589, hashicorp/terraform-provider-google#10121,
// akka/akka-core#32992), a pool's terse status message, ERROR, naming no
// zone, and the API's conditions of code GCE_STOCKOUT with Compute
// Engine's words and no status message (StatusCondition; status_message
// is deprecated for them).
func gkeStockouts() []struct {
	name string
	pool *containerpb.NodePool
	op   *containerpb.Operation
} {
	const terse = "Not all instances running in IGM after 35m9s. Expected 2, running 1. [GCE_STOCKOUT]: 1 nodes cannot be created due to lack of capacity."
	const compute = "The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request."
	cond := []*containerpb.StatusCondition{{Code: containerpb.StatusCondition_GCE_STOCKOUT, CanonicalCode: rpccode.Code_RESOURCE_EXHAUSTED, Message: compute}}
	failed := func(msg string, conds []*containerpb.StatusCondition) *containerpb.Operation {
		return &containerpb.Operation{Status: containerpb.Operation_DONE, StatusMessage: msg, NodepoolConditions: conds,
			Error: &spb.Status{Code: int32(codes.ResourceExhausted), Message: msg}}
	}
	return []struct {
		name string
		pool *containerpb.NodePool
		op   *containerpb.Operation
	}{
		{"instance group manager's words",
			&containerpb.NodePool{Name: "a", Status: containerpb.NodePool_RUNNING_WITH_ERROR, StatusMessage: stockoutZoneB, InitialNodeCount: 2},
			failed(stockoutZoneB, nil)},
		{"terse, in ERROR",
			&containerpb.NodePool{Name: "a", Status: containerpb.NodePool_ERROR, StatusMessage: terse, InitialNodeCount: 2},
			failed(terse, nil)},
		{"conditions only",
			&containerpb.NodePool{Name: "a", Status: containerpb.NodePool_RUNNING_WITH_ERROR, Conditions: cond, InitialNodeCount: 2},
			failed(compute, cond)},
		{"conditions, the code in no message",
			&containerpb.NodePool{Name: "a", Status: containerpb.NodePool_RUNNING_WITH_ERROR, Conditions: []*containerpb.StatusCondition{{Code: containerpb.StatusCondition_GCE_STOCKOUT, Message: "Instance 'gke-c-a-6c72f0a8-k7xw' creation failed."}}, InitialNodeCount: 2},
			&containerpb.Operation{Status: containerpb.Operation_DONE, Error: &spb.Status{Code: int32(codes.Unknown), Message: "Instance 'gke-c-a-6c72f0a8-k7xw' creation failed."},
				NodepoolConditions: []*containerpb.StatusCondition{{Code: containerpb.StatusCondition_GCE_STOCKOUT, Message: "Instance 'gke-c-a-6c72f0a8-k7xw' creation failed."}}}},
	}
}

// A stockout in any of GKE's forms is held as one: the create's or the
// resize's error is transient and not called again, the pool is error
// with the zone, the machine type and the nodes, and it goes ready when
// the provider shows it whole.
func TestStockoutInEveryForm(t *testing.T) {
	groups := &PoolNodes{Running: 3, Target: 4, Short: []string{"us-central1-b"}}
	for _, f := range gkeStockouts() {
		t.Run(f.name, func(t *testing.T) {
			o := outcome(f.op)
			if o.Err == nil || !o.Err.Transient || !isStockout(o.Err.Message) {
				t.Fatalf("outcome = %+v, want a transient stockout", o.Err)
			}
			op := observe(&containerpb.Cluster{NodePools: []*containerpb.NodePool{f.pool}}).Pools["a"]
			op.Nodes = groups
			obs := observed(StatusRunning, map[string]ObservedPool{"a": op})
			for _, kind := range []string{CreateNodePool, SetSize} {
				st := resource.StateUpdating
				if kind == CreateNodePool {
					st = resource.StateProvisioning
				}
				p := poolDoc("a", st, 1, func(p *model.NodePool) {
					p.Spec.MachineType = "g2-standard-8"
					p.Spec.NodeCount = 2
					p.Status.Provider.Created = kind != CreateNodePool
				}, withPoolOp(kind, 2))
				d := Plan(Input{Cluster: clusterDoc(resource.StateReady), Pools: []model.NodePool{p}, Observed: obs, Op: o, RetryEvery: 5 * time.Minute}, t0)
				if d.Action != nil {
					t.Errorf("%s: action = %+v, want none: GKE keeps creating the nodes", kind, *d.Action)
				}
				const want = "us-central1-b: no g2-standard-8 available (GCE_STOCKOUT); 3 of 4 nodes; retried every 5 minutes"
				if st, msg := model.NodePoolState(&d.Pools[0]); st != resource.StateError || msg != want {
					t.Errorf("%s: pool = %s %q, want error %q", kind, st, msg, want)
				}
			}
		})
	}
}

func TestWithConditions(t *testing.T) {
	stock := &containerpb.StatusCondition{Code: containerpb.StatusCondition_GCE_STOCKOUT, Message: "The zone 'projects/p/zones/z' does not have enough resources available to fulfill the request."}
	quota := &containerpb.StatusCondition{Code: containerpb.StatusCondition_GCE_QUOTA_EXCEEDED, Message: "Quota 'CPUS' exceeded."}
	tests := []struct {
		name  string
		msg   string
		conds []*containerpb.StatusCondition
		want  string
	}{
		{"message alone", "boom", nil, "boom"},
		{"condition alone, its code kept", "", []*containerpb.StatusCondition{stock}, "[GCE_STOCKOUT]: " + stock.Message},
		{"condition the message says", "[GCE_STOCKOUT]: " + stock.Message, []*containerpb.StatusCondition{stock}, "[GCE_STOCKOUT]: " + stock.Message},
		{"two conditions", "", []*containerpb.StatusCondition{stock, quota}, "[GCE_STOCKOUT]: " + stock.Message + "; [GCE_QUOTA_EXCEEDED]: " + quota.Message},
		{"code alone", "", []*containerpb.StatusCondition{{Code: containerpb.StatusCondition_GCE_STOCKOUT}}, "[GCE_STOCKOUT]"},
		{"unknown code, words alone", "x", []*containerpb.StatusCondition{{Message: "y"}}, "x; y"},
	}
	for _, tt := range tests {
		if got := withConditions(tt.msg, tt.conds); got != tt.want {
			t.Errorf("%s: withConditions = %q, want %q", tt.name, got, tt.want)
		}
	}
	// A quota in a condition stays the tenant's to fix.
	if transient(codes.ResourceExhausted, withConditions("", []*containerpb.StatusCondition{quota})) {
		t.Errorf("a GCE_QUOTA_EXCEEDED condition read as transient")
	}
}

// A pool the provider bounds over all its zones (total_min_node_count,
// total_max_node_count, which the product never sends: an adopted
// cluster's, or a change made outside Better Compute) is not taken for
// the spec's per-zone bounds of the same numbers: the run sets the spec's.
func TestPoolBoundedByTotalsIsConverged(t *testing.T) {
	pb := &containerpb.NodePool{Name: "a", Status: containerpb.NodePool_RUNNING, InitialNodeCount: 2,
		Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, TotalMinNodeCount: 1, TotalMaxNodeCount: 4, LocationPolicy: containerpb.NodePoolAutoscaling_ANY}}
	op := observe(&containerpb.Cluster{NodePools: []*containerpb.NodePool{pb}}).Pools["a"]
	p := poolDoc("a", resource.StateReady, 2, func(p *model.NodePool) { p.Spec.Autoscaling = autoscale(1, 4) })
	d := Plan(Input{Cluster: clusterDoc(resource.StateReady), Pools: []model.NodePool{p}, Observed: observed(StatusRunning, map[string]ObservedPool{"a": op})}, t0)
	if d.Action == nil || d.Action.Kind != SetAutoscaling {
		t.Fatalf("plan = %+v, want SetAutoscaling to the spec's per-zone bounds", d.Action)
	}
	if got := autoscaling(autoscale(1, 4)); got.GetTotalMinNodeCount() != 0 || got.GetTotalMaxNodeCount() != 0 || got.GetMinNodeCount() != 1 || got.GetMaxNodeCount() != 4 {
		t.Errorf("the call's bounds = %v, want per-zone 1..4 and no totals", got)
	}
}
