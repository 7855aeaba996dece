package gke

import (
	"maps"
	"slices"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestUpdateCluster(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	upd := func(u *containerpb.ClusterUpdate) (*containerpb.Operation, error) {
		return e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: u})
	}
	// A cluster of one pool: the pool may be left out.
	op, err := upd(&containerpb.ClusterUpdate{DesiredNodePoolAutoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, MaxNodeCount: 5}})
	if err != nil {
		t.Fatalf("UpdateCluster autoscaling: %v", err)
	}
	if op.OperationType != containerpb.Operation_UPDATE_CLUSTER || op.Status != containerpb.Operation_PENDING {
		t.Errorf("op = %v %v, want UPDATE_CLUSTER PENDING", op.OperationType, op.Status)
	}
	// PENDING for the first tenth of the operation, then RUNNING.
	e.clock.Step(opTime / 10)
	if got, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.Name}); err != nil || got.Status != containerpb.Operation_RUNNING {
		t.Errorf("GetOperation after a tenth = %v, %v; want RUNNING", got.GetStatus(), err)
	}
	e.wait(t, op)
	np := e.getPool(t, "p0")
	if a := np.Autoscaling; !a.GetEnabled() || a.MaxNodeCount != 5 || a.LocationPolicy != containerpb.NodePoolAutoscaling_BALANCED || np.InitialNodeCount != 1 {
		t.Errorf("pool = autoscaling %v, initialNodeCount %d; want enabled 1..5 BALANCED, 1", a, np.InitialNodeCount)
	}
	if n, _ := e.srv.NodeCounts(clusterN + "/nodePools/p0"); n[zoneA] != 1 {
		t.Errorf("NodeCounts = %v, want 1 in %s: new bounds resize nothing", n, zoneA)
	}

	op, err = upd(&containerpb.ClusterUpdate{DesiredLoggingService: "none", DesiredMonitoringService: "none"})
	if err != nil || op.Status != containerpb.Operation_RUNNING {
		t.Fatalf("UpdateCluster services = %v, %v; want a RUNNING operation", op.GetStatus(), err)
	}
	e.wait(t, op)
	if c, _ := e.srv.Cluster(clusterN); c.LoggingService != "none" || c.MonitoringService != "none" {
		t.Errorf("services = %q, %q; want none, none", c.LoggingService, c.MonitoringService)
	}

	const oneUpdate = "Exactly one update can be applied to a cluster with each request, so at most one field can be provided: "
	refusals := []struct {
		name  string
		u     *containerpb.ClusterUpdate
		want  codes.Code
		words string // "" for any
	}{
		{"nothing", nil, codes.InvalidArgument, "Must specify a field to update."},
		{"empty", &containerpb.ClusterUpdate{}, codes.InvalidArgument, "Must specify a field to update."},
		{"master version and another field", &containerpb.ClusterUpdate{DesiredMasterVersion: "latest", DesiredImageType: "UBUNTU_CONTAINERD"}, codes.InvalidArgument,
			oneUpdate + "desired_image_type, desired_master_version."},
		{"pool autoscaling and another field", &containerpb.ClusterUpdate{DesiredNodePoolId: "p0", DesiredNodePoolAutoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MaxNodeCount: 3}, DesiredLoggingService: "none"}, codes.InvalidArgument,
			oneUpdate + "desired_logging_service, desired_node_pool_autoscaling."},
		{"pool autoscaling and a master version", &containerpb.ClusterUpdate{DesiredNodePoolAutoscaling: &containerpb.NodePoolAutoscaling{}, DesiredMasterVersion: "latest"}, codes.InvalidArgument,
			oneUpdate + "desired_master_version, desired_node_pool_autoscaling."},
		{"missing pool", &containerpb.ClusterUpdate{DesiredNodePoolId: "nope", DesiredNodePoolAutoscaling: &containerpb.NodePoolAutoscaling{}}, codes.NotFound, ""},
	}
	for _, tt := range refusals {
		_, err := upd(tt.u)
		if code(err) != tt.want || tt.words != "" && status.Convert(err).Message() != tt.words {
			t.Errorf("UpdateCluster %s = %v, want %v %q", tt.name, err, tt.want, tt.words)
		}
	}
	op, err = e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-medium", 1, zoneA)})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, op)
	if _, err := upd(&containerpb.ClusterUpdate{DesiredNodePoolAutoscaling: &containerpb.NodePoolAutoscaling{}}); code(err) != codes.InvalidArgument {
		t.Errorf("UpdateCluster autoscaling of no pool in a cluster of two = %v, want InvalidArgument", err)
	}
}

