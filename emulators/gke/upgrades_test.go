package gke

import (
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestRollbackNodePoolUpgrade(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	p0 := clusterN + "/nodePools/p0"
	rollback := func(name string) (*containerpb.Operation, error) {
		return e.client.RollbackNodePoolUpgrade(e.ctx, &containerpb.RollbackNodePoolUpgradeRequest{Name: name})
	}
	relabel := func(v string) *containerpb.Operation {
		t.Helper()
		op, err := e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{Name: p0, Labels: &containerpb.NodeLabels{Labels: map[string]string{"v": v}}})
		if err != nil {
			t.Fatalf("UpdateNodePool: %v", err)
		}
		return op
	}
	const nothing = `Node pool "p0" has no failed or cancelled upgrade to roll back.`
	_, err := rollback(p0)
	wantStatus(t, "RollbackNodePoolUpgrade of a pool never upgraded", err, codes.FailedPrecondition, nothing)
	e.wait(t, relabel("1"))
	_, err = rollback(p0)
	wantStatus(t, "RollbackNodePoolUpgrade after a successful upgrade", err, codes.FailedPrecondition, nothing)
	_, err = rollback(clusterN + "/nodePools/nope")
	wantStatus(t, "RollbackNodePoolUpgrade of a missing pool", err, codes.NotFound, `Not found: node pool "nope" not found.`)

	// A running upgrade makes the pool busy.
	op := relabel("2")
	_, err = rollback(p0)
	wantStatus(t, "RollbackNodePoolUpgrade during an upgrade", err, codes.FailedPrecondition, "Cluster is running incompatible operation "+op.Name+".")
	if err := e.client.CancelOperation(e.ctx, &containerpb.CancelOperationRequest{Name: parent + "/operations/" + op.Name}); err != nil {
		t.Fatalf("CancelOperation: %v", err)
	}

	// A cancelled upgrade can be rolled back, once.
	op, err = rollback(p0)
	if err != nil {
		t.Fatalf("RollbackNodePoolUpgrade after a cancelled upgrade: %v", err)
	}
	if op.OperationType != containerpb.Operation_UPGRADE_NODES || op.Status != containerpb.Operation_PENDING {
		t.Errorf("RollbackNodePoolUpgrade = %v %v, want a PENDING UPGRADE_NODES", op.OperationType, op.Status)
	}
	if np := e.getPool(t, "p0"); np.Status != containerpb.NodePool_RECONCILING {
		t.Errorf("pool during the rollback = %v, want RECONCILING", np.Status)
	}
	e.wait(t, op)
	if np := e.getPool(t, "p0"); np.Status != containerpb.NodePool_RUNNING || np.Config.Labels["v"] != "1" {
		t.Errorf("pool after the rollback = %v, labels %v; want RUNNING with the labels before the cancelled upgrade", np.Status, np.Config.Labels)
	}
	_, err = rollback(p0)
	wantStatus(t, "RollbackNodePoolUpgrade after a rollback", err, codes.FailedPrecondition, nothing)

	// So can a failed one.
	e.srv.FailNextOperation("UpdateNodePool", codes.Internal, "upgrade failed")
	if done := e.wait(t, relabel("3")); done.Error == nil {
		t.Fatalf("upgrade did not fail")
	}
	op, err = rollback(p0)
	if err != nil {
		t.Fatalf("RollbackNodePoolUpgrade after a failed upgrade: %v", err)
	}
	e.wait(t, op)
}

