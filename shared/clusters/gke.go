package clusters

import (
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// names are the provider's resource names of one cluster.
type names struct {
	parent  string // projects/P/locations/L
	cluster string // parent/clusters/C
}

func namesOf(c *model.Cluster) names {
	parent := fmt.Sprintf("projects/%s/locations/%s", c.Spec.Project, c.Spec.Region)
	return names{parent: parent, cluster: parent + "/clusters/" + c.Spec.ProviderName}
}

func (n names) pool(name string) string { return n.cluster + "/nodePools/" + name }

func (n names) operation(id string) string {
	if strings.HasPrefix(id, "projects/") {
		return id
	}
	return n.parent + "/operations/" + id
}

// sameTarget reports whether an operation's targetLink is the cluster or
// pool named name (projects/P/locations/L/clusters/C[/nodePools/NP]) of
// the location the operations were listed in. GKE writes the link with
// the project's number and, for a zonal cluster, zones/Z: only what
// follows the location says which cluster or pool.
func sameTarget(link, name string) bool {
	i := strings.Index(name, "/clusters/")
	return i >= 0 && strings.HasSuffix(link, name[i:])
}

// observe turns the provider's cluster into what the planner reads.
func observe(c *containerpb.Cluster) *ObservedCluster {
	o := &ObservedCluster{
		ID:       c.GetId(),
		Status:   c.GetStatus().String(),
		Message:  withConditions(c.GetStatusMessage(), c.GetConditions()),
		Version:  c.GetCurrentMasterVersion(),
		Endpoint: c.GetEndpoint(),
		CA:       c.GetMasterAuth().GetClusterCaCertificate(),
		Pools:    map[string]ObservedPool{},
	}
	for _, np := range c.GetNodePools() {
		op := ObservedPool{Status: np.GetStatus().String(), Message: withConditions(np.GetStatusMessage(), np.GetConditions()), Shape: observedShape(np)}
		if a := np.GetAutoscaling(); a.GetEnabled() {
			// Bounds over the whole pool (total_min_node_count and
			// total_max_node_count, which the product never sends)
			// read as per-zone 0..0: unlike any spec's, so a run sets
			// the spec's bounds.
			op.Autoscaling = &resource.Autoscaling{MinNodes: int(a.GetMinNodeCount()), MaxNodes: int(a.GetMaxNodeCount())}
		}
		o.Pools[np.GetName()] = op
	}
	return o
}

// fault classifies a provider error. Transient errors (the service is
// down, rate limits, another operation running) are retried with backoff;
// the others are the tenant's to see.
func fault(err error) *Fault {
	st, _ := status.FromError(err)
	return &Fault{Transient: transient(st.Code(), st.Message()), Message: st.Message()}
}

func transient(c codes.Code, msg string) bool {
	if isStockout(msg) {
		// A zone out of machines passes, whatever the code says: GKE
		// keeps creating the nodes.
		return true
	}
	switch c {
	case codes.InvalidArgument, codes.OutOfRange, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
		return false
	case codes.ResourceExhausted:
		return !resourceQuota(msg)
	}
	return true
}

// resourceQuota reports whether a RESOURCE_EXHAUSTED is a quota of the
// tenant's project's resources ("Insufficient regional quota to satisfy
// request: resource "CPUS" ...", "Quota 'GPUS_ALL_REGIONS' exceeded"):
// the tenant's to fix, shown as the pool's error. The provider's rate
// limits ("... limit 'Requests per minute' ...") and its limit of
// concurrent operations ("Too many operations") pass by themselves and are
// retried unseen, as is a zone out of stock.
func resourceQuota(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "quota") && !strings.Contains(m, "per minute") && !strings.Contains(m, "too many operations")
}

// outcome reads a provider operation.
func outcome(op *containerpb.Operation) *OpOutcome {
	if op.GetStatus() != containerpb.Operation_DONE {
		return &OpOutcome{}
	}
	o := &OpOutcome{Done: true}
	if e := op.GetError(); e != nil && codes.Code(e.GetCode()) != codes.OK {
		msg := e.GetMessage()
		if msg == "" {
			msg = op.GetStatusMessage()
		}
		msg = withConditions(msg, slices.Concat(op.GetNodepoolConditions(), op.GetClusterConditions()))
		o.Err = &Fault{Transient: transient(codes.Code(e.GetCode()), msg), Message: msg}
	}
	return o
}

// opTypes are the operation types the provider reports for each call.
var opTypes = map[string][]containerpb.Operation_Type{
	CreateCluster:  {containerpb.Operation_CREATE_CLUSTER},
	DeleteCluster:  {containerpb.Operation_DELETE_CLUSTER},
	CreateNodePool: {containerpb.Operation_CREATE_NODE_POOL},
	DeleteNodePool: {containerpb.Operation_DELETE_NODE_POOL},
	SetSize:        {containerpb.Operation_SET_NODE_POOL_SIZE},
	SetAutoscaling: {containerpb.Operation_UPDATE_CLUSTER, containerpb.Operation_SET_NODE_POOL_MANAGEMENT},
}

