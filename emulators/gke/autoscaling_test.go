package gke

import (
	"maps"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A pool bounded as a whole (total_min_node_count, total_max_node_count)
// is accepted by each call that sets autoscaling, read back as sent with
// GKE's default location policy, and autoscaled so that its nodes over
// all its zones stay within the totals.
func TestTotalAutoscalingBounds(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	p1 := clusterN + "/nodePools/p1"
	np := pool("p1", "e2-medium", 1, zoneA, zoneB)
	np.Autoscaling = &containerpb.NodePoolAutoscaling{Enabled: true, TotalMinNodeCount: 1, TotalMaxNodeCount: 5, LocationPolicy: containerpb.NodePoolAutoscaling_ANY}
	op, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: np})
	if err != nil {
		t.Fatalf("CreateNodePool with total bounds: %v", err)
	}
	e.wait(t, op)
	a := e.getPool(t, "p1").Autoscaling
	if !a.GetEnabled() || a.TotalMinNodeCount != 1 || a.TotalMaxNodeCount != 5 || a.MinNodeCount != 0 || a.MaxNodeCount != 0 || a.LocationPolicy != containerpb.NodePoolAutoscaling_ANY {
		t.Errorf("p1 autoscaling = %v, want enabled, total 1..5, no per-zone bounds, ANY", a)
	}

	steps := []struct {
		name    string
		scale   func() error
		wantErr bool
		want    map[string]int32
	}{
		{"even, within the total", func() error { return e.srv.Autoscale(p1, 2) }, false, map[string]int32{zoneA: 2, zoneB: 2}},
		{"even, over the total", func() error { return e.srv.Autoscale(p1, 3) }, true, map[string]int32{zoneA: 2, zoneB: 2}},
		{"uneven, at the maximum", func() error { return e.srv.AutoscaleZones(p1, map[string]int32{zoneA: 5, zoneB: 0}) }, false, map[string]int32{zoneA: 5, zoneB: 0}},
		{"one zone, over the total", func() error { return e.srv.AutoscaleZones(p1, map[string]int32{zoneB: 1}) }, true, map[string]int32{zoneA: 5, zoneB: 0}},
		{"under the minimum", func() error { return e.srv.AutoscaleZones(p1, map[string]int32{zoneA: 0}) }, true, map[string]int32{zoneA: 5, zoneB: 0}},
		{"a zone not the pool's", func() error { return e.srv.AutoscaleZones(p1, map[string]int32{zoneF: 1}) }, true, map[string]int32{zoneA: 5, zoneB: 0}},
		{"down to the minimum", func() error { return e.srv.AutoscaleZones(p1, map[string]int32{zoneA: 0, zoneB: 1}) }, false, map[string]int32{zoneA: 0, zoneB: 1}},
	}
	for _, s := range steps {
		err := s.scale()
		if (err != nil) != s.wantErr {
			t.Errorf("%s: %v, want error %v", s.name, err, s.wantErr)
		}
		if got, _ := e.srv.NodeCounts(p1); !maps.Equal(got, s.want) {
			t.Errorf("%s: NodeCounts = %v, want %v", s.name, got, s.want)
		}
	}

	// Per-zone bounds still bound each zone, whatever the sum.
	op, err = e.client.SetNodePoolAutoscaling(e.ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: p1, Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, MaxNodeCount: 3}})
	if err != nil {
		t.Fatalf("SetNodePoolAutoscaling back to per-zone bounds: %v", err)
	}
	e.wait(t, op)
	if err := e.srv.AutoscaleZones(p1, map[string]int32{zoneA: 3, zoneB: 3}); err != nil {
		t.Errorf("AutoscaleZones(3, 3) within 1..3 per zone = %v", err)
	}
	if err := e.srv.AutoscaleZones(p1, map[string]int32{zoneA: 4, zoneB: 1}); err == nil {
		t.Errorf("AutoscaleZones(4, 1) with 1..3 per zone = nil, want an error")
	}

	// Both ways of changing autoscaling take total bounds; GKE's default
	// location policy is BALANCED.
	changes := []struct {
		name string
		set  func(*containerpb.NodePoolAutoscaling) (*containerpb.Operation, error)
	}{
		{"SetNodePoolAutoscaling", func(a *containerpb.NodePoolAutoscaling) (*containerpb.Operation, error) {
			return e.client.SetNodePoolAutoscaling(e.ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: p1, Autoscaling: a})
		}},
		{"UpdateCluster", func(a *containerpb.NodePoolAutoscaling) (*containerpb.Operation, error) {
			return e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredNodePoolId: "p1", DesiredNodePoolAutoscaling: a}})
		}},
	}
	for i, c := range changes {
		op, err := c.set(&containerpb.NodePoolAutoscaling{Enabled: true, TotalMaxNodeCount: int32(8 + i)})
		if err != nil {
			t.Fatalf("%s with total bounds: %v", c.name, err)
		}
		e.wait(t, op)
		a := e.getPool(t, "p1").Autoscaling
		if a.TotalMinNodeCount != 0 || a.TotalMaxNodeCount != int32(8+i) || a.MinNodeCount != 0 || a.MaxNodeCount != 0 || a.LocationPolicy != containerpb.NodePoolAutoscaling_BALANCED {
			t.Errorf("after %s: autoscaling = %v, want total 0..%d, no per-zone bounds, BALANCED", c.name, a, 8+i)
		}
	}
}

