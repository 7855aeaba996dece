package lifecycle

import "testing"

// A pool uses a platform account or its own tenant's, never another
// tenant's; only gcp has managed Kubernetes; a pool ID is foreign only to
// the tenants that do not own it, and an unrecorded one is no one's.
func TestAccountAndPoolRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  bool
		want bool
	}{
		{"a platform account, by any tenant", Account{ID: "acc"}.UsableBy("acme"), true},
		{"the tenant's own account", Account{ID: "acc", TenantID: "acme"}.UsableBy("acme"), true},
		{"another tenant's account", Account{ID: "acc", TenantID: "globex"}.UsableBy("acme"), false},
		{"gcp", Account{Provider: "gcp"}.ManagedKubernetes(), true},
		{"bare metal", Account{Provider: "baremetal"}.ManagedKubernetes(), false},
		{"the tenant's pool ID", Pool{ID: "p", TenantID: "acme"}.ForeignTo("acme"), false},
		{"another tenant's pool ID", Pool{ID: "p", TenantID: "globex"}.ForeignTo("acme"), true},
		{"a pool ID not recorded", Pool{}.ForeignTo("acme"), false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if got, want := Unusable("acc", "acme"), "account acc cannot be used by tenant acme"; got != want {
		t.Errorf("Unusable = %q, want %q", got, want)
	}
}
