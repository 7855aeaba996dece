package store_test

import (
	"os"
	"testing"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
)

// The devstack's seed parses, with its tenant-owned account.
func TestParseSeedDevstack(t *testing.T) {
	b, err := os.ReadFile("../../emulators/seed/devstack.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.ParseSeed(b, lifecycle.Rules{})
	if err != nil {
		t.Fatalf("ParseSeed(devstack.json) = %v", err)
	}
	var tenant *store.Account
	for i := range s.Accounts {
		if s.Accounts[i].Impersonate != "" {
			tenant = &s.Accounts[i]
		}
	}
	if tenant == nil || tenant.Project == "bc-dev" || tenant.NodeServiceAccount == "" {
		t.Errorf("the devstack seed has no tenant-owned account with its nodes' account: %+v", s.Accounts)
	}
}

// How to act in an account is a service account's email, and only for a
// provider that has them.
func TestParseSeedImpersonate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		account string
		ok      bool
	}{
		{"platform", `{"id": "a", "provider": "gcp", "project": "p"}`, true},
		{"tenant", `{"id": "a", "provider": "gcp", "project": "p", "impersonate": "bc-provisioner@p.iam.gserviceaccount.com", "nodeServiceAccount": "bc-nodes@p.iam.gserviceaccount.com"}`, true},
		{"not an email", `{"id": "a", "provider": "gcp", "project": "p", "impersonate": "bc-provisioner"}`, false},
		{"a user, not a service account", `{"id": "a", "provider": "gcp", "project": "p", "impersonate": "alice@example.com"}`, false},
		{"bad nodes' account", `{"id": "a", "provider": "gcp", "project": "p", "nodeServiceAccount": "nodes@"}`, false},
		{"provider without service accounts", `{"id": "a", "provider": "baremetal", "project": "p", "impersonate": "x@p.iam.gserviceaccount.com"}`, false},
		{"misspelt field", `{"id": "a", "provider": "gcp", "project": "p", "impersonates": "x@p.iam.gserviceaccount.com"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.ParseSeed([]byte(`{"accounts": [`+tc.account+`], "pools": [], "roleBindings": []}`), lifecycle.Rules{})
			if (err == nil) != tc.ok {
				t.Errorf("ParseSeed = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// The seed binds tenants and principals that Firestore cannot take as
// document IDs as they stand.
func TestParseSeedHostileIDs(t *testing.T) {
	s, err := store.ParseSeed([]byte(`{"accounts": [{"id": "acc", "provider": "gcp"}],
		"pools": [{"id": "..", "tenantId": "__acme__", "accountId": "acc"}],
		"roleBindings": [{"tenantId": "__acme__", "principal": "alice/../bob", "role": "kubernetes.admin"},
		                 {"tenantId": ".", "principal": "a/b", "role": "kubernetes.viewer"}]}`), lifecycle.Rules{})
	if err != nil || len(s.RoleBindings) != 2 || len(s.Pools) != 1 {
		t.Fatalf("ParseSeed(hostile IDs) = %+v, %v", s, err)
	}
}

// Tenants' quotas parse strictly: a misspelt field is refused, not dropped.
func TestParseSeedTenants(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tenants string
		ok      bool
	}{
		{"a quota", `[{"id": "acme", "quota": {"clusters": 50}}]`, true},
		{"a quota of none", `[{"id": "acme", "quota": {"clusters": 0}}]`, true},
		{"no quota", `[{"id": "acme"}]`, true},
		{"no id", `[{"quota": {"clusters": 50}}]`, false},
		{"named twice", `[{"id": "acme"}, {"id": "acme", "quota": {"clusters": 1}}]`, false},
		{"negative", `[{"id": "acme", "quota": {"clusters": -1}}]`, false},
		{"misspelt quota", `[{"id": "acme", "quota": {"cluster": 50}}]`, false},
		{"misspelt field", `[{"id": "acme", "quotas": {"clusters": 50}}]`, false},
		{"not a number", `[{"id": "acme", "quota": {"clusters": "50"}}]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.ParseSeed([]byte(`{"accounts": [], "pools": [], "roleBindings": [], "tenants": `+tc.tenants+`}`), lifecycle.Rules{})
			if (err == nil) != tc.ok {
				t.Errorf("ParseSeed = %+v, %v; want ok %v", s, err, tc.ok)
			}
		})
	}
}
