package gke

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"

	"github.com/better-compute/kubernetes/shared/wait"
)

func TestCreateClusterRefusals(t *testing.T) {
	tests := []struct {
		name    string
		parent  string
		cluster *containerpb.Cluster
		want    codes.Code
	}{
		{"legacy initial_node_count", parent, &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}, codes.OK},
		{"autopilot", parent, &containerpb.Cluster{Name: "c1", Autopilot: &containerpb.Autopilot{Enabled: true}}, codes.OK},
		{"zonal", "projects/proj/locations/us-east1-b", &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}, codes.OK},
		{"no cluster", parent, nil, codes.InvalidArgument},
		{"bad name", parent, &containerpb.Cluster{Name: "C1", InitialNodeCount: 1}, codes.InvalidArgument},
		{"unknown location", "projects/proj/locations/mars-north1", &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}, codes.InvalidArgument},
		{"no nodes", parent, &containerpb.Cluster{Name: "c1"}, codes.InvalidArgument},
		{"pools and initial count", parent, &containerpb.Cluster{Name: "c1", InitialNodeCount: 1, NodePools: []*containerpb.NodePool{pool("p0", "e2-medium", 1)}}, codes.InvalidArgument},
		{"autopilot with pools", parent, &containerpb.Cluster{Name: "c1", Autopilot: &containerpb.Autopilot{Enabled: true}, NodePools: []*containerpb.NodePool{pool("p0", "e2-medium", 1)}}, codes.InvalidArgument},
		{"duplicate pool", parent, &containerpb.Cluster{Name: "c1", NodePools: []*containerpb.NodePool{pool("p0", "e2-medium", 1), pool("p0", "e2-medium", 1)}}, codes.InvalidArgument},
		{"bad pool", parent, &containerpb.Cluster{Name: "c1", NodePools: []*containerpb.NodePool{pool("p0", "e2-medium", 1, "europe-west4-a")}}, codes.InvalidArgument},
		{"cluster zone of another region", parent, &containerpb.Cluster{Name: "c1", InitialNodeCount: 1, Locations: []string{"us-east1-b"}}, codes.InvalidArgument},
		{"malformed version", parent, &containerpb.Cluster{Name: "c1", InitialNodeCount: 1, InitialClusterVersion: "1.33.x"}, codes.InvalidArgument},
		{"unsupported version", parent, &containerpb.Cluster{Name: "c1", InitialNodeCount: 1, InitialClusterVersion: "1.29.1-gke.100"}, codes.InvalidArgument},
		{"malformed parent", "projects/proj", &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: tt.parent, Cluster: tt.cluster})
			if code(err) != tt.want {
				t.Fatalf("CreateCluster(%s) = %v, want %v", tt.name, err, tt.want)
			}
			ls, err := e.client.ListClusters(e.ctx, &containerpb.ListClustersRequest{Parent: "projects/proj/locations/-"})
			if err != nil {
				t.Fatalf("ListClusters: %v", err)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.want == codes.OK]; len(ls.Clusters) != want {
				t.Errorf("ListClusters = %d clusters, want %d", len(ls.Clusters), want)
			}
		})
	}
	t.Run("existing name", func(t *testing.T) {
		e := newEnv(t)
		e.createCluster(t)
		_, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}})
		if code(err) != codes.AlreadyExists {
			t.Errorf("CreateCluster(existing) = %v, want AlreadyExists", err)
		}
	})
}

