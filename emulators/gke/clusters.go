package gke

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// CreateCluster creates a cluster and its node pools: PROVISIONING until
// the CREATE_CLUSTER operation ends, then RUNNING (ERROR if a pool could
// not be brought up).
func (s *GServer) CreateCluster(_ context.Context, req *containerpb.CreateClusterRequest) (*containerpb.Operation, error) {
	parent, err := parseParent(req.Parent, req.ProjectId, req.Zone)
	if err != nil {
		return nil, err
	}
	if req.Cluster == nil {
		return nil, status.Errorf(codes.InvalidArgument, "Required field cluster not set.")
	}
	in := proto.Clone(req.Cluster).(*containerpb.Cluster)
	if !nameRE.MatchString(in.Name) {
		return nil, status.Errorf(codes.InvalidArgument, "Invalid cluster name %q: must be 1 to 40 lowercase letters, digits or hyphens, start with a letter and not end with a hyphen.", in.Name)
	}
	region, _, ok := regionOf(parent.location)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "Location %q does not exist or is not a GKE location.", parent.location)
	}
	autopilot := in.Autopilot != nil && in.Autopilot.Enabled
	switch {
	case autopilot && (len(in.NodePools) > 0 || in.InitialNodeCount > 0):
		return nil, status.Errorf(codes.InvalidArgument, "Autopilot clusters cannot have node pools or an initial_node_count.")
	case len(in.NodePools) > 0 && (in.InitialNodeCount > 0 || in.NodeConfig != nil):
		return nil, status.Errorf(codes.InvalidArgument, "Cannot specify both node_pools and initial_node_count or node_config.")
	case !autopilot && len(in.NodePools) == 0 && in.InitialNodeCount <= 0:
		return nil, status.Errorf(codes.InvalidArgument, "Cluster.initial_node_count must be greater than zero.")
	case !autopilot && len(in.NodePools) == 0:
		// The legacy form: GKE turns it into a pool named default-pool.
		in.NodePools = []*containerpb.NodePool{{Name: "default-pool", InitialNodeCount: in.InitialNodeCount, Config: in.NodeConfig}}
	}
	if len(in.Locations) == 0 {
		in.Locations = defaultZones(parent.location)
	} else if err := checkLocations(in.Name, region, in.Locations); err != nil {
		return nil, err
	}
	asked := in.ReleaseChannel != nil
	if !asked {
		in.ReleaseChannel = &containerpb.ReleaseChannel{Channel: containerpb.ReleaseChannel_REGULAR}
	}
	def := s.versions[in.ReleaseChannel.Channel]
	if def == "" {
		def = s.versions[containerpb.ReleaseChannel_REGULAR]
	}
	version, err := s.resolveVersion("Master", in.InitialClusterVersion, def, "")
	if err != nil {
		return nil, err
	}
	// A version asked without a channel chooses the channel, as in GKE.
	if !asked && !slices.Contains([]string{"", "-", "latest"}, in.InitialClusterVersion) {
		in.ReleaseChannel.Channel = s.channelOffering(version)
	}

	// The Kubernetes endpoint's listener and CA are made before the lock
	// is taken, and dropped if the cluster is not created.
	kc, err := s.newClusterKube()
	if err != nil {
		return nil, err
	}
	defer func() {
		if kc != nil && kc.c == nil {
			kc.close(false)
		}
	}()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	k := clusterKey{parent.project, parent.location, in.Name}
	if s.clusters[k] != nil {
		return nil, status.Errorf(codes.AlreadyExists, "Already exists: %s.", k.path())
	}
	now := s.now()
	s.endpoints++
	c := &cluster{key: k, region: region, pools: map[string]*nodePool{}}
	reqPools := in.NodePools
	in.NodePools = nil
	in.Id = randomHex(16)
	in.SelfLink = apiBase + k.path()
	in.Zone = parent.location
	in.Location = parent.location
	in.CreateTime = timestamp(now)
	in.Endpoint = fmt.Sprintf("203.0.113.%d", (s.endpoints-1)%254+1)
	in.InitialClusterVersion = version
	in.CurrentMasterVersion = version
	// A cluster created in the legacy form keeps its initial_node_count,
	// as GKE's does; its node_config is its first pool's (clusterOut).
	in.NodeConfig = nil
	in.Etag = randomHex(8)
	in.LabelFingerprint = labelFingerprint(in.ResourceLabels)
	confidentialDefaults(in.ConfidentialNodes)
	in.DatabaseEncryption = databaseEncryption(nil, in.DatabaseEncryption)
	c.pb = in
	for _, p := range reqPools {
		np, err := s.newPool(c, p)
		if err != nil {
			return nil, err
		}
		if c.pools[np.pb.Name] != nil {
			return nil, status.Errorf(codes.InvalidArgument, "Node pool %q is specified more than once.", np.pb.Name)
		}
		c.pools[np.pb.Name] = np
		c.order = append(c.order, np.pb.Name)
	}
	if kc != nil {
		// GKE reports the endpoint once the control plane is up (kubeUp).
		in.Endpoint = ""
		kc.attach(c)
		if kc.env.cfg.AtCreate {
			// As GKE's control plane, up about when the cluster is
			// RUNNING rather than seconds after the first connection.
			go func() { _, _ = kc.ensure() }()
		}
	}
	s.clusters[k] = c
	op := s.startOp("CreateCluster", c, containerpb.Operation_CREATE_CLUSTER, "")
	var first *fate
	for _, name := range c.order {
		np := c.pools[name]
		f := s.planNodes(c, np, perZone(np.pb.Locations, np.pb.InitialNodeCount), true)
		op.eff.fates = append(op.eff.fates, f)
		if f.fail != nil && first == nil {
			first = &f
		}
	}
	if op.fail == nil && first != nil {
		op.fail = rpcStatus(codes.Code(first.fail.Code), "Node pool %q: %s", first.pool, first.fail.Message)
		op.eff.own = true
	}
	s.refresh(c)
	s.log.Info("Creating cluster", "cluster", k.String(), "id", in.Id, "pools", len(c.order))
	return opOut(op), nil
}

