package gke

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// busyEnv starts, on e, an operation of every kind and leaves them all
// running: c1 has a resize, an autoscaling change, an update, a pool
// delete and a pool create that a stockout hits, c2 is being created with
// a pool whose machine type its zone lacks, c3 is being deleted, c4
// upgraded, c5 relabelled; one operation is lost and one will fail.
func busyEnv(t *testing.T, e *env) {
	t.Helper()
	ctx := e.ctx
	e.createCluster(t, pool("p0", "e2-standard-4", 1, zoneA), pool("p1", "e2-standard-4", 1, zoneA, zoneB),
		pool("p2", "e2-standard-4", 1, zoneA), pool("p3", "e2-standard-4", 1, zoneA))
	for _, name := range []string{"c3", "c4", "c5"} {
		op, err := e.client.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: name, NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA)}}})
		if err != nil {
			t.Fatalf("CreateCluster(%s): %v", name, err)
		}
		e.wait(t, op)
	}
	must := func(what string, _ *containerpb.Operation, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	e.srv.LoseNextOperations("SetNodePoolSize", 1)
	op, err := e.client.SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p0", NodeCount: 3})
	must("SetNodePoolSize", op, err)
	op, err = e.client.SetNodePoolAutoscaling(ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: clusterN + "/nodePools/p1",
		Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 2, MaxNodeCount: 4}})
	must("SetNodePoolAutoscaling", op, err)
	op, err = e.client.UpdateNodePool(ctx, &containerpb.UpdateNodePoolRequest{Name: clusterN + "/nodePools/p2",
		Locations: []string{zoneA, zoneB}, Labels: &containerpb.NodeLabels{Labels: map[string]string{"team": "a"}},
		Taints: &containerpb.NodeTaints{Taints: []*containerpb.NodeTaint{{Key: "k", Value: "v", Effect: containerpb.NodeTaint_NO_SCHEDULE}}}})
	must("UpdateNodePool", op, err)
	e.srv.FailNextOperation("DeleteNodePool", codes.Internal, "boom")
	op, err = e.client.DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p3"})
	must("DeleteNodePool", op, err)
	e.srv.Stockout(zoneB, 1)
	op, err = e.client.CreateNodePool(ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p4", "e2-standard-4", 2, zoneA, zoneB)})
	must("CreateNodePool", op, err)
	op, err = e.client.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c2",
		NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA), pool("gpu", "g2-standard-4", 1, zoneF)}}})
	must("CreateCluster(c2)", op, err)
	op, err = e.client.DeleteCluster(ctx, &containerpb.DeleteClusterRequest{Name: parent + "/clusters/c3"})
	must("DeleteCluster(c3)", op, err)
	op, err = e.client.SetLabels(ctx, &containerpb.SetLabelsRequest{Name: parent + "/clusters/c5", ResourceLabels: map[string]string{"team": "b"}})
	must("SetLabels(c5)", op, err)
	if _, err := e.srv.UpgradeMaster(parent+"/clusters/c4", DefaultVersions[containerpb.ReleaseChannel_RAPID]); err != nil {
		t.Fatalf("UpgradeMaster: %v", err)
	}
	e.clock.Step(opTime / 2)
}

// observe is what a client can see of a server: every cluster and every
// operation; but not the node pools' etags, random when an update ends.
func observe(t *testing.T, e *env) []proto.Message {
	t.Helper()
	cs, err := e.client.ListClusters(e.ctx, &containerpb.ListClustersRequest{Parent: "projects/proj/locations/-"})
	if err != nil {
		t.Fatalf("ListClusters: %v", err)
	}
	for _, c := range cs.Clusters {
		for _, np := range c.NodePools {
			np.Etag = ""
		}
	}
	ops, err := e.client.ListOperations(e.ctx, &containerpb.ListOperationsRequest{Parent: "projects/proj/locations/-"})
	if err != nil {
		t.Fatalf("ListOperations: %v", err)
	}
	return []proto.Message{cs, ops}
}