func TestClusterDefaults(t *testing.T) {
	e := newEnv(t)
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{ProjectId: project, Zone: "us-east1-b", Cluster: &containerpb.Cluster{
		Name: "z1", InitialNodeCount: 2, ReleaseChannel: &containerpb.ReleaseChannel{Channel: containerpb.ReleaseChannel_RAPID},
	}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	e.clock.Step(opTime)
	c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{ProjectId: project, Zone: "us-east1-b", ClusterId: "z1"})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if len(c.NodePools) != 1 || c.NodePools[0].Name != "default-pool" || c.NodePools[0].Config.MachineType != defaultMachineType {
		t.Errorf("NodePools = %v, want one default-pool of %s", c.NodePools, defaultMachineType)
	}
	if strings.Join(c.Locations, ",") != "us-east1-b" || c.Location != "us-east1-b" {
		t.Errorf("zonal cluster locations = %v at %q, want [us-east1-b]", c.Locations, c.Location)
	}
	if want := DefaultVersions[containerpb.ReleaseChannel_RAPID]; c.CurrentMasterVersion != want || c.CurrentNodeVersion != want {
		t.Errorf("versions = master %q node %q, want %q", c.CurrentMasterVersion, c.CurrentNodeVersion, want)
	}
	if !strings.HasPrefix(c.Endpoint, "203.0.113.") {
		t.Errorf("Endpoint = %q, want an address of 203.0.113.0/24", c.Endpoint)
	}
	ops, err := e.client.ListOperations(e.ctx, &containerpb.ListOperationsRequest{ProjectId: project, Zone: "us-east1-b"})
	if err != nil || len(ops.Operations) != 1 || ops.Operations[0].Name != op.Name || ops.Operations[0].Status != containerpb.Operation_DONE {
		t.Errorf("ListOperations = %v, %v; want the one DONE create", ops, err)
	}
	got, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{ProjectId: project, Zone: "us-east1-b", OperationId: op.Name})
	if err != nil || got.Name != op.Name {
		t.Errorf("GetOperation(deprecated fields) = %v, %v; want %s", got, err, op.Name)
	}
}

func TestListClusters(t *testing.T) {
	e := newEnv(t)
	for _, loc := range []string{"us-central1", "us-central1-a", "europe-west4"} {
		_, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: "projects/proj/locations/" + loc, Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}})
		if err != nil {
			t.Fatalf("CreateCluster(%s): %v", loc, err)
		}
	}
	if _, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: "projects/other/locations/us-central1", Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}}); err != nil {
		t.Fatalf("CreateCluster(other project): %v", err)
	}
	tests := []struct {
		req  *containerpb.ListClustersRequest
		want int
		code codes.Code
	}{
		{&containerpb.ListClustersRequest{Parent: "projects/proj/locations/-"}, 3, codes.OK},
		{&containerpb.ListClustersRequest{Parent: "projects/proj/locations/us-central1"}, 1, codes.OK},
		{&containerpb.ListClustersRequest{ProjectId: project, Zone: "-"}, 3, codes.OK},
		{&containerpb.ListClustersRequest{ProjectId: "other", Zone: "us-central1"}, 1, codes.OK},
		{&containerpb.ListClustersRequest{Parent: "projects/proj/locations/asia-southeast1"}, 0, codes.OK},
		{&containerpb.ListClustersRequest{Parent: "projects/proj/locations/nowhere"}, 0, codes.InvalidArgument},
		{&containerpb.ListClustersRequest{ProjectId: project}, 0, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.req), func(t *testing.T) {
			resp, err := e.client.ListClusters(e.ctx, tt.req)
			if code(err) != tt.code || len(resp.GetClusters()) != tt.want {
				t.Errorf("ListClusters(%v) = %d clusters, %v; want %d, %v", tt.req, len(resp.GetClusters()), err, tt.want, tt.code)
			}
		})
	}
}

func TestIdentityOnRecreate(t *testing.T) {
	e := newEnv(t)
	first := e.createCluster(t)
	del, err := e.client.DeleteCluster(e.ctx, &containerpb.DeleteClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("DeleteCluster: %v", err)
	}
	if _, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}}); code(err) != codes.AlreadyExists {
		t.Errorf("CreateCluster while the old one stops = %v, want AlreadyExists", err)
	}
	e.wait(t, del)
	second := e.createCluster(t)
	if first.Id == "" || second.Id == first.Id {
		t.Errorf("re-created cluster id = %q, first %q; want a new, non-empty id", second.Id, first.Id)
	}
	if second.CreateTime == first.CreateTime {
		t.Errorf("re-created cluster createTime = %q, want later than %q", second.CreateTime, first.CreateTime)
	}
}

