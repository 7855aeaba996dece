package model

import (
	"maps"
	"slices"
	"time"

	"github.com/better-compute/kubernetes/shared/resource"
)

// Flavor is one of a pool's flavors: a node pool spec whose Name is the
// flavor's node pool's name.
type Flavor struct {
	Name     string       `firestore:"name"`
	NodePool NodePoolSpec `firestore:"nodePool"`
}

// SubstrateSpec is what the pool's last applied event asks of the
// substrate.
type SubstrateSpec struct {
	PoolVersion int64  `firestore:"poolVersion"`
	AccountID   string `firestore:"accountId"`
	Mode        string `firestore:"mode"`
	// Region, Zones and ReleaseChannel are the cluster to create.
	Region         string   `firestore:"region"`
	Zones          []string `firestore:"zones"`
	ReleaseChannel string   `firestore:"releaseChannel"`
	// AdoptClusterID is the cluster to adopt.
	AdoptClusterID string   `firestore:"adoptClusterId"`
	Flavors        []Flavor `firestore:"flavors"`
	// Problem, when set, is why the substrate cannot be served (an
	// account without managed Kubernetes, a malformed event for its pool):
	// it stays in error with it until an event fixes it.
	Problem string `firestore:"problem"`
	// Deleting: the pool no longer asks for this substrate.
	Deleting bool `firestore:"deleting"`
	// After is the pool's previous substrate, which must be deleted before
	// this one makes anything (its cluster's name is the same).
	After      string    `firestore:"after"`
	Generation int64     `firestore:"generation"`
	UpdatedAt  time.Time `firestore:"updatedAt"`
}

// JoinToken is the join token the substrate's Secret holds, by its hash.
type JoinToken struct {
	Hash     string    `firestore:"hash"`
	MintedAt time.Time `firestore:"mintedAt"`
}

// SubstrateStatus is what the substrate's runs last saw and did.
type SubstrateStatus struct {
	State              resource.State `firestore:"state"`
	Message            string         `firestore:"message"`
	ObservedGeneration int64          `firestore:"observedGeneration"`
	// ClusterID is the cluster made (create) or adopted (adopt), once a
	// run recorded it.
	ClusterID string                       `firestore:"clusterId"`
	NodePools []resource.SubstrateNodePool `firestore:"nodePools"`
	Token     JoinToken                    `firestore:"token"`
	// Applied is the spec generation whose objects are applied in the
	// cluster's Kubernetes API.
	Applied   int64 `firestore:"applied"`
	EverReady bool  `firestore:"everReady"`
	// Announced is the error kubernetes.substrate.error last announced.
	Announced string `firestore:"announced"`
	// Serials are, by flavor, the n of the flavor's newest node pool
	// (bc-<pool>-<flavor>-<n>, n = 1 being bc-<pool>-<flavor>): a
	// replacement is named by the next one (API.md §9).
	Serials map[string]int `firestore:"serials,omitempty"`
	// Retrying, when set, records the runs' failures since the last run
	// that did not fail (substrates.Reconciler shows them once they last).
	Retrying  *Retry    `firestore:"retrying,omitempty"`
	UpdatedAt time.Time `firestore:"updatedAt"`
}

// Substrate is a stored substrate.
type Substrate struct {
	ID        string     `firestore:"id"`
	TenantID  string     `firestore:"tenantId"`
	PoolID    string     `firestore:"poolId"`
	CreatedAt time.Time  `firestore:"createdAt"`
	Active    bool       `firestore:"active"`
	ExpireAt  *time.Time `firestore:"expireAt"`
	// Joined counts the joined nodes. Joins and runs change it with
	// increments, outside spec and status, so neither overwrites the
	// other's.
	Joined int64           `firestore:"joined"`
	Spec   SubstrateSpec   `firestore:"spec"`
	Status SubstrateStatus `firestore:"status"`
}

// View is the substrate as the API returns it.
func (s *Substrate) View() resource.Substrate {
	v := resource.Substrate{
		ID:          s.ID,
		TenantID:    s.TenantID,
		PoolID:      s.PoolID,
		PoolVersion: s.Spec.PoolVersion,
		AccountID:   s.Spec.AccountID,
		Mode:        s.Spec.Mode,
		ClusterID:   s.Status.ClusterID,
		NodePools:   slices.Clone(s.Status.NodePools),
		JoinedNodes: s.Joined,
		State:       s.Status.State,
		Message:     s.Status.Message,
		CreatedAt:   s.CreatedAt.UTC(),
		UpdatedAt:   later(s.Spec.UpdatedAt, s.Status.UpdatedAt).UTC(),
	}
	if v.ClusterID == "" && s.Spec.Mode == resource.SubstrateAdopt {
		v.ClusterID = s.Spec.AdoptClusterID
	}
	if v.NodePools == nil {
		v.NodePools = []resource.SubstrateNodePool{}
	}
	if v.State == "" {
		v.State = resource.StatePending
	}
	return v
}

// ClusterID is the substrate's cluster: the one it made, or the one it
// adopts; "" while it has none.
func (s *Substrate) ClusterID() string {
	if s.Status.ClusterID == "" && s.Spec.Mode == resource.SubstrateAdopt {
		return s.Spec.AdoptClusterID
	}
	return s.Status.ClusterID
}

// Clone is a deep copy of the substrate's status (the spec is never
// changed by a run).
func (s Substrate) Clone() Substrate {
	s.Status.NodePools = slices.Clone(s.Status.NodePools)
	s.Status.Serials = maps.Clone(s.Status.Serials)
	if r := s.Status.Retrying; r != nil {
		c := *r
		s.Status.Retrying = &c
	}
	return s
}
