// Package resource holds the public resources of the Kubernetes API (node
// pools and clusters) as the API returns them, their states, and their IDs.
//
// The same structs are stored in Firestore: the json tags are the public
// contract (API.md §4), the firestore tags the stored field names.
package resource

import (
	"fmt"
	"time"

	"go.jetify.com/typeid"
)

// State is the lifecycle state of a node pool or a cluster.
type State string

// The states of API.md §4. Provisioning applies to clusters only.
const (
	StatePending      State = "pending"
	StateProvisioning State = "provisioning"
	StateReady        State = "ready"
	StateUpdating     State = "updating"
	StateDeleting     State = "deleting"
	StateDeleted      State = "deleted"
	StateError        State = "error"
)

// Cluster modes.
const (
	ModeStandard  = "standard"
	ModeAutopilot = "autopilot"
)

// MaxNodePools is the number of node pools that are not deleted a cluster may
// have (the seed's quota).
const MaxNodePools = 10

// ID prefixes of TypeIDs.
const (
	ClusterPrefix  = "kcl"
	NodePoolPrefix = "knp"
)

// Autoscaling bounds the node count of a pool per zone.
type Autoscaling struct {
	MinNodes int `json:"minNodes" firestore:"minNodes"`
	MaxNodes int `json:"maxNodes" firestore:"maxNodes"`
}

// Accelerators are the GPUs attached to each node of a pool.
type Accelerators struct {
	Type  string `json:"type" firestore:"type"`
	Count int    `json:"count" firestore:"count"`
}

// Taint is a Kubernetes taint put on every node of a pool.
type Taint struct {
	Key    string `json:"key" firestore:"key"`
	Value  string `json:"value" firestore:"value"`
	Effect string `json:"effect" firestore:"effect"`
}

// NodePool is a group of worker nodes of a standard cluster. Name is also its
// provider-side name. Optional fields that were not given are omitted
// (Autoscaling, Accelerators, DiskGiB, DiskType) or empty (Zones, Labels,
// Taints, never null in JSON).
type NodePool struct {
	ID           string            `json:"id" firestore:"id"`
	TenantID     string            `json:"tenantId" firestore:"tenantId"`
	ClusterID    string            `json:"clusterId" firestore:"clusterId"`
	Name         string            `json:"name" firestore:"name"`
	MachineType  string            `json:"machineType" firestore:"machineType"`
	NodeCount    int               `json:"nodeCount" firestore:"nodeCount"`
	Autoscaling  *Autoscaling      `json:"autoscaling,omitempty" firestore:"autoscaling"`
	DiskGiB      int               `json:"diskGiB,omitempty" firestore:"diskGiB,omitempty"`
	DiskType     string            `json:"diskType,omitempty" firestore:"diskType,omitempty"`
	Spot         bool              `json:"spot" firestore:"spot"`
	Accelerators *Accelerators     `json:"accelerators,omitempty" firestore:"accelerators"`
	Zones        []string          `json:"zones" firestore:"zones"`
	Labels       map[string]string `json:"labels" firestore:"labels"`
	Taints       []Taint           `json:"taints" firestore:"taints"`
	// ManagedBy is the substrate (ksb_...) that manages the pool, if any.
	ManagedBy string    `json:"managedBy,omitempty" firestore:"managedBy,omitempty"`
	State     State     `json:"state" firestore:"state"`
	Message   string    `json:"message" firestore:"message"`
	Version   int64     `json:"version" firestore:"version"`
	CreatedAt time.Time `json:"createdAt" firestore:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt" firestore:"updatedAt"`

	// CurrentNodeCount is the nodes the provider runs for the pool in all
	// its zones, as last observed; nil until observed and when it cannot
	// be read.
	CurrentNodeCount *int `json:"currentNodeCount,omitempty" firestore:"currentNodeCount,omitempty"`
}

