package gke

import (
	"context"
	"errors"
	"maps"
	"path"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestFailNext(t *testing.T) {
	tests := []struct {
		name    string
		rpc     string
		code    codes.Code
		retried bool // the official client retries UNAVAILABLE on reads
		call    func(e *env) error
	}{
		{"create refused", "CreateNodePool", codes.PermissionDenied, false, func(e *env) error {
			_, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-medium", 1, zoneA)})
			return err
		}},
		{"read unavailable", "GetCluster", codes.Unavailable, true, func(e *env) error {
			_, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
			return err
		}},
	}
	const n = 2
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			before := e.srv.Calls(tt.rpc)
			e.srv.FailNext(tt.rpc, n, tt.code, "injected")
			if !tt.retried {
				for i := range n {
					if err := tt.call(e); code(err) != tt.code || status.Convert(err).Message() != "injected" {
						t.Fatalf("call %d = %v, want %v with the message injected", i, err, tt.code)
					}
				}
			}
			if err := tt.call(e); err != nil {
				t.Fatalf("call after the faults = %v, want nil", err)
			}
			if got := e.srv.Calls(tt.rpc) - before; got != n+1 {
				t.Errorf("Calls(%s) = %d more, want %d", tt.rpc, got, n+1)
			}
		})
	}
}

// Injected faults come before everything the simulator checks: a faulted
// call is neither authenticated nor charged to its project's quota, and
// reactors see the request.
func TestFaultsComeFirst(t *testing.T) {
	e := newEnv(t, WithRequestQuota(1), WithIAM(IAM{
		Projects: map[string][]string{project: {platformSA}},
		Identify: func(tok string) (string, bool) { return platformSA, tok == "platform" },
	}))
	anonymous, platform := clientAs(t, e.srv, ""), clientAs(t, e.srv, "platform")
	get := &containerpb.GetClusterRequest{Name: clusterN}
	e.srv.FailNext("GetCluster", 1, codes.PermissionDenied, "injected")
	if _, err := anonymous.GetCluster(e.ctx, get); code(err) != codes.PermissionDenied {
		t.Errorf("faulted GetCluster without a credential = %v, want the fault, not UNAUTHENTICATED", err)
	}
	e.srv.FailNext("GetCluster", 1, codes.PermissionDenied, "injected")
	if _, err := platform.GetCluster(e.ctx, get); code(err) != codes.PermissionDenied {
		t.Errorf("faulted GetCluster = %v, want PermissionDenied", err)
	}
	if _, err := platform.GetCluster(e.ctx, get); code(err) != codes.NotFound {
		t.Errorf("GetCluster after the faults = %v, want NotFound: the faulted calls spent none of the quota of 1", err)
	}
	if _, err := platform.GetCluster(e.ctx, get); code(err) != codes.ResourceExhausted {
		t.Errorf("second served GetCluster = %v, want ResourceExhausted", err)
	}
	if got := e.srv.Calls("GetCluster"); got != 4 {
		t.Errorf("Calls(GetCluster) = %d, want 4", got)
	}

	// A reactor decides by the request, and lets the others through.
	e.srv.AddReactor("GetNodePool", onlyPool{"gone"})
	if _, err := platform.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: clusterN + "/nodePools/gone"}); code(err) != codes.FailedPrecondition {
		t.Errorf("GetNodePool(gone) = %v, want the reactor's FailedPrecondition", err)
	}
	e.clock.Step(time.Minute) // a new minute of quota
	if _, err := platform.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: clusterN + "/nodePools/other"}); code(err) != codes.NotFound {
		t.Errorf("GetNodePool(other) = %v, want the simulator's NotFound", err)
	}
}

// onlyPool fails the GetNodePool calls of one node pool.
type onlyPool struct{ name string }

func (o onlyPool) React(req any) (bool, any, error) {
	r, ok := req.(*containerpb.GetNodePoolRequest)
	if !ok || path.Base(r.GetName()) != o.name {
		return false, nil, nil
	}
	return true, nil, status.Error(codes.FailedPrecondition, "the node pool is being repaired")
}

