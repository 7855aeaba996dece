package gke

import (
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
)

func TestClusterLifecycle(t *testing.T) {
	e := newEnv(t)
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name:      "c1",
		NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 2, zoneA, zoneB)},
	}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	if op.OperationType != containerpb.Operation_CREATE_CLUSTER || op.Status != containerpb.Operation_RUNNING {
		t.Errorf("CreateCluster op = %v %v, want CREATE_CLUSTER RUNNING", op.OperationType, op.Status)
	}
	if want := apiBase + "projects/" + ProjectNumber(project) + "/locations/us-central1/clusters/c1"; op.TargetLink != want {
		t.Errorf("op.TargetLink = %q, want %q", op.TargetLink, want)
	}
	c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if c.Status != containerpb.Cluster_PROVISIONING || c.NodePools[0].Status != containerpb.NodePool_PROVISIONING {
		t.Errorf("GetCluster during create: status %v, pool %v; want PROVISIONING, PROVISIONING", c.Status, c.NodePools[0].Status)
	}
	done := e.wait(t, op)
	if done.EndTime == "" || done.Error != nil {
		t.Errorf("done op = endTime %q error %v, want an endTime and no error", done.EndTime, done.Error)
	}
	c, err = e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if c.Status != containerpb.Cluster_RUNNING || c.NodePools[0].Status != containerpb.NodePool_RUNNING {
		t.Errorf("GetCluster after create: status %v, pool %v; want RUNNING, RUNNING", c.Status, c.NodePools[0].Status)
	}
	if c.CurrentNodeCount != 4 {
		t.Errorf("CurrentNodeCount = %d, want 4", c.CurrentNodeCount)
	}
	if c.Id == "" || c.Endpoint == "" || c.CreateTime == "" || c.CurrentMasterVersion != DefaultVersions[containerpb.ReleaseChannel_REGULAR] {
		t.Errorf("cluster = id %q endpoint %q createTime %q version %q; want all set, REGULAR's version", c.Id, c.Endpoint, c.CreateTime, c.CurrentMasterVersion)
	}

	del, err := e.client.DeleteCluster(e.ctx, &containerpb.DeleteClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("DeleteCluster: %v", err)
	}
	c, err = e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil || c.Status != containerpb.Cluster_STOPPING {
		t.Fatalf("GetCluster during delete = %v, %v; want STOPPING", c.GetStatus(), err)
	}
	e.wait(t, del)
	if _, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN}); code(err) != codes.NotFound {
		t.Errorf("GetCluster after delete: %v, want NotFound", err)
	}
}
