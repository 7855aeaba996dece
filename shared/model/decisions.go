package model

// AdoptionRequest is what an adoption is decided on (lifecycle.DecideAdoption): the
// substrate that adopts, and what the store read in its transaction.
type AdoptionRequest struct {
	// Substrate, of pool Pool on account AccountID, adopts Cluster.
	Substrate, Pool, AccountID string
	Cluster                    *Cluster
	// Adopters are the substrates of lifecycle.OtherAdopters(Cluster, Substrate),
	// as read: nil (or absent) for one that does not exist.
	Adopters map[string]*Substrate
}

// Adoption is what an adoption writes on its cluster: nothing when Drop
// is empty and Record is false.
type Adoption struct {
	// Drop are the other adopters whose adoptions are removed, by ID.
	Drop []string
	// Record: the substrate's adoption is written (it is not recorded
	// yet, or for another pool).
	Record bool
}

// ClusterCreate is what a cluster create is decided on (lifecycle.DecideCreate):
// the request, and what the store read in its transaction.
type ClusterCreate struct {
	TenantID string
	// Spec holds the request's name, mode, region, release channel and
	// labels, and, when set, its Zones; NodePools the specs of its first
	// node pools.
	Spec      ClusterSpec
	NodePools []NodePoolSpec
	// Pool is the tenant's pool the cluster is made in.
	Pool Pool
	// Account is the pool's account; nil when it does not exist.
	Account *Account
	// NameTaken: another cluster of the tenant holds the name.
	NameTaken bool
	// Tenant is the tenant's document, which counts the cluster against
	// its quota (lifecycle.AddCluster).
	Tenant *Tenant
}

// SeedTenant is a tenant's entry of the seed: its quota (API.md §10). A
// tenant that no entry names has no quota.
type SeedTenant struct {
	ID    string `json:"id"`
	Quota Quota  `json:"quota"`
}

// Changes reports whether the adoption writes anything.
func (a Adoption) Changes() bool { return len(a.Drop) > 0 || a.Record }
