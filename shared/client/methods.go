package client

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/better-compute/kubernetes/shared/resource"
)

// The resources, as the API returns them.
type (
	NodePool     = resource.NodePool
	Cluster      = resource.Cluster
	State        = resource.State
	Autoscaling  = resource.Autoscaling
	Accelerators = resource.Accelerators
	Taint        = resource.Taint

	Substrate         = resource.Substrate
	SubstrateNodePool = resource.SubstrateNodePool
	SubstrateNode     = resource.SubstrateNode
	SubstratePlan     = resource.SubstratePlan
	PlannedSubstrate  = resource.PlannedSubstrate
	PlanAction        = resource.PlanAction
)

// The kinds of a plan's actions (kubernetesSubstrates.plan).
const (
	PlanCreateCluster   = resource.PlanCreateCluster
	PlanAdoptCluster    = resource.PlanAdoptCluster
	PlanCreateNodePool  = resource.PlanCreateNodePool
	PlanResizeNodePool  = resource.PlanResizeNodePool
	PlanReplaceNodePool = resource.PlanReplaceNodePool
	PlanDeleteNodePool  = resource.PlanDeleteNodePool
	PlanApplyObjects    = resource.PlanApplyObjects
	PlanTeardown        = resource.PlanTeardown
	PlanNone            = resource.PlanNone
)

// Substrate modes: the substrate created its cluster, or adopted one.
const (
	SubstrateCreate = resource.SubstrateCreate
	SubstrateAdopt  = resource.SubstrateAdopt
)

// The states of a node pool or a cluster (a node pool is never
// provisioning).
const (
	StatePending      = resource.StatePending
	StateProvisioning = resource.StateProvisioning
	StateReady        = resource.StateReady
	StateUpdating     = resource.StateUpdating
	StateDeleting     = resource.StateDeleting
	StateDeleted      = resource.StateDeleted
	StateError        = resource.StateError
)

// Cluster modes.
const (
	ModeStandard  = resource.ModeStandard
	ModeAutopilot = resource.ModeAutopilot
)

// The API's methods.
var (
	nodePoolsCreate = method{"kubernetesNodePools", "create", true}
	nodePoolsList   = method{"kubernetesNodePools", "list", true}
	nodePoolsUpdate = method{"kubernetesNodePools", "update", false}
	nodePoolsDelete = method{"kubernetesNodePools", "delete", true}
	clustersCreate  = method{"kubernetesClusters", "create", true}
	clustersGet     = method{"kubernetesClusters", "get", true}
	clustersList    = method{"kubernetesClusters", "list", true}
	clustersDelete  = method{"kubernetesClusters", "delete", true}

	substratesGet       = method{"kubernetesSubstrates", "get", true}
	substratesList      = method{"kubernetesSubstrates", "list", true}
	substratesListNodes = method{"kubernetesSubstrates", "listNodes", true}
	substratesPlan      = method{"kubernetesSubstrates", "plan", true}

	// methods is every method the client calls, in the order of API.md:
	// every method a tenant calls. kubernetesSubstrates.join is bcd's,
	// with a join token, not a user's.
	methods = []method{nodePoolsCreate, nodePoolsList, nodePoolsUpdate, nodePoolsDelete,
		clustersCreate, clustersGet, clustersList, clustersDelete,
		substratesGet, substratesList, substratesListNodes, substratesPlan}
)

