package gke

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	apiBase     = "https://container.googleapis.com/v1/"
	computeBase = "https://www.googleapis.com/compute/v1/"
	// computeBetaBase is the form of the links of what GKE creates through
	// Compute Engine's beta API (a group's instance group and template).
	computeBetaBase = "https://www.googleapis.com/compute/beta/"
	// maxConcurrentOps is GKE's per-cluster quota of running operations.
	maxConcurrentOps = 5
)

// cluster is the stored state of one cluster.
type cluster struct {
	key    clusterKey
	region string
	pb     *containerpb.Cluster // NodePools is always nil; pools holds them
	pools  map[string]*nodePool
	order  []string // pool names in creation order
	// running holds the cluster's unfinished operations, oldest first.
	running []*operation
	// errMsg, when set, makes the cluster ERROR (a failed create).
	errMsg string
	gone   bool
	// kube is the cluster's Kubernetes API (WithKubernetes only).
	kube *kubeCluster
}

// nodePool is the stored state of one node pool.
type nodePool struct {
	pb    *containerpb.NodePool
	uid   string
	nodes map[string]int32 // zone → current node count
	gone  bool
	// short is what a stockout left the pool lacking (effects.go).
	short *shortfall
}

// operation is one long-running operation. It is RUNNING until end and
// completes lazily, the first time any call observes the clock past end.
type operation struct {
	pb           *containerpb.Operation
	parent       parentKey
	c            *cluster
	pool         string // "" for cluster-level operations
	uid          string // the node pool's uid
	clusterLevel bool
	seq          int
	end          time.Time
	lost         bool
	// fail, decided when the operation starts, makes it end with an
	// error.
	fail *spb.Status
	eff  effect
}