func TestLatency(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	e.srv.SetLatency("GetNodePool", 50*time.Millisecond)
	start := time.Now()
	e.getPool(t, "p0")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("GetNodePool took %v, want at least 50ms", d)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := e.client.GetNodePool(ctx, &containerpb.GetNodePoolRequest{Name: clusterN + "/nodePools/p0"}); !errors.Is(err, context.DeadlineExceeded) && code(err) != codes.DeadlineExceeded {
		t.Errorf("GetNodePool with a 10ms deadline = %v, want DeadlineExceeded", err)
	}
	e.srv.SetLatency("GetNodePool", 0)
	start = time.Now()
	e.getPool(t, "p0")
	if d := time.Since(start); d >= 50*time.Millisecond {
		t.Errorf("GetNodePool without latency took %v, want under 50ms", d)
	}
}

func TestLostOperations(t *testing.T) {
	tests := []struct {
		name string
		lose func(e *env, op *containerpb.Operation)
	}{
		{"LoseOperation", func(e *env, op *containerpb.Operation) {
			if err := e.srv.LoseOperation(op.Name); err != nil {
				t.Fatalf("LoseOperation: %v", err)
			}
		}},
		{"LoseNextOperations", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			if tt.lose == nil {
				e.srv.LoseNextOperations("SetNodePoolSize", 1)
			}
			op, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p0", NodeCount: 3})
			if err != nil {
				t.Fatalf("SetNodePoolSize: %v", err)
			}
			if tt.lose != nil {
				tt.lose(e, op)
			}
			if _, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.Name}); code(err) != codes.NotFound {
				t.Errorf("GetOperation(lost) = %v, want NotFound", err)
			}
			ops, err := e.client.ListOperations(e.ctx, &containerpb.ListOperationsRequest{Parent: parent})
			if err != nil {
				t.Fatalf("ListOperations: %v", err)
			}
			for _, o := range ops.Operations {
				if o.Name == op.Name {
					t.Errorf("ListOperations lists the lost operation %s", op.Name)
				}
			}
			// The work still happens, and blocks the pool meanwhile.
			if _, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p0", NodeCount: 4}); code(err) != codes.FailedPrecondition {
				t.Errorf("second resize during the lost one = %v, want FailedPrecondition", err)
			}
			e.clock.Step(opTime)
			if got, _ := e.srv.NodeCounts(clusterN + "/nodePools/p0"); got[zoneA] != 3 {
				t.Errorf("NodeCounts = %v, want 3 in %s", got, zoneA)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		e := newEnv(t)
		if err := e.srv.LoseOperation("operation-1"); err == nil {
			t.Errorf("LoseOperation(unknown) = nil, want an error")
		}
		if _, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/operation-1"}); code(err) != codes.NotFound {
			t.Errorf("GetOperation(unknown) = %v, want NotFound", err)
		}
	})
}