func TestConcurrency(t *testing.T) {
	e := newEnv(t)
	var pools []*containerpb.NodePool
	for i := range 7 {
		pools = append(pools, pool(fmt.Sprintf("p%d", i), "e2-medium", 1, zoneA))
	}
	e.createCluster(t, pools...)
	resize := func(p string) error {
		_, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/" + p, NodeCount: 2})
		return err
	}

	// Five pool operations on five pools run together; a sixth is over quota.
	for i := range 5 {
		if err := resize(fmt.Sprintf("p%d", i)); err != nil {
			t.Fatalf("resize p%d: %v", i, err)
		}
	}
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"sixth operation", func() error { return resize("p5") }, codes.ResourceExhausted},
		{"second operation on a pool", func() error { return resize("p0") }, codes.FailedPrecondition},
		{"delete of a busy pool", func() error {
			_, err := e.client.DeleteNodePool(e.ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p1"})
			return err
		}, codes.FailedPrecondition},
		{"cluster delete", func() error {
			_, err := e.client.DeleteCluster(e.ctx, &containerpb.DeleteClusterRequest{Name: clusterN})
			return err
		}, codes.FailedPrecondition},
		{"master upgrade", func() error {
			_, err := e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredMasterVersion: "latest"}})
			return err
		}, codes.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); code(err) != tt.want {
				t.Errorf("%s = %v, want %v", tt.name, err, tt.want)
			}
		})
	}
	t.Run("message names the running operation", func(t *testing.T) {
		err := resize("p0")
		if !strings.Contains(err.Error(), "Cluster is running incompatible operation operation-") {
			t.Errorf("resize(p0) = %v, want GKE's incompatible-operation message", err)
		}
	})

	// Once they are done, a cluster-level operation blocks every pool.
	e.clock.Step(opTime)
	id, err := e.srv.UpgradeMaster(clusterN, "1.33.5-gke.1200")
	if err != nil {
		t.Fatalf("UpgradeMaster: %v", err)
	}
	if err := resize("p6"); code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), id) {
		t.Errorf("resize during a master upgrade = %v, want FailedPrecondition naming %s", err, id)
	}
	e.clock.Step(opTime)
	if err := resize("p6"); err != nil {
		t.Errorf("resize after the upgrade = %v, want nil", err)
	}
}

func TestReleaseChannelUpgrade(t *testing.T) {
	e := newEnv(t)
	before := e.createCluster(t)
	if before.CurrentMasterVersion != "1.33.4-gke.1000" {
		t.Fatalf("CurrentMasterVersion = %q, want 1.33.4-gke.1000", before.CurrentMasterVersion)
	}
	id, err := e.srv.UpgradeMaster(clusterN, "1.33.5-gke.1200")
	if err != nil {
		t.Fatalf("UpgradeMaster: %v", err)
	}
	c, _ := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if c.Status != containerpb.Cluster_RECONCILING || c.CurrentMasterVersion != before.CurrentMasterVersion {
		t.Errorf("during upgrade = %v %q, want RECONCILING at the old version", c.Status, c.CurrentMasterVersion)
	}
	op, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + id})
	if err != nil || op.OperationType != containerpb.Operation_UPGRADE_MASTER {
		t.Errorf("GetOperation(%s) = %v, %v; want UPGRADE_MASTER", id, op, err)
	}
	e.clock.Step(opTime)
	c, _ = e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if c.Status != containerpb.Cluster_RUNNING || c.CurrentMasterVersion != "1.33.5-gke.1200" || c.CurrentNodeVersion != "1.33.4-gke.1000" {
		t.Errorf("after upgrade = %v master %q node %q, want RUNNING 1.33.5-gke.1200, nodes still 1.33.4-gke.1000", c.Status, c.CurrentMasterVersion, c.CurrentNodeVersion)
	}

	tests := []struct {
		name    string
		version string
		want    codes.Code
	}{
		{"downgrade", "1.33.4-gke.1000", codes.InvalidArgument},
		{"malformed", "one", codes.InvalidArgument},
		{"upgrade", "1.34.1-gke.1100", codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, err := e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredMasterVersion: tt.version}})
			if code(err) != tt.want {
				t.Fatalf("UpdateCluster(desired master version %s) = %v, want %v", tt.version, err, tt.want)
			}
			if err == nil {
				e.wait(t, op)
				if c, _ := e.srv.Cluster(clusterN); c.CurrentMasterVersion != tt.version {
					t.Errorf("CurrentMasterVersion = %q, want %q", c.CurrentMasterVersion, tt.version)
				}
			}
		})
	}
}

// mustPool returns the pool an operation targets.
func (s *Server) mustPool(t *testing.T, op *containerpb.Operation) *containerpb.NodePool {
	t.Helper()
	np, err := s.NodePool(clusterN + "/nodePools/" + path.Base(op.TargetLink))
	if err != nil {
		t.Fatalf("NodePool(%s): %v", op.TargetLink, err)
	}
	return np
}

