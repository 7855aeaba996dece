package gke

import (
	"context"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// RollbackNodePoolUpgrade rolls back a node pool's last upgrade when it
// failed or was cancelled: an UPGRADE_NODES operation on the pool, after
// which the pool is RUNNING at the version it had before that upgrade
// (the simulator never applies a part of an upgrade, so no node has to
// go back). A pool whose last upgrade (its last UPGRADE_NODES operation)
// succeeded, or that has had none, is refused with FAILED_PRECONDITION in
// the simulator's words; the API says such a call "makes no changes".
// respect_pdb changes nothing: no Pod is drained.
func (s *GServer) RollbackNodePoolUpgrade(_ context.Context, req *containerpb.RollbackNodePoolUpgradeRequest) (*containerpb.Operation, error) {
	return s.poolOp("RollbackNodePoolUpgrade", req.Name, req.ProjectId, req.Zone, req.ClusterId, req.NodePoolId, containerpb.Operation_UPGRADE_NODES,
		containerpb.NodePool_RECONCILING, nil,
		func(c *cluster, np *nodePool) error {
			last := s.lastUpgrade(c, np)
			switch {
			case last != nil && last.pb.Status != containerpb.Operation_DONE:
				return nil // refused as busy
			case last == nil || last.pb.Error == nil:
				return status.Errorf(codes.FailedPrecondition, "Node pool %q has no failed or cancelled upgrade to roll back.", np.pb.Name)
			}
			return nil
		})
}

// lastUpgrade is the last UPGRADE_NODES operation on np, nil if none.
// Must be called with the lock held.
func (s *GServer) lastUpgrade(c *cluster, np *nodePool) *operation {
	for i := len(s.opList) - 1; i >= 0; i-- {
		op := s.opList[i]
		if op.c == c && op.pool == np.pb.Name && op.uid == np.uid && op.pb.OperationType == containerpb.Operation_UPGRADE_NODES {
			return op
		}
	}
	return nil
}

// CompleteNodePoolUpgrade ends the soak of a blue-green upgrade: the
// running upgrade (UPGRADE_NODES) of a pool whose upgrade strategy is
// BLUE_GREEN is DONE at once, as when its soak time is over. A pool with
// no such upgrade running is refused with FAILED_PRECONDITION, in the
// simulator's words. The blue-green phases (updateInfo) are not shown.
func (s *GServer) CompleteNodePoolUpgrade(_ context.Context, req *containerpb.CompleteNodePoolUpgradeRequest) (*emptypb.Empty, error) {
	k, err := parsePool(req.Name, "", "", "", "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	c, np, err := s.pool(k)
	if err != nil {
		return nil, err
	}
	last := s.lastUpgrade(c, np)
	if last == nil || last.pb.Status == containerpb.Operation_DONE || np.pb.GetUpgradeSettings().GetStrategy() != containerpb.NodePoolUpdateStrategy_BLUE_GREEN {
		return nil, status.Errorf(codes.FailedPrecondition, "Node pool %q has no blue-green upgrade in progress to complete.", k.pool)
	}
	last.end = s.now()
	s.finish(last)
	s.log.Info("Completed a blue-green upgrade", "nodePool", k.String(), "operation", last.pb.Name)
	return &emptypb.Empty{}, nil
}

// CompleteControlPlaneUpgrade completes a rollback-safe control plane
// upgrade's second step. The simulator upgrades a control plane in one
// step, so no cluster is ever between the two: a cluster that exists and
// is idle is refused with FAILED_PRECONDITION, in the simulator's words.
func (s *GServer) CompleteControlPlaneUpgrade(_ context.Context, req *containerpb.CompleteControlPlaneUpgradeRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(zonesAsLocations(req.Name), "", "", "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	c, err := s.cluster(k)
	if err != nil {
		return nil, err
	}
	if err := s.busy(c, ""); err != nil {
		return nil, err
	}
	return nil, status.Errorf(codes.FailedPrecondition, "Cluster %q has no rollback-safe control plane upgrade to complete.", k.cluster)
}

// zonesAsLocations turns a name in the projects/P/zones/Z/... form, which
// some methods accept, into the projects/P/locations/Z/... one.
func zonesAsLocations(name string) string {
	if v, ok := splitName(name, "projects", "*", "zones", "*", "clusters", "*"); ok {
		return "projects/" + v[0] + "/locations/" + v[1] + "/clusters/" + v[2]
	}
	if v, ok := splitName(name, "projects", "*", "zones", "*", "clusters", "*", "nodePools", "*"); ok {
		return "projects/" + v[0] + "/locations/" + v[1] + "/clusters/" + v[2] + "/nodePools/" + v[3]
	}
	return name
}

// FetchClusterUpgradeInfo tells where auto-upgrades would take the
// control plane: to its release channel's default version (REGULAR's
// without a channel), as a patch target within the minor release or as a
// minor target beyond it; auto-upgrades ACTIVE, or paused by a
// maintenance exclusion in force. The simulator's clusters are never
// upgraded automatically (UpgradeMaster does it), and it keeps no
// support dates or upgrade history, so those are not shown.
func (s *GServer) FetchClusterUpgradeInfo(_ context.Context, req *containerpb.FetchClusterUpgradeInfoRequest) (*containerpb.ClusterUpgradeInfo, error) {
	k, err := parseCluster(zonesAsLocations(req.Name), "", "", "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	c, err := s.cluster(k)
	if err != nil {
		return nil, err
	}
	target := s.versions[c.pb.GetReleaseChannel().GetChannel()]
	if target == "" {
		target = s.versions[containerpb.ReleaseChannel_REGULAR]
	}
	out := &containerpb.ClusterUpgradeInfo{}
	out.MinorTargetVersion, out.PatchTargetVersion = upgradeTargets(c.pb.CurrentMasterVersion, target)
	// The control plane's patch upgrades go on under an exclusion of
	// minor (or node) upgrades.
	sc := exclusionScope(c.pb, s.now())
	switch {
	case sc == nil:
		out.AutoUpgradeStatus = []containerpb.ClusterUpgradeInfo_AutoUpgradeStatus{containerpb.ClusterUpgradeInfo_ACTIVE}
	case *sc == containerpb.MaintenanceExclusionOptions_NO_UPGRADES:
		out.AutoUpgradeStatus = []containerpb.ClusterUpgradeInfo_AutoUpgradeStatus{containerpb.ClusterUpgradeInfo_UPGRADE_PAUSED}
		out.PausedReason = []containerpb.ClusterUpgradeInfo_AutoUpgradePausedReason{containerpb.ClusterUpgradeInfo_MAINTENANCE_EXCLUSION_NO_UPGRADES}
	default:
		out.AutoUpgradeStatus = []containerpb.ClusterUpgradeInfo_AutoUpgradeStatus{containerpb.ClusterUpgradeInfo_MINOR_UPGRADE_PAUSED}
		out.PausedReason = []containerpb.ClusterUpgradeInfo_AutoUpgradePausedReason{containerpb.ClusterUpgradeInfo_MAINTENANCE_EXCLUSION_NO_MINOR_UPGRADES}
	}
	return out, nil
}

// FetchNodePoolUpgradeInfo tells where auto-upgrades would take the node
// pool: to the control plane's version, as a patch or minor target;
// auto-upgrades ACTIVE when the pool's management has auto-upgrade on
// (none shown otherwise), or paused by a maintenance exclusion in force
// (NO_UPGRADES and NO_MINOR_OR_NODE_UPGRADES pause all, NO_MINOR_UPGRADES
// minor ones). Pools are never upgraded automatically by the simulator.
func (s *GServer) FetchNodePoolUpgradeInfo(_ context.Context, req *containerpb.FetchNodePoolUpgradeInfoRequest) (*containerpb.NodePoolUpgradeInfo, error) {
	k, err := parsePool(zonesAsLocations(req.Name), "", "", "", "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	c, np, err := s.pool(k)
	if err != nil {
		return nil, err
	}
	out := &containerpb.NodePoolUpgradeInfo{}
	out.MinorTargetVersion, out.PatchTargetVersion = upgradeTargets(np.pb.Version, c.pb.CurrentMasterVersion)
	if !np.pb.GetManagement().GetAutoUpgrade() {
		return out, nil
	}
	sc := exclusionScope(c.pb, s.now())
	switch {
	case sc == nil:
		out.AutoUpgradeStatus = []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_ACTIVE}
	case *sc == containerpb.MaintenanceExclusionOptions_NO_MINOR_UPGRADES:
		out.AutoUpgradeStatus = []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_MINOR_UPGRADE_PAUSED}
		out.PausedReason = []containerpb.NodePoolUpgradeInfo_AutoUpgradePausedReason{containerpb.NodePoolUpgradeInfo_MAINTENANCE_EXCLUSION_NO_MINOR_UPGRADES}
	default:
		out.AutoUpgradeStatus = []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_UPGRADE_PAUSED}
		out.PausedReason = []containerpb.NodePoolUpgradeInfo_AutoUpgradePausedReason{containerpb.NodePoolUpgradeInfo_MAINTENANCE_EXCLUSION_NO_UPGRADES}
	}
	return out, nil
}

// upgradeTargets is where an upgrade from cur to target goes: a patch
// target when target is a newer build of cur's minor release, a minor
// target when it is a later minor release; neither when it is not newer.
func upgradeTargets(cur, target string) (minor, patch *string) {
	if compareVersions(target, cur) <= 0 {
		return nil, nil
	}
	a, b := versionRE.FindStringSubmatch(cur), versionRE.FindStringSubmatch(target)
	if a != nil && b != nil && a[1] == b[1] && a[2] == b[2] {
		return nil, &target
	}
	return &target, nil
}

// scopeBreadth orders the exclusions' scopes: NO_UPGRADES is the
// broadest, NO_MINOR_UPGRADES the narrowest.
var scopeBreadth = map[containerpb.MaintenanceExclusionOptions_Scope]int{
	containerpb.MaintenanceExclusionOptions_NO_UPGRADES:               2,
	containerpb.MaintenanceExclusionOptions_NO_MINOR_OR_NODE_UPGRADES: 1,
	containerpb.MaintenanceExclusionOptions_NO_MINOR_UPGRADES:         0,
}

// exclusionScope is the broadest scope of the cluster's maintenance
// exclusions in force at now (one without options excludes all
// upgrades), nil when none is.
func exclusionScope(c *containerpb.Cluster, now time.Time) *containerpb.MaintenanceExclusionOptions_Scope {
	var best *containerpb.MaintenanceExclusionOptions_Scope
	for _, tw := range c.GetMaintenancePolicy().GetWindow().GetMaintenanceExclusions() {
		if tw.GetStartTime() != nil && now.Before(tw.StartTime.AsTime()) || tw.GetEndTime() != nil && !now.Before(tw.EndTime.AsTime()) {
			continue
		}
		sc := tw.GetMaintenanceExclusionOptions().GetScope()
		if best == nil || scopeBreadth[sc] > scopeBreadth[*best] {
			best = sc.Enum()
		}
	}
	return best
}