func TestOutOfBand(t *testing.T) {
	p0 := clusterN + "/nodePools/p0"
	tests := []struct {
		name       string
		change     func(s *Server) error
		wantErr    bool
		wantStatus containerpb.NodePool_Status // UNSPECIFIED: the pool is gone
		wantNodes  map[string]int32
	}{
		{"remove", func(s *Server) error { return s.RemoveNodePool(p0) }, false, containerpb.NodePool_STATUS_UNSPECIFIED, nil},
		{"resize", func(s *Server) error { return s.ResizeNodePool(p0, 7) }, false, containerpb.NodePool_RUNNING, map[string]int32{zoneA: 7}},
		{"break", func(s *Server) error { return s.BreakNodePool(p0, "Instance group broken.") }, false, containerpb.NodePool_ERROR, map[string]int32{zoneA: 1}},
		{"autoscale within bounds", func(s *Server) error { return s.Autoscale(p0, 4) }, false, containerpb.NodePool_RUNNING, map[string]int32{zoneA: 4}},
		{"autoscale beyond bounds", func(s *Server) error { return s.Autoscale(p0, 9) }, true, containerpb.NodePool_RUNNING, map[string]int32{zoneA: 1}},
		{"resize of an unknown pool", func(s *Server) error { return s.ResizeNodePool(clusterN+"/nodePools/nope", 1) }, true, containerpb.NodePool_RUNNING, map[string]int32{zoneA: 1}},
		{"a cluster name for a pool", func(s *Server) error { return s.BreakNodePool(clusterN, "x") }, true, containerpb.NodePool_RUNNING, map[string]int32{zoneA: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			p := pool("p0", "e2-medium", 1, zoneA)
			p.Autoscaling = &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, MaxNodeCount: 5}
			e.createCluster(t, p)
			if err := tt.change(e.srv); (err != nil) != tt.wantErr {
				t.Fatalf("change = %v, want error %v", err, tt.wantErr)
			}
			np, err := e.client.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: p0})
			if tt.wantStatus == containerpb.NodePool_STATUS_UNSPECIFIED {
				if code(err) != codes.NotFound {
					t.Errorf("GetNodePool = %v, want NotFound", err)
				}
				return
			}
			if err != nil || np.Status != tt.wantStatus {
				t.Fatalf("GetNodePool = %v, %v; want %v", np.GetStatus(), err, tt.wantStatus)
			}
			if got, _ := e.srv.NodeCounts(p0); !maps.Equal(got, tt.wantNodes) {
				t.Errorf("NodeCounts = %v, want %v", got, tt.wantNodes)
			}
			c, _ := e.srv.Cluster(clusterN)
			var total int32
			for _, n := range tt.wantNodes {
				total += n
			}
			if c.CurrentNodeCount != total {
				t.Errorf("CurrentNodeCount = %d, want %d", c.CurrentNodeCount, total)
			}
		})
	}
	t.Run("a broken pool recovers after a resize", func(t *testing.T) {
		e := newEnv(t)
		e.createCluster(t)
		if err := e.srv.BreakNodePool(p0, "broken"); err != nil {
			t.Fatalf("BreakNodePool: %v", err)
		}
		if np := e.getPool(t, "p0"); np.StatusMessage != "broken" {
			t.Errorf("StatusMessage = %q, want broken", np.StatusMessage)
		}
		op, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: p0, NodeCount: 2})
		if err != nil {
			t.Fatalf("SetNodePoolSize: %v", err)
		}
		e.wait(t, op)
		if np := e.getPool(t, "p0"); np.Status != containerpb.NodePool_RUNNING || np.StatusMessage != "" {
			t.Errorf("pool = %v %q, want RUNNING with no message", np.Status, np.StatusMessage)
		}
	})
	t.Run("an operation on a removed pool ends without effect", func(t *testing.T) {
		e := newEnv(t)
		e.createCluster(t)
		op, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: p0, NodeCount: 2})
		if err != nil {
			t.Fatalf("SetNodePoolSize: %v", err)
		}
		if err := e.srv.RemoveNodePool(p0); err != nil {
			t.Fatalf("RemoveNodePool: %v", err)
		}
		e.wait(t, op)
		if _, err := e.srv.NodePool(p0); err == nil {
			t.Errorf("NodePool(%s) exists after removal and a finished resize", p0)
		}
	})
}

// TestRefusedCallsCounted: a call the simulator refuses (here a missing
// cluster) is counted as any other.
func TestRefusedCallsCounted(t *testing.T) {
	e := newEnv(t)
	if _, err := e.client.SetLabels(e.ctx, &containerpb.SetLabelsRequest{Name: clusterN}); code(err) != codes.NotFound {
		t.Errorf("SetLabels = %v, want NotFound", err)
	}
	if got := e.srv.Calls("SetLabels"); got != 1 {
		t.Errorf("Calls(SetLabels) = %d, want 1", got)
	}
}

func TestNewServerRefusesBadVersions(t *testing.T) {
	if _, err := NewServer(WithVersions(map[containerpb.ReleaseChannel_Channel]string{containerpb.ReleaseChannel_REGULAR: "1.33"})); err == nil {
		t.Errorf("NewServer(bad versions) = nil error, want one")
	}
}

func BenchmarkGetCluster(b *testing.B) {
	srv, err := NewServer()
	if err != nil {
		b.Fatalf("NewServer: %v", err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	client, err := dial(srv)
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	b.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	if _, err := client.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", NodePools: []*containerpb.NodePool{pool("p0", "e2-medium", 3), pool("p1", "g2-standard-8", 1)}}}); err != nil {
		b.Fatalf("CreateCluster: %v", err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: clusterN}); err != nil {
			b.Fatalf("GetCluster: %v", err)
		}
	}
}

func BenchmarkNodePoolCreateDelete(b *testing.B) {
	srv, err := NewServer(WithOperationTime(0))
	if err != nil {
		b.Fatalf("NewServer: %v", err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	client, err := dial(srv)
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	b.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	if _, err := client.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}}); err != nil {
		b.Fatalf("CreateCluster: %v", err)
	}
	for b.Loop() {
		if _, err := client.CreateNodePool(ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-medium", 1)}); err != nil {
			b.Fatalf("CreateNodePool: %v", err)
		}
		if _, err := client.DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p1"}); err != nil {
			b.Fatalf("DeleteNodePool: %v", err)
		}
	}
}
