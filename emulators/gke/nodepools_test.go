package gke

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestNodePoolOperations(t *testing.T) {
	newer := "1.33.3-gke.900" // older than the master: a valid node version
	tests := []struct {
		name      string
		call      func(e *env) (*containerpb.Operation, error)
		wantType  containerpb.Operation_Type
		during    containerpb.NodePool_Status
		wantNodes map[string]int32 // after; nil when the pool is gone
		check     func(t *testing.T, np *containerpb.NodePool)
	}{
		{
			name: "create",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "n2-standard-8", 3, zoneA, zoneB)})
			},
			wantType:  containerpb.Operation_CREATE_NODE_POOL,
			during:    containerpb.NodePool_PROVISIONING,
			wantNodes: map[string]int32{zoneA: 3, zoneB: 3},
			check: func(t *testing.T, np *containerpb.NodePool) {
				if np.Config.DiskType != defaultDiskType || np.Config.DiskSizeGb != defaultDiskSizeGb || len(np.InstanceGroupUrls) != 2 {
					t.Errorf("pool = disk %q %d GB, %d instance groups; want defaults and 2 groups", np.Config.DiskType, np.Config.DiskSizeGb, len(np.InstanceGroupUrls))
				}
			},
		},
		{
			name: "create with the deprecated fields",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{ProjectId: project, Zone: region, ClusterId: "c1", NodePool: pool("p1", "e2-medium", 1)})
			},
			wantType:  containerpb.Operation_CREATE_NODE_POOL,
			during:    containerpb.NodePool_PROVISIONING,
			wantNodes: map[string]int32{zoneA: 1, zoneB: 1, "us-central1-c": 1}, // the cluster's three default zones
		},
		{
			name: "resize",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p1", NodeCount: 5})
			},
			wantType:  containerpb.Operation_SET_NODE_POOL_SIZE,
			during:    containerpb.NodePool_RECONCILING,
			wantNodes: map[string]int32{zoneA: 5},
			check: func(t *testing.T, np *containerpb.NodePool) {
				if np.InitialNodeCount != 5 {
					t.Errorf("InitialNodeCount after resize = %d, want 5 (the new size, as GKE shows it)", np.InitialNodeCount)
				}
			},
		},
		{
			name: "resize with the deprecated fields",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{ProjectId: project, Zone: region, ClusterId: "c1", NodePoolId: "p1", NodeCount: 0})
			},
			wantType:  containerpb.Operation_SET_NODE_POOL_SIZE,
			during:    containerpb.NodePool_RECONCILING,
			wantNodes: map[string]int32{zoneA: 0},
		},
		{
			name: "enable autoscaling does not resize",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.SetNodePoolAutoscaling(e.ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: clusterN + "/nodePools/p1", Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 3, MaxNodeCount: 6}})
			},
			wantType:  containerpb.Operation_UPDATE_CLUSTER,
			during:    containerpb.NodePool_RECONCILING,
			wantNodes: map[string]int32{zoneA: 2},
			check: func(t *testing.T, np *containerpb.NodePool) {
				if a := np.Autoscaling; !a.GetEnabled() || a.MinNodeCount != 3 || a.MaxNodeCount != 6 || a.LocationPolicy != containerpb.NodePoolAutoscaling_BALANCED {
					t.Errorf("Autoscaling = %v, want enabled 3..6, BALANCED", a)
				}
				if np.InitialNodeCount != 2 {
					t.Errorf("InitialNodeCount = %d, want 2", np.InitialNodeCount)
				}
			},
		},
		{
			name: "disable autoscaling",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.SetNodePoolAutoscaling(e.ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: clusterN + "/nodePools/p1", Autoscaling: &containerpb.NodePoolAutoscaling{MinNodeCount: 1}})
			},
			wantType:  containerpb.Operation_UPDATE_CLUSTER,
			during:    containerpb.NodePool_RECONCILING,
			wantNodes: map[string]int32{zoneA: 2},
			check: func(t *testing.T, np *containerpb.NodePool) {
				if np.Autoscaling.GetEnabled() || np.Autoscaling.GetMinNodeCount() != 0 {
					t.Errorf("Autoscaling = %v, want disabled and empty", np.Autoscaling)
				}
			},
		},
		{
			name: "update version",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{Name: clusterN + "/nodePools/p1", NodeVersion: newer})
			},
			wantType:  containerpb.Operation_UPGRADE_NODES,
			during:    containerpb.NodePool_RECONCILING,
			wantNodes: map[string]int32{zoneA: 2},
			check: func(t *testing.T, np *containerpb.NodePool) {
				if np.Version != newer {
					t.Errorf("Version = %q, want %q", np.Version, newer)
				}
			},
		},
		{
			name: "update locations, labels and taints",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{
					Name:      clusterN + "/nodePools/p1",
					Locations: []string{zoneA, zoneF},
					Labels:    &containerpb.NodeLabels{Labels: map[string]string{"team": "ml"}},
					Taints:    &containerpb.NodeTaints{Taints: []*containerpb.NodeTaint{{Key: "gpu", Value: "yes", Effect: containerpb.NodeTaint_NO_SCHEDULE}}},
				})
			},
			wantType:  containerpb.Operation_UPGRADE_NODES,
			during:    containerpb.NodePool_RECONCILING,
			wantNodes: map[string]int32{zoneA: 2, zoneF: 2},
			check: func(t *testing.T, np *containerpb.NodePool) {
				if len(np.Locations) != 2 || np.Config.Labels["team"] != "ml" || len(np.Config.Taints) != 1 {
					t.Errorf("pool = locations %v labels %v taints %v, want 2 zones, team=ml, one taint", np.Locations, np.Config.Labels, np.Config.Taints)
				}
			},
		},
		{
			name: "delete",
			call: func(e *env) (*containerpb.Operation, error) {
				return e.client.DeleteNodePool(e.ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p1"})
			},
			wantType: containerpb.Operation_DELETE_NODE_POOL,
			during:   containerpb.NodePool_STOPPING,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			if tt.wantType != containerpb.Operation_CREATE_NODE_POOL {
				op, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-standard-4", 2, zoneA)})
				if err != nil {
					t.Fatalf("CreateNodePool: %v", err)
				}
				e.wait(t, op)
			}
			op, err := tt.call(e)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if op.OperationType != tt.wantType || op.Status != containerpb.Operation_PENDING {
				t.Errorf("op = %v %v, want %v PENDING", op.OperationType, op.Status, tt.wantType)
			}
			if want := apiBase + "projects/" + ProjectNumber(project) + "/locations/us-central1/clusters/c1/nodePools/p1"; op.TargetLink != want {
				t.Errorf("op.TargetLink = %q, want %q", op.TargetLink, want)
			}
			if got := e.getPool(t, "p1").Status; got != tt.during {
				t.Errorf("pool status during the operation = %v, want %v", got, tt.during)
			}
			c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
			if err != nil || c.Status != containerpb.Cluster_RECONCILING {
				t.Errorf("cluster status during the operation = %v, %v; want RECONCILING", c.GetStatus(), err)
			}
			if done := e.wait(t, op); done.Error != nil {
				t.Fatalf("operation error = %v, want none", done.Error)
			}
			if tt.wantNodes == nil {
				if _, err := e.client.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: clusterN + "/nodePools/p1"}); code(err) != codes.NotFound {
					t.Errorf("GetNodePool after delete: %v, want NotFound", err)
				}
				return
			}
			np := e.getPool(t, "p1")
			if np.Status != containerpb.NodePool_RUNNING {
				t.Errorf("pool status after = %v, want RUNNING", np.Status)
			}
			if got, err := e.srv.NodeCounts(clusterN + "/nodePools/p1"); err != nil || !maps.Equal(got, tt.wantNodes) {
				t.Errorf("NodeCounts = %v, %v; want %v", got, err, tt.wantNodes)
			}
			if tt.check != nil {
				tt.check(t, np)
			}
		})
	}
}

