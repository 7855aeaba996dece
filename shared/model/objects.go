// Package model holds the documents of ARCHITECTURE.md's data model as
// plain values: clusters, node pools, substrates, accounts, pools,
// tenants and a pool's index, with the values the domain's decisions take
// and return (PoolState, PoolDecision, ClusterCreate, AdoptionRequest,
// Adoption), and how a document reads as the public resource (View, from
// ClusterState and NodePoolState). It has no rule and no I/O: the rules
// are lifecycle's, the paths and transactions the store's; both import
// it, and it sits below both.
//
// Every stored object has a spec and a status, as Kubernetes objects do. The
// spec is what the tenant asked for: only the API writes it, and every write
// bumps its Generation. The status is what the reconciler last saw and did:
// only the reconciler writes it, always whole, with the generation it acted
// on (ObservedGeneration). Neither side can drop the other's fields, and a
// run that acted on an older generation is told by a version check, not by
// comparing fields. The public state (resource.State) is derived from both
// halves, never stored on its own: see ClusterState and NodePoolState.
package model

import (
	"maps"
	"slices"
	"time"

	"github.com/better-compute/kubernetes/shared/resource"
)

// DeletedTTL is how long the documents of deleted pools and clusters are
// kept, for idempotent replays and audits, before Firestore's TTL policy on
// expireAt removes them.
const DeletedTTL = 30 * 24 * time.Hour

// Intent records a provider call about to be made, before it is made, so
// that a run killed between the call and recording its operation, or
// whose call failed transiently (maybe after the provider did it), is
// followed by one that finds the operation instead of calling again.
type Intent struct {
	Kind      string    `firestore:"kind"`
	At        time.Time `firestore:"at"`
	NodeCount int       `firestore:"nodeCount"` // the size asked by a resize
}

// ClusterSpec is what the tenant asked of a cluster, and what the API fixed
// when it was created (its account's project, zones and provider name).
type ClusterSpec struct {
	PoolID         string            `firestore:"poolId"`
	AccountID      string            `firestore:"accountId"`
	Name           string            `firestore:"name"`
	Mode           string            `firestore:"mode"`
	Region         string            `firestore:"region"`
	ReleaseChannel string            `firestore:"releaseChannel"`
	Labels         map[string]string `firestore:"labels"`
	ProviderName   string            `firestore:"providerName"`
	// Project is the provider project of the cluster's account.
	Project string `firestore:"project"`
	// Impersonate is the service account the reconciler acts as in
	// Project, for a tenant's account; empty: its own identity. Copied
	// from the account at creation, as Project is, so that a run needs
	// no read of the account.
	Impersonate string `firestore:"impersonate,omitempty"`
	// NodeServiceAccount is the account's service account for the
	// cluster's nodes, copied at creation; empty: the reconciler's default.
	NodeServiceAccount string `firestore:"nodeServiceAccount,omitempty"`
	// Zones are the zones of the cluster's region enabled on its account.
	Zones []string `firestore:"zones"`
	// Deleting is set when the tenant deletes the cluster.
	Deleting bool `firestore:"deleting"`
	// ManagedBy is the substrate that made the cluster and alone may
	// change it; ManagedPool is that substrate's pool.
	ManagedBy   string `firestore:"managedBy,omitempty"`
	ManagedPool string `firestore:"managedPool,omitempty"`
	// PoolsCreated counts the node pools ever created in the cluster; with
	// the status's PoolsDeleted it gives the pools that count against the
	// quota, without a count query.
	PoolsCreated int `firestore:"poolsCreated"`
	// Version is the public version: 1 at creation, +1 on every accepted
	// change of the cluster or of one of its pools.
	Version int64 `firestore:"version"`
	// Generation goes up with every write of the spec.
	Generation int64     `firestore:"generation"`
	UpdatedAt  time.Time `firestore:"updatedAt"`
}

// ProviderCluster is what the reconciler knows of the cluster at the
// provider.
type ProviderCluster struct {
	// ID is the provider's unique ID of the cluster, so that a cluster
	// re-created under the same name is never taken for ours.
	ID            string  `firestore:"id"`
	Operation     string  `firestore:"operation"` // cluster-level operation in flight
	OperationKind string  `firestore:"operationKind"`
	Intent        *Intent `firestore:"intent"`
	EverReady     bool    `firestore:"everReady"` // kubernetes.cluster.ready was published
}