func TestSetLabels(t *testing.T) {
	e := newEnv(t)
	c := e.createCluster(t)
	labels := map[string]string{"team": "ml"}
	if _, err := e.client.SetLabels(e.ctx, &containerpb.SetLabelsRequest{Name: clusterN, ResourceLabels: labels, LabelFingerprint: "0000"}); code(err) != codes.FailedPrecondition {
		t.Errorf("SetLabels with a stale fingerprint = %v, want FailedPrecondition", err)
	}
	op, err := e.client.SetLabels(e.ctx, &containerpb.SetLabelsRequest{Name: clusterN, ResourceLabels: labels, LabelFingerprint: c.LabelFingerprint})
	if err != nil {
		t.Fatalf("SetLabels: %v", err)
	}
	if op.OperationType != containerpb.Operation_UPDATE_CLUSTER || op.Status != containerpb.Operation_RUNNING {
		t.Errorf("op = %v %v, want UPDATE_CLUSTER RUNNING", op.OperationType, op.Status)
	}
	e.wait(t, op)
	got, err := e.srv.Cluster(clusterN)
	if err != nil || !maps.Equal(got.ResourceLabels, labels) || got.LabelFingerprint == c.LabelFingerprint {
		t.Errorf("cluster = labels %v fingerprint %q (was %q), %v; want %v and a new fingerprint", got.GetResourceLabels(), got.GetLabelFingerprint(), c.LabelFingerprint, err, labels)
	}
}

// Calls the simulator does not model further are accepted as GKE accepts
// them (recorded: Config Connector's maintenancepolicy, autoscaling and
// kubeletconfig fixtures), with GKE's operation types, and what they set
// is read back.
func TestUnmodelledChangesAccepted(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	policy := &containerpb.MaintenancePolicy{Window: &containerpb.MaintenanceWindow{Policy: &containerpb.MaintenanceWindow_DailyMaintenanceWindow{DailyMaintenanceWindow: &containerpb.DailyMaintenanceWindow{StartTime: "03:00"}}}}
	op, err := e.client.SetMaintenancePolicy(e.ctx, &containerpb.SetMaintenancePolicyRequest{Name: clusterN, MaintenancePolicy: policy})
	if err != nil || op.OperationType != containerpb.Operation_UPDATE_CLUSTER {
		t.Fatalf("SetMaintenancePolicy = %v, %v; want an UPDATE_CLUSTER operation", op, err)
	}
	e.wait(t, op)
	c, _ := e.srv.Cluster(clusterN)
	if c.GetMaintenancePolicy().GetWindow().GetDailyMaintenanceWindow().GetStartTime() != "03:00" || c.MaintenancePolicy.ResourceVersion == "" {
		t.Errorf("maintenancePolicy = %v, want the daily window at 03:00 with a resourceVersion", c.GetMaintenancePolicy())
	}

	nap := &containerpb.ClusterAutoscaling{EnableNodeAutoprovisioning: true, ResourceLimits: []*containerpb.ResourceLimit{{ResourceType: "cpu", Maximum: 2}, {ResourceType: "memory", Maximum: 2048}}}
	op, err = e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredClusterAutoscaling: nap}})
	if err != nil || op.OperationType != containerpb.Operation_UPDATE_CLUSTER {
		t.Fatalf("UpdateCluster with node auto-provisioning = %v, %v; want an UPDATE_CLUSTER operation", op, err)
	}
	e.wait(t, op)
	if c, _ := e.srv.Cluster(clusterN); !c.GetAutoscaling().GetEnableNodeAutoprovisioning() || len(c.Autoscaling.ResourceLimits) != 2 {
		t.Errorf("autoscaling = %v, want node auto-provisioning with two limits", c.GetAutoscaling())
	}

	op, err = e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{Name: clusterN + "/nodePools/p0", KubeletConfig: &containerpb.NodeKubeletConfig{PodPidsLimit: 2048, CpuManagerPolicy: "none"}})
	if err != nil || op.OperationType != containerpb.Operation_UPGRADE_NODES {
		t.Fatalf("UpdateNodePool of the kubelet config = %v, %v; want an UPGRADE_NODES operation", op, err)
	}
	e.wait(t, op)
	np, _ := e.srv.NodePool(clusterN + "/nodePools/p0")
	if k := np.GetConfig().GetKubeletConfig(); k.GetPodPidsLimit() != 2048 || k.GetMaxParallelImagePulls() != 2 || k.InsecureKubeletReadonlyPortEnabled == nil {
		t.Errorf("kubeletConfig = %v, want podPidsLimit 2048 with GKE's defaults", k)
	}
}

