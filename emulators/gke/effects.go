package gke

import (
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// effect is what an operation does to its cluster or node pool when it
// ends, decided when it starts. It is data rather than code so that a
// running operation can be saved and restored (Snapshot): complete reads
// it.
type effect struct {
	// rpc is the method that started the operation; it selects the rule
	// complete applies.
	rpc string
	// own marks a failure that is the operation's planned outcome (a zone
	// without the machine type, a stockout), as opposed to an injected or
	// cancelled one: it still applies the fates.
	own bool
	// fates are what the operation does to the nodes of its pools.
	fates []fate
	// before is the status of the pools when the operation started, which
	// a failure restores.
	before []poolStatus
	// version is the master version of UpdateCluster's
	// desired_master_version (rule "UpdateMaster") and UpgradeMaster, the
	// node version of UpdateNodePool.
	version string
	// autoscaling is SetNodePoolAutoscaling's setting.
	autoscaling *containerpb.NodePoolAutoscaling
	// update is UpdateNodePool's request (locations, labels, taints).
	update *containerpb.UpdateNodePoolRequest
	// labels are SetLabels' resource labels.
	labels map[string]string
	// cluster is UpdateCluster's change of the cluster.
	cluster *containerpb.ClusterUpdate
	// maintenance is SetMaintenancePolicy's policy.
	maintenance *containerpb.MaintenancePolicy
	// patch holds the cluster fields an UpdateCluster sets, whole.
	patch *containerpb.Cluster
}

// poolStatus is a node pool's status at some point.
type poolStatus struct {
	pool, uid string
	status    containerpb.NodePool_Status
	msg       string
}

// statusOf records np's status.
func statusOf(np *nodePool) poolStatus {
	return poolStatus{pool: np.pb.Name, uid: np.uid, status: np.pb.Status, msg: np.pb.StatusMessage}
}

// restore puts the pool's status back unless the pool has gone.
func (p poolStatus) restore(c *cluster) {
	if np := c.livePool(p.pool, p.uid); np != nil {
		np.pb.Status, np.pb.StatusMessage = p.status, p.msg
	}
}

// livePool returns the node pool named pool of c if it is still the one
// with uid and neither it nor c has gone; nil otherwise.
func (c *cluster) livePool(pool, uid string) *nodePool {
	if c.gone {
		return nil
	}
	if np := c.pools[pool]; np != nil && np.uid == uid {
		return np
	}
	return nil
}

// complete applies op's effect, as a success or, with op.fail set, a
// failure. Must be called with the lock held.
func (s *GServer) complete(op *operation) {
	if !s.completeCluster(op) {
		s.completePool(op)
	}
}

// completeCluster applies the effect of an operation on the cluster as a
// whole and reports whether op was one; it leaves node pool operations to
// completePool. Must be called with the lock held.
func (s *GServer) completeCluster(op *operation) bool {
	c, e := op.c, op.eff
	failed := op.fail != nil
	switch e.rpc {
	case "CreateCluster":
		switch {
		case !failed:
			e.applyFates(c)
			s.kubeUp(c)
		case c.gone:
		case e.own:
			// A node pool failed; the control plane is there.
			c.errMsg = op.fail.Message
			e.applyFates(c)
			s.kubeUp(c)
		default:
			c.errMsg = op.fail.Message
			for _, np := range c.pools {
				np.pb.Status, np.pb.StatusMessage = containerpb.NodePool_ERROR, op.fail.Message
			}
		}
	case "DeleteCluster":
		if !failed {
			s.removeCluster(c)
			return true
		}
		for _, b := range e.before {
			b.restore(c)
		}
	case "UpdateMaster", "UpgradeMaster":
		if !failed && !c.gone {
			c.pb.CurrentMasterVersion = e.version
		}
	case "UpdateCluster":
		if !failed && !c.gone {
			e.updateCluster(c)
		}
	case "SetMaintenancePolicy":
		if !failed && !c.gone {
			c.pb.MaintenancePolicy = proto.Clone(e.maintenance).(*containerpb.MaintenancePolicy)
			c.pb.MaintenancePolicy.ResourceVersion = randomHex(4)
		}
	case "SetLabels":
		if !failed && !c.gone {
			c.pb.ResourceLabels = maps.Clone(e.labels)
			c.pb.LabelFingerprint = labelFingerprint(e.labels)
		}
	default:
		return false
	}
	return true
}

// updateCluster applies UpdateCluster's change to c.
func (e effect) updateCluster(c *cluster) {
	if v := e.cluster.GetDesiredLoggingService(); v != "" {
		c.pb.LoggingService = v
	}
	if v := e.cluster.GetDesiredMonitoringService(); v != "" {
		c.pb.MonitoringService = v
	}
	if d := e.cluster.GetDesiredDatabaseEncryption(); d != nil {
		c.pb.DatabaseEncryption = databaseEncryption(c.pb.DatabaseEncryption, d)
	}
	if a := e.cluster.GetDesiredClusterAutoscaling(); a != nil {
		c.pb.Autoscaling = proto.Clone(a).(*containerpb.ClusterAutoscaling)
	}
	if t := e.cluster.GetDesiredNodePoolAutoConfigNetworkTags(); t != nil {
		if c.pb.NodePoolAutoConfig == nil {
			c.pb.NodePoolAutoConfig = &containerpb.NodePoolAutoConfig{}
		}
		c.pb.NodePoolAutoConfig.NetworkTags = proto.Clone(t).(*containerpb.NetworkTags)
	}
	if a := e.cluster.GetDesiredAddonsConfig(); a != nil {
		if c.pb.AddonsConfig == nil {
			c.pb.AddonsConfig = &containerpb.AddonsConfig{}
		}
		overlay(c.pb.AddonsConfig, a)
	}
	if e.patch != nil {
		overlay(c.pb, e.patch)
	}
	if locs := e.patch.GetLocations(); len(locs) > 0 {
		// Every pool takes the cluster's new zones.
		for _, f := range e.fates {
			if np := c.livePool(f.pool, f.uid); np != nil {
				np.pb.Locations = slices.Clone(locs)
			}
		}
		e.applyFates(c)
	}
}

// completePool applies the effect of a node pool operation. Must be
// called with the lock held.
func (s *GServer) completePool(op *operation) {
	c, e := op.c, op.eff
	failed := op.fail != nil
	// Nothing happens to a pool that has gone.
	np := c.livePool(op.pool, op.uid)
	if np == nil {
		return
	}
	if failed && !e.own {
		if e.rpc == "CreateNodePool" {
			np.pb.Status, np.pb.StatusMessage = containerpb.NodePool_ERROR, op.fail.Message
		} else {
			for _, b := range e.before {
				b.restore(c)
			}
		}
		return
	}
	switch e.rpc {
	case "DeleteNodePool":
		s.removePool(c, np)
	case "SetNodePoolAutoscaling":
		// New bounds move no node: the cluster autoscaler would, in its
		// own time (Server.Autoscale).
		np.pb.Autoscaling = proto.Clone(e.autoscaling).(*containerpb.NodePoolAutoscaling)
		np.pb.Status, np.pb.StatusMessage = containerpb.NodePool_RUNNING, ""
	case "SetNodePoolSize":
		e.applyFates(c)
		if !failed {
			// GKE shows the size set as the pool's initial_node_count.
			for _, f := range e.fates {
				if len(np.pb.Locations) > 0 {
					np.pb.InitialNodeCount = f.nodes[np.pb.Locations[0]]
				}
			}
		}
	case "UpdateNodePool":
		e.updatePool(c, np)
	default: // CreateNodePool
		e.applyFates(c)
	}
}

// updatePool applies UpdateNodePool's request to np, of c.
func (e effect) updatePool(c *cluster, np *nodePool) {
	req := e.update
	if e.version != "" {
		np.pb.Version = e.version
	}
	if len(req.Locations) > 0 {
		np.pb.Locations = slices.Clone(req.Locations)
	}
	if req.Labels != nil {
		np.pb.Config.Labels = maps.Clone(req.Labels.Labels)
	}
	if req.Taints != nil {
		np.pb.Config.Taints = nil
		for _, t := range req.Taints.Taints {
			np.pb.Config.Taints = append(np.pb.Config.Taints, proto.Clone(t).(*containerpb.NodeTaint))
		}
	}
	configFields(np.pb.Config, req)
	e.applyFates(c)
	np.pb.Etag = randomHex(8)
}

func (e effect) applyFates(c *cluster) {
	for _, f := range e.fates {
		f.apply(c)
	}
}

// shortfall is what a stockout left a node pool lacking: the nodes per
// zone it should have, which the zones' instance groups keep creating
// (Compute Engine's currentActions.creating) until the zones have the
// machines again.
type shortfall struct {
	want map[string]int32
	// retryAt is when the instance groups next try for the missing nodes.
	retryAt time.Time
	// form is how GKE reports it (StockoutAs).
	form StockoutForm
}

func (sh *shortfall) clone() *shortfall {
	if sh == nil {
		return nil
	}
	return &shortfall{want: maps.Clone(sh.want), retryAt: sh.retryAt, form: sh.form}
}

// stockedOut is what a zone out of stock gets when it has cur nodes and
// needs target: half of those it lacks (rounded down), as an instance
// group that created some of its instances before the zone ran out.
func stockedOut(cur, target int32) int32 { return cur + (target-cur)/2 }

// retryShortfalls makes the instance groups of the pools a stockout left
// short try again for their missing nodes, every operation time: a try in
// a zone that still has a stockout pending (Server.Stockout) uses one of
// them and gets nothing more; the first one in a zone that has none gets
// every missing node. A pool that lacks nothing more is RUNNING again, as
// GKE shows it once its instance groups are whole. Must be called with the
// lock held.
func (s *GServer) retryShortfalls(now time.Time) {
	step := max(s.opTime, time.Millisecond)
	for _, c := range s.clusters {
		for _, name := range c.order {
			np := c.pools[name]
			for np.short != nil && !np.short.retryAt.After(now) {
				sh := np.short
				for _, z := range slices.Sorted(maps.Keys(sh.want)) {
					if s.stockouts[z] > 0 {
						s.stockouts[z]--
						continue
					}
					np.nodes[z] = sh.want[z]
					delete(sh.want, z)
				}
				sh.retryAt = sh.retryAt.Add(step)
				if len(sh.want) > 0 {
					continue
				}
				np.short = nil
				if np.pb.Status == containerpb.NodePool_RUNNING_WITH_ERROR || np.pb.Status == containerpb.NodePool_ERROR {
					np.pb.Status, np.pb.StatusMessage = containerpb.NodePool_RUNNING, ""
				}
				s.log.Info("Stockout over: the node pool has all its nodes", "nodePool", c.key.String()+"/nodePools/"+name, "nodes", np.nodes)
			}
		}
	}
}

// configFields copies into cfg the fields of an UpdateNodePool request
// that the node configuration has under the same name and type (those the
// simulator does not model further: kubelet_config, linux_node_config,
// workload_metadata_config, gvnic, ...), as GetNodePool shows them after
// the update, with GKE's kubelet defaults.
func configFields(cfg *containerpb.NodeConfig, req *containerpb.UpdateNodePoolRequest) {
	dst := cfg.ProtoReflect()
	fields := dst.Descriptor().Fields()
	req.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch fd.Name() {
		case "labels", "taints", "locations", "node_version":
			return true
		}
		to := fields.ByName(fd.Name())
		if to == nil || to.Kind() != fd.Kind() || to.Cardinality() != fd.Cardinality() || to.IsMap() != fd.IsMap() {
			return true
		}
		if fd.Kind() == protoreflect.MessageKind && to.Message().FullName() != fd.Message().FullName() {
			return true
		}
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
			v = protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect())
		}
		dst.Set(to, v)
		return true
	})
	kubeletDefaults(cfg)
	confidentialDefaults(cfg.ConfidentialNodes)
}