func TestCreateNodePoolRefusals(t *testing.T) {
	withAcc := func(p *containerpb.NodePool, typ string, n int64) *containerpb.NodePool {
		p.Config.Accelerators = []*containerpb.AcceleratorConfig{{AcceleratorType: typ, AcceleratorCount: n}}
		return p
	}
	withDisk := func(p *containerpb.NodePool, typ string, gb int32) *containerpb.NodePool {
		p.Config.DiskType, p.Config.DiskSizeGb = typ, gb
		return p
	}
	withScaling := func(p *containerpb.NodePool, minN, maxN int32) *containerpb.NodePool {
		p.Autoscaling = &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: minN, MaxNodeCount: maxN}
		return p
	}
	tests := []struct {
		name   string
		parent string
		pool   *containerpb.NodePool
		want   codes.Code
	}{
		{"g2 with its L4", clusterN, withAcc(pool("p1", "g2-standard-4", 1, zoneA), "nvidia-l4", 1), codes.OK},
		{"g2 without listing its L4", clusterN, pool("p1", "g2-standard-24", 1, zoneA), codes.OK},
		{"a2 with its A100s", clusterN, withAcc(pool("p1", "a2-highgpu-2g", 1, zoneA), "nvidia-tesla-a100", 2), codes.OK},
		{"n1 with a T4", clusterN, withAcc(pool("p1", "n1-standard-8", 1, zoneA), "nvidia-tesla-t4", 2), codes.OK},
		{"spot c3 on hyperdisk", clusterN, withDisk(pool("p1", "c3-standard-8", 1, zoneA), "hyperdisk-balanced", 200), codes.OK},
		{"unknown machine type", clusterN, pool("p1", "e2-standard-3", 1, zoneA), codes.InvalidArgument},
		{"L4 on e2", clusterN, withAcc(pool("p1", "e2-standard-4", 1, zoneA), "nvidia-l4", 1), codes.InvalidArgument},
		{"two L4 on g2-standard-4", clusterN, withAcc(pool("p1", "g2-standard-4", 1, zoneA), "nvidia-l4", 2), codes.InvalidArgument},
		{"T4 on g2", clusterN, withAcc(pool("p1", "g2-standard-4", 1, zoneA), "nvidia-tesla-t4", 1), codes.InvalidArgument},
		{"A100 on n1", clusterN, withAcc(pool("p1", "n1-standard-8", 1, zoneA), "nvidia-tesla-a100", 1), codes.InvalidArgument},
		{"three T4 on n1", clusterN, withAcc(pool("p1", "n1-standard-8", 1, zoneA), "nvidia-tesla-t4", 3), codes.InvalidArgument},
		{"unknown accelerator", clusterN, withAcc(pool("p1", "n1-standard-8", 1, zoneA), "nvidia-h9000", 1), codes.InvalidArgument},
		{"pd-standard on c3", clusterN, withDisk(pool("p1", "c3-standard-8", 1, zoneA), "pd-standard", 100), codes.InvalidArgument},
		{"disk too small", clusterN, withDisk(pool("p1", "e2-standard-4", 1, zoneA), "pd-balanced", 5), codes.InvalidArgument},
		{"zone of another region", clusterN, pool("p1", "e2-standard-4", 1, "europe-west4-a"), codes.InvalidArgument},
		{"unknown zone", clusterN, pool("p1", "e2-standard-4", 1, "us-central1-z"), codes.InvalidArgument},
		{"bad name", clusterN, pool("P_1", "e2-standard-4", 1, zoneA), codes.InvalidArgument},
		{"negative count", clusterN, pool("p1", "e2-standard-4", -1, zoneA), codes.InvalidArgument},
		{"autoscaling min above max", clusterN, withScaling(pool("p1", "e2-standard-4", 1, zoneA), 5, 2), codes.InvalidArgument},
		{"node version newer than master", clusterN, func() *containerpb.NodePool {
			p := pool("p1", "e2-standard-4", 1, zoneA)
			p.Version = "1.99.0-gke.1"
			return p
		}(), codes.InvalidArgument},
		{"no node pool", clusterN, nil, codes.InvalidArgument},
		{"existing name", clusterN, pool("p0", "e2-standard-4", 1, zoneA), codes.AlreadyExists},
		{"unknown cluster", parent + "/clusters/nope", pool("p1", "e2-standard-4", 1, zoneA), codes.NotFound},
		{"malformed parent", "projects/proj/clusters/c1", pool("p1", "e2-standard-4", 1, zoneA), codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			_, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: tt.parent, NodePool: tt.pool})
			if code(err) != tt.want {
				t.Fatalf("CreateNodePool(%s) = %v, want %v", tt.name, err, tt.want)
			}
			if tt.want == codes.OK {
				return
			}
			if got := e.srv.Calls("CreateNodePool"); got != 1 {
				t.Errorf("Calls(CreateNodePool) = %d, want 1", got)
			}
			if _, err := e.srv.NodePool(clusterN + "/nodePools/p1"); err == nil {
				t.Errorf("NodePool(p1) exists after a refused create")
			}
		})
	}
}

