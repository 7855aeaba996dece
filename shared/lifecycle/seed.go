package lifecycle

import (
	"fmt"
	"regexp"

	"github.com/better-compute/kubernetes/shared/model"
)

// The rules of the devstack's seed file (API.md §8), apart from its role
// bindings (auth's): what makes its accounts, pools and tenants' quotas
// well-formed. The store decodes the file and calls them.

// serviceAccountRE matches a service account's email: a user-managed one
// (name@project.iam.gserviceaccount.com) or a Google-managed one.
var serviceAccountRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}@[a-z0-9.:-]+\.gserviceaccount\.com$`)

// CheckSeedPools refuses the seed's accounts unless each has an ID and a
// provider, and names service accounts (to act as, to run nodes as) only
// by a service account's email and on a provider that has them; then its
// pools, unless each has an ID, a tenant and one of those accounts, which
// its tenant may use.
func CheckSeedPools(accounts []model.Account, pools []model.Pool) error {
	byID := map[string]model.Account{}
	for i, a := range accounts {
		if a.ID == "" || a.Provider == "" {
			return fmt.Errorf("accounts[%d] needs an id and a provider", i)
		}
		for _, sa := range []struct{ field, email string }{{"impersonate", a.Impersonate}, {"nodeServiceAccount", a.NodeServiceAccount}} {
			switch {
			case sa.email == "":
			case !a.ManagedKubernetes():
				return fmt.Errorf("accounts[%d].%s: provider %q has no service accounts", i, sa.field, a.Provider)
			case !serviceAccountRE.MatchString(sa.email):
				return fmt.Errorf("accounts[%d].%s: %q is not a service account email", i, sa.field, sa.email)
			}
		}
		byID[a.ID] = a
	}
	for i, p := range pools {
		a, ok := byID[p.AccountID]
		if p.ID == "" || p.TenantID == "" || !ok {
			return fmt.Errorf("pools[%d] needs an id, a tenantId and an accountId among the accounts", i)
		}
		if !UsableBy(a, p.TenantID) {
			return fmt.Errorf("pools[%d]: %s", i, Unusable(a.ID, p.TenantID))
		}
	}
	return nil
}

// CheckSeedTenants refuses the seed's tenants' entries unless each names
// a tenant, once, with a quota of clusters that is not negative.
func CheckSeedTenants(tenants []model.SeedTenant) error {
	seen := map[string]bool{}
	for i, t := range tenants {
		switch {
		case t.ID == "":
			return fmt.Errorf("tenants[%d] needs an id", i)
		case seen[t.ID]:
			return fmt.Errorf("tenants[%d]: tenant %s is named twice", i, t.ID)
		case t.Quota.Clusters != nil && *t.Quota.Clusters < 0:
			return fmt.Errorf("tenants[%d].quota.clusters: %d is negative", i, *t.Quota.Clusters)
		}
		seen[t.ID] = true
	}
	return nil
}