// pendingUntil is when a node pool operation stops being PENDING and
// starts RUNNING: after the first tenth of its time. GKE answers the
// call that starts one with PENDING; cluster operations start RUNNING.
func (op *operation) pendingUntil(opTime time.Duration) time.Time {
	start, err := time.Parse(time.RFC3339Nano, op.pb.StartTime)
	if err != nil {
		return time.Time{}
	}
	return start.Add(opTime / 10)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// settle completes every operation whose time has come, in the order they
// end. Must be called with the lock held; every RPC and helper calls it
// first, so completion is a pure function of the injected clock.
func (s *GServer) settle() {
	now := s.now()
	var due []*operation
	for _, op := range s.running {
		if !op.end.After(now) {
			due = append(due, op)
		} else if op.pb.Status == containerpb.Operation_PENDING && !now.Before(op.pendingUntil(s.opTime)) {
			op.pb.Status = containerpb.Operation_RUNNING
		}
	}
	slices.SortFunc(due, func(a, b *operation) int {
		if c := a.end.Compare(b.end); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	for _, op := range due {
		s.finish(op)
	}
	s.retryShortfalls(now)
}

// finish ends op now (its end time), applying its effects. Must be called
// with the lock held.
func (s *GServer) finish(op *operation) {
	s.running = slices.DeleteFunc(s.running, func(o *operation) bool { return o == op })
	op.c.running = slices.DeleteFunc(op.c.running, func(o *operation) bool { return o == op })
	op.pb.Status = containerpb.Operation_DONE
	op.pb.EndTime = timestamp(op.end)
	if op.fail != nil {
		op.pb.Error = op.fail
		op.pb.StatusMessage = op.fail.Message
		if op.eff.own {
			for _, f := range op.eff.fates {
				op.pb.NodepoolConditions = append(op.pb.NodepoolConditions, stockoutConditions(op.c.key.project, f.short)...)
			}
		}
	}
	s.complete(op)
	s.refresh(op.c)
	s.log.Info("Operation done", "operation", op.pb.Name, "type", op.pb.OperationType.String(), "target", op.pb.TargetLink, "failed", op.fail != nil)
}

// busy refuses a new operation on c: a cluster-level operation (pool "")
// needs c idle; a node pool operation needs no cluster-level operation and
// none on the same pool, and at most maxConcurrentOps running. Must be
// called with the lock held.
func (s *GServer) busy(c *cluster, pool string) error {
	for _, op := range c.running {
		if pool == "" || op.clusterLevel || op.pool == pool {
			return status.Errorf(codes.FailedPrecondition, "%s", incompatible(c, op, pool))
		}
	}
	if len(c.running) >= maxConcurrentOps {
		return status.Errorf(codes.ResourceExhausted, "Too many operations: cluster %q hits the concurrent operations quota %d, please try again later.", c.key.cluster, maxConcurrentOps)
	}
	return nil
}

// incompatible is GKE's refusal of a call while op runs, in the words
// public reports quote: it names what op is doing to the cluster for the
// operations they show it for ("is currently creating cluster C", ...);
// for another operation, a call on the cluster is told the cluster is
// being operated on ("Operation X is currently operating on cluster C.
// ...": cilium/cilium#14348, GoogleCloudPlatform/kubernetes-engine-samples
// #119) and a call on a pool the operation works on that the cluster runs
// an incompatible operation (rancher/gke-operator#509). pool is the
// refused call's pool, "" for a cluster call.
func incompatible(c *cluster, op *operation, pool string) string {
	doing := map[containerpb.Operation_Type]string{
		containerpb.Operation_CREATE_CLUSTER:   "creating cluster",
		containerpb.Operation_DELETE_CLUSTER:   "deleting cluster",
		containerpb.Operation_UPGRADE_MASTER:   "upgrading cluster",
		containerpb.Operation_CREATE_NODE_POOL: "creating a node pool for cluster",
		containerpb.Operation_DELETE_NODE_POOL: "deleting a node pool for cluster",
	}[op.pb.OperationType]
	switch {
	case doing == "" && pool != "" && op.pool == pool:
		return fmt.Sprintf("Cluster is running incompatible operation %s.", op.pb.Name)
	case doing == "":
		doing = "operating on cluster"
	}
	return fmt.Sprintf("Operation %s is currently %s %s. Please wait and try again once it is done.", op.pb.Name, doing, c.key.cluster)
}

// startOp records a RUNNING operation of rpc on c (and pool, if any), taking
// any failure or loss injected for rpc; its effect is rpc's, which the
// caller completes. Must be called with the lock held.
func (s *GServer) startOp(rpc string, c *cluster, typ containerpb.Operation_Type, pool string) *operation {
	now := s.now()
	s.seq++
	id := fmt.Sprintf("operation-%d-%s", now.UnixMilli(), randomHex(4))
	// GKE links an operation by the project's number, with zones/ for a
	// zonal location, and reports the location in the zone field only.
	at := apiBase + scope(ProjectNumber(c.key.project), c.key.location)
	target := at + "/clusters/" + c.key.cluster
	st := containerpb.Operation_RUNNING
	if pool != "" {
		target += "/nodePools/" + pool
		// A node pool operation is queued first (see settle).
		st = containerpb.Operation_PENDING
	}
	parent := parentKey{c.key.project, c.key.location}
	op := &operation{
		pb: &containerpb.Operation{
			Name:          id,
			Zone:          c.key.location,
			OperationType: typ,
			Status:        st,
			SelfLink:      at + "/operations/" + id,
			TargetLink:    target,
			StartTime:     timestamp(now),
		},
		parent:       parent,
		c:            c,
		pool:         pool,
		clusterLevel: pool == "",
		seq:          s.seq,
		end:          now.Add(s.opTime),
		eff:          effect{rpc: rpc},
	}
	if np := c.pools[pool]; pool != "" && np != nil {
		op.uid = np.uid
	}
	if q := s.opFaults[rpc]; len(q) > 0 {
		op.fail, s.opFaults[rpc] = q[0], q[1:]
	}
	if s.loseNext[rpc] > 0 {
		s.loseNext[rpc]--
		op.lost = true
	}
	s.ops[id] = op
	s.opList = append(s.opList, op)
	s.running = append(s.running, op)
	c.running = append(c.running, op)
	s.log.Info("Operation started", "operation", id, "type", typ.String(), "target", target)
	return op
}

// refresh derives the cluster's status from its running operations, and
// its node version from its pools. Must be called with the lock held.
func (s *GServer) refresh(c *cluster) {
	st, msg := containerpb.Cluster_RUNNING, ""
	if c.errMsg != "" {
		st, msg = containerpb.Cluster_ERROR, c.errMsg
	}
	rank := func(x containerpb.Cluster_Status) int {
		return slices.Index([]containerpb.Cluster_Status{containerpb.Cluster_RUNNING, containerpb.Cluster_ERROR, containerpb.Cluster_RECONCILING, containerpb.Cluster_PROVISIONING, containerpb.Cluster_STOPPING}, x)
	}
	for _, op := range c.running {
		next := containerpb.Cluster_RECONCILING
		switch op.pb.OperationType {
		case containerpb.Operation_CREATE_CLUSTER:
			next = containerpb.Cluster_PROVISIONING
		case containerpb.Operation_DELETE_CLUSTER:
			next = containerpb.Cluster_STOPPING
		}
		if rank(next) > rank(st) {
			st, msg = next, ""
		}
	}
	c.pb.Status, c.pb.StatusMessage = st, msg
	nodeVersion := ""
	for _, name := range c.order {
		if v := c.pools[name].pb.Version; nodeVersion == "" || compareVersions(v, nodeVersion) < 0 {
			nodeVersion = v
		}
	}
	if nodeVersion == "" {
		nodeVersion = c.pb.CurrentMasterVersion
	}
	c.pb.CurrentNodeVersion = nodeVersion
}

// cluster returns the live cluster k. Must be called with the lock held.
func (s *GServer) cluster(k clusterKey) (*cluster, error) {
	c := s.clusters[k]
	if c == nil {
		return nil, status.Errorf(codes.NotFound, "Not found: %s.", k.path())
	}
	return c, nil
}

// pool returns the live node pool k and its cluster. Must be called with
// the lock held.
func (s *GServer) pool(k poolKey) (*cluster, *nodePool, error) {
	c, err := s.cluster(k.clusterKey)
	if err != nil {
		return nil, nil, err
	}
	np := c.pools[k.pool]
	if np == nil {
		return nil, nil, status.Errorf(codes.NotFound, "Not found: node pool %q not found.", k.pool)
	}
	return c, np, nil
}

// removePool drops a node pool from its cluster. Must be called with the
// lock held.
func (s *GServer) removePool(c *cluster, np *nodePool) {
	np.gone = true
	delete(c.pools, np.pb.Name)
	c.order = slices.DeleteFunc(c.order, func(n string) bool { return n == np.pb.Name })
}

// removeCluster drops a cluster. Must be called with the lock held.
func (s *GServer) removeCluster(c *cluster) {
	c.gone = true
	s.kubeGone(c)
	for _, np := range c.pools {
		np.gone = true
	}
	if s.clusters[c.key] == c {
		delete(s.clusters, c.key)
	}
}

// poolOut is the API view of a node pool: a copy, with the instance
// groups GKE reports. Must be called with the lock held.
func poolOut(c *cluster, np *nodePool) *containerpb.NodePool {
	out := proto.Clone(np.pb).(*containerpb.NodePool)
	out.InstanceGroupUrls = nil
	for _, z := range np.pb.Locations {
		out.InstanceGroupUrls = append(out.InstanceGroupUrls, instanceGroupURL(c, np, z))
	}
	if np.pb.Status == containerpb.NodePool_RUNNING_WITH_ERROR {
		out.Conditions = stockoutConditions(c.key.project, np.short)
	}
	return out
}

// instanceGroupURL is the URL of a pool's instance group manager in zone,
// by project ID as GKE gives it.
func instanceGroupURL(c *cluster, np *nodePool, zone string) string {
	return fmt.Sprintf("%sprojects/%s/zones/%s/instanceGroupManagers/%s", computeBase, c.key.project, zone, instanceGroupName(c.key.cluster, np.pb.Name, c.pb.Id, np.uid, zone))
}

// clusterOut is the API view of a cluster, with its node pools. Must be
// called with the lock held.
func clusterOut(c *cluster) *containerpb.Cluster {
	out := proto.Clone(c.pb).(*containerpb.Cluster)
	out.CurrentNodeCount = 0
	out.InstanceGroupUrls = nil
	if len(c.order) > 0 {
		// GKE shows the first pool's node configuration as the
		// cluster's.
		out.NodeConfig = proto.Clone(c.pools[c.order[0]].pb.Config).(*containerpb.NodeConfig)
	}
	for _, name := range c.order {
		np := c.pools[name]
		p := poolOut(c, np)
		out.NodePools = append(out.NodePools, p)
		out.InstanceGroupUrls = append(out.InstanceGroupUrls, p.InstanceGroupUrls...)
		for _, n := range np.nodes {
			out.CurrentNodeCount += n
		}
	}
	return out
}

func opOut(op *operation) *containerpb.Operation {
	return proto.Clone(op.pb).(*containerpb.Operation)
}

func rpcStatus(c codes.Code, format string, args ...any) *spb.Status {
	return status.Newf(c, format, args...).Proto()
}