func TestLateFailures(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(e *env)
		pool       *containerpb.NodePool
		wantCode   codes.Code
		wantStatus containerpb.NodePool_Status
		wantMsg    string
		wantOpMsg  string // part of the operation's error, when set
		wantCond   string // the message of the pool's one GCE_STOCKOUT condition, when set
		wantNodes  map[string]int32
	}{
		{
			name:       "machine type missing in zone",
			pool:       pool("p1", "g2-standard-8", 1, zoneA, zoneF),
			wantCode:   codes.InvalidArgument,
			wantStatus: containerpb.NodePool_ERROR,
			wantMsg:    `not available in zone "us-central1-f"`,
			wantNodes:  map[string]int32{},
		},
		{
			name:       "stockout",
			setup:      func(e *env) { e.srv.Stockout(zoneB, 1) },
			pool:       pool("p1", "g2-standard-8", 2, zoneA, zoneB),
			wantCode:   codes.ResourceExhausted,
			wantStatus: containerpb.NodePool_RUNNING_WITH_ERROR,
			wantMsg:    "Expected 2, running 1, transitioning 1. Current errors: [GCE_STOCKOUT]: Instance 'gke-c1-p1-",
			wantOpMsg:  "zones/" + zoneB + "' does not have enough resources available to fulfill the request.  '(resource type:compute)'.",
			wantNodes:  map[string]int32{zoneA: 2, zoneB: 1}, // half of those it lacked
		},
		{
			name:       "stockout, GKE's terse form",
			setup:      func(e *env) { e.srv.StockoutAs(zoneB, 1, StockoutCapacity) },
			pool:       pool("p1", "g2-standard-8", 2, zoneA, zoneB),
			wantCode:   codes.ResourceExhausted,
			wantStatus: containerpb.NodePool_ERROR,
			wantMsg:    "Expected 2, running 1. [GCE_STOCKOUT]: 1 nodes cannot be created due to lack of capacity.",
			wantOpMsg:  "[GCE_STOCKOUT]: 1 nodes cannot be created due to lack of capacity.",
			wantNodes:  map[string]int32{zoneA: 2, zoneB: 1},
		},
		{
			name:       "stockout, in conditions",
			setup:      func(e *env) { e.srv.StockoutAs(zoneB, 1, StockoutConditions) },
			pool:       pool("p1", "g2-standard-8", 2, zoneA, zoneB),
			wantCode:   codes.ResourceExhausted,
			wantStatus: containerpb.NodePool_RUNNING_WITH_ERROR,
			wantOpMsg:  "The zone 'projects/proj/zones/" + zoneB + "' does not have enough resources available to fulfill the request.",
			wantCond:   "The zone 'projects/proj/zones/" + zoneB + "' does not have enough resources available to fulfill the request.",
			wantNodes:  map[string]int32{zoneA: 2, zoneB: 1},
		},
		{
			name:       "stockout elsewhere",
			setup:      func(e *env) { e.srv.Stockout("us-central1-c", 1) },
			pool:       pool("p1", "g2-standard-8", 2, zoneA, zoneB),
			wantCode:   codes.OK,
			wantStatus: containerpb.NodePool_RUNNING,
			wantNodes:  map[string]int32{zoneA: 2, zoneB: 2},
		},
		{
			name: "injected failure",
			setup: func(e *env) {
				e.srv.FailNextOperation("CreateNodePool", codes.Internal, "Internal error: instance template broken.")
			},
			pool:       pool("p1", "e2-standard-4", 2, zoneA),
			wantCode:   codes.Internal,
			wantStatus: containerpb.NodePool_ERROR,
			wantMsg:    "instance template broken",
			wantNodes:  map[string]int32{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			op, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: tt.pool})
			if err != nil {
				t.Fatalf("CreateNodePool: %v, want an accepted operation", err)
			}
			done := e.wait(t, op)
			if got := codes.Code(done.GetError().GetCode()); got != tt.wantCode {
				t.Errorf("operation error code = %v (%v), want %v", got, done.Error, tt.wantCode)
			}
			if tt.wantCode != codes.OK && done.StatusMessage == "" {
				t.Errorf("failed operation has no statusMessage")
			}
			if !strings.Contains(done.GetError().GetMessage(), tt.wantOpMsg) {
				t.Errorf("operation error = %q, want it containing %q", done.GetError().GetMessage(), tt.wantOpMsg)
			}
			np := e.getPool(t, "p1")
			if np.Status != tt.wantStatus || !strings.Contains(np.StatusMessage, tt.wantMsg) || (tt.wantMsg == "" && np.StatusMessage != "") {
				t.Errorf("pool = %v %q, want %v containing %q", np.Status, np.StatusMessage, tt.wantStatus, tt.wantMsg)
			}
			var conds, opConds []string
			for _, c := range np.Conditions {
				conds = append(conds, fmt.Sprintf("%v %v %s", c.Code, c.CanonicalCode, c.Message))
			}
			for _, c := range done.NodepoolConditions {
				opConds = append(opConds, fmt.Sprintf("%v %v %s", c.Code, c.CanonicalCode, c.Message))
			}
			var wantConds []string
			if tt.wantCond != "" {
				wantConds = []string{"GCE_STOCKOUT RESOURCE_EXHAUSTED " + tt.wantCond}
			}
			if !slices.Equal(conds, wantConds) || !slices.Equal(opConds, wantConds) {
				t.Errorf("conditions: pool %q, operation %q; want %q", conds, opConds, wantConds)
			}
			if got, _ := e.srv.NodeCounts(clusterN + "/nodePools/p1"); !maps.Equal(got, tt.wantNodes) {
				t.Errorf("NodeCounts = %v, want %v", got, tt.wantNodes)
			}
		})
	}
}