func TestClusterCreateFailures(t *testing.T) {
	tests := []struct {
		name     string
		location string
		setup    func(e *env)
		pool     *containerpb.NodePool
		wantPool containerpb.NodePool_Status
	}{
		{"injected", region, func(e *env) { e.srv.FailNextOperation("CreateCluster", codes.Internal, "boom") }, pool("p0", "e2-medium", 1, zoneA), containerpb.NodePool_ERROR},
		{"stockout", region, func(e *env) { e.srv.Stockout(zoneA, 1) }, pool("p0", "e2-medium", 1, zoneA), containerpb.NodePool_RUNNING_WITH_ERROR},
		{"machine type missing in zone", "europe-west4", nil, pool("p0", "a2-highgpu-1g", 1, "europe-west4-c"), containerpb.NodePool_ERROR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			p := "projects/proj/locations/" + tt.location
			op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: p, Cluster: &containerpb.Cluster{Name: "c1", NodePools: []*containerpb.NodePool{tt.pool}}})
			if err != nil {
				t.Fatalf("CreateCluster: %v", err)
			}
			e.clock.Step(opTime)
			done, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: p + "/operations/" + op.Name})
			if err != nil || done.Error == nil || done.StatusMessage == "" {
				t.Errorf("GetOperation = %v, %v; want DONE with an error and statusMessage", done, err)
			}
			name := p + "/clusters/c1"
			c, err := e.srv.Cluster(name)
			if err != nil {
				t.Fatalf("Cluster: %v", err)
			}
			if c.Status != containerpb.Cluster_ERROR || c.StatusMessage == "" || c.NodePools[0].Status != tt.wantPool {
				t.Errorf("cluster = %v %q, pool %v; want ERROR with a message, pool %v", c.Status, c.StatusMessage, c.NodePools[0].Status, tt.wantPool)
			}
			// A failed cluster can still be deleted.
			if _, err := e.client.DeleteCluster(e.ctx, &containerpb.DeleteClusterRequest{Name: name}); err != nil {
				t.Fatalf("DeleteCluster: %v", err)
			}
			e.clock.Step(opTime)
			if _, err := e.srv.Cluster(name); err == nil {
				t.Errorf("Cluster(%s) after delete exists, want gone", name)
			}
		})
	}
}

func TestRealClock(t *testing.T) {
	srv, err := NewServer(WithOperationTime(5 * time.Millisecond))
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	e := &env{srv: srv, ctx: context.Background()}
	e.client = newEnvClient(t, srv)
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	wait.For(t, "the operation DONE after its 5ms", func() (bool, string) {
		got, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.Name})
		if err != nil {
			return false, "GetOperation: " + err.Error()
		}
		return got.Status == containerpb.Operation_DONE, "status " + got.Status.String()
	})
	if c, _ := srv.Cluster(clusterN); c.Status != containerpb.Cluster_RUNNING {
		t.Errorf("cluster status = %v, want RUNNING", c.Status)
	}
}

// TestUpgradeMasterFor: an upgrade the provider starts itself, of a given
// length, to the next version; other operations are refused until it ends.
func TestUpgradeMasterFor(t *testing.T) {
	e := newEnv(t)
	before := e.createCluster(t)
	const d = 4 * opTime
	id, err := e.srv.UpgradeMasterFor(clusterN, "", d)
	if err != nil {
		t.Fatalf("UpgradeMasterFor: %v", err)
	}
	want := NextVersion(before.CurrentMasterVersion)
	if compareVersions(want, before.CurrentMasterVersion) <= 0 {
		t.Fatalf("NextVersion(%s) = %s, want a newer one", before.CurrentMasterVersion, want)
	}
	e.clock.Step(d - time.Millisecond)
	op, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + id})
	if err != nil || op.Status != containerpb.Operation_RUNNING || op.OperationType != containerpb.Operation_UPGRADE_MASTER {
		t.Fatalf("GetOperation(%s) just before its end = %v, %v; want a RUNNING UPGRADE_MASTER", id, op, err)
	}
	_, err = e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/" + before.NodePools[0].Name, NodeCount: 2})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), id) {
		t.Errorf("resize during the upgrade = %v, want FailedPrecondition naming %s", err, id)
	}
	e.clock.Step(time.Millisecond)
	c, _ := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if c.Status != containerpb.Cluster_RUNNING || c.CurrentMasterVersion != want {
		t.Errorf("after the upgrade = %v %q, want RUNNING %q", c.Status, c.CurrentMasterVersion, want)
	}
}