func sameObservations(t *testing.T, when string, want, got []proto.Message) {
	t.Helper()
	for i := range want {
		if !proto.Equal(want[i], got[i]) {
			t.Errorf("%s: the restored server shows\n%s\nwant, as the original shows,\n%s", when, prototext.Format(got[i]), prototext.Format(want[i]))
		}
	}
}

// TestSnapshotRestore restores a server in the middle of an operation of
// every kind and checks that it goes on exactly as the original does.
func TestSnapshotRestore(t *testing.T) {
	e := newEnv(t)
	busyEnv(t, e)
	data, err := e.srv.Snapshot(nil)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	srv2, err := NewServer(WithClock(e.clock), WithOperationTime(opTime))
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv2.Close() })
	if err := srv2.Restore(data); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	e2 := &env{srv: srv2, client: newEnvClient(t, srv2), clock: e.clock, ctx: e.ctx}
	again, err := srv2.Snapshot(nil)
	if err != nil {
		t.Fatalf("Snapshot of the restored server: %v", err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("Snapshot after Restore differs from the snapshot restored:\n%s\nwant\n%s", again, data)
	}
	sameObservations(t, "after Restore", observe(t, e), observe(t, e2))

	// Every operation ends, on both, with its effect.
	e.clock.Step(opTime)
	want := observe(t, e)
	sameObservations(t, "once every operation ended", want, observe(t, e2))
	if len(want[1].(*containerpb.ListOperationsResponse).Operations) == 0 {
		t.Fatal("no operations listed")
	}
	for _, op := range want[1].(*containerpb.ListOperationsResponse).Operations {
		if op.Status != containerpb.Operation_DONE {
			t.Errorf("operation %s %v = %v, want DONE", op.Name, op.OperationType, op.Status)
		}
	}
	checks := []struct {
		name string
		want func(*env) bool
	}{
		{"p0 has 3 nodes", func(e *env) bool {
			n, err := e.srv.NodeCounts(clusterN + "/nodePools/p0")
			return err == nil && n[zoneA] == 3
		}},
		{"p1 has autoscaling and still 1 node per zone", func(e *env) bool {
			np, err := e.srv.NodePool(clusterN + "/nodePools/p1")
			n, _ := e.srv.NodeCounts(clusterN + "/nodePools/p1")
			return err == nil && np.Autoscaling.GetEnabled() && n[zoneA] == 1 && n[zoneB] == 1
		}},
		{"p2 has its labels, taint and zones", func(e *env) bool {
			np, err := e.srv.NodePool(clusterN + "/nodePools/p2")
			return err == nil && np.Config.Labels["team"] == "a" && len(np.Config.Taints) == 1 && len(np.Locations) == 2
		}},
		{"p3's failed delete left it RUNNING", func(e *env) bool {
			np, err := e.srv.NodePool(clusterN + "/nodePools/p3")
			return err == nil && np.Status == containerpb.NodePool_RUNNING
		}},
		{"p4 is RUNNING_WITH_ERROR after the stockout", func(e *env) bool {
			np, err := e.srv.NodePool(clusterN + "/nodePools/p4")
			return err == nil && np.Status == containerpb.NodePool_RUNNING_WITH_ERROR
		}},
		{"c2 is ERROR", func(e *env) bool {
			c, err := e.srv.Cluster(parent + "/clusters/c2")
			return err == nil && c.Status == containerpb.Cluster_ERROR
		}},
		{"c5 has its labels", func(e *env) bool {
			c, err := e.srv.Cluster(parent + "/clusters/c5")
			return err == nil && c.ResourceLabels["team"] == "b"
		}},
		{"p0's size is its initialNodeCount", func(e *env) bool {
			np, err := e.srv.NodePool(clusterN + "/nodePools/p0")
			return err == nil && np.InitialNodeCount == 3
		}},
		{"c3 is gone", func(e *env) bool { _, err := e.srv.Cluster(parent + "/clusters/c3"); return err != nil }},
		{"c4 is upgraded", func(e *env) bool {
			c, err := e.srv.Cluster(parent + "/clusters/c4")
			return err == nil && c.CurrentMasterVersion == DefaultVersions[containerpb.ReleaseChannel_RAPID]
		}},
	}
	for _, c := range checks {
		if !c.want(e) || !c.want(e2) {
			t.Errorf("%s: original %v, restored %v; want both", c.name, c.want(e), c.want(e2))
		}
	}

	// The restored server takes new work.
	for _, x := range []*env{e, e2} {
		op, err := x.client.DeleteNodePool(x.ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p0"})
		if err != nil {
			t.Fatalf("DeleteNodePool after the operations: %v", err)
		}
		x.wait(t, op)
		if _, err := x.srv.NodePool(clusterN + "/nodePools/p0"); err == nil {
			t.Errorf("p0 still there after its delete")
		}
	}
}

// TestRestoreLate restores a snapshot long after it was taken: the
// operations that were running complete at the first call, in order.
func TestRestoreLate(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	op, err := e.client.DeleteNodePool(e.ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p0"})
	if err != nil {
		t.Fatalf("DeleteNodePool: %v", err)
	}
	data, err := e.srv.Snapshot(nil)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	e.clock.Step(time.Hour)
	srv2, err := NewServer(WithClock(e.clock), WithOperationTime(opTime))
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv2.Close() })
	if err := srv2.Restore(data); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	client := newEnvClient(t, srv2)
	got, err := client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.Name})
	if err != nil || got.Status != containerpb.Operation_DONE {
		t.Fatalf("GetOperation after a late restore = %v, %v; want DONE", got.GetStatus(), err)
	}
	if _, err := srv2.NodePool(clusterN + "/nodePools/p0"); err == nil {
		t.Errorf("p0 still there after its delete ended")
	}
	// Its name is free again.
	if _, err := client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p0", "e2-standard-4", 1, zoneA)}); err != nil {
		t.Errorf("CreateNodePool(p0) after the restored delete: %v", err)
	}
}