func TestFailedResizeKeepsThePool(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(e *env)
		wantStatus containerpb.NodePool_Status
		wantNodes  map[string]int32
	}{
		{"injected failure", func(e *env) { e.srv.FailNextOperation("SetNodePoolSize", codes.Internal, "boom") }, containerpb.NodePool_RUNNING, map[string]int32{zoneA: 1, zoneB: 1}},
		{"stockout in one zone", func(e *env) { e.srv.Stockout(zoneB, 1) }, containerpb.NodePool_RUNNING_WITH_ERROR, map[string]int32{zoneA: 4, zoneB: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t, pool("p1", "e2-standard-4", 1, zoneA, zoneB))
			tt.setup(e)
			op, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p1", NodeCount: 4})
			if err != nil {
				t.Fatalf("SetNodePoolSize: %v", err)
			}
			if done := e.wait(t, op); done.Error == nil {
				t.Errorf("operation error = nil, want one")
			}
			if np := e.getPool(t, "p1"); np.Status != tt.wantStatus {
				t.Errorf("pool status = %v, want %v", np.Status, tt.wantStatus)
			}
			if got, _ := e.srv.NodeCounts(clusterN + "/nodePools/p1"); !maps.Equal(got, tt.wantNodes) {
				t.Errorf("NodeCounts = %v, want %v", got, tt.wantNodes)
			}
		})
	}
}

