package lifecycle

import (
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
)

// A pool uses a platform account or its own tenant's, never another
// tenant's; only gcp has managed Kubernetes; a pool ID is foreign only to
// the tenants that do not own it, and an unrecorded one is no one's.
func TestAccountAndPoolRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  bool
		want bool
	}{
		{"a platform account, by any tenant", UsableBy(model.Account{ID: "acc"}, "acme"), true},
		{"the tenant's own account", UsableBy(model.Account{ID: "acc", TenantID: "acme"}, "acme"), true},
		{"another tenant's account", UsableBy(model.Account{ID: "acc", TenantID: "globex"}, "acme"), false},
		{"gcp", model.Account{Provider: "gcp"}.ManagedKubernetes(), true},
		{"bare metal", model.Account{Provider: "baremetal"}.ManagedKubernetes(), false},
		{"the tenant's pool ID", ForeignTo(model.Pool{ID: "p", TenantID: "acme"}, "acme"), false},
		{"another tenant's pool ID", ForeignTo(model.Pool{ID: "p", TenantID: "globex"}, "acme"), true},
		{"a pool ID not recorded", ForeignTo(model.Pool{}, "acme"), false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if got, want := Unusable("acc", "acme"), "account acc cannot be used by tenant acme"; got != want {
		t.Errorf("Unusable = %q, want %q", got, want)
	}
}
