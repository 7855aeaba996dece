package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	iamemu "github.com/better-compute/kubernetes/emulators/iamcredentials"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// The seed's tenant-owned account: acc-acme on the tenant's project
// acme-prod, acted in only as its provisioner.
const (
	tenantProject = "acme-prod"
	provisioner   = "bc-provisioner@acme-prod.iam.gserviceaccount.com"
	tenantNodes   = "bc-nodes@acme-prod.iam.gserviceaccount.com"
	reconciler    = "reconciler@bc-dev.iam.gserviceaccount.com"
)

// TestTenantProject runs a cluster of pool-acme, whose account is the
// tenant's own project: it is made there through impersonation, with the
// tenant's nodes' account. When the tenant revokes the reconciler's grant
// on its provisioner, the cluster goes error with what to grant, announced
// once while the chain keeps looking; granted again, it is ready with
// nothing else done.
func TestTenantProject(t *testing.T) {
	cfg := fastConfig()
	// Short tokens, so that the revoke is felt within seconds: a token
	// minted before it stays valid until it expires, as a real one does.
	cfg.ImpersonationTokenLifetime = 4 * time.Second
	e := startEnv(t, cfg)
	start := time.Now()

	body := map[string]any{"tenantId": "acme", "poolId": "pool-acme", "name": "tenant-prod", "mode": "standard", "region": "us-central1",
		"nodePools": []map[string]any{poolSpec("default", 1)}}
	var cl resource.Cluster
	if err := e.api.call("kubernetesClusters/create", body, &cl); err != nil {
		t.Fatalf("create cluster in pool-acme: %v", err)
	}
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	t.Logf("ready through impersonation after %v", time.Since(start).Round(time.Millisecond))
	name := fmt.Sprintf("projects/%s/locations/us-central1/clusters/%s", tenantProject, cl.ProviderName)
	pc, err := e.GKE.Cluster(name)
	if err != nil {
		t.Fatalf("the cluster is not in the tenant's project: %v", err)
	}
	if sa := pc.GetNodePools()[0].GetConfig().GetServiceAccount(); sa != tenantNodes {
		t.Errorf("its nodes run as %q, want the tenant's %q", sa, tenantNodes)
	}

	// The tenant revokes the grant.
	e.IAM.Revoke(provisioner, reconciler)
	revoked := time.Now()
	want := "Better Compute cannot act in project acme-prod: grant roles/iam.serviceAccountTokenCreator on " + provisioner + " to " + reconciler
	wait.For(t, "the cluster in error with what to grant", func() (bool, string) {
		got, err := e.api.getCluster(cl.ID)
		return err == nil && got.State == resource.StateError && got.Message == want, e.api.clusterState(cl.ID)
	})
	t.Logf("error %v after the revoke", time.Since(revoked).Round(time.Millisecond))
	// The chain keeps looking: two more refused runs, and still one
	// announcement.
	refusals := e.IAM.Calls("GenerateAccessToken")
	wait.For(t, "two more runs of the cluster in error", func() (bool, string) {
		n := e.IAM.Calls("GenerateAccessToken")
		return n >= refusals+2, fmt.Sprintf("%d GenerateAccessToken calls since the error", n-refusals)
	})
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterError: 1})
	if n := e.events.count(cl.ID, event.ClusterError, ""); n != 1 {
		t.Errorf("%s events = %d, want 1 (all: %s)", event.ClusterError, n, e.events.summary(cl.ID))
	}
	if got, _ := e.api.getCluster(cl.ID); got.State != resource.StateError || got.Message != want {
		t.Errorf("cluster while the grant is missing = %s %q, want error %q", got.State, got.Message, want)
	}

	// The tenant grants it again: ready, nothing else done.
	e.IAM.Grant(provisioner, reconciler)
	granted := time.Now()
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	t.Logf("ready %v after the grant came back", time.Since(granted).Round(time.Millisecond))
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterUpdated: 1})
	if n := e.events.count(cl.ID, event.ClusterError, ""); n != 1 {
		t.Errorf("%s events after recovering = %d, want 1 (all: %s)", event.ClusterError, n, e.events.summary(cl.ID))
	}
}

// The platform's own identity cannot act in the tenant's project: the
// simulator refuses it, as GKE would, while it is at home in bc-dev.
func TestPlatformIdentityRefusedInTenantProject(t *testing.T) {
	e := sharedStack(t)
	ctx := context.Background()
	own := platformClient(t, e.Stack)
	if _, err := own.ListClusters(ctx, &containerpb.ListClustersRequest{Parent: "projects/bc-dev/locations/-"}); err != nil {
		t.Fatalf("ListClusters in bc-dev as the reconciler = %v", err)
	}
	// The devstack's own client is the reconciler's too.
	for _, c := range []struct {
		name   string
		client *container.ClusterManagerClient
	}{{"from /dev/access-token", own}, {"the devstack's", e.GKEClient}} {
		_, err := c.client.CreateCluster(ctx, &containerpb.CreateClusterRequest{
			Parent:  "projects/acme-prod/locations/us-central1",
			Cluster: &containerpb.Cluster{Name: "direct", NodePools: []*containerpb.NodePool{{Name: "p", InitialNodeCount: 1, Config: &containerpb.NodeConfig{MachineType: "e2-standard-4"}}}},
		})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: CreateCluster in acme-prod as the reconciler = %v, want PermissionDenied", c.name, err)
			continue
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, `"container.clusters.create"`) || !strings.Contains(msg, `"projects/acme-prod"`) {
			t.Errorf("%s: refusal %q does not name the permission and the project", c.name, msg)
		}
		_, err = c.client.ListClusters(ctx, &containerpb.ListClustersRequest{Parent: "projects/acme-prod/locations/-"})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: ListClusters in acme-prod as the reconciler = %v, want PermissionDenied", c.name, err)
		}
	}
	// Without a token, the simulator does not know who calls.
	anon, err := container.NewClusterManagerClient(ctx, option.WithEndpoint(e.GKE.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.ListClusters(ctx, &containerpb.ListClustersRequest{Parent: "projects/bc-dev/locations/-"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListClusters without a token = %v, want Unauthenticated", err)
	}
}

// platformClient is the official container client with the reconciler's
// access token from the devstack's POST /dev/access-token.
func platformClient(t *testing.T, s *devstack.Stack) *container.ClusterManagerClient {
	t.Helper()
	resp, err := http.Post(s.URL+devstack.AccessTokenPath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("POST %s: %v", devstack.AccessTokenPath, err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		t.Fatalf("POST %s = %s, %v", devstack.AccessTokenPath, resp.Status, err)
	}
	if who, ok := s.IAM.Identify(out.AccessToken); !ok || who != reconciler {
		t.Fatalf("the access token stands for %q (%v), want %q", who, ok, reconciler)
	}
	c, err := container.NewClusterManagerClient(context.Background(), option.WithEndpoint(s.GKE.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithPerRPCCredentials(iamemu.Bearer(out.AccessToken))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
