package gke

import (
	"context"
	"testing"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

const (
	platformSA = "reconciler@bc-dev.iam.gserviceaccount.com"
	tenantSA   = "bc-provisioner@acme-prod.iam.gserviceaccount.com"
)

// bearer presents an access token on every call, over the simulator's
// insecure connection.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// iamEnv is a simulator with IAM on: the platform's identity is allowed
// in proj, the tenant's provisioner in acme-prod; tokens "platform" and
// "tenant" stand for them.
func iamEnv(t *testing.T) *env {
	t.Helper()
	tokens := map[string]string{"platform": platformSA, "tenant": tenantSA}
	return newEnv(t, WithIAM(IAM{
		Projects: map[string][]string{project: {platformSA}, "acme-prod": {tenantSA}},
		Identify: func(tok string) (string, bool) { who, ok := tokens[tok]; return who, ok },
	}))
}

// clientAs is the official client presenting tok ("": no credential).
func clientAs(t *testing.T, srv *Server, tok string) *container.ClusterManagerClient {
	t.Helper()
	opts := []option.ClientOption{
		option.WithEndpoint(srv.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
	if tok != "" {
		opts = append(opts, option.WithGRPCDialOption(grpc.WithPerRPCCredentials(bearer(tok))))
	}
	c, err := container.NewClusterManagerClient(context.Background(), opts...)
	if err != nil {
		t.Fatalf("NewClusterManagerClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// With IAM on, a call needs a token the simulator can identify, and its
// caller must be allowed in the project it calls into; the refusal names
// the permission the method needs and what it is checked on, as GKE's.
func TestIAMAuthorizesPerProject(t *testing.T) {
	e := iamEnv(t)
	platform, tenant := clientAs(t, e.srv, "platform"), clientAs(t, e.srv, "tenant")
	create := func(parent string) *containerpb.CreateClusterRequest {
		return &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA)}}}
	}

	for _, tc := range []struct {
		name string
		tok  string
		want codes.Code
	}{
		{"no credential", "", codes.Unauthenticated},
		{"a token nobody issued", "forged", codes.Unauthenticated},
	} {
		if _, err := clientAs(t, e.srv, tc.tok).ListClusters(e.ctx, &containerpb.ListClustersRequest{Parent: parent}); status.Code(err) != tc.want {
			t.Errorf("%s: ListClusters = %v, want %v", tc.name, err, tc.want)
		}
	}

	// Each identity in its own project.
	op, err := platform.CreateCluster(e.ctx, create(parent))
	if err != nil {
		t.Fatalf("platform CreateCluster in %s: %v", project, err)
	}
	if _, err := tenant.CreateCluster(e.ctx, create("projects/acme-prod/locations/us-central1")); err != nil {
		t.Fatalf("tenant CreateCluster in acme-prod: %v", err)
	}

	// And each refused in the other's.
	const acme = "projects/acme-prod/locations/us-central1/clusters/c1"
	for _, tc := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"CreateCluster", func() error {
			_, err := platform.CreateCluster(e.ctx, create("projects/acme-prod/locations/us-central1"))
			return err
		}, `Required "container.clusters.create" permission(s) for "projects/acme-prod".`},
		{"GetCluster", func() error {
			_, err := platform.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: acme})
			return err
		}, `Required "container.clusters.get" permission(s) for "` + acme + `".`},
		{"CreateNodePool", func() error {
			_, err := platform.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: acme, NodePool: pool("p1", "e2-standard-4", 1, zoneA)})
			return err
		}, `Required "container.clusters.update" permission(s) for "` + acme + `".`},
		{"SetNodePoolSize", func() error {
			_, err := platform.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: acme + "/nodePools/p0", NodeCount: 2})
			return err
		}, `Required "container.clusters.update" permission(s) for "` + acme + `".`},
		{"ListOperations", func() error {
			_, err := platform.ListOperations(e.ctx, &containerpb.ListOperationsRequest{Parent: "projects/acme-prod/locations/-"})
			return err
		}, `Required "container.operations.list" permission(s) for "projects/acme-prod".`},
		{"GetOperation", func() error {
			_, err := tenant.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.GetName()})
			return err
		}, `Required "container.operations.get" permission(s) for "` + parent + "/operations/" + op.GetName() + `".`},
		{"GetCluster, legacy fields", func() error {
			_, err := tenant.GetCluster(e.ctx, &containerpb.GetClusterRequest{ProjectId: project, Zone: region, ClusterId: "c1"})
			return err
		}, `Required "container.clusters.get" permission(s) for "projects/proj/zones/us-central1/clusters/c1".`},
	} {
		err := tc.call()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s into the other's project = %v, want PermissionDenied", tc.name, err)
			continue
		}
		if got := status.Convert(err).Message(); got != tc.msg {
			t.Errorf("%s refusal = %q, want %q", tc.name, got, tc.msg)
		}
	}
	// Refused calls cost the project nothing of its request quota.
	for _, u := range e.srv.Usage("acme-prod") {
		if u.Calls != 1 {
			t.Errorf("acme-prod served %d calls in %v, want 1 (the tenant's create)", u.Calls, u.Start)
		}
	}

	// A change of the project's policy applies to the next call.
	if err := e.srv.SetProjectIAM("acme-prod", tenantSA, platformSA); err != nil {
		t.Fatal(err)
	}
	if _, err := platform.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: acme}); err != nil {
		t.Errorf("GetCluster once allowed = %v", err)
	}
	if err := e.srv.SetProjectIAM("acme-prod"); err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: acme}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("GetCluster once nobody is allowed = %v, want PermissionDenied", err)
	}
}

// Without WithIAM nothing is checked, and the policy cannot be set.
func TestIAMOffChecksNothing(t *testing.T) {
	e := newEnv(t)
	if _, err := clientAs(t, e.srv, "").ListClusters(e.ctx, &containerpb.ListClustersRequest{Parent: parent}); err != nil {
		t.Errorf("ListClusters without a credential = %v", err)
	}
	if err := e.srv.SetProjectIAM(project, platformSA); err == nil {
		t.Errorf("SetProjectIAM without WithIAM = nil error")
	}
}