// ClusterStatus is what the reconciler last saw and did. The zero value is
// a cluster no run has looked at yet.
type ClusterStatus struct {
	State   resource.State `firestore:"state"`
	Message string         `firestore:"message"`
	// ObservedGeneration is the spec's generation the status answers.
	ObservedGeneration int64  `firestore:"observedGeneration"`
	KubernetesVersion  string `firestore:"kubernetesVersion"`
	Endpoint           string `firestore:"endpoint"`
	// CACertificate is the cluster's certificate authority as the provider
	// reports it (base64 of the PEM), to reach its Kubernetes API.
	CACertificate string `firestore:"caCertificate"`
	// Upgraded is set when the provider moved the cluster's version, until
	// kubernetes.cluster.updated announces it.
	Upgraded bool `firestore:"upgraded"`
	// PoolsDeleted counts the cluster's pools that reached deleted.
	PoolsDeleted int `firestore:"poolsDeleted"`
	// Announced is the error kubernetes.cluster.error last announced,
	// until the cluster is ready again: the same error is not announced
	// twice because a tenant's change came in between.
	Announced string          `firestore:"announced"`
	Provider  ProviderCluster `firestore:"provider"`
	// Retrying, when set, records the runs' transient failures since the
	// first one (lifecycle.RunFailed); a run that observes the provider clears it.
	Retrying  *Retry    `firestore:"retrying,omitempty"`
	UpdatedAt time.Time `firestore:"updatedAt"`
}

// Cluster is a stored cluster. Active and ExpireAt are derived from the
// status when it is saved (queries filter on active; Firestore's TTL policy
// reads expireAt).
type Cluster struct {
	ID        string        `firestore:"id"`
	TenantID  string        `firestore:"tenantId"`
	CreatedAt time.Time     `firestore:"createdAt"`
	Active    bool          `firestore:"active"`
	ExpireAt  *time.Time    `firestore:"expireAt"`
	Spec      ClusterSpec   `firestore:"spec"`
	Status    ClusterStatus `firestore:"status"`
	// AdoptedBy is the substrate that adopted the cluster, if any (its
	// ID → its pool's): one at most (lifecycle.MayAdopt), and the cluster may not
	// be deleted while it uses it. Outside the spec, since adopting
	// changes nothing the tenant asked for.
	AdoptedBy map[string]string `firestore:"substrates"`
}

// NodePoolSpec is what the tenant asked of a node pool.
type NodePoolSpec struct {
	Name         string                 `firestore:"name"`
	MachineType  string                 `firestore:"machineType"`
	NodeCount    int                    `firestore:"nodeCount"`
	Autoscaling  *resource.Autoscaling  `firestore:"autoscaling"`
	DiskGiB      int                    `firestore:"diskGiB,omitempty"`
	DiskType     string                 `firestore:"diskType,omitempty"`
	Spot         bool                   `firestore:"spot"`
	Accelerators *resource.Accelerators `firestore:"accelerators"`
	Zones        []string               `firestore:"zones"`
	Labels       map[string]string      `firestore:"labels"`
	Taints       []resource.Taint       `firestore:"taints"`
	// Deleting is set when the tenant deletes the pool or its cluster.
	Deleting bool `firestore:"deleting"`
	// ManagedBy is the substrate that made the pool and alone may change
	// it; ManagedPool is that substrate's pool.
	ManagedBy   string `firestore:"managedBy,omitempty"`
	ManagedPool string `firestore:"managedPool,omitempty"`
	// Version is the public version: 1 at creation, +1 on every resize.
	Version    int64     `firestore:"version"`
	Generation int64     `firestore:"generation"`
	UpdatedAt  time.Time `firestore:"updatedAt"`
}

// ProviderPool is what the reconciler knows of the pool at the provider.
type ProviderPool struct {
	Operation     string  `firestore:"operation"` // operation in flight
	OperationKind string  `firestore:"operationKind"`
	Intent        *Intent `firestore:"intent"`
	// Created is true once the provider has had the pool.
	Created bool `firestore:"created"`
	// NodeCount is the size per zone the provider was last seen with
	// (its instance groups' target size) or last set to, or -1 when
	// unknown (the autoscaler moves it, or its zones differ). A run
	// compares the spec with the provider's size; this stands in for it
	// only when that cannot be read.
	NodeCount int `firestore:"nodeCount"`
}

// NodePoolStatus is what the reconciler last saw and did of a pool.
type NodePoolStatus struct {
	State              resource.State `firestore:"state"`
	Message            string         `firestore:"message"`
	ObservedGeneration int64          `firestore:"observedGeneration"`
	Provider           ProviderPool   `firestore:"provider"`
	UpdatedAt          time.Time      `firestore:"updatedAt"`

	// CurrentNodeCount is the nodes the provider runs for the pool, as the
	// last run read them; nil until read and when they could not be.
	CurrentNodeCount *int `firestore:"currentNodeCount"`
}