func TestCompleteNodePoolUpgrade(t *testing.T) {
	e := newEnv(t)
	bg := pool("bg", "e2-standard-4", 1, zoneA)
	blueGreen := containerpb.NodePoolUpdateStrategy_BLUE_GREEN
	bg.UpgradeSettings = &containerpb.NodePool_UpgradeSettings{Strategy: &blueGreen}
	e.createCluster(t, pool("p0", "e2-standard-4", 1, zoneA), bg)
	complete := func(pool string) error {
		return e.client.CompleteNodePoolUpgrade(e.ctx, &containerpb.CompleteNodePoolUpgradeRequest{Name: clusterN + "/nodePools/" + pool})
	}
	upgrade := func(pool string) *containerpb.Operation {
		t.Helper()
		op, err := e.client.UpdateNodePool(e.ctx, &containerpb.UpdateNodePoolRequest{Name: clusterN + "/nodePools/" + pool, Labels: &containerpb.NodeLabels{Labels: map[string]string{"new": "yes"}}})
		if err != nil {
			t.Fatalf("UpdateNodePool: %v", err)
		}
		return op
	}
	wantStatus(t, "CompleteNodePoolUpgrade with no upgrade", complete("bg"), codes.FailedPrecondition, `Node pool "bg" has no blue-green upgrade in progress to complete.`)
	wantStatus(t, "CompleteNodePoolUpgrade of a missing pool", complete("nope"), codes.NotFound, `Not found: node pool "nope" not found.`)
	surge := upgrade("p0")
	wantStatus(t, "CompleteNodePoolUpgrade of a surge upgrade", complete("p0"), codes.FailedPrecondition, `Node pool "p0" has no blue-green upgrade in progress to complete.`)
	e.wait(t, surge)

	op := upgrade("bg")
	if err := complete("bg"); err != nil {
		t.Fatalf("CompleteNodePoolUpgrade: %v", err)
	}
	// Done at once, without the clock moving, with its change.
	got, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.Name})
	if err != nil || got.Status != containerpb.Operation_DONE || got.Error != nil {
		t.Fatalf("GetOperation after CompleteNodePoolUpgrade = %v, %v; want DONE without error", got.GetStatus(), err)
	}
	if np := e.getPool(t, "bg"); np.Status != containerpb.NodePool_RUNNING || np.Config.Labels["new"] != "yes" {
		t.Errorf("pool = %v, labels %v; want RUNNING with the new labels", np.Status, np.Config.Labels)
	}
	wantStatus(t, "CompleteNodePoolUpgrade again", complete("bg"), codes.FailedPrecondition, "")
}

func TestCompleteControlPlaneUpgrade(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	complete := func(name string) error {
		_, err := e.client.CompleteControlPlaneUpgrade(e.ctx, &containerpb.CompleteControlPlaneUpgradeRequest{Name: name})
		return err
	}
	wantStatus(t, "CompleteControlPlaneUpgrade of a missing cluster", complete(missingClusterN), codes.NotFound, "Not found: projects/proj/locations/us-central1/clusters/nope.")
	id, err := e.srv.UpgradeMaster(clusterN, "")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "CompleteControlPlaneUpgrade during an upgrade", complete(clusterN), codes.FailedPrecondition,
		fmt.Sprintf("Operation %s is currently upgrading cluster c1. Please wait and try again once it is done.", id))
	e.clock.Step(opTime)
	wantStatus(t, "CompleteControlPlaneUpgrade after a one-step upgrade", complete(clusterN), codes.FailedPrecondition, `Cluster "c1" has no rollback-safe control plane upgrade to complete.`)
}

