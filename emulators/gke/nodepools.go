package gke

import (
	"context"
	"maps"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// CreateNodePool adds a node pool: PROVISIONING until the CREATE_NODE_POOL
// operation ends, then RUNNING with initial_node_count nodes per zone.
// What GKE checks up front (name, machine type, accelerators, disks,
// zones, autoscaling bounds) is refused with INVALID_ARGUMENT; a machine
// type a zone does not offer, a stockout or an injected failure make the
// operation end with an error and the pool ERROR or RUNNING_WITH_ERROR.
func (s *GServer) CreateNodePool(_ context.Context, req *containerpb.CreateNodePoolRequest) (*containerpb.Operation, error) {
	k, err := parseCluster(req.Parent, req.ProjectId, req.Zone, req.ClusterId)
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
	if c.pb.Autopilot != nil && c.pb.Autopilot.Enabled {
		return nil, status.Errorf(codes.FailedPrecondition, "Node pools cannot be created in Autopilot cluster %q.", k.cluster)
	}
	np, err := s.newPool(c, req.NodePool)
	if err != nil {
		return nil, err
	}
	if c.pools[np.pb.Name] != nil {
		return nil, status.Errorf(codes.AlreadyExists, "Already exists: %s/nodePools/%s.", k.path(), np.pb.Name)
	}
	if err := s.busy(c, np.pb.Name); err != nil {
		return nil, err
	}
	c.pools[np.pb.Name] = np
	c.order = append(c.order, np.pb.Name)
	op := s.startOp("CreateNodePool", c, containerpb.Operation_CREATE_NODE_POOL, np.pb.Name)
	f := s.planNodes(c, np, perZone(np.pb.Locations, np.pb.InitialNodeCount), true)
	op.eff.fates = []fate{f}
	if op.fail == nil && f.fail != nil {
		op.fail, op.eff.own = f.fail, true
	}
	s.refresh(c)
	s.log.Info("Creating node pool", "nodePool", k.String()+"/nodePools/"+np.pb.Name, "machineType", np.pb.Config.MachineType)
	return opOut(op), nil
}

// GetNodePool returns a copy of the node pool.
func (s *GServer) GetNodePool(_ context.Context, req *containerpb.GetNodePoolRequest) (*containerpb.NodePool, error) {
	k, err := parsePool(req.Name, req.ProjectId, req.Zone, req.ClusterId, req.NodePoolId)
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
	return poolOut(c, np), nil
}

// ListNodePools lists the cluster's node pools in creation order.
func (s *GServer) ListNodePools(_ context.Context, req *containerpb.ListNodePoolsRequest) (*containerpb.ListNodePoolsResponse, error) {
	k, err := parseCluster(req.Parent, req.ProjectId, req.Zone, req.ClusterId)
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
	return &containerpb.ListNodePoolsResponse{NodePools: clusterOut(c).NodePools}, nil
}

// DeleteNodePool deletes a node pool: STOPPING until the DELETE_NODE_POOL
// operation ends, then gone.
func (s *GServer) DeleteNodePool(_ context.Context, req *containerpb.DeleteNodePoolRequest) (*containerpb.Operation, error) {
	return s.poolOp("DeleteNodePool", req.Name, req.ProjectId, req.Zone, req.ClusterId, req.NodePoolId, containerpb.Operation_DELETE_NODE_POOL,
		containerpb.NodePool_STOPPING, nil)
}

// SetNodePoolSize sets the node count per zone: RECONCILING until the
// SET_NODE_POOL_SIZE operation ends, then the size is the pool's
// initial_node_count, as GKE shows it; Server.NodeCounts shows the
// current size.
func (s *GServer) SetNodePoolSize(_ context.Context, req *containerpb.SetNodePoolSizeRequest) (*containerpb.Operation, error) {
	if req.NodeCount < 0 || req.NodeCount > maxNodesPerZone {
		return nil, status.Errorf(codes.InvalidArgument, "node_count %d is out of range [0, %d].", req.NodeCount, maxNodesPerZone)
	}
	return s.poolOp("SetNodePoolSize", req.Name, req.ProjectId, req.Zone, req.ClusterId, req.NodePoolId, containerpb.Operation_SET_NODE_POOL_SIZE,
		containerpb.NodePool_RECONCILING,
		func(c *cluster, np *nodePool, op *operation) {
			f := s.planNodes(c, np, perZone(np.pb.Locations, req.NodeCount), false)
			op.eff.fates = []fate{f}
			if op.fail == nil && f.fail != nil {
				op.fail, op.eff.own = f.fail, true
			}
		})
}

// SetNodePoolAutoscaling changes the autoscaling settings: RECONCILING
// until the operation (UPDATE_CLUSTER, as GKE reports it) ends. As in
// GKE, new bounds do not resize the pool: only the cluster autoscaler
// would (Server.Autoscale).
func (s *GServer) SetNodePoolAutoscaling(_ context.Context, req *containerpb.SetNodePoolAutoscalingRequest) (*containerpb.Operation, error) {
	if req.Autoscaling == nil {
		return nil, status.Errorf(codes.InvalidArgument, "Required field autoscaling not set.")
	}
	return s.setAutoscaling("SetNodePoolAutoscaling", poolRef{req.Name, req.ProjectId, req.Zone, req.ClusterId, req.NodePoolId}, req.Autoscaling)
}

// poolRef is how a request names a node pool: by name, or by the
// deprecated fields.
type poolRef struct{ name, project, zone, cluster, pool string }

// setAutoscaling starts the UPDATE_CLUSTER operation of rpc that gives the
// pool the autoscaling settings in (off when not enabled).
func (s *GServer) setAutoscaling(rpc string, ref poolRef, in *containerpb.NodePoolAutoscaling) (*containerpb.Operation, error) {
	a := &containerpb.NodePoolAutoscaling{}
	if in.Enabled {
		a = proto.Clone(in).(*containerpb.NodePoolAutoscaling)
		autoscalingDefaults(a)
	}
	return s.poolOp(rpc, ref.name, ref.project, ref.zone, ref.cluster, ref.pool, containerpb.Operation_UPDATE_CLUSTER,
		containerpb.NodePool_RECONCILING,
		func(_ *cluster, _ *nodePool, op *operation) {
			op.eff.rpc = "SetNodePoolAutoscaling"
			op.eff.autoscaling = a
		},
		func(_ *cluster, np *nodePool) error { return checkAutoscaling(np.pb.Name, a) })
}

// naming are the UpdateNodePool fields that name the pool or guard the
// change rather than change it.
var naming = map[protoreflect.Name]bool{
	"project_id": true, "zone": true, "cluster_id": true, "node_pool_id": true, "name": true, "etag": true,
}

// UpdateNodePool changes a node pool: RECONCILING until the operation
// ends, UPDATE_CLUSTER for a change of locations alone and UPGRADE_NODES
// for any other (as GKE reports a version, label, taint or kubelet
// configuration change, which it rolls out node by node). The version,
// locations, Kubernetes labels and taints are modelled; any other field
// is accepted as GKE accepts it, and a node configuration field of the
// same name (kubelet_config, linux_node_config, workload_metadata_config,
// ...) is what GetNodePool shows afterwards. A request that changes
// nothing is INVALID_ARGUMENT.
func (s *GServer) UpdateNodePool(_ context.Context, req *containerpb.UpdateNodePoolRequest) (*containerpb.Operation, error) {
	var changes []string
	req.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !naming[fd.Name()] {
			changes = append(changes, string(fd.Name()))
		}
		return true
	})
	if len(changes) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "UpdateNodePool: the request changes nothing.")
	}
	if req.Labels != nil {
		if err := checkNodeLabels(req.Labels.Labels); err != nil {
			return nil, err
		}
	}
	typ := containerpb.Operation_UPGRADE_NODES
	if len(changes) == 1 && changes[0] == "locations" {
		typ = containerpb.Operation_UPDATE_CLUSTER
	}
	var version string
	return s.poolOp("UpdateNodePool", req.Name, req.ProjectId, req.Zone, req.ClusterId, req.NodePoolId, typ,
		containerpb.NodePool_RECONCILING,
		func(c *cluster, np *nodePool, op *operation) {
			f := fate{pool: np.pb.Name, uid: np.uid, status: containerpb.NodePool_RUNNING, nodes: maps.Clone(np.nodes)}
			if len(req.Locations) > 0 {
				// A new zone gets as many nodes as the pool's zones have now.
				var n int32
				for _, z := range np.pb.Locations {
					n = max(n, np.nodes[z])
				}
				f.nodes = map[string]int32{}
				for _, z := range req.Locations {
					f.nodes[z] = n
					if old, ok := np.nodes[z]; ok {
						f.nodes[z] = old
					}
				}
			}
			op.eff.fates = []fate{f}
			op.eff.version = version
			op.eff.update = proto.Clone(req).(*containerpb.UpdateNodePoolRequest)
			op.eff.update.NodeVersion = ""
		},
		func(c *cluster, np *nodePool) error {
			if req.NodeVersion != "" {
				v, err := s.resolveVersion("Node", req.NodeVersion, c.pb.CurrentMasterVersion, c.pb.CurrentMasterVersion)
				if err != nil {
					return err
				}
				if compareVersions(v, c.pb.CurrentMasterVersion) > 0 {
					return status.Errorf(codes.InvalidArgument, "Node pool %q: node version %q must not be newer than the master version %q.", np.pb.Name, v, c.pb.CurrentMasterVersion)
				}
				version = v
			}
			if len(req.Locations) > 0 {
				if err := checkLocations(np.pb.Name, c.region, req.Locations); err != nil {
					return err
				}
			}
			// The configuration as it would be, checked as a new pool's.
			cfg := &containerpb.NodeConfig{MachineType: np.pb.Config.MachineType, DiskType: np.pb.Config.DiskType, DiskSizeGb: np.pb.Config.DiskSizeGb}
			if req.Taints != nil {
				cfg.Taints = req.Taints.Taints
			}
			configFields(cfg, req)
			if err := checkNodeConfig(np.pb.Name, cfg); err != nil {
				return err
			}
			return s.checkTags(c.key.project, req.ResourceManagerTags)
		})
}

// poolOp runs the common shape of a node pool operation: resolve the pool,
// run the optional checks, refuse if busy, start the operation with the
// pool in status during (a failure restores the status it had), and let
// setup complete the operation's effect.
func (s *GServer) poolOp(rpc, name, project, zone, clusterID, poolID string, typ containerpb.Operation_Type, during containerpb.NodePool_Status,
	setup func(*cluster, *nodePool, *operation), checks ...func(*cluster, *nodePool) error) (*containerpb.Operation, error) {
	k, err := parsePool(name, project, zone, clusterID, poolID)
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
	for _, check := range checks {
		if err := check(c, np); err != nil {
			return nil, err
		}
	}
	if err := s.busy(c, k.pool); err != nil {
		return nil, err
	}
	op := s.startOp(rpc, c, typ, k.pool)
	op.eff.before = []poolStatus{statusOf(np)}
	if setup != nil {
		setup(c, np, op)
	}
	np.pb.Status, np.pb.StatusMessage = during, ""
	s.refresh(c)
	s.log.Info("Starting node pool operation", "rpc", rpc, "nodePool", k.String(), "operation", op.pb.Name)
	return opOut(op), nil
}