// NodePoolSpec is a node pool as a tenant asks for it. Zero optional
// fields are left out of the request.
type NodePoolSpec struct {
	Name         string            `json:"name"`
	MachineType  string            `json:"machineType"`
	NodeCount    int               `json:"nodeCount"`
	Autoscaling  *Autoscaling      `json:"autoscaling,omitempty"`
	DiskGiB      int               `json:"diskGiB,omitempty"`
	DiskType     string            `json:"diskType,omitempty"`
	Spot         bool              `json:"spot,omitempty"`
	Accelerators *Accelerators     `json:"accelerators,omitempty"`
	Zones        []string          `json:"zones,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Taints       []Taint           `json:"taints,omitempty"`
}

// CreateNodePoolRequest is the body of kubernetesNodePools.create.
type CreateNodePoolRequest struct {
	TenantID  string `json:"tenantId"`
	ClusterID string `json:"clusterId"`
	NodePoolSpec
	// IdempotencyKey makes a retry return the same pool; CreateNodePool
	// makes one when it is empty.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// CreateNodePool adds a node pool to a standard cluster and returns it
// pending (kubernetesNodePools.create).
func (c *Client) CreateNodePool(ctx context.Context, req CreateNodePoolRequest) (*NodePool, error) {
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = newIdempotencyKey()
	}
	return callFor[NodePool](ctx, c, nodePoolsCreate, req)
}

// ListNodePools returns the cluster's node pools that are not deleted,
// oldest first (kubernetesNodePools.list).
func (c *Client) ListNodePools(ctx context.Context, tenantID, clusterID string) ([]NodePool, error) {
	var out struct {
		NodePools []NodePool `json:"nodePools"`
	}
	err := c.call(ctx, nodePoolsList, clusterRef{tenantID, clusterID}, &out)
	return out.NodePools, err
}

// UpdateNodePoolRequest is the body of kubernetesNodePools.update: a
// resize. Set NodeCount, Autoscaling, or both; DisableAutoscaling turns
// autoscaling off (the body's "autoscaling": null).
type UpdateNodePoolRequest struct {
	TenantID           string
	ClusterID          string
	NodePoolID         string
	NodeCount          *int
	Autoscaling        *Autoscaling
	DisableAutoscaling bool
}

// MarshalJSON writes the body the API takes.
func (u UpdateNodePoolRequest) MarshalJSON() ([]byte, error) {
	m := map[string]any{"tenantId": u.TenantID, "clusterId": u.ClusterID, "nodePoolId": u.NodePoolID}
	if u.NodeCount != nil {
		m["nodeCount"] = *u.NodeCount
	}
	switch {
	case u.DisableAutoscaling:
		m["autoscaling"] = nil
	case u.Autoscaling != nil:
		m["autoscaling"] = u.Autoscaling
	}
	return json.Marshal(m)
}

// UpdateNodePool resizes a node pool (kubernetesNodePools.update).
func (c *Client) UpdateNodePool(ctx context.Context, req UpdateNodePoolRequest) (*NodePool, error) {
	return callFor[NodePool](ctx, c, nodePoolsUpdate, req)
}

// DeleteNodePool marks a node pool for deletion and returns it deleting
// (kubernetesNodePools.delete).
func (c *Client) DeleteNodePool(ctx context.Context, tenantID, clusterID, nodePoolID string) (*NodePool, error) {
	return callFor[NodePool](ctx, c, nodePoolsDelete, nodePoolRef{tenantID, clusterID, nodePoolID})
}

// CreateClusterRequest is the body of kubernetesClusters.create.
type CreateClusterRequest struct {
	TenantID       string            `json:"tenantId"`
	PoolID         string            `json:"poolId"`
	Name           string            `json:"name"`
	Mode           string            `json:"mode"`
	Region         string            `json:"region"`
	ReleaseChannel string            `json:"releaseChannel,omitempty"`
	NodePools      []NodePoolSpec    `json:"nodePools,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	// IdempotencyKey makes a retry return the same cluster; CreateCluster
	// makes one when it is empty.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// CreateCluster creates a cluster and returns it pending
// (kubernetesClusters.create).
func (c *Client) CreateCluster(ctx context.Context, req CreateClusterRequest) (*Cluster, error) {
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = newIdempotencyKey()
	}
	return callFor[Cluster](ctx, c, clustersCreate, req)
}

// GetCluster returns a cluster (kubernetesClusters.get).
func (c *Client) GetCluster(ctx context.Context, tenantID, clusterID string) (*Cluster, error) {
	return callFor[Cluster](ctx, c, clustersGet, clusterRef{tenantID, clusterID})
}