// Bounds GKE refuses are refused by every call that sets them, with GKE's
// words where a public trace quotes them, and change nothing.
func TestAutoscalingBoundsRefused(t *testing.T) {
	e := newEnv(t)
	p := pool("p0", "e2-medium", 1, zoneA, zoneB)
	p.Autoscaling = &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, MaxNodeCount: 3}
	e.createCluster(t, p)
	p0 := clusterN + "/nodePools/p0"
	tests := []struct {
		name  string
		a     *containerpb.NodePoolAutoscaling
		words string // "" when GKE's are in no trace: the code alone is checked
	}{
		{"both maxima zero", &containerpb.NodePoolAutoscaling{Enabled: true},
			"Node_pool_autoscaling.max_node_count and node_pool_autoscaling.total_max_node_count cannot be both set to zero."},
		{"both maxima zero, a total minimum", &containerpb.NodePoolAutoscaling{Enabled: true, TotalMinNodeCount: 2},
			"Node_pool_autoscaling.max_node_count and node_pool_autoscaling.total_max_node_count cannot be both set to zero."},
		{"both maxima set", &containerpb.NodePoolAutoscaling{Enabled: true, MaxNodeCount: 3, TotalMaxNodeCount: 6},
			"Node_pool_autoscaling.max_node_count and node_pool_autoscaling.total_max_node_count cannot be both greater than zero."},
		{"both minima set", &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, TotalMinNodeCount: 1, TotalMaxNodeCount: 6},
			"Node_pool_autoscaling.min_node_count and node_pool_autoscaling.total_min_node_count cannot be both greater than zero."},
		{"a per-zone minimum with a total maximum", &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, TotalMaxNodeCount: 6}, ""},
		{"a total minimum with a per-zone maximum", &containerpb.NodePoolAutoscaling{Enabled: true, TotalMinNodeCount: 1, MaxNodeCount: 3}, ""},
		{"totals out of order", &containerpb.NodePoolAutoscaling{Enabled: true, TotalMinNodeCount: 7, TotalMaxNodeCount: 6}, ""},
		{"a negative total maximum", &containerpb.NodePoolAutoscaling{Enabled: true, TotalMaxNodeCount: -1}, ""},
		{"per-zone bounds out of order", &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 4, MaxNodeCount: 3}, ""},
	}
	calls := []struct {
		name string
		call func(*containerpb.NodePoolAutoscaling) error
	}{
		{"CreateNodePool", func(a *containerpb.NodePoolAutoscaling) error {
			np := pool("p1", "e2-medium", 1, zoneA)
			np.Autoscaling = a
			_, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: np})
			return err
		}},
		{"SetNodePoolAutoscaling", func(a *containerpb.NodePoolAutoscaling) error {
			_, err := e.client.SetNodePoolAutoscaling(e.ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: p0, Autoscaling: a})
			return err
		}},
		{"UpdateCluster", func(a *containerpb.NodePoolAutoscaling) error {
			_, err := e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredNodePoolAutoscaling: a}})
			return err
		}},
	}
	for _, tt := range tests {
		for _, c := range calls {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				err := c.call(tt.a)
				if code(err) != codes.InvalidArgument {
					t.Fatalf("%v, want InvalidArgument", err)
				}
				if msg := status.Convert(err).Message(); tt.words != "" && msg != tt.words {
					t.Errorf("message %q, want %q", msg, tt.words)
				}
			})
		}
	}
	c, err := e.srv.Cluster(clusterN)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.NodePools) != 1 {
		t.Errorf("pools after the refusals = %d, want p0 alone", len(c.NodePools))
	}
	if a := e.getPool(t, "p0").Autoscaling; a.MinNodeCount != 1 || a.MaxNodeCount != 3 || a.TotalMaxNodeCount != 0 {
		t.Errorf("p0 autoscaling after the refusals = %v, want 1..3 per zone as created", a)
	}
}