func TestUpdateNodePoolRefusals(t *testing.T) {
	tests := []struct {
		name string
		req  *containerpb.UpdateNodePoolRequest
		want codes.Code
	}{
		{"unknown machine type", &containerpb.UpdateNodePoolRequest{MachineType: "e2-huge-8"}, codes.InvalidArgument},
		{"nothing", &containerpb.UpdateNodePoolRequest{}, codes.InvalidArgument},
		{"version newer than master", &containerpb.UpdateNodePoolRequest{NodeVersion: "1.99.0-gke.1"}, codes.InvalidArgument},
		{"malformed version", &containerpb.UpdateNodePoolRequest{NodeVersion: "1.33.x"}, codes.InvalidArgument},
		{"unsupported version", &containerpb.UpdateNodePoolRequest{NodeVersion: "1.29.1-gke.100"}, codes.InvalidArgument},
		{"minor alias", &containerpb.UpdateNodePoolRequest{NodeVersion: "1.33"}, codes.OK},
		{"machine type", &containerpb.UpdateNodePoolRequest{MachineType: "e2-standard-8"}, codes.OK},
		{"kubelet config", &containerpb.UpdateNodePoolRequest{KubeletConfig: &containerpb.NodeKubeletConfig{PodPidsLimit: 2048}}, codes.OK},
		{"zone of another region", &containerpb.UpdateNodePoolRequest{Locations: []string{"us-east1-b"}}, codes.InvalidArgument},
		{"taint without effect", &containerpb.UpdateNodePoolRequest{Taints: &containerpb.NodeTaints{Taints: []*containerpb.NodeTaint{{Key: "k"}}}}, codes.InvalidArgument},
		{"latest version", &containerpb.UpdateNodePoolRequest{NodeVersion: "latest"}, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			tt.req.Name = clusterN + "/nodePools/p0"
			if _, err := e.client.UpdateNodePool(e.ctx, tt.req); code(err) != tt.want {
				t.Errorf("UpdateNodePool(%s) = %v, want %v", tt.name, err, tt.want)
			}
		})
	}
}