// NodePool is a stored node pool.
type NodePool struct {
	ID        string         `firestore:"id"`
	TenantID  string         `firestore:"tenantId"`
	ClusterID string         `firestore:"clusterId"`
	CreatedAt time.Time      `firestore:"createdAt"`
	Active    bool           `firestore:"active"`
	ExpireAt  *time.Time     `firestore:"expireAt"`
	Spec      NodePoolSpec   `firestore:"spec"`
	Status    NodePoolStatus `firestore:"status"`
}

// View is the cluster as the API returns it.
func (c *Cluster) View() resource.Cluster {
	st, msg := ClusterState(c)
	v := resource.Cluster{
		ID:                c.ID,
		TenantID:          c.TenantID,
		PoolID:            c.Spec.PoolID,
		AccountID:         c.Spec.AccountID,
		Name:              c.Spec.Name,
		Mode:              c.Spec.Mode,
		Region:            c.Spec.Region,
		ReleaseChannel:    c.Spec.ReleaseChannel,
		KubernetesVersion: c.Status.KubernetesVersion,
		Endpoint:          c.Status.Endpoint,
		ProviderName:      c.Spec.ProviderName,
		Labels:            maps.Clone(c.Spec.Labels),
		ManagedBy:         c.Spec.ManagedBy,
		State:             st,
		Message:           msg,
		Version:           c.Spec.Version,
		CreatedAt:         c.CreatedAt,
		UpdatedAt:         later(c.Spec.UpdatedAt, c.Status.UpdatedAt),
	}
	v.Normalize()
	return v
}

// View is the node pool as the API returns it.
func (p *NodePool) View() resource.NodePool {
	st, msg := NodePoolState(p)
	s := p.Spec.Clone()
	v := resource.NodePool{
		ID:           p.ID,
		TenantID:     p.TenantID,
		ClusterID:    p.ClusterID,
		Name:         s.Name,
		MachineType:  s.MachineType,
		NodeCount:    s.NodeCount,
		Autoscaling:  s.Autoscaling,
		DiskGiB:      s.DiskGiB,
		DiskType:     s.DiskType,
		Spot:         s.Spot,
		Accelerators: s.Accelerators,
		Zones:        s.Zones,
		Labels:       s.Labels,
		Taints:       s.Taints,
		ManagedBy:    s.ManagedBy,
		State:        st,
		Message:      msg,
		Version:      s.Version,
		CreatedAt:    p.CreatedAt,
		UpdatedAt:    later(p.Spec.UpdatedAt, p.Status.UpdatedAt),
	}
	v.CurrentNodeCount = cloneInt(p.Status.CurrentNodeCount)
	v.Normalize()
	return v
}

// Clone returns a deep copy of c.
func (c Cluster) Clone() Cluster {
	c.Spec.Labels = maps.Clone(c.Spec.Labels)
	c.Spec.Zones = slices.Clone(c.Spec.Zones)
	c.Status.Provider.Intent = cloneIntent(c.Status.Provider.Intent)
	if c.Status.Retrying != nil {
		r := *c.Status.Retrying
		c.Status.Retrying = &r
	}
	if c.ExpireAt != nil {
		t := *c.ExpireAt
		c.ExpireAt = &t
	}
	return c
}

// Clone returns a deep copy of p.
func (p NodePool) Clone() NodePool {
	p.Spec = p.Spec.Clone()
	p.Status.Provider.Intent = cloneIntent(p.Status.Provider.Intent)
	p.Status.CurrentNodeCount = cloneInt(p.Status.CurrentNodeCount)
	if p.ExpireAt != nil {
		t := *p.ExpireAt
		p.ExpireAt = &t
	}
	return p
}

// Clone returns a deep copy of s.
func (s NodePoolSpec) Clone() NodePoolSpec {
	s.Zones = slices.Clone(s.Zones)
	s.Labels = maps.Clone(s.Labels)
	s.Taints = slices.Clone(s.Taints)
	if s.Autoscaling != nil {
		a := *s.Autoscaling
		s.Autoscaling = &a
	}
	if s.Accelerators != nil {
		a := *s.Accelerators
		s.Accelerators = &a
	}
	return s
}

func cloneIntent(in *Intent) *Intent {
	if in == nil {
		return nil
	}
	c := *in
	return &c
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func cloneInt(n *int) *int {
	if n == nil {
		return nil
	}
	v := *n
	return &v
}

// Retry records that a cluster's runs have failed transiently since Since,
// the last time for Reason.
type Retry struct {
	Since  time.Time `firestore:"since"`
	Reason string    `firestore:"reason"`
}
