package gke

import (
	"context"
	"crypto/rand"
	"math/big"
	"slices"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The Set* methods are the API's older forms of UpdateCluster and
// UpdateNodePool. Each is served by the same path as the update it stands
// for, so that it refuses, reports and reads back as that update does:
// an UPDATE_CLUSTER operation on the cluster (the API's Operation.Type
// says master auth, network policy and labels changes use it), or, for
// SetNodePoolManagement, a SET_NODE_POOL_MANAGEMENT operation on the pool.

// SetLoggingService is UpdateCluster's desired_logging_service.
func (s *GServer) SetLoggingService(_ context.Context, req *containerpb.SetLoggingServiceRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	return s.legacyUpdate("SetLoggingService", k, &containerpb.ClusterUpdate{DesiredLoggingService: req.LoggingService})
}

// SetMonitoringService is UpdateCluster's desired_monitoring_service.
func (s *GServer) SetMonitoringService(_ context.Context, req *containerpb.SetMonitoringServiceRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	return s.legacyUpdate("SetMonitoringService", k, &containerpb.ClusterUpdate{DesiredMonitoringService: req.MonitoringService})
}

// SetAddonsConfig is UpdateCluster's desired_addons_config: each addon
// the request configures replaces the cluster's, the others are kept.
func (s *GServer) SetAddonsConfig(_ context.Context, req *containerpb.SetAddonsConfigRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	if req.AddonsConfig == nil {
		return nil, status.Errorf(codes.InvalidArgument, "Required field addons_config not set.")
	}
	return s.legacyUpdate("SetAddonsConfig", k, &containerpb.ClusterUpdate{DesiredAddonsConfig: req.AddonsConfig})
}

// SetLocations is UpdateCluster's desired_locations: the zones of the
// cluster's nodes, which every node pool then has (see updateLocations).
func (s *GServer) SetLocations(_ context.Context, req *containerpb.SetLocationsRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	if len(req.Locations) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "Required field locations not set.")
	}
	return s.legacyUpdate("SetLocations", k, &containerpb.ClusterUpdate{DesiredLocations: req.Locations})
}

// legacyUpdate starts UpdateCluster's operation for u on behalf of rpc,
// whose injected failures it takes.
func (s *GServer) legacyUpdate(rpc string, k clusterKey, u *containerpb.ClusterUpdate) (*containerpb.Operation, error) {
	return s.clusterChange(rpc, k, func(c *cluster, op *operation) error {
		return s.planClusterUpdate(c, op, u)
	})
}

// SetLegacyAbac turns legacy ABAC on or off; GetCluster shows legacyAbac.
func (s *GServer) SetLegacyAbac(_ context.Context, req *containerpb.SetLegacyAbacRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	return s.clusterChange("SetLegacyAbac", k, func(_ *cluster, op *operation) error {
		op.eff.patch = &containerpb.Cluster{LegacyAbac: &containerpb.LegacyAbac{Enabled: req.Enabled}}
		return nil
	})
}

// SetNetworkPolicy sets the cluster's network policy, which GetCluster
// shows. Whether the network policy addon is enabled is not checked.
func (s *GServer) SetNetworkPolicy(_ context.Context, req *containerpb.SetNetworkPolicyRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	if req.NetworkPolicy == nil {
		return nil, status.Errorf(codes.InvalidArgument, "Required field network_policy not set.")
	}
	return s.clusterChange("SetNetworkPolicy", k, func(_ *cluster, op *operation) error {
		op.eff.patch = &containerpb.Cluster{NetworkPolicy: proto.Clone(req.NetworkPolicy).(*containerpb.NetworkPolicy)}
		return nil
	})
}

// basicAuthRemoved is GKE's refusal of basic authentication on a cluster
// of 1.19 or later, as it words it for a create (quoted in
// hashicorp/terraform-provider-google#8032 and
// GoogleCloudPlatform/istio-samples#78) without the sentence about
// creating, which SetMasterAuth does not do.
const basicAuthRemoved = "Basic authentication was removed for GKE cluster versions >= 1.19. Instructions for choosing an alternative authentication method can be found at: https://cloud.google.com/kubernetes-engine/docs/how-to/api-server-authentication."