func TestPoolRefusalsOnMissingPool(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	missing := clusterN + "/nodePools/nope"
	calls := map[string]func() error{
		"GetNodePool": func() error {
			_, err := e.client.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: missing})
			return err
		},
		"DeleteNodePool": func() error {
			_, err := e.client.DeleteNodePool(e.ctx, &containerpb.DeleteNodePoolRequest{Name: missing})
			return err
		},
		"SetNodePoolSize": func() error {
			_, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: missing, NodeCount: 1})
			return err
		},
		"SetNodePoolAutoscaling": func() error {
			_, err := e.client.SetNodePoolAutoscaling(e.ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: missing, Autoscaling: &containerpb.NodePoolAutoscaling{}})
			return err
		},
		"UpdateNodePool": func() error {
			_, err := e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{Name: missing, NodeVersion: "latest"})
			return err
		},
		"ListNodePools of a missing cluster": func() error {
			_, err := e.client.ListNodePools(e.ctx, &containerpb.ListNodePoolsRequest{Parent: parent + "/clusters/nope"})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); code(err) != codes.NotFound {
				t.Errorf("%s = %v, want NotFound", name, err)
			}
		})
	}
	t.Run("resize out of range", func(t *testing.T) {
		_, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p0", NodeCount: 1001})
		if code(err) != codes.InvalidArgument {
			t.Errorf("SetNodePoolSize(1001) = %v, want InvalidArgument", err)
		}
	})
	t.Run("autoscaling bounds", func(t *testing.T) {
		_, err := e.client.SetNodePoolAutoscaling(e.ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: clusterN + "/nodePools/p0", Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MaxNodeCount: 0}})
		if code(err) != codes.InvalidArgument {
			t.Errorf("SetNodePoolAutoscaling(max 0) = %v, want InvalidArgument", err)
		}
	})
}

// GKE refuses node labels whose keys it or Kubernetes manage, in a new
// node pool, in a new cluster's pools and in an update, with its words;
// nothing is created or changed. Other keys, look-alikes included, are
// taken.
func TestNodeLabelsManagedRefused(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	gkeWords := func(k string) string {
		return `Node labels with key "` + k + `" are managed by GKE or Kubernetes and must not be manually specified.`
	}
	kubeWords := func(k string) string { return "Applying kubernetes label is not allowed: " + k + "." }
	refused := map[string]string{
		"cloud.google.com/gke-nodepool":  gkeWords("cloud.google.com/gke-nodepool"),
		"cloud.google.com/compute-class": gkeWords("cloud.google.com/compute-class"),
		"node.cloud.google.com/x":        gkeWords("node.cloud.google.com/x"),
		"node-role.kubernetes.io/x":      kubeWords("node-role.kubernetes.io/x"),
		"kubernetes.io/arch":             kubeWords("kubernetes.io/arch"),
		"foo.k8s.io/y":                   kubeWords("foo.k8s.io/y"),
	}
	for key, words := range refused {
		t.Run(key, func(t *testing.T) {
			labels := map[string]string{"team": "ml", key: "v"}
			np := pool("bad", "e2-standard-4", 1, zoneA)
			np.Config.Labels = labels
			_, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: np})
			if code(err) != codes.InvalidArgument || status.Convert(err).Message() != words {
				t.Errorf("CreateNodePool with label %q = %v, want InvalidArgument %q", key, err, words)
			}
			_, err = e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c2", NodePools: []*containerpb.NodePool{np}}})
			if code(err) != codes.InvalidArgument || status.Convert(err).Message() != words {
				t.Errorf("CreateCluster with a pool labelled %q = %v, want InvalidArgument %q", key, err, words)
			}
			_, err = e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{Name: clusterN + "/nodePools/p0", Labels: &containerpb.NodeLabels{Labels: labels}})
			if code(err) != codes.InvalidArgument || status.Convert(err).Message() != words {
				t.Errorf("UpdateNodePool with label %q = %v, want InvalidArgument %q", key, err, words)
			}
		})
	}
	list, err := e.client.ListClusters(e.ctx, &containerpb.ListClustersRequest{Parent: parent})
	if err != nil {
		t.Fatalf("ListClusters: %v", err)
	}
	var got []string
	for _, c := range list.Clusters {
		for _, np := range c.NodePools {
			got = append(got, c.Name+"/"+np.Name)
		}
	}
	if len(got) != 1 || got[0] != "c1/p0" {
		t.Errorf("node pools after the refused calls: %v, want c1/p0 alone", got)
	}
	if got := e.getPool(t, "p0").Config.Labels; len(got) != 0 {
		t.Errorf("p0's labels after refused updates = %v, want none", got)
	}

	np := pool("ok", "e2-standard-4", 1, zoneA)
	np.Config.Labels = map[string]string{"team": "ml", "example.com/x": "y", "notcloud.google.com/x": "y", "google.com/x": "y", "notk8s.io/x": "y"}
	op, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: np})
	if err != nil {
		t.Fatalf("CreateNodePool with labels GKE takes = %v", err)
	}
	e.wait(t, op)
}