// GetCluster returns a copy of the cluster with its node pools.
func (s *GServer) GetCluster(_ context.Context, req *containerpb.GetClusterRequest) (*containerpb.Cluster, error) {
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
	return clusterOut(c), nil
}

// ListClusters lists the project's clusters in one location, or in all
// with location "-", ordered by location then name.
func (s *GServer) ListClusters(_ context.Context, req *containerpb.ListClustersRequest) (*containerpb.ListClustersResponse, error) {
	p, err := parseParent(req.Parent, req.ProjectId, req.Zone)
	if err != nil {
		return nil, err
	}
	if _, _, ok := regionOf(p.location); !ok && p.location != "-" {
		return nil, status.Errorf(codes.InvalidArgument, "Location %q does not exist or is not a GKE location.", p.location)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	var cs []*cluster
	for k, c := range s.clusters {
		if k.project == p.project && (p.location == "-" || k.location == p.location) {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b *cluster) int { return strings.Compare(a.key.String(), b.key.String()) })
	resp := &containerpb.ListClustersResponse{}
	for _, c := range cs {
		resp.Clusters = append(resp.Clusters, clusterOut(c))
	}
	return resp, nil
}

// DeleteCluster deletes a cluster and its node pools: STOPPING until the
// DELETE_CLUSTER operation ends, then gone (GetCluster is NOT_FOUND).
func (s *GServer) DeleteCluster(_ context.Context, req *containerpb.DeleteClusterRequest) (*containerpb.Operation, error) {
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
	// A node pool operation refuses the deletion in the words GKE gives a
	// call on the pool it works on (elastic/cloud-on-k8s#9098).
	for _, op := range c.running {
		if !op.clusterLevel {
			return nil, status.Errorf(codes.FailedPrecondition, "Cluster is running incompatible operation %s.", op.pb.Name)
		}
	}
	if err := s.busy(c, ""); err != nil {
		return nil, err
	}
	op := s.startOp("DeleteCluster", c, containerpb.Operation_DELETE_CLUSTER, "")
	for _, name := range c.order {
		np := c.pools[name]
		op.eff.before = append(op.eff.before, statusOf(np))
		np.pb.Status, np.pb.StatusMessage = containerpb.NodePool_STOPPING, ""
	}
	s.refresh(c)
	s.log.Info("Deleting cluster", "cluster", k.String())
	return opOut(op), nil
}

// upgradeMaster starts an UPGRADE_MASTER operation. Must be called with
// the lock held.
func (s *GServer) upgradeMaster(rpc string, k clusterKey, version string) (*operation, error) {
	c, err := s.cluster(k)
	if err != nil {
		return nil, err
	}
	v, err := s.resolveVersion("Master", version, s.versions[containerpb.ReleaseChannel_RAPID], "")
	if err != nil {
		return nil, err
	}
	if compareVersions(v, c.pb.CurrentMasterVersion) < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "Master version %q is older than the current version %q: downgrades are not supported.", v, c.pb.CurrentMasterVersion)
	}
	if err := s.busy(c, ""); err != nil {
		return nil, err
	}
	op := s.startOp(rpc, c, containerpb.Operation_UPGRADE_MASTER, "")
	op.eff.version = v
	s.refresh(c)
	s.log.Info("Upgrading master", "cluster", k.String(), "version", v)
	return op, nil
}

// databaseEncryption is the application-layer secrets encryption GKE shows
// once a cluster (cur nil) is created with asked, or once an update to
// asked is done, as recorded (containercluster-databaseencryption*, and
// every other recording for a cluster that asks none): DECRYPTED unless a
// key is asked with ENCRYPTED, which GKE shows as
// ALL_OBJECTS_ENCRYPTION_ENABLED, each with the matching currentState;
// decrypting keeps the key that was in use among decryptionKeys. What GKE
// shows while an update runs (the PENDING states) is not recorded.
func databaseEncryption(cur, asked *containerpb.DatabaseEncryption) *containerpb.DatabaseEncryption {
	out := &containerpb.DatabaseEncryption{DecryptionKeys: slices.Clone(cur.GetDecryptionKeys())}
	switch asked.GetState() {
	case containerpb.DatabaseEncryption_ENCRYPTED, containerpb.DatabaseEncryption_ALL_OBJECTS_ENCRYPTION_ENABLED:
		out.KeyName = asked.KeyName
		out.State = containerpb.DatabaseEncryption_ALL_OBJECTS_ENCRYPTION_ENABLED
		out.CurrentState = containerpb.DatabaseEncryption_CURRENT_STATE_ALL_OBJECTS_ENCRYPTION_ENABLED.Enum()
	default:
		if k := cur.GetKeyName(); k != "" && !slices.Contains(out.DecryptionKeys, k) {
			out.DecryptionKeys = append(out.DecryptionKeys, k)
		}
		out.State = containerpb.DatabaseEncryption_DECRYPTED
		out.CurrentState = containerpb.DatabaseEncryption_CURRENT_STATE_DECRYPTED.Enum()
	}
	return out
}