// TestRestoreRefusesInvalid leaves the server as it was when the data is
// not a snapshot it can restore.
func TestRestoreRefusesInvalid(t *testing.T) {
	e := newEnv(t)
	busyEnv(t, e)
	data, err := e.srv.Snapshot(nil)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	var st savedState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(*savedState)) []byte {
		var c savedState
		_ = json.Unmarshal(data, &c)
		f(&c)
		b, _ := json.Marshal(c)
		return b
	}
	for name, bad := range map[string][]byte{
		"not JSON":      []byte("{"),
		"empty":         nil,
		"other version": mutate(func(s *savedState) { s.Version = 2 }),
		"running operation without its cluster": mutate(func(s *savedState) {
			s.Clusters = s.Clusters[1:] // c1, whose operations run
		}),
		"unknown pool status": mutate(func(s *savedState) {
			for i := range s.Operations {
				if e := s.Operations[i].Effect; e != nil && len(e.Before) > 0 {
					e.Before[0].Status = "MELTING"
				}
			}
		}),
		"cluster twice": mutate(func(s *savedState) { s.Clusters = append(s.Clusters, s.Clusters[0]) }),
	} {
		before := observe(t, e)
		if err := e.srv.Restore(bad); err == nil {
			t.Errorf("Restore(%s) = nil, want an error", name)
		}
		sameObservations(t, "after Restore("+name+")", before, observe(t, e))
	}
}

// TestSnapshotHoldsCalls checks that no call gets in while Snapshot's
// during runs.
func TestSnapshotHoldsCalls(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	returned := make(chan error, 1)
	_, err := e.srv.Snapshot(func() {
		go func() {
			_, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
			returned <- err
		}()
		time.Sleep(50 * time.Millisecond)
		select {
		case <-returned:
			t.Errorf("GetCluster returned while Snapshot held the server")
		default:
		}
	})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := <-returned; err != nil {
		t.Errorf("GetCluster after Snapshot: %v", err)
	}
}
