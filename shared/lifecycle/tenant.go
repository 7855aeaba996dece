package lifecycle

import "github.com/better-compute/kubernetes/shared/errs"

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

// ActiveClusters is the number of the tenant's clusters that are not
// deleted: the ones that count against its quota.
func ActiveClusters(t *Tenant) int {
	return t.ClustersCreated - t.ClustersDeleted
}

// AddCluster is kubernetesClusters.create's share of the tenant: beyond
// its quota of clusters it is QUOTA_EXCEEDED naming the quota; otherwise
// the tenant counts the cluster.
func AddCluster(tenantID string, t *Tenant) error {
	n := ActiveClusters(t)
	if q := t.Quota.Clusters; q != nil && n >= *q {
		if n == *q {
			return errs.E(errs.Quota, "tenant %s has %d clusters that are not deleted, its quota of clusters", tenantID, n)
		}
		return errs.E(errs.Quota, "tenant %s has %d clusters that are not deleted, over its quota of %d clusters", tenantID, n, *q)
	}
	t.ClustersCreated++
	return nil
}
