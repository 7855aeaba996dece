package lifecycle

import (
	"fmt"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

// DecideCreate is the spec of a cluster to create for c, or why it is
// refused: an archived pool takes no new cluster, the pool's account must
// be one the tenant may use, with managed Kubernetes, and hold the
// cluster's region and its node pools' zones (ClusterZones), the name
// must be free and the tenant under its quota; c.Tenant then counts the
// cluster. The spec is on the pool's account and project; its ID,
// provider name and manager are the caller's to set.
func DecideCreate(c model.ClusterCreate) (model.ClusterSpec, error) {
	pool, acc := c.Pool, c.Account
	switch {
	case pool.Archived:
		return model.ClusterSpec{}, errs.E(errs.InvalidState, "pool %s is archived: it takes no new cluster", pool.ID)
	case acc == nil:
		return model.ClusterSpec{}, fmt.Errorf("pool %s names account %s, which does not exist", pool.ID, pool.AccountID)
	case !UsableBy(*acc, c.TenantID):
		// Unreachable through the API: a pool is recorded only on an
		// account its tenant may use (ParseSeed, DecidePoolEvent).
		return model.ClusterSpec{}, errs.E(errs.InvalidState, "pool %s: %s", pool.ID, Unusable(acc.ID, c.TenantID))
	case !acc.ManagedKubernetes():
		return model.ClusterSpec{}, errs.E(errs.Unsupported, "the provider %q of pool %s has no managed Kubernetes", acc.Provider, pool.ID)
	}
	zones, err := ClusterZones(acc.Regions, &c.Spec, c.NodePools)
	if err != nil {
		return model.ClusterSpec{}, err
	}
	if c.NameTaken {
		return model.ClusterSpec{}, errs.E(errs.Conflict, "cluster name %q is taken", c.Spec.Name)
	}
	if err := AddCluster(c.TenantID, c.Tenant); err != nil {
		return model.ClusterSpec{}, err
	}
	return model.ClusterSpec{
		PoolID:         pool.ID,
		AccountID:      acc.ID,
		Name:           c.Spec.Name,
		Mode:           c.Spec.Mode,
		Region:         c.Spec.Region,
		ReleaseChannel: c.Spec.ReleaseChannel,
		Labels:         c.Spec.Labels,
		Project:        acc.Project,
		Zones:          zones,
		// How to act in the project and what the nodes run as stay
		// with the cluster, as its project does.
		Impersonate:        acc.Impersonate,
		NodeServiceAccount: acc.NodeServiceAccount,
	}, nil
}
