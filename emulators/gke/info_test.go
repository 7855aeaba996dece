package gke

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func TestGetJSONWebKeys(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	keys := func(name string) *containerpb.Jwk {
		t.Helper()
		resp, err := e.client.GetJSONWebKeys(e.ctx, &containerpb.GetJSONWebKeysRequest{Parent: name})
		if err != nil {
			t.Fatalf("GetJSONWebKeys(%s): %v", name, err)
		}
		if len(resp.Keys) != 1 {
			t.Fatalf("GetJSONWebKeys(%s) = %d keys, want 1", name, len(resp.Keys))
		}
		return resp.Keys[0]
	}
	k := keys(clusterN)
	if k.Kty != "RSA" || k.Alg != "RS256" || k.Use != "sig" || k.E != "AQAB" {
		t.Errorf("key = %v, want an RS256 signing key with e AQAB", k)
	}
	// The kid is the one Kubernetes gives the tokens the key signs.
	n, err := base64.RawURLEncoding.DecodeString(k.N)
	if err != nil {
		t.Fatalf("n: %v", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&rsa.PublicKey{N: new(big.Int).SetBytes(n), E: 65537})
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(der); k.Kid != base64.RawURLEncoding.EncodeToString(sum[:]) {
		t.Errorf("kid = %q, want the key's SHA-256, base64url", k.Kid)
	}
	if again := keys(clusterN); !proto.Equal(again, k) {
		t.Errorf("second GetJSONWebKeys = %v, want the same key %v", again, k)
	}
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c2", InitialNodeCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, op)
	if other := keys(parent + "/clusters/c2"); other.N == k.N {
		t.Errorf("two clusters have one signing key")
	}
	_, err = e.client.GetJSONWebKeys(e.ctx, &containerpb.GetJSONWebKeysRequest{Parent: missingClusterN})
	wantStatus(t, "GetJSONWebKeys of a missing cluster", err, codes.NotFound, "Not found: projects/proj/locations/us-central1/clusters/nope.")
}

// TestFileSigningKey: the key of a cluster with a Kubernetes API is the
// file its API server signs with: made when missing, read when there.
func TestFileSigningKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster", "sa.key")
	a, err := fileSigningKey(path)
	if err != nil {
		t.Fatalf("fileSigningKey (new): %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no key file made: %v", err)
	}
	b, err := fileSigningKey(path)
	if err != nil {
		t.Fatalf("fileSigningKey (existing): %v", err)
	}
	if !a.Equal(b) {
		t.Errorf("the key read back differs from the one made")
	}
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fileSigningKey(path); err == nil {
		t.Errorf("fileSigningKey of a file that is no key = nil error, want one")
	}
}

func TestListUsableSubnetworks(t *testing.T) {
	e := newEnv(t)
	// The client library's iterator, as a program lists them.
	var all []*containerpb.UsableSubnetwork
	it := e.client.ListUsableSubnetworks(e.ctx, &containerpb.ListUsableSubnetworksRequest{Parent: "projects/proj"})
	for {
		s, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("ListUsableSubnetworks: %v", err)
		}
		all = append(all, s)
	}
	if len(all) != len(autoSubnets) {
		t.Fatalf("ListUsableSubnetworks = %d subnetworks, want %d", len(all), len(autoSubnets))
	}
	want := &containerpb.UsableSubnetwork{
		Subnetwork:  "projects/proj/regions/us-central1/subnetworks/default",
		Network:     "projects/proj/global/networks/default",
		IpCidrRange: "10.128.0.0/20",
	}
	if !slices.ContainsFunc(all, func(s *containerpb.UsableSubnetwork) bool { return proto.Equal(s, want) }) {
		t.Errorf("ListUsableSubnetworks lacks %v", want)
	}

	// Pages, through the service's own gRPC stub.
	conn, err := grpc.NewClient(e.srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stub := containerpb.NewClusterManagerClient(conn)
	list := func(req *containerpb.ListUsableSubnetworksRequest) *containerpb.ListUsableSubnetworksResponse {
		t.Helper()
		resp, err := stub.ListUsableSubnetworks(e.ctx, req)
		if err != nil {
			t.Fatalf("ListUsableSubnetworks(%v): %v", req, err)
		}
		return resp
	}
	var paged []*containerpb.UsableSubnetwork
	req := &containerpb.ListUsableSubnetworksRequest{Parent: "projects/proj", PageSize: 5}
	for pages := 1; ; pages++ {
		resp := list(req)
		if len(resp.Subnetworks) > 5 {
			t.Errorf("page %d has %d subnetworks, want at most 5", pages, len(resp.Subnetworks))
		}
		paged = append(paged, resp.Subnetworks...)
		if resp.NextPageToken == "" {
			break
		}
		if pages > len(autoSubnets) {
			t.Fatalf("pages never end")
		}
		req.PageToken = resp.NextPageToken
	}
	if len(paged) != len(all) {
		t.Errorf("paged = %d subnetworks, want %d", len(paged), len(all))
	}
	for i := range paged {
		if !proto.Equal(paged[i], all[i]) {
			t.Errorf("page entry %d = %v, want %v", i, paged[i], all[i])
		}
	}

	if resp := list(&containerpb.ListUsableSubnetworksRequest{Parent: "projects/proj", Filter: "networkProjectId=proj"}); len(resp.Subnetworks) != len(autoSubnets) {
		t.Errorf("filtered on the parent project = %d subnetworks, want %d", len(resp.Subnetworks), len(autoSubnets))
	}
	if resp := list(&containerpb.ListUsableSubnetworksRequest{Parent: "projects/proj", Filter: "networkProjectId=host"}); len(resp.Subnetworks) != 0 {
		t.Errorf("filtered on another project = %d subnetworks, want none", len(resp.Subnetworks))
	}
	for _, bad := range []*containerpb.ListUsableSubnetworksRequest{
		{Parent: parent},
		{Parent: "projects/proj", PageSize: 501},
		{Parent: "projects/proj", PageToken: "x"},
	} {
		_, err := stub.ListUsableSubnetworks(e.ctx, bad)
		wantStatus(t, "ListUsableSubnetworks "+bad.String(), err, codes.InvalidArgument, "")
	}
}