// ListClustersRequest is the body of kubernetesClusters.list.
type ListClustersRequest struct {
	TenantID  string `json:"tenantId"`
	PoolID    string `json:"poolId,omitempty"`
	PageSize  int    `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

// ClusterList is one page of kubernetesClusters.list.
type ClusterList struct {
	Clusters      []Cluster `json:"clusters"`
	NextPageToken string    `json:"nextPageToken"`
}

// ListClusters returns one page of the tenant's clusters, newest first
// (kubernetesClusters.list).
func (c *Client) ListClusters(ctx context.Context, req ListClustersRequest) (*ClusterList, error) {
	return callFor[ClusterList](ctx, c, clustersList, req)
}

// AllClusters yields every cluster of the tenant (of the pool, unless
// empty), page after page; it stops at the first error, which it yields.
func (c *Client) AllClusters(ctx context.Context, tenantID, poolID string) iter.Seq2[Cluster, error] {
	return func(yield func(Cluster, error) bool) {
		req := ListClustersRequest{TenantID: tenantID, PoolID: poolID, PageSize: 100}
		for {
			page, err := c.ListClusters(ctx, req)
			if err != nil {
				yield(Cluster{}, err)
				return
			}
			for _, cl := range page.Clusters {
				if !yield(cl, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			req.PageToken = page.NextPageToken
		}
	}
}

// DeleteCluster marks a cluster and its node pools for deletion and
// returns it deleting (kubernetesClusters.delete).
func (c *Client) DeleteCluster(ctx context.Context, tenantID, clusterID string) (*Cluster, error) {
	return callFor[Cluster](ctx, c, clustersDelete, clusterRef{tenantID, clusterID})
}

// GetSubstrate returns a pool's substrate (kubernetesSubstrates.get).
func (c *Client) GetSubstrate(ctx context.Context, tenantID, substrateID string) (*Substrate, error) {
	return callFor[Substrate](ctx, c, substratesGet, substrateRef{tenantID, substrateID})
}

// ListSubstrates returns the tenant's substrates that are not deleted, of
// the pool unless poolID is empty, oldest first (kubernetesSubstrates.list).
// A pool has at most one.
func (c *Client) ListSubstrates(ctx context.Context, tenantID, poolID string) ([]Substrate, error) {
	var out struct {
		Substrates []Substrate `json:"substrates"`
	}
	req := struct {
		TenantID string `json:"tenantId"`
		PoolID   string `json:"poolId,omitempty"`
	}{tenantID, poolID}
	err := c.call(ctx, substratesList, req, &out)
	return out.Substrates, err
}

// ListSubstrateNodesRequest is the body of kubernetesSubstrates.listNodes.
type ListSubstrateNodesRequest struct {
	TenantID    string `json:"tenantId"`
	SubstrateID string `json:"substrateId"`
	PageSize    int    `json:"pageSize,omitempty"`
	PageToken   string `json:"pageToken,omitempty"`
}

// SubstrateNodeList is one page of kubernetesSubstrates.listNodes.
type SubstrateNodeList struct {
	Nodes         []SubstrateNode `json:"nodes"`
	NextPageToken string          `json:"nextPageToken"`
}

// ListSubstrateNodes returns one page of the nodes that joined the
// substrate, by name (kubernetesSubstrates.listNodes).
func (c *Client) ListSubstrateNodes(ctx context.Context, req ListSubstrateNodesRequest) (*SubstrateNodeList, error) {
	return callFor[SubstrateNodeList](ctx, c, substratesListNodes, req)
}

// AllSubstrateNodes yields every node that joined the substrate, page
// after page; it stops at the first error, which it yields.
func (c *Client) AllSubstrateNodes(ctx context.Context, tenantID, substrateID string) iter.Seq2[SubstrateNode, error] {
	return func(yield func(SubstrateNode, error) bool) {
		req := ListSubstrateNodesRequest{TenantID: tenantID, SubstrateID: substrateID, PageSize: 1000}
		for {
			page, err := c.ListSubstrateNodes(ctx, req)
			if err != nil {
				yield(SubstrateNode{}, err)
				return
			}
			for _, n := range page.Nodes {
				if !yield(n, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			req.PageToken = page.NextPageToken
		}
	}
}

// PlanSubstrate answers what the pool's substrate would do if the pool's
// next event carried pool (the data of compute.pool.updated, as JSON),
// action by action, and the substrate as it would be once converged
// (kubernetesSubstrates.plan). Nothing changes. A malformed pool is
// INVALID_INPUT naming every broken field under pool.
func (c *Client) PlanSubstrate(ctx context.Context, tenantID string, pool json.RawMessage) (*SubstratePlan, error) {
	req := struct {
		TenantID string          `json:"tenantId"`
		Pool     json.RawMessage `json:"pool"`
	}{tenantID, pool}
	return callFor[SubstratePlan](ctx, c, substratesPlan, req)
}

type substrateRef struct {
	TenantID    string `json:"tenantId"`
	SubstrateID string `json:"substrateId"`
}

type clusterRef struct {
	TenantID  string `json:"tenantId"`
	ClusterID string `json:"clusterId"`
}

type nodePoolRef struct {
	TenantID   string `json:"tenantId"`
	ClusterID  string `json:"clusterId"`
	NodePoolID string `json:"nodePoolId"`
}

// newIdempotencyKey is a key the API takes ([A-Za-z0-9._:-]{1,128}).
func newIdempotencyKey() string { return "bc-" + newID() }

// callFor calls m and returns its answer as a T, or nil and the error.
func callFor[T any](ctx context.Context, c *Client, m method, req any) (*T, error) {
	var v T
	if err := c.call(ctx, m, req, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
