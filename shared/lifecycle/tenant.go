package lifecycle

import (
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

// ActiveClusters is the number of the tenant's clusters that are not
// deleted: the ones that count against its quota.
func ActiveClusters(t *model.Tenant) int {
	return t.ClustersCreated - t.ClustersDeleted
}

// AddCluster is kubernetesClusters.create's share of the tenant: beyond
// its quota of clusters it is QUOTA_EXCEEDED naming the quota; otherwise
// the tenant counts the cluster.
func AddCluster(tenantID string, t *model.Tenant) error {
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
