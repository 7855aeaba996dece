package gke

import (
	"fmt"
	"maps"
	"regexp"
	"slices"

	"cloud.google.com/go/container/apiv1/containerpb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// nameRE is GKE's rule for cluster and node pool names.
var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)

// newPool validates a requested node pool for cluster c (whose region,
// default locations and master version are given) and builds its stored
// state, PROVISIONING with no nodes yet.
func (s *GServer) newPool(c *cluster, req *containerpb.NodePool) (*nodePool, error) {
	if req == nil {
		return nil, status.Errorf(codes.InvalidArgument, "Required field node_pool not set.")
	}
	pb := proto.Clone(req).(*containerpb.NodePool)
	if !nameRE.MatchString(pb.Name) {
		return nil, status.Errorf(codes.InvalidArgument, "Invalid node pool name %q: must be 1 to 40 lowercase letters, digits or hyphens, start with a letter and not end with a hyphen.", pb.Name)
	}
	if pb.InitialNodeCount < 0 || pb.InitialNodeCount > maxNodesPerZone {
		return nil, status.Errorf(codes.InvalidArgument, "Node pool %q: initial_node_count %d is out of range [0, %d].", pb.Name, pb.InitialNodeCount, maxNodesPerZone)
	}
	if err := checkAutoscaling(pb.Name, pb.Autoscaling); err != nil {
		return nil, err
	}
	if pb.Config == nil {
		pb.Config = &containerpb.NodeConfig{}
	}
	if err := checkNodeConfig(pb.Name, pb.Config); err != nil {
		return nil, err
	}
	poolDefaults(pb)
	if len(pb.Locations) == 0 {
		pb.Locations = slices.Clone(c.pb.Locations)
	}
	if err := checkLocations(pb.Name, c.region, pb.Locations); err != nil {
		return nil, err
	}
	v, err := s.resolveVersion("Node", pb.Version, c.pb.CurrentMasterVersion, c.pb.CurrentMasterVersion)
	if err != nil {
		return nil, err
	}
	if compareVersions(v, c.pb.CurrentMasterVersion) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "Node pool %q: node version %q must not be newer than the master version %q.", pb.Name, v, c.pb.CurrentMasterVersion)
	}
	pb.Version = v
	if err := s.checkTags(c.key.project, pb.Config.ResourceManagerTags); err != nil {
		return nil, err
	}
	pb.SelfLink = apiBase + c.key.path() + "/nodePools/" + pb.Name
	pb.Status = containerpb.NodePool_PROVISIONING
	pb.StatusMessage = ""
	pb.InstanceGroupUrls = nil
	pb.Etag = randomHex(8)
	if pb.Management == nil {
		pb.Management = &containerpb.NodeManagement{AutoUpgrade: true, AutoRepair: true}
	}
	return &nodePool{pb: pb, uid: randomHex(4), nodes: map[string]int32{}}, nil
}

// defaultScopes are the OAuth scopes GKE gives nodes when none are asked.
var defaultScopes = []string{
	"https://www.googleapis.com/auth/devstorage.read_only",
	"https://www.googleapis.com/auth/logging.write",
	"https://www.googleapis.com/auth/monitoring",
	"https://www.googleapis.com/auth/service.management.readonly",
	"https://www.googleapis.com/auth/servicecontrol",
	"https://www.googleapis.com/auth/trace.append",
}

// poolDefaults fills in what GKE shows of a pool created without it, as
// recorded of real GKE: the image, the nodes' service account, scopes and
// metadata, Shielded VM integrity monitoring, 110 Pods a node, surge
// upgrades one node at a time and balanced autoscaling.
func poolDefaults(pb *containerpb.NodePool) {
	cfg := pb.Config
	if cfg.ImageType == "" {
		cfg.ImageType = "COS_CONTAINERD"
	}
	if cfg.ServiceAccount == "" {
		cfg.ServiceAccount = "default"
	}
	if len(cfg.OauthScopes) == 0 {
		cfg.OauthScopes = slices.Clone(defaultScopes)
	}
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	if _, ok := cfg.Metadata["disable-legacy-endpoints"]; !ok {
		cfg.Metadata["disable-legacy-endpoints"] = "true"
	}
	kubeletDefaults(cfg)
	confidentialDefaults(cfg.ConfidentialNodes)
	if cfg.ShieldedInstanceConfig == nil {
		cfg.ShieldedInstanceConfig = &containerpb.ShieldedInstanceConfig{EnableIntegrityMonitoring: true}
	}
	if pb.MaxPodsConstraint == nil {
		pb.MaxPodsConstraint = &containerpb.MaxPodsConstraint{MaxPodsPerNode: 110}
		pb.PodIpv4CidrSize = 24
	}
	if pb.GetQueuedProvisioning().GetEnabled() {
		queuedDefaults(pb)
	}
	if pb.UpgradeSettings == nil {
		pb.UpgradeSettings = &containerpb.NodePool_UpgradeSettings{MaxSurge: 1}
	}
	if pb.UpgradeSettings.Strategy == nil {
		surge := containerpb.NodePoolUpdateStrategy_SURGE
		pb.UpgradeSettings.Strategy = &surge
	}
	autoscalingDefaults(pb.Autoscaling)
}