func TestCheckAutopilotCompatibility(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	resp, err := e.client.CheckAutopilotCompatibility(e.ctx, &containerpb.CheckAutopilotCompatibilityRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("CheckAutopilotCompatibility: %v", err)
	}
	if len(resp.Issues) != 0 || resp.Summary == "" {
		t.Errorf("CheckAutopilotCompatibility = %v, want no issues and a summary", resp)
	}
	_, err = e.client.CheckAutopilotCompatibility(e.ctx, &containerpb.CheckAutopilotCompatibilityRequest{Name: missingClusterN})
	wantStatus(t, "CheckAutopilotCompatibility of a missing cluster", err, codes.NotFound, "Not found: projects/proj/locations/us-central1/clusters/nope.")
}

// validRequests holds, for every RPC of ClusterManager, a request GKE
// would accept on c1 (made by createCluster, with pool p0).
func validRequests() map[string]proto.Message {
	p0 := clusterN + "/nodePools/p0"
	return map[string]proto.Message{
		"ListClusters":                &containerpb.ListClustersRequest{Parent: parent},
		"GetCluster":                  &containerpb.GetClusterRequest{Name: clusterN},
		"CreateCluster":               &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c2", InitialNodeCount: 1}},
		"UpdateCluster":               &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredLoggingService: "none"}},
		"UpdateNodePool":              &containerpb.UpdateNodePoolRequest{Name: p0, Labels: &containerpb.NodeLabels{Labels: map[string]string{"a": "b"}}},
		"SetNodePoolAutoscaling":      &containerpb.SetNodePoolAutoscalingRequest{Name: p0, Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MaxNodeCount: 3}},
		"SetLoggingService":           &containerpb.SetLoggingServiceRequest{Name: clusterN, LoggingService: "none"},
		"SetMonitoringService":        &containerpb.SetMonitoringServiceRequest{Name: clusterN, MonitoringService: "none"},
		"SetAddonsConfig":             &containerpb.SetAddonsConfigRequest{Name: clusterN, AddonsConfig: &containerpb.AddonsConfig{HttpLoadBalancing: &containerpb.HttpLoadBalancing{Disabled: true}}},
		"SetLocations":                &containerpb.SetLocationsRequest{Name: clusterN, Locations: []string{zoneA, zoneB}},
		"UpdateMaster":                &containerpb.UpdateMasterRequest{Name: clusterN, MasterVersion: "latest"},
		"SetMasterAuth":               &containerpb.SetMasterAuthRequest{Name: clusterN, Action: containerpb.SetMasterAuthRequest_SET_USERNAME, Update: &containerpb.MasterAuth{}},
		"DeleteCluster":               &containerpb.DeleteClusterRequest{Name: clusterN},
		"ListOperations":              &containerpb.ListOperationsRequest{Parent: parent},
		"GetOperation":                &containerpb.GetOperationRequest{Name: parent + "/operations/nope"},
		"CancelOperation":             &containerpb.CancelOperationRequest{Name: parent + "/operations/nope"},
		"GetServerConfig":             &containerpb.GetServerConfigRequest{Name: parent},
		"GetJSONWebKeys":              &containerpb.GetJSONWebKeysRequest{Parent: clusterN},
		"ListNodePools":               &containerpb.ListNodePoolsRequest{Parent: clusterN},
		"GetNodePool":                 &containerpb.GetNodePoolRequest{Name: p0},
		"CreateNodePool":              &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-medium", 1)},
		"DeleteNodePool":              &containerpb.DeleteNodePoolRequest{Name: p0},
		"CompleteNodePoolUpgrade":     &containerpb.CompleteNodePoolUpgradeRequest{Name: p0},
		"RollbackNodePoolUpgrade":     &containerpb.RollbackNodePoolUpgradeRequest{Name: p0},
		"SetNodePoolManagement":       &containerpb.SetNodePoolManagementRequest{Name: p0, Management: &containerpb.NodeManagement{AutoRepair: true, AutoUpgrade: true}},
		"SetLabels":                   &containerpb.SetLabelsRequest{Name: clusterN, ResourceLabels: map[string]string{"a": "b"}},
		"SetLegacyAbac":               &containerpb.SetLegacyAbacRequest{Name: clusterN, Enabled: true},
		"StartIPRotation":             &containerpb.StartIPRotationRequest{Name: clusterN},
		"CompleteIPRotation":          &containerpb.CompleteIPRotationRequest{Name: clusterN},
		"SetNodePoolSize":             &containerpb.SetNodePoolSizeRequest{Name: p0, NodeCount: 2},
		"SetNetworkPolicy":            &containerpb.SetNetworkPolicyRequest{Name: clusterN, NetworkPolicy: &containerpb.NetworkPolicy{Enabled: true}},
		"SetMaintenancePolicy":        &containerpb.SetMaintenancePolicyRequest{Name: clusterN, MaintenancePolicy: &containerpb.MaintenancePolicy{}},
		"ListUsableSubnetworks":       &containerpb.ListUsableSubnetworksRequest{Parent: "projects/proj"},
		"CheckAutopilotCompatibility": &containerpb.CheckAutopilotCompatibilityRequest{Name: clusterN},
		"FetchClusterUpgradeInfo":     &containerpb.FetchClusterUpgradeInfoRequest{Name: clusterN},
		"FetchNodePoolUpgradeInfo":    &containerpb.FetchNodePoolUpgradeInfoRequest{Name: p0},
		"CompleteControlPlaneUpgrade": &containerpb.CompleteControlPlaneUpgradeRequest{Name: clusterN},
	}
}

