package gke

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// UpdateCluster applies a change to a cluster: desired_node_pool_autoscaling
// (of desired_node_pool_id, which may be left out when the cluster has one
// pool), as SetNodePoolAutoscaling does and with the same UPDATE_CLUSTER
// operation on the pool; desired_master_version, an UPGRADE_MASTER operation; or
// any other change, an UPDATE_CLUSTER operation on the cluster, as GKE
// answers (recorded: desired_cluster_autoscaling with node
// auto-provisioning, desired_node_pool_auto_config_network_tags), which
// applies the logging and monitoring services, cluster autoscaling, the
// auto-provisioned pools' network tags, database encryption, addons and
// node locations (which move every pool) to what
// GetCluster shows and keeps the rest unmodelled (doc.go).
// An update that sets nothing is INVALID_ARGUMENT "Must specify a field to
// update.", as in GKE. Node pool autoscaling or a master version together
// with another field breaks the API's rule for ClusterUpdate, "Exactly one
// update can be applied to a cluster with each request, so at most one
// field can be provided", and is INVALID_ARGUMENT in those words, which
// name the fields (GKE's own words for it are in no public trace). The
// other fields are accepted together, as GKE took desired_logging_service
// with desired_monitoring_service (recorded: containercluster-zonal);
// desired_node_pool_id and etag only name the pool and guard the change.
func (s *GServer) UpdateCluster(_ context.Context, req *containerpb.UpdateClusterRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
	if err != nil {
		return nil, err
	}
	u := req.Update
	var set []string
	if u != nil {
		u.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			set = append(set, string(fd.Name()))
			return true
		})
	}
	set = slices.DeleteFunc(set, func(f string) bool { return f == "desired_node_pool_id" || f == "etag" })
	slices.Sort(set) // the refusal names them in an order of its own
	own := slices.ContainsFunc(set, func(f string) bool { return f == "desired_node_pool_autoscaling" || f == "desired_master_version" })
	switch {
	case len(set) == 0:
		return nil, status.Errorf(codes.InvalidArgument, "Must specify a field to update.")
	case !own:
		return s.updateCluster(k, u)
	case len(set) > 1:
		return nil, status.Errorf(codes.InvalidArgument, "Exactly one update can be applied to a cluster with each request, so at most one field can be provided: %s.", strings.Join(set, ", "))
	}
	switch set[0] {
	case "desired_node_pool_autoscaling":
		pool, err := s.onlyPool(k, u.DesiredNodePoolId)
		if err != nil {
			return nil, err
		}
		return s.setAutoscaling("UpdateCluster", poolRef{name: k.String() + "/nodePools/" + pool}, u.DesiredNodePoolAutoscaling)
	case "desired_master_version":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.settle()
		op, err := s.upgradeMaster("UpdateCluster", k, u.DesiredMasterVersion)
		if err != nil {
			return nil, err
		}
		// The rule keeps the name of the RPC that shared it, which saved
		// states (Snapshot) still carry.
		op.eff.rpc = "UpdateMaster"
		return opOut(op), nil
	}
	panic("unreachable")
}

// updateCluster starts the UPDATE_CLUSTER operation of a change on the
// cluster itself; complete applies what the simulator models of it.
func (s *GServer) updateCluster(k clusterKey, u *containerpb.ClusterUpdate) (*containerpb.Operation, error) {
	return s.clusterChange("UpdateCluster", k, func(c *cluster, op *operation) error {
		return s.planClusterUpdate(c, op, u)
	})
}

// onlyPool returns the node pool an update names, or the cluster's only
// pool when it names none.
func (s *GServer) onlyPool(k clusterKey, pool string) (string, error) {
	if pool != "" {
		return pool, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	c, err := s.cluster(k)
	if err != nil {
		return "", err
	}
	if len(c.order) != 1 {
		return "", status.Errorf(codes.InvalidArgument, "desired_node_pool_id must be set: cluster %q has %d node pools.", k.cluster, len(c.order))
	}
	return c.order[0], nil
}

// SetLabels replaces the cluster's resource labels: an UPDATE_CLUSTER
// operation on the cluster, after which GetCluster shows the labels and a
// new labelFingerprint. A label_fingerprint that is not the cluster's
// current one is refused with FAILED_PRECONDITION, so that a caller does
// not overwrite labels it has not seen; an empty one is not checked.
func (s *GServer) SetLabels(_ context.Context, req *containerpb.SetLabelsRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
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
	if req.LabelFingerprint != "" && req.LabelFingerprint != c.pb.LabelFingerprint {
		return nil, status.Errorf(codes.FailedPrecondition, "Labels could not be set due to fingerprint mismatch.")
	}
	if err := s.busy(c, ""); err != nil {
		return nil, err
	}
	op := s.startOp("SetLabels", c, containerpb.Operation_UPDATE_CLUSTER, "")
	op.eff.labels = maps.Clone(req.ResourceLabels)
	s.refresh(c)
	s.log.Info("Setting cluster labels", "cluster", k.String())
	return opOut(op), nil
}

// labelFingerprint is a fingerprint of resource labels: it changes when
// they do.
func labelFingerprint(labels map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.Write([]byte(k + "=" + labels[k] + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}

// SetMaintenancePolicy sets the cluster's maintenance policy: an
// UPDATE_CLUSTER operation on the cluster, as GKE answers (recorded),
// after which GetCluster shows the policy with a new resourceVersion.
// The policy is kept, not acted on: the simulator upgrades nothing by
// itself.
func (s *GServer) SetMaintenancePolicy(_ context.Context, req *containerpb.SetMaintenancePolicyRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Name, req.ProjectId, req.Zone, req.ClusterId)
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
	op := s.startOp("SetMaintenancePolicy", c, containerpb.Operation_UPDATE_CLUSTER, "")
	op.eff.maintenance = proto.Clone(req.GetMaintenancePolicy()).(*containerpb.MaintenancePolicy)
	if op.eff.maintenance == nil {
		op.eff.maintenance = &containerpb.MaintenancePolicy{}
	}
	s.refresh(c)
	s.log.Info("Setting the maintenance policy", "cluster", k.String())
	return opOut(op), nil
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