// confidentialDefaults gives confidential nodes asked without a type
// GKE's: SEV, as recorded of an n2d pool and cluster
// (containercluster-enableconfidentialnodesin*).
func confidentialDefaults(c *containerpb.ConfidentialNodes) {
	if c.GetEnabled() && c.ConfidentialInstanceType == containerpb.ConfidentialNodes_CONFIDENTIAL_INSTANCE_TYPE_UNSPECIFIED {
		c.ConfidentialInstanceType = containerpb.ConfidentialNodes_SEV
	}
}

// queuedTaint is the taint GKE gives the nodes of a queued provisioning
// pool, so that only the workloads that asked for them land there.
var queuedTaint = &containerpb.NodeTaint{Key: "cloud.google.com/gke-queued", Value: "true", Effect: containerpb.NodeTaint_NO_SCHEDULE}

// queuedDefaults are what GKE shows of a queued provisioning pool, as
// recorded (containernodepool-queuedprovisioning): its nodes tainted
// cloud.google.com/gke-queued=true:NoSchedule, short-lived upgrades (its
// nodes are never upgraded in place) without a surge, and autoscaling's
// locationPolicy ANY (the capacity comes from wherever it is found).
func queuedDefaults(pb *containerpb.NodePool) {
	if !slices.ContainsFunc(pb.Config.Taints, func(t *containerpb.NodeTaint) bool { return t.Key == queuedTaint.Key }) {
		pb.Config.Taints = append(pb.Config.Taints, proto.Clone(queuedTaint).(*containerpb.NodeTaint))
	}
	if pb.UpgradeSettings == nil {
		short := containerpb.NodePoolUpdateStrategy_SHORT_LIVED
		pb.UpgradeSettings = &containerpb.NodePool_UpgradeSettings{Strategy: &short}
	}
	if a := pb.Autoscaling; a != nil && a.Enabled && a.LocationPolicy == containerpb.NodePoolAutoscaling_LOCATION_POLICY_UNSPECIFIED {
		a.LocationPolicy = containerpb.NodePoolAutoscaling_ANY
	}
}

// autoscalingDefaults gives enabled autoscaling GKE's location policy.
func autoscalingDefaults(a *containerpb.NodePoolAutoscaling) {
	if a != nil && a.Enabled && a.LocationPolicy == containerpb.NodePoolAutoscaling_LOCATION_POLICY_UNSPECIFIED {
		a.LocationPolicy = containerpb.NodePoolAutoscaling_BALANCED
	}
}

// checkAutoscaling refuses bounds GKE refuses. A pool is bounded either
// per zone (min_node_count, max_node_count) or as a whole, over all its
// zones (total_min_node_count, total_max_node_count), never both: the API
// calls the two kinds mutually exclusive. GKE's words are quoted where a
// public trace shows them: both maxima zero
// (terraform-google-modules/terraform-google-kubernetes-engine#1554) and
// both greater than zero (quoted of an update Config Connector sent); for
// the minima the simulator says the same of them.
func checkAutoscaling(pool string, a *containerpb.NodePoolAutoscaling) error {
	if a == nil || !a.Enabled {
		return nil
	}
	switch {
	case a.MaxNodeCount == 0 && a.TotalMaxNodeCount == 0:
		return status.Errorf(codes.InvalidArgument, "Node_pool_autoscaling.max_node_count and node_pool_autoscaling.total_max_node_count cannot be both set to zero.")
	case a.MaxNodeCount > 0 && a.TotalMaxNodeCount > 0:
		return status.Errorf(codes.InvalidArgument, "Node_pool_autoscaling.max_node_count and node_pool_autoscaling.total_max_node_count cannot be both greater than zero.")
	case a.MinNodeCount > 0 && a.TotalMinNodeCount > 0:
		return status.Errorf(codes.InvalidArgument, "Node_pool_autoscaling.min_node_count and node_pool_autoscaling.total_min_node_count cannot be both greater than zero.")
	}
	if totalBounds(a) {
		if a.MinNodeCount != 0 {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: min_node_count cannot be used with total limits (total_max_node_count %d).", pool, a.TotalMaxNodeCount)
		}
		if a.TotalMinNodeCount < 0 || a.TotalMaxNodeCount < 0 || a.TotalMinNodeCount > a.TotalMaxNodeCount {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: invalid autoscaling bounds: total_min_node_count %d, total_max_node_count %d; want 0 <= total_min <= total_max.", pool, a.TotalMinNodeCount, a.TotalMaxNodeCount)
		}
		return nil
	}
	if a.TotalMinNodeCount != 0 {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: total_min_node_count cannot be used with per zone limits (max_node_count %d).", pool, a.MaxNodeCount)
	}
	if a.MinNodeCount < 0 || a.MaxNodeCount < 1 || a.MaxNodeCount > maxNodesPerZone || a.MinNodeCount > a.MaxNodeCount {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: invalid autoscaling bounds: min_node_count %d, max_node_count %d; want 0 <= min <= max, 1 <= max <= %d.", pool, a.MinNodeCount, a.MaxNodeCount, maxNodesPerZone)
	}
	return nil
}