// TestEveryRPCServed: no RPC of ClusterManager, as the client library
// describes the service, answers UNIMPLEMENTED (or INVALID_ARGUMENT) to a
// valid request. An RPC added to the library fails this test until the
// simulator serves it and validRequests holds a request for it.
func TestEveryRPCServed(t *testing.T) {
	svc := containerpb.File_google_container_v1_cluster_service_proto.Services().ByName("ClusterManager")
	if svc == nil {
		t.Fatal("no ClusterManager service in the client library's descriptor")
	}
	reqs := validRequests()
	methods := svc.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		t.Run(string(m.Name()), func(t *testing.T) {
			req := reqs[string(m.Name())]
			if req == nil {
				t.Fatalf("no valid request for %s: serve it and add one to validRequests", m.FullName())
			}
			if got := req.ProtoReflect().Descriptor().FullName(); got != m.Input().FullName() {
				t.Fatalf("request for %s is a %s, want a %s", m.Name(), got, m.Input().FullName())
			}
			e := newEnv(t)
			e.createCluster(t)
			code := invoke(t, e, m, req)
			if code == codes.Unimplemented || code == codes.InvalidArgument {
				t.Errorf("%s(%v) = %v", m.Name(), req, code)
			}
		})
	}
}

// invoke calls method m over gRPC as any client of the service would, by
// its full name, and returns the answer's code.
func invoke(t *testing.T, e *env, m protoreflect.MethodDescriptor, req proto.Message) codes.Code {
	t.Helper()
	conn, err := grpc.NewClient(e.srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp := dynamicpb.NewMessage(m.Output())
	err = conn.Invoke(context.Background(), "/"+string(m.Parent().FullName())+"/"+string(m.Name()), req, resp)
	return code(err)
}