// kubeletDefaults gives a node configuration GKE's kubelet settings for
// what it leaves unset (recorded: insecureKubeletReadonlyPortEnabled false
// and maxParallelImagePulls 2, with or without a kubeletConfig asked; 3
// for nodes with local SSDs, the images' ephemeral storage among them, as
// GKE documents a default "2 or 3 depending on the disk type" and showed
// for pools with ephemeral storage on local SSDs).
func kubeletDefaults(cfg *containerpb.NodeConfig) {
	if cfg.KubeletConfig == nil {
		cfg.KubeletConfig = &containerpb.NodeKubeletConfig{}
	}
	k := cfg.KubeletConfig
	if k.InsecureKubeletReadonlyPortEnabled == nil {
		k.InsecureKubeletReadonlyPortEnabled = proto.Bool(false)
	}
	if k.MaxParallelImagePulls == 0 {
		k.MaxParallelImagePulls = 2
		if localSSDs(cfg) > 0 {
			k.MaxParallelImagePulls = 3
		}
	}
}

// localSSDs is the number of local SSDs a node configuration gives each
// node, in any of the API's forms.
func localSSDs(cfg *containerpb.NodeConfig) int32 {
	return cfg.LocalSsdCount + cfg.GetEphemeralStorageLocalSsdConfig().GetLocalSsdCount() + cfg.GetLocalNvmeSsdBlockConfig().GetLocalSsdCount()
}