func TestFetchUpgradeInfo(t *testing.T) {
	e := newEnv(t)
	// REGULAR's default is 1.33.4-gke.1000.
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name: "c1", InitialClusterVersion: "1.32.8-gke.1100", ReleaseChannel: &containerpb.ReleaseChannel{Channel: containerpb.ReleaseChannel_REGULAR},
		NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, op)
	cluster := func() *containerpb.ClusterUpgradeInfo {
		t.Helper()
		info, err := e.client.FetchClusterUpgradeInfo(e.ctx, &containerpb.FetchClusterUpgradeInfoRequest{Name: clusterN})
		if err != nil {
			t.Fatalf("FetchClusterUpgradeInfo: %v", err)
		}
		return info
	}
	nodes := func() *containerpb.NodePoolUpgradeInfo {
		t.Helper()
		info, err := e.client.FetchNodePoolUpgradeInfo(e.ctx, &containerpb.FetchNodePoolUpgradeInfoRequest{Name: clusterN + "/nodePools/p0"})
		if err != nil {
			t.Fatalf("FetchNodePoolUpgradeInfo: %v", err)
		}
		return info
	}
	c := cluster()
	if c.GetMinorTargetVersion() != "1.33.4-gke.1000" || c.PatchTargetVersion != nil || len(c.AutoUpgradeStatus) != 1 || c.AutoUpgradeStatus[0] != containerpb.ClusterUpgradeInfo_ACTIVE {
		t.Errorf("cluster upgrade info = %v, want minor target 1.33.4-gke.1000, ACTIVE", c)
	}
	if n := nodes(); n.MinorTargetVersion != nil || n.PatchTargetVersion != nil || len(n.AutoUpgradeStatus) != 1 || n.AutoUpgradeStatus[0] != containerpb.NodePoolUpgradeInfo_ACTIVE {
		t.Errorf("pool upgrade info = %v, want no target (at the master's version), ACTIVE", n)
	}

	// The master a build ahead: a patch target for the pool.
	if _, err := e.srv.UpgradeMaster(clusterN, ""); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(opTime)
	if n := nodes(); n.GetPatchTargetVersion() != "1.32.8-gke.1200" || n.MinorTargetVersion != nil {
		t.Errorf("pool upgrade info after a master upgrade = %v, want patch target 1.32.8-gke.1200", n)
	}

	// Maintenance exclusions pause auto-upgrades.
	now := e.clock.Now()
	for _, tt := range []struct {
		scope  containerpb.MaintenanceExclusionOptions_Scope
		status containerpb.ClusterUpgradeInfo_AutoUpgradeStatus
		reason containerpb.ClusterUpgradeInfo_AutoUpgradePausedReason
		pool   containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus
	}{
		{containerpb.MaintenanceExclusionOptions_NO_UPGRADES, containerpb.ClusterUpgradeInfo_UPGRADE_PAUSED, containerpb.ClusterUpgradeInfo_MAINTENANCE_EXCLUSION_NO_UPGRADES, containerpb.NodePoolUpgradeInfo_UPGRADE_PAUSED},
		{containerpb.MaintenanceExclusionOptions_NO_MINOR_UPGRADES, containerpb.ClusterUpgradeInfo_MINOR_UPGRADE_PAUSED, containerpb.ClusterUpgradeInfo_MAINTENANCE_EXCLUSION_NO_MINOR_UPGRADES, containerpb.NodePoolUpgradeInfo_MINOR_UPGRADE_PAUSED},
		{containerpb.MaintenanceExclusionOptions_NO_MINOR_OR_NODE_UPGRADES, containerpb.ClusterUpgradeInfo_MINOR_UPGRADE_PAUSED, containerpb.ClusterUpgradeInfo_MAINTENANCE_EXCLUSION_NO_MINOR_UPGRADES, containerpb.NodePoolUpgradeInfo_UPGRADE_PAUSED},
	} {
		op, err := e.client.SetMaintenancePolicy(e.ctx, &containerpb.SetMaintenancePolicyRequest{Name: clusterN, MaintenancePolicy: &containerpb.MaintenancePolicy{Window: &containerpb.MaintenanceWindow{
			MaintenanceExclusions: map[string]*containerpb.TimeWindow{"freeze": {
				StartTime: timestamppb.New(now), EndTime: timestamppb.New(now.Add(30 * 24 * time.Hour)),
				Options: &containerpb.TimeWindow_MaintenanceExclusionOptions{MaintenanceExclusionOptions: &containerpb.MaintenanceExclusionOptions{Scope: tt.scope}},
			}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		e.wait(t, op)
		if c := cluster(); len(c.AutoUpgradeStatus) != 1 || c.AutoUpgradeStatus[0] != tt.status || len(c.PausedReason) != 1 || c.PausedReason[0] != tt.reason {
			t.Errorf("cluster upgrade info under %v = %v, want %v for %v", tt.scope, c, tt.status, tt.reason)
		}
		if n := nodes(); len(n.AutoUpgradeStatus) != 1 || n.AutoUpgradeStatus[0] != tt.pool {
			t.Errorf("pool upgrade info under %v = %v, want %v", tt.scope, n, tt.pool)
		}
	}

	_, err = e.client.FetchClusterUpgradeInfo(e.ctx, &containerpb.FetchClusterUpgradeInfoRequest{Name: missingClusterN})
	wantStatus(t, "FetchClusterUpgradeInfo of a missing cluster", err, codes.NotFound, "Not found: projects/proj/locations/us-central1/clusters/nope.")
	_, err = e.client.FetchNodePoolUpgradeInfo(e.ctx, &containerpb.FetchNodePoolUpgradeInfoRequest{Name: clusterN + "/nodePools/nope"})
	wantStatus(t, "FetchNodePoolUpgradeInfo of a missing pool", err, codes.NotFound, `Not found: node pool "nope" not found.`)
	// The zones/ form names a zonal cluster.
	_, err = e.client.FetchClusterUpgradeInfo(e.ctx, &containerpb.FetchClusterUpgradeInfoRequest{Name: "projects/proj/zones/us-central1-a/clusters/c1"})
	wantStatus(t, "FetchClusterUpgradeInfo in the zones/ form", err, codes.NotFound, "Not found: projects/proj/zones/us-central1-a/clusters/c1.")
}