// nodePool is the provider's form of a pool.
func nodePool(np *model.NodePool) *containerpb.NodePool {
	p := &np.Spec
	cfg := &containerpb.NodeConfig{
		MachineType: p.MachineType,
		DiskSizeGb:  int32(p.DiskGiB),
		DiskType:    p.DiskType,
		Spot:        p.Spot,
		Labels:      p.Labels,
	}
	if p.Accelerators != nil {
		cfg.Accelerators = []*containerpb.AcceleratorConfig{{AcceleratorType: p.Accelerators.Type, AcceleratorCount: int64(p.Accelerators.Count)}}
	}
	for _, t := range p.Taints {
		cfg.Taints = append(cfg.Taints, &containerpb.NodeTaint{Key: t.Key, Value: t.Value, Effect: taintEffect(t.Effect)})
	}
	return &containerpb.NodePool{
		Name:             p.Name,
		Config:           cfg,
		InitialNodeCount: int32(p.NodeCount),
		Locations:        p.Zones,
		Autoscaling:      autoscaling(p.Autoscaling),
	}
}

// setNodeServiceAccount makes the nodes of a cluster to create (pc, nil
// for a pool added later) and of its pools run as the service account
// email; for an autopilot cluster, the nodes GKE provisions. Empty leaves
// GKE's default.
func setNodeServiceAccount(email string, pc *containerpb.Cluster, pools ...*containerpb.NodePool) {
	if email == "" {
		return
	}
	for _, np := range pools {
		np.Config.ServiceAccount = email
	}
	if pc.GetAutopilot().GetEnabled() {
		pc.Autoscaling = &containerpb.ClusterAutoscaling{
			AutoprovisioningNodePoolDefaults: &containerpb.AutoprovisioningNodePoolDefaults{ServiceAccount: email},
		}
	}
}

func autoscaling(a *resource.Autoscaling) *containerpb.NodePoolAutoscaling {
	if a == nil {
		return &containerpb.NodePoolAutoscaling{Enabled: false}
	}
	return &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: int32(a.MinNodes), MaxNodeCount: int32(a.MaxNodes)}
}

func taintEffect(e string) containerpb.NodeTaint_Effect {
	switch e {
	case "NoSchedule":
		return containerpb.NodeTaint_NO_SCHEDULE
	case "PreferNoSchedule":
		return containerpb.NodeTaint_PREFER_NO_SCHEDULE
	case "NoExecute":
		return containerpb.NodeTaint_NO_EXECUTE
	}
	return containerpb.NodeTaint_EFFECT_UNSPECIFIED
}

func releaseChannel(ch string) containerpb.ReleaseChannel_Channel {
	switch ch {
	case "rapid":
		return containerpb.ReleaseChannel_RAPID
	case "stable":
		return containerpb.ReleaseChannel_STABLE
	}
	return containerpb.ReleaseChannel_REGULAR
}

// cluster is the provider's form of a cluster to create, with its pools.
func cluster(c *model.Cluster, pools []model.NodePool) *containerpb.Cluster {
	// The cluster's own labels follow Kubernetes' rules, which GKE's
	// resource labels are stricter than (no dots, slashes or capitals): they
	// stay on our resource. The provider's label values allow no underscore.
	labels := map[string]string{"better-compute-cluster": strings.ReplaceAll(c.ID, "_", "-")}
	pc := &containerpb.Cluster{
		Name:           c.Spec.ProviderName,
		ResourceLabels: labels,
		ReleaseChannel: &containerpb.ReleaseChannel{Channel: releaseChannel(c.Spec.ReleaseChannel)},
	}
	if c.Spec.Mode == resource.ModeAutopilot {
		pc.Autopilot = &containerpb.Autopilot{Enabled: true}
		return pc
	}
	// The nodes go in the zones the cluster may use (the account's, or a
	// substrate policy's), not GKE's default ones of the region.
	pc.Locations = slices.Clone(c.Spec.Zones)
	// Pools the provider refused before are left out, so that they do
	// not hold back the others; they are created on their own once the
	// cluster exists. When all of them were refused they are all asked
	// again, as the provider needs at least one.
	for _, refused := range []bool{false, true} {
		for i := range pools {
			if np := &pools[i]; !np.Spec.Deleting && (np.Status.State == resource.StateError) == refused {
				pc.NodePools = append(pc.NodePools, nodePool(&pools[i]))
			}
		}
		if len(pc.NodePools) > 0 {
			break
		}
	}
	return pc
}