// TestRecordedNodeDefaults holds the defaults GKE gave nodes in the
// recordings (containercluster-enableconfidentialnodesin*, -datacache,
// -swap-*): confidential nodes asked without a type are SEV, at the
// cluster and in its pools, and the kubelet pulls 3 images at a time on
// nodes whose ephemeral storage is on local SSDs, 2 otherwise, unless
// asked.
func TestRecordedNodeDefaults(t *testing.T) {
	e := newEnv(t)
	confidential := pool("conf", "n2d-standard-2", 1, zoneA)
	confidential.Config.ConfidentialNodes = &containerpb.ConfidentialNodes{Enabled: true}
	snp := pool("snp", "n2d-standard-2", 1, zoneA)
	snp.Config.ConfidentialNodes = &containerpb.ConfidentialNodes{Enabled: true, ConfidentialInstanceType: containerpb.ConfidentialNodes_SEV_SNP}
	ssd := pool("ssd", "n2-standard-2", 1, zoneA)
	ssd.Config.EphemeralStorageLocalSsdConfig = &containerpb.EphemeralStorageLocalSsdConfig{LocalSsdCount: 2}
	asked := pool("asked", "n2-standard-2", 1, zoneA)
	asked.Config.EphemeralStorageLocalSsdConfig = &containerpb.EphemeralStorageLocalSsdConfig{LocalSsdCount: 1}
	asked.Config.KubeletConfig = &containerpb.NodeKubeletConfig{MaxParallelImagePulls: 4}
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name:              "c1",
		ConfidentialNodes: &containerpb.ConfidentialNodes{Enabled: true},
		NodePools:         []*containerpb.NodePool{confidential, snp, ssd, asked, pool("plain", "e2-medium", 1, zoneA)},
	}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	e.wait(t, op)
	c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if got := c.GetConfidentialNodes().GetConfidentialInstanceType(); got != containerpb.ConfidentialNodes_SEV {
		t.Errorf("cluster confidentialInstanceType = %v, want SEV", got)
	}
	for _, tt := range []struct {
		pool  string
		typ   containerpb.ConfidentialNodes_ConfidentialInstanceType
		pulls int32
	}{
		{"conf", containerpb.ConfidentialNodes_SEV, 2},
		{"snp", containerpb.ConfidentialNodes_SEV_SNP, 2},
		{"ssd", containerpb.ConfidentialNodes_CONFIDENTIAL_INSTANCE_TYPE_UNSPECIFIED, 3},
		{"asked", containerpb.ConfidentialNodes_CONFIDENTIAL_INSTANCE_TYPE_UNSPECIFIED, 4},
		{"plain", containerpb.ConfidentialNodes_CONFIDENTIAL_INSTANCE_TYPE_UNSPECIFIED, 2},
	} {
		cfg := e.getPool(t, tt.pool).GetConfig()
		if got := cfg.GetConfidentialNodes().GetConfidentialInstanceType(); got != tt.typ {
			t.Errorf("pool %s confidentialInstanceType = %v, want %v", tt.pool, got, tt.typ)
		}
		if got := cfg.GetKubeletConfig().GetMaxParallelImagePulls(); got != tt.pulls {
			t.Errorf("pool %s maxParallelImagePulls = %d, want %d", tt.pool, got, tt.pulls)
		}
	}
}

// TestUnservedRPCsAnswerUnimplemented: an RPC nobody calls is not served
// (emulators/README.md), and says so rather than answering as if it
// had done something.
func TestUnservedRPCsAnswerUnimplemented(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t, pool("p1", "e2-medium", 1))
	for name, call := range map[string]func() error{
		"SetLegacyAbac": func() error {
			_, err := e.client.SetLegacyAbac(e.ctx, &containerpb.SetLegacyAbacRequest{Name: clusterN, Enabled: true})
			return err
		},
		"CancelOperation": func() error {
			return e.client.CancelOperation(e.ctx, &containerpb.CancelOperationRequest{Name: parent + "/operations/operation-1"})
		},
		"UpdateMaster": func() error {
			_, err := e.client.UpdateMaster(e.ctx, &containerpb.UpdateMasterRequest{Name: clusterN, MasterVersion: "latest"})
			return err
		},
	} {
		if err := call(); code(err) != codes.Unimplemented {
			t.Errorf("%s = %v, want Unimplemented", name, err)
		}
	}
}