// Normalize replaces nil collections by empty ones, so the JSON shows [] and
// {} rather than null, and times by their UTC value.
func (p *NodePool) Normalize() {
	if p.Zones == nil {
		p.Zones = []string{}
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	if p.Taints == nil {
		p.Taints = []Taint{}
	}
	p.CreatedAt = p.CreatedAt.UTC()
	p.UpdatedAt = p.UpdatedAt.UTC()
}

// Cluster is a managed Kubernetes cluster on a provider account.
// ProviderName, derived from the ID, is its provider-side name.
type Cluster struct {
	ID                string            `json:"id" firestore:"id"`
	TenantID          string            `json:"tenantId" firestore:"tenantId"`
	PoolID            string            `json:"poolId" firestore:"poolId"`
	AccountID         string            `json:"accountId" firestore:"accountId"`
	Name              string            `json:"name" firestore:"name"`
	Mode              string            `json:"mode" firestore:"mode"`
	Region            string            `json:"region" firestore:"region"`
	ReleaseChannel    string            `json:"releaseChannel" firestore:"releaseChannel"`
	KubernetesVersion string            `json:"kubernetesVersion" firestore:"kubernetesVersion"`
	Endpoint          string            `json:"endpoint" firestore:"endpoint"`
	ProviderName      string            `json:"providerName" firestore:"providerName"`
	Labels            map[string]string `json:"labels" firestore:"labels"`
	// ManagedBy is the substrate (ksb_...) that manages the cluster, if any.
	ManagedBy string    `json:"managedBy,omitempty" firestore:"managedBy,omitempty"`
	State     State     `json:"state" firestore:"state"`
	Message   string    `json:"message" firestore:"message"`
	Version   int64     `json:"version" firestore:"version"`
	CreatedAt time.Time `json:"createdAt" firestore:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt" firestore:"updatedAt"`
}

// Normalize replaces nil collections by empty ones and times by UTC.
func (c *Cluster) Normalize() {
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.CreatedAt = c.CreatedAt.UTC()
	c.UpdatedAt = c.UpdatedAt.UTC()
}

// NewClusterID returns a fresh cluster TypeID (kcl_...).
func NewClusterID() string { return NewID(ClusterPrefix) }

// NewNodePoolID returns a fresh node pool TypeID (knp_...).
func NewNodePoolID() string { return NewID(NodePoolPrefix) }

// NewID returns a fresh TypeID with the prefix.
func NewID(prefix string) string {
	id, err := typeid.WithPrefix(prefix)
	if err != nil {
		// Only an invalid prefix fails, and ours are constants.
		panic(fmt.Sprintf("typeid %q: %v", prefix, err))
	}
	return id.String()
}

// ProviderClusterName is the provider-side name of a cluster: its ID with
// the underscore GKE does not allow replaced by a dash, so two tenants on one
// account never collide.
func ProviderClusterName(clusterID string) string {
	b := []byte(clusterID)
	for i, c := range b {
		if c == '_' {
			b[i] = '-'
		}
	}
	return string(b)
}

// SubstratePrefix is the TypeID prefix of substrates.
const SubstratePrefix = "ksb"

// NewSubstrateID returns a fresh substrate TypeID (ksb_...).
func NewSubstrateID() string { return NewID(SubstratePrefix) }

// Substrate modes: the substrate creates its cluster or adopts one.
const (
	SubstrateCreate = "create"
	SubstrateAdopt  = "adopt"
)

// Substrate is the managed Kubernetes cluster behind a pool whose policy
// asks for one (API.md §9).
type Substrate struct {
	ID          string              `json:"id"`
	TenantID    string              `json:"tenantId"`
	PoolID      string              `json:"poolId"`
	PoolVersion int64               `json:"poolVersion"`
	AccountID   string              `json:"accountId"`
	Mode        string              `json:"mode"`
	ClusterID   string              `json:"clusterId"`
	NodePools   []SubstrateNodePool `json:"nodePools"`
	JoinedNodes int64               `json:"joinedNodes"`
	State       State               `json:"state"`
	Message     string              `json:"message"`
	CreatedAt   time.Time           `json:"createdAt"`
	UpdatedAt   time.Time           `json:"updatedAt"`
}

// SubstrateNodePool is the node pool of one of a substrate's flavors.
type SubstrateNodePool struct {
	Flavor     string `json:"flavor" firestore:"flavor"`
	Name       string `json:"name" firestore:"name"`
	NodePoolID string `json:"nodePoolId" firestore:"nodePoolId"`
	State      State  `json:"state" firestore:"state"`
}

// SubstrateNode is a node that joined a substrate.
type SubstrateNode struct {
	Name       string    `json:"name" firestore:"name"`
	Flavor     string    `json:"flavor" firestore:"flavor"`
	Zone       string    `json:"zone" firestore:"zone"`
	ProviderID string    `json:"providerId" firestore:"providerId"`
	JoinedAt   time.Time `json:"joinedAt" firestore:"joinedAt"`
}

// JoinResult is the answer of kubernetesSubstrates.join: the node's
// substrate, and the flavor whose node pool it is in.
type JoinResult struct {
	SubstrateID string `json:"substrateId"`
	PoolID      string `json:"poolId"`
	NodeName    string `json:"nodeName"`
	Flavor      string `json:"flavor"`
}
