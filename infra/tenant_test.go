package infra

import (
	"bytes"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
)

// The tenant module's test values: a tenant's project and the platform's
// reconciler.
const (
	tenantProject    = "acme-prod"
	tenantReconciler = "reconciler@bc-prod.iam.gserviceaccount.com"
)

func tenantModule(t *testing.T) *module {
	t.Helper()
	return loadModule(t, "tenant", map[string]cty.Value{
		"project":                    cty.StringVal(tenantProject),
		"reconciler_service_account": cty.StringVal(tenantReconciler),
	})
}

// TestTenantModuleRoles checks what a tenant grants in its own project:
// the provisioner gets exactly the permissions of the reconciler's GKE
// and Compute Engine calls (shared/clusters.GKE and Compute) and of the
// substrates' calls to the
// clusters' Kubernetes APIs, which go out as the provisioner too (the
// reconcile and join functions' alike: kubePermissions), and actAs on the
// nodes' account, the nodes their logs and metrics, and the platform's
// reconciler the token creator role on the provisioner, the grant its
// clusters' error names. Nothing else.
func TestTenantModuleRoles(t *testing.T) {
	m := tenantModule(t)
	sa := func(res string) string { return "serviceAccount:google_service_account." + res + ".email" }
	account := func(res string) string { return "serviceAccount google_service_account." + res + ".name" }

	perms := providerPermissions(t)
	for _, ps := range kubeCalls(t) {
		for _, p := range ps {
			if !slices.Contains(perms, p) {
				perms = append(perms, p)
			}
		}
	}
	sort.Strings(perms)
	roles := m.ofType("google_project_iam_custom_role")
	if len(roles) != 1 || roles[0].str("project") != tenantProject {
		t.Fatalf("custom roles = %d, want one in %s", len(roles), tenantProject)
	}
	if diff := cmp.Diff(perms, slices.Sorted(slices.Values(stringsOf(roles[0].attrs["permissions"])))); diff != "" {
		t.Errorf("the provisioner's permissions (-the GKE calls' +granted):\n%s", diff)
	}

	var got []string
	for _, r := range m.resources {
		if !strings.HasSuffix(r.typ, "_iam_member") && !strings.HasSuffix(r.typ, "_iam_binding") && !strings.HasSuffix(r.typ, "_iam_policy") {
			continue
		}
		for _, i := range r.instances {
			var target string
			switch r.typ {
			case "google_project_iam_member":
				target = "project " + i.str("project")
			case "google_service_account_iam_member":
				target = "serviceAccount " + i.str("service_account_id")
			default:
				t.Errorf("%s: the test does not know %s", i.addr(), r.typ)
				continue
			}
			got = append(got, i.str("member")+" "+i.str("role")+" on "+target)
		}
	}
	want := []string{
		sa("provisioner") + " " + roles[0].str("name") + " on project " + tenantProject,
		sa("provisioner") + " roles/iam.serviceAccountUser on " + account("nodes"),
		sa("nodes") + " roles/logging.logWriter on project " + tenantProject,
		sa("nodes") + " roles/monitoring.metricWriter on project " + tenantProject,
		"serviceAccount:" + tenantReconciler + " " + impersonate.TokenCreator + " on " + account("provisioner"),
	}
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grants (-what the reconciler needs +what the module grants):\n%s", diff)
	}
	for _, i := range m.ofType("google_service_account") {
		if i.str("project") != tenantProject {
			t.Errorf("%s is in project %q, want the tenant's", i.addr(), i.str("project"))
		}
	}
}

// TestTenantModuleMatchesSeed checks that the devstack's tenant-owned
// account names the accounts the module creates, and that the module
// outputs what such an account holds.
func TestTenantModuleMatchesSeed(t *testing.T) {
	m := tenantModule(t)
	seed := readSeed(t)
	var acc *store.Account
	for i := range seed.Accounts {
		if seed.Accounts[i].Impersonate != "" {
			acc = &seed.Accounts[i]
		}
	}
	if acc == nil {
		t.Fatal("the devstack seed has no tenant-owned account")
	}
	for res, email := range map[string]string{"provisioner": acc.Impersonate, "nodes": acc.NodeServiceAccount} {
		i := m.instanceWith("google_service_account", "account_id", strings.Split(email, "@")[0])
		if i == nil || email != i.str("account_id")+"@"+acc.Project+".iam.gserviceaccount.com" {
			t.Errorf("the seed's %s account %q is not the module's google_service_account.%s in %s", res, email, res, acc.Project)
		}
	}
	src := string(m.files["outputs.tf"])
	for _, field := range []string{"project", "impersonate", "nodeServiceAccount"} {
		if !strings.Contains(src, field+" ") {
			t.Errorf("outputs.tf does not output the account's %s", field)
		}
	}
}

func TestTenantModuleIsFormatted(t *testing.T) {
	for name, src := range tenantModule(t).files {
		if out := hclwrite.Format(src); !bytes.Equal(out, src) {
			t.Errorf("tenant/%s is not formatted as terraform fmt would", name)
		}
	}
}

func readSeed(t *testing.T) *store.Seed {
	t.Helper()
	b, err := os.ReadFile("../emulators/seed/devstack.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.ParseSeed(b, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
