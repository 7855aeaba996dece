package gke

import (
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestResourceManagerTags holds the refusal of a tag that does not exist
// against GKE's recorded words, and the pools whose tags exist are
// created and updated with them.
func TestResourceManagerTags(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	tagged := func(name, key, value string) *containerpb.NodePool {
		p := pool(name, "e2-medium", 1, zoneA)
		p.Config.ResourceManagerTags = &containerpb.ResourceManagerTags{Tags: map[string]string{key: value}}
		return p
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != want {
			t.Errorf("%s = %v; want PermissionDenied %q", what, err, want)
		}
	}
	agent := "service-" + ProjectNumber(project) + "@container-engine-robot.iam.gserviceaccount.com"
	_, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: tagged("p1", "tagKeys/123", "tagValues/456")})
	refused("CreateNodePool with a missing TagKey", err, "Permission denied: for "+agent+` on TagKey "tagKeys/123" (or it may not exist).`)
	if _, err := e.client.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: clusterN + "/nodePools/p1"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetNodePool of the refused pool = %v; want NotFound", err)
	}

	e.srv.AddTags(map[string][]string{"tagKeys/123": {"tagValues/456"}})
	_, err = e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: tagged("p1", "tagKeys/123", "tagValues/789")})
	refused("CreateNodePool with a missing TagValue", err, "Permission denied: for "+agent+` on TagValue "tagValues/789" (or it may not exist).`)
	op, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: tagged("p1", "tagKeys/123", "tagValues/456")})
	if err != nil {
		t.Fatalf("CreateNodePool with existing tags: %v", err)
	}
	e.wait(t, op)
	np, _ := e.srv.NodePool(clusterN + "/nodePools/p1")
	if got := np.GetConfig().GetResourceManagerTags().GetTags()["tagKeys/123"]; got != "tagValues/456" {
		t.Errorf("pool's tag = %q, want tagValues/456", got)
	}

	update := &containerpb.UpdateNodePoolRequest{Name: clusterN + "/nodePools/p1", ResourceManagerTags: &containerpb.ResourceManagerTags{Tags: map[string]string{"tagKeys/999": "tagValues/1"}}}
	_, err = e.client.UpdateNodePool(e.ctx, update)
	refused("UpdateNodePool with a missing TagKey", err, "Permission denied: for "+agent+` on TagKey "tagKeys/999" (or it may not exist).`)
	e.srv.AddTags(map[string][]string{"tagKeys/123": {"tagValues/789"}})
	update.ResourceManagerTags.Tags = map[string]string{"tagKeys/123": "tagValues/789"}
	op, err = e.client.UpdateNodePool(e.ctx, update)
	if err != nil {
		t.Fatalf("UpdateNodePool with existing tags: %v", err)
	}
	e.wait(t, op)
	np, _ = e.srv.NodePool(clusterN + "/nodePools/p1")
	if got := np.GetConfig().GetResourceManagerTags().GetTags()["tagKeys/123"]; got != "tagValues/789" {
		t.Errorf("pool's tag after the update = %q, want tagValues/789", got)
	}
}
