package model

// Quota is what a tenant may hold (API.md §10), as the seed sets it. A
// limit that is not set is none.
type Quota struct {
	// Clusters bounds the tenant's clusters that are not deleted.
	Clusters *int `firestore:"clusters,omitempty" json:"clusters,omitempty"`
}

// Tenant is what a tenant's own document holds: its quota, set by the
// seed, and the count of its clusters that are not deleted, kept as the
// cluster keeps its node pools' (ActiveNodePools): creates add to
// ClustersCreated in their transaction, and the run that finds a cluster
// deleted adds to ClustersDeleted in its own, so that the quota is kept
// exactly by the transactions' conflicts, with no count query.
type Tenant struct {
	Quota           Quota `firestore:"quota"`
	ClustersCreated int   `firestore:"clustersCreated"`
	ClustersDeleted int   `firestore:"clustersDeleted"`
}