// SetMasterAuth changes the basic authentication of the cluster's API, as
// the API documents each action: SET_PASSWORD sets update.password,
// GENERATE_PASSWORD a new random one, SET_USERNAME sets update.username
// (an empty one turns basic authentication off, dropping the password;
// another keeps the password given or generates one). Kubernetes removed
// basic authentication in 1.19, and GKE refuses to turn it on for a
// cluster at 1.19 or later (basicAuthRemoved); turning it off is always
// accepted. The simulator's API servers never take the password.
func (s *GServer) SetMasterAuth(_ context.Context, req *containerpb.SetMasterAuthRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	u := req.GetUpdate()
	switch req.Action {
	case containerpb.SetMasterAuthRequest_SET_PASSWORD:
		if u.GetPassword() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "SET_PASSWORD needs update.password.")
		}
	case containerpb.SetMasterAuthRequest_GENERATE_PASSWORD, containerpb.SetMasterAuthRequest_SET_USERNAME:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "Unknown action %v: want SET_PASSWORD, GENERATE_PASSWORD or SET_USERNAME.", req.Action)
	}
	return s.clusterChange("SetMasterAuth", k, func(c *cluster, op *operation) error {
		ma := &containerpb.MasterAuth{}
		if c.pb.MasterAuth != nil {
			ma = proto.Clone(c.pb.MasterAuth).(*containerpb.MasterAuth)
		}
		switch req.Action {
		case containerpb.SetMasterAuthRequest_SET_PASSWORD:
			ma.Password = u.Password
		case containerpb.SetMasterAuthRequest_GENERATE_PASSWORD:
			ma.Password = generatedPassword()
		case containerpb.SetMasterAuthRequest_SET_USERNAME:
			ma.Username, ma.Password = u.GetUsername(), u.GetPassword()
			if ma.Username == "" {
				ma.Password = ""
			} else if ma.Password == "" {
				ma.Password = generatedPassword()
			}
		}
		if (ma.Username != "" || ma.Password != "") && compareVersions(c.pb.CurrentMasterVersion, "1.19.0-gke.0") >= 0 {
			return status.Errorf(codes.InvalidArgument, "%s", basicAuthRemoved)
		}
		op.eff.patch = &containerpb.Cluster{MasterAuth: ma}
		return nil
	})
}

// generatedPassword is a password as GKE generates one: 16 letters and
// digits.
func generatedPassword() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 16)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[n.Int64()]
	}
	return string(b)
}

// StartIPRotation starts a rotation of the control plane's IP (and, with
// rotate_credentials, of its credentials): an UPDATE_CLUSTER operation,
// after which the cluster is rotating until CompleteIPRotation. A cluster
// already rotating is refused with FAILED_PRECONDITION (the simulator's
// words). The endpoint and CA are kept: the simulator's API servers have
// one address and one CA.
func (s *GServer) StartIPRotation(_ context.Context, req *containerpb.StartIPRotationRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	return s.clusterChange("StartIPRotation", k, func(c *cluster, op *operation) error {
		// A cluster that is busy is refused as busy (the rotation state
		// may be about to change).
		if c.rotating && len(c.running) == 0 {
			return status.Errorf(codes.FailedPrecondition, "Cluster %q is already rotating its IP: complete the rotation first.", k.cluster)
		}
		op.eff.rpc = "StartIPRotation"
		return nil
	})
}

// CompleteIPRotation ends the rotation StartIPRotation began: an
// UPDATE_CLUSTER operation. A cluster that is not rotating is refused
// with FAILED_PRECONDITION (the simulator's words).
func (s *GServer) CompleteIPRotation(_ context.Context, req *containerpb.CompleteIPRotationRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	return s.clusterChange("CompleteIPRotation", k, func(c *cluster, op *operation) error {
		if !c.rotating && len(c.running) == 0 {
			return status.Errorf(codes.FailedPrecondition, "Cluster %q is not rotating its IP: start a rotation first.", k.cluster)
		}
		op.eff.rpc = "CompleteIPRotation"
		return nil
	})
}

// clusterChange runs the common shape of a cluster-level UPDATE_CLUSTER
// operation started by rpc: resolve the cluster, refuse if it is busy,
// and let plan check the request against the cluster and set the
// operation's effect (a refusal of plan drops the operation). The
// effect is UpdateCluster's unless plan names its own rule.
func (s *GServer) clusterChange(rpc string, k clusterKey, plan func(*cluster, *operation) error) (*containerpb.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	c, err := s.cluster(k)
	if err != nil {
		return nil, err
	}
	// The plan runs on a draft, before the busy check as the other
	// updates check their requests, so that a refusal leaves no operation
	// behind and consumes no injected fault.
	draft := &operation{eff: effect{rpc: "UpdateCluster"}}
	if err := plan(c, draft); err != nil {
		return nil, err
	}
	if err := s.busy(c, ""); err != nil {
		return nil, err
	}
	op := s.startOp(rpc, c, containerpb.Operation_UPDATE_CLUSTER, "")
	op.eff = draft.eff
	s.refresh(c)
	s.log.Info("Updating cluster", "rpc", rpc, "cluster", k.String())
	return opOut(op), nil
}