// A Node's labels are GKE's where GKE sets them, whatever its pool's
// configuration says: a pool that got GKE's own keys past the API (a
// snapshot of an older simulator, say) cannot make its Nodes pose as
// another pool's.
func TestNodeLabelsGKEWins(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	g := e.srv.GServer
	g.mu.Lock()
	var c *cluster
	for _, cl := range g.clusters {
		if cl.pb.Name == "c1" {
			c = cl
		}
	}
	c.pools["p0"].pb.Config.Labels = map[string]string{labelNodePool: "bc-impostor", labelZone: "elsewhere", "team": "ml"}
	g.mu.Unlock()
	nodes, ok := g.kubeNodes(&kubeCluster{c: c})
	if !ok || len(nodes) != 1 {
		t.Fatalf("kubeNodes = %d nodes, %v; want p0's one", len(nodes), ok)
	}
	l := nodes[0].labels
	if l[labelNodePool] != "p0" || l[labelZone] != zoneA || l["team"] != "ml" {
		t.Errorf("Node labels = %v, want GKE's %s=p0 and %s=%s, and the pool's team=ml", l, labelNodePool, labelZone, zoneA)
	}
}

// TestKubeletImagePullsByDisk holds the default maxParallelImagePulls
// against GKE's: 3 on nodes with local SSDs, 2 otherwise, kept through a
// kubelet configuration update that leaves it unset.
func TestKubeletImagePullsByDisk(t *testing.T) {
	e := newEnv(t)
	plain := pool("plain", "n2-standard-4", 1, zoneA)
	ephemeral := pool("ephemeral", "n2-standard-4", 1, zoneA)
	ephemeral.Config.EphemeralStorageLocalSsdConfig = &containerpb.EphemeralStorageLocalSsdConfig{LocalSsdCount: 1}
	legacy := pool("legacy", "n2-standard-4", 1, zoneA)
	legacy.Config.LocalSsdCount = 2
	e.createCluster(t, plain, ephemeral, legacy)
	want := map[string]int32{"plain": 2, "ephemeral": 3, "legacy": 3}
	for name, n := range want {
		np, err := e.client.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: clusterN + "/nodePools/" + name})
		if err != nil {
			t.Fatal(err)
		}
		if got := np.GetConfig().GetKubeletConfig().GetMaxParallelImagePulls(); got != n {
			t.Errorf("pool %s: maxParallelImagePulls = %d, want %d", name, got, n)
		}
	}
	op, err := e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{Name: clusterN + "/nodePools/ephemeral", KubeletConfig: &containerpb.NodeKubeletConfig{PodPidsLimit: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, op)
	np, _ := e.srv.NodePool(clusterN + "/nodePools/ephemeral")
	if got := np.GetConfig().GetKubeletConfig().GetMaxParallelImagePulls(); got != 3 {
		t.Errorf("after a kubelet update: maxParallelImagePulls = %d, want 3", got)
	}
}
