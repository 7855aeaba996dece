package lifecycle

import (
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
)

func TestCheckSeedPools(t *testing.T) {
	gcp := model.Account{ID: "acc", Provider: "gcp", Project: "p"}
	with := func(f func(a *model.Account)) model.Account { a := gcp; f(&a); return a }
	mine := with(func(a *model.Account) { a.ID, a.TenantID = "acc-acme", "acme" })
	for _, c := range []struct {
		name     string
		accounts []model.Account
		pools    []model.Pool
		want     string // "" for no error
	}{
		{name: "nothing", want: ""},
		{name: "a platform account and its pool", accounts: []model.Account{gcp}, pools: []model.Pool{{ID: "p1", TenantID: "acme", AccountID: "acc"}}},
		{name: "a tenant's account and its own pool", accounts: []model.Account{mine}, pools: []model.Pool{{ID: "p1", TenantID: "acme", AccountID: "acc-acme"}}},
		{name: "service accounts of a gcp account", accounts: []model.Account{with(func(a *model.Account) {
			a.Impersonate, a.NodeServiceAccount = "bc-provisioner@p.iam.gserviceaccount.com", "bc-nodes@p.iam.gserviceaccount.com"
		})}},
		{name: "an account without id", accounts: []model.Account{gcp, {Provider: "gcp"}}, want: "accounts[1] needs an id and a provider"},
		{name: "an account without provider", accounts: []model.Account{{ID: "a"}}, want: "accounts[0] needs an id and a provider"},
		{name: "impersonate not an email", accounts: []model.Account{with(func(a *model.Account) { a.Impersonate = "bc-provisioner" })},
			want: `accounts[0].impersonate: "bc-provisioner" is not a service account email`},
		{name: "impersonate a user", accounts: []model.Account{with(func(a *model.Account) { a.Impersonate = "alice@example.com" })},
			want: `accounts[0].impersonate: "alice@example.com" is not a service account email`},
		{name: "bad nodes' account", accounts: []model.Account{with(func(a *model.Account) { a.NodeServiceAccount = "nodes@" })},
			want: `accounts[0].nodeServiceAccount: "nodes@" is not a service account email`},
		{name: "both bad: impersonate first", accounts: []model.Account{with(func(a *model.Account) { a.Impersonate, a.NodeServiceAccount = "x", "y" })},
			want: `accounts[0].impersonate: "x" is not a service account email`},
		{name: "a provider without service accounts", accounts: []model.Account{{ID: "a", Provider: "baremetal", NodeServiceAccount: "x@p.iam.gserviceaccount.com"}},
			want: `accounts[0].nodeServiceAccount: provider "baremetal" has no service accounts`},
		{name: "a pool without id", accounts: []model.Account{gcp}, pools: []model.Pool{{TenantID: "acme", AccountID: "acc"}},
			want: "pools[0] needs an id, a tenantId and an accountId among the accounts"},
		{name: "a pool without tenant", accounts: []model.Account{gcp}, pools: []model.Pool{{ID: "p1", AccountID: "acc"}},
			want: "pools[0] needs an id, a tenantId and an accountId among the accounts"},
		{name: "a pool on an unknown account", accounts: []model.Account{gcp}, pools: []model.Pool{{ID: "p1", TenantID: "acme", AccountID: "acc"}, {ID: "p2", TenantID: "acme", AccountID: "nope"}},
			want: "pools[1] needs an id, a tenantId and an accountId among the accounts"},
		{name: "a pool on another tenant's account", accounts: []model.Account{mine}, pools: []model.Pool{{ID: "p1", TenantID: "globex", AccountID: "acc-acme"}},
			want: "pools[0]: account acc-acme cannot be used by tenant globex"},
	} {
		check(t, c.name, CheckSeedPools(c.accounts, c.pools), c.want)
	}
}

func TestCheckSeedTenants(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, c := range []struct {
		name    string
		tenants []model.SeedTenant
		want    string // "" for no error
	}{
		{name: "none"},
		{name: "a quota", tenants: []model.SeedTenant{{ID: "acme", Quota: model.Quota{Clusters: n(50)}}}},
		{name: "a quota of none", tenants: []model.SeedTenant{{ID: "acme", Quota: model.Quota{Clusters: n(0)}}}},
		{name: "no quota", tenants: []model.SeedTenant{{ID: "acme"}, {ID: "globex"}}},
		{name: "no id", tenants: []model.SeedTenant{{ID: "acme"}, {Quota: model.Quota{Clusters: n(50)}}}, want: "tenants[1] needs an id"},
		{name: "named twice", tenants: []model.SeedTenant{{ID: "acme"}, {ID: "acme", Quota: model.Quota{Clusters: n(1)}}}, want: "tenants[1]: tenant acme is named twice"},
		{name: "negative", tenants: []model.SeedTenant{{ID: "acme", Quota: model.Quota{Clusters: n(-1)}}}, want: "tenants[0].quota.clusters: -1 is negative"},
	} {
		check(t, c.name, CheckSeedTenants(c.tenants), c.want)
	}
}

// check fails the case named unless err is nil for want "", or its
// message is want.
func check(t *testing.T, name string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v, want no error", name, err)
	case want != "" && (err == nil || err.Error() != want):
		t.Errorf("%s: %v, want %q", name, err, want)
	}
}