// TestDatabaseEncryption holds application-layer secrets encryption to
// what GKE showed (containercluster-databaseencryption*): DECRYPTED when
// none is asked, ENCRYPTED with a key read back as
// ALL_OBJECTS_ENCRYPTION_ENABLED, each with its currentState, and the
// key of a decrypted cluster kept among its decryptionKeys.
func TestDatabaseEncryption(t *testing.T) {
	const key = "projects/proj/locations/us-central1/keyRings/r/cryptoKeys/k"
	check := func(what string, got *containerpb.DatabaseEncryption, state containerpb.DatabaseEncryption_State, current containerpb.DatabaseEncryption_CurrentState, keyName string, decryption ...string) {
		t.Helper()
		if got.GetState() != state || got.GetCurrentState() != current || got.GetKeyName() != keyName || !slices.Equal(got.GetDecryptionKeys(), decryption) {
			t.Errorf("%s: databaseEncryption = %v; want %v, %v, key %q, decryption keys %q", what, got, state, current, keyName, decryption)
		}
	}
	e := newEnv(t)
	c := e.createCluster(t)
	check("no encryption asked", c.DatabaseEncryption, containerpb.DatabaseEncryption_DECRYPTED, containerpb.DatabaseEncryption_CURRENT_STATE_DECRYPTED, "")

	e = newEnv(t)
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name: "c1", InitialNodeCount: 1,
		DatabaseEncryption: &containerpb.DatabaseEncryption{State: containerpb.DatabaseEncryption_ENCRYPTED, KeyName: key},
	}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	e.wait(t, op)
	get := func() *containerpb.DatabaseEncryption {
		t.Helper()
		c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
		if err != nil {
			t.Fatalf("GetCluster: %v", err)
		}
		return c.DatabaseEncryption
	}
	check("created ENCRYPTED", get(), containerpb.DatabaseEncryption_ALL_OBJECTS_ENCRYPTION_ENABLED, containerpb.DatabaseEncryption_CURRENT_STATE_ALL_OBJECTS_ENCRYPTION_ENABLED, key)

	update := func(d *containerpb.DatabaseEncryption) {
		t.Helper()
		op, err := e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredDatabaseEncryption: d}})
		if err != nil {
			t.Fatalf("UpdateCluster(%v): %v", d, err)
		}
		e.wait(t, op)
	}
	update(&containerpb.DatabaseEncryption{State: containerpb.DatabaseEncryption_DECRYPTED})
	check("decrypted", get(), containerpb.DatabaseEncryption_DECRYPTED, containerpb.DatabaseEncryption_CURRENT_STATE_DECRYPTED, "", key)
	update(&containerpb.DatabaseEncryption{State: containerpb.DatabaseEncryption_ENCRYPTED, KeyName: key + "2"})
	check("encrypted again", get(), containerpb.DatabaseEncryption_ALL_OBJECTS_ENCRYPTION_ENABLED, containerpb.DatabaseEncryption_CURRENT_STATE_ALL_OBJECTS_ENCRYPTION_ENABLED, key+"2", key)
}