// planClusterUpdate sets op's effect to UpdateCluster's change u, checking
// and planning what the simulator models of it ahead: the node locations.
// Must be called with the lock held.
func (s *GServer) planClusterUpdate(c *cluster, op *operation, u *containerpb.ClusterUpdate) error {
	op.eff.cluster = proto.Clone(u).(*containerpb.ClusterUpdate)
	if len(u.DesiredLocations) == 0 {
		return nil
	}
	if err := checkLocations(c.key.cluster, c.region, u.DesiredLocations); err != nil {
		return err
	}
	if _, isZone, _ := regionOf(c.key.location); isZone && !slices.Contains(u.DesiredLocations, c.key.location) {
		return status.Errorf(codes.InvalidArgument, "Locations of zonal cluster %q must include its zone %q.", c.key.cluster, c.key.location)
	}
	op.eff.patch = &containerpb.Cluster{Locations: slices.Clone(u.DesiredLocations)}
	for _, name := range c.order {
		np := c.pools[name]
		op.eff.fates = append(op.eff.fates, relocated(np, u.DesiredLocations))
	}
	return nil
}

// relocated is the fate of np moved to zones: a zone it keeps keeps its
// nodes, a new one gets as many as its busiest zone has, as UpdateNodePool
// spreads a pool to new zones.
func relocated(np *nodePool, zones []string) fate {
	var n int32
	for _, z := range np.pb.Locations {
		n = max(n, np.nodes[z])
	}
	f := fate{pool: np.pb.Name, uid: np.uid, status: containerpb.NodePool_RUNNING, nodes: map[string]int32{}}
	for _, z := range zones {
		f.nodes[z] = n
		if old, ok := np.nodes[z]; ok {
			f.nodes[z] = old
		}
	}
	return f
}

// overlay sets in dst every field set in src, replacing what dst had
// there (a message, list or map whole): a cluster patch, or the addons an
// update configures over the cluster's.
func overlay(dst, src proto.Message) {
	d := dst.ProtoReflect()
	proto.Clone(src).ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
}

// SetNodePoolManagement sets the pool's auto-repair and auto-upgrade: a
// SET_NODE_POOL_MANAGEMENT operation on the pool, after which GetNodePool
// shows the management. As GKE, it refuses to turn either off in a
// cluster enrolled in a release channel, in its words for a create:
// "Auto_upgrade cannot be false when release_channel REGULAR is set."
// (nkoson/gke-tutorial#8), "Auto_upgrade and auto_repair cannot be false
// ..." (rancher/rancher#32282); "Auto_repair cannot be false ..." alone is
// inferred.
func (s *GServer) SetNodePoolManagement(_ context.Context, req *containerpb.SetNodePoolManagementRequest) (*containerpb.Operation, error) {
	m := &containerpb.NodeManagement{}
	if req.Management != nil {
		m = proto.Clone(req.Management).(*containerpb.NodeManagement)
		// Output only: the upgrade options are GKE's to say.
		m.UpgradeOptions = nil
	}
	return s.poolOp("SetNodePoolManagement", req.Name, req.ProjectId, req.Zone, req.ClusterId, req.NodePoolId, containerpb.Operation_SET_NODE_POOL_MANAGEMENT,
		containerpb.NodePool_RECONCILING,
		func(_ *cluster, _ *nodePool, op *operation) { op.eff.management = m },
		func(c *cluster, _ *nodePool) error { return checkManagement(c, m) })
}

// checkManagement refuses node management a release channel does not
// allow, in GKE's words.
func checkManagement(c *cluster, m *containerpb.NodeManagement) error {
	ch := c.pb.GetReleaseChannel().GetChannel()
	if ch == containerpb.ReleaseChannel_UNSPECIFIED {
		return nil
	}
	var off string
	switch {
	case !m.AutoUpgrade && !m.AutoRepair:
		off = "Auto_upgrade and auto_repair cannot"
	case !m.AutoUpgrade:
		off = "Auto_upgrade cannot"
	case !m.AutoRepair:
		off = "Auto_repair cannot"
	default:
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "%s be false when release_channel %s is set.", off, ch)
}