// totalBounds reports whether a bounds the pool as a whole rather than
// per zone.
func totalBounds(a *containerpb.NodePoolAutoscaling) bool {
	return a.TotalMaxNodeCount != 0
}

// withinBounds says why nodes (a count per zone) lie outside a's bounds,
// or "" when they do not: per zone, each zone's count; as a whole, their
// sum.
func withinBounds(a *containerpb.NodePoolAutoscaling, nodes map[string]int32) string {
	if totalBounds(a) {
		var sum int32
		for _, n := range nodes {
			sum += n
		}
		if sum < a.TotalMinNodeCount || sum > a.TotalMaxNodeCount {
			return fmt.Sprintf("%d nodes in all, outside the total bounds [%d, %d]", sum, a.TotalMinNodeCount, a.TotalMaxNodeCount)
		}
		return ""
	}
	for _, z := range slices.Sorted(maps.Keys(nodes)) {
		if n := nodes[z]; n < a.MinNodeCount || n > a.MaxNodeCount {
			return fmt.Sprintf("%d nodes in %s, outside the bounds [%d, %d] per zone", n, z, a.MinNodeCount, a.MaxNodeCount)
		}
	}
	return ""
}

// fate is what an operation that brings up nodes will have done to a node
// pool when it ends. It is decided when the operation starts, which is
// when the injected faults are consumed.
type fate struct {
	pool, uid string      // the node pool
	fail      *spb.Status // nil when every node came up
	status    containerpb.NodePool_Status
	msg       string
	nodes     map[string]int32
	short     *shortfall // the nodes a stockout withholds, nil for none
}

// planNodes decides the fate of np when an operation asks for target nodes
// per zone. A create fails on a zone that lacks the machine type; a zone
// with a stockout pending gets only part of the nodes it lacks, and its
// instance group keeps creating the others (shortfall). Must be called with the
// lock held.
func (s *GServer) planNodes(c *cluster, np *nodePool, target map[string]int32, create bool) fate {
	f := fate{pool: np.pb.Name, uid: np.uid, status: containerpb.NodePool_RUNNING, nodes: maps.Clone(target)}
	if create {
		if z := missingZone(np.pb.Config.MachineType, np.pb.Locations); z != "" {
			msg := fmt.Sprintf("Machine type %q is not available in zone %q.", np.pb.Config.MachineType, z)
			f.fail = rpcStatus(codes.InvalidArgument, "%s", msg)
			f.status, f.msg, f.nodes = containerpb.NodePool_ERROR, msg, map[string]int32{}
			return f
		}
	}
	for _, z := range np.pb.Locations {
		if target[z] <= np.nodes[z] || s.stockouts[z] == 0 {
			continue
		}
		s.stockouts[z]--
		f.nodes[z] = stockedOut(np.nodes[z], target[z])
		if f.short == nil {
			f.short = &shortfall{want: map[string]int32{}, retryAt: s.now().Add(2 * s.opTime)}
		}
		f.short.want[z] = target[z]
		f.short.form = s.stockoutForms[z]
		if f.fail == nil {
			msg := stockoutWords(f.short.form, c, np, z, target[z], f.nodes[z], s.opTime)
			f.fail = rpcStatus(codes.ResourceExhausted, "%s", msg)
			f.status, f.msg = containerpb.NodePool_RUNNING_WITH_ERROR, msg
			switch f.short.form {
			case StockoutCapacity:
				f.status = containerpb.NodePool_ERROR
			case StockoutConditions:
				f.msg = ""
			}
		}
	}
	return f
}

// apply makes the fate real unless the pool has gone meanwhile.
func (f fate) apply(c *cluster) {
	np := c.livePool(f.pool, f.uid)
	if np == nil {
		return
	}
	np.pb.Status, np.pb.StatusMessage = f.status, f.msg
	np.nodes = maps.Clone(f.nodes)
	np.short = f.short.clone()
}

// perZone returns n nodes in each of zones.
func perZone(zones []string, n int32) map[string]int32 {
	m := map[string]int32{}
	for _, z := range zones {
		m[z] = n
	}
	return m
}
