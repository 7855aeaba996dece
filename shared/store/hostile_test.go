package store_test

import (
	"context"
	"testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// Tenants, principals and pools that Firestore cannot take as document IDs
// are bound, found and refused like any other, each in a document of its
// own.
func TestHostileIDsBound(t *testing.T) {
	ctx := context.Background()
	fs := fsemu.ForTest(t, "hostile")
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	hostile := []string{".", "..", "__x__", "__acme__", "a/b", "alice/../bob", "~", "~YS9i", "x/" + string(make([]byte, 1600))}
	seed := &store.Seed{
		Accounts: []store.Account{{ID: "__metal__", Provider: "baremetal", Project: "rack"}},
	}
	for _, id := range hostile {
		seed.Pools = append(seed.Pools, store.Pool{ID: id, TenantID: id, AccountID: "__metal__"})
		// Each principal is admin in the tenant of its own name only.
		seed.RoleBindings = append(seed.RoleBindings, auth.Binding{TenantID: id, Principal: id, Role: auth.RoleAdmin})
	}
	if err := st.LoadSeed(ctx, seed); err != nil {
		t.Fatalf("LoadSeed(hostile IDs) = %v", err)
	}
	for _, id := range hostile {
		for _, p := range hostile {
			m, err := st.Grant(ctx, auth.User(id, p))
			switch {
			case p == id && (err != nil || auth.Authorize(auth.User(id, p), m, auth.PermCreate, auth.Tenant("")) != nil):
				t.Errorf("Grant(%.20q, %.20q) = %v, %v, want the admin", id, p, m, err)
			case p != id && !errs.Is(err, errs.PermissionDenied):
				t.Errorf("Grant(%.20q, %.20q) = %v, %v, want PERMISSION_DENIED", id, p, m, err)
			}
		}
		c := auth.User(id, id)
		// The pool and its account are found: a metal pool has no
		// managed Kubernetes.
		_, err := st.CreateCluster(ctx, c, store.CreateClusterRequest{
			PoolID: id, Spec: model.ClusterSpec{Name: "c", Mode: resource.ModeAutopilot, Region: "fra"},
			IdempotencyKey: id, RequestHash: "h",
		})
		if !errs.Is(err, errs.Unsupported) {
			t.Errorf("CreateCluster(pool %.20q) = %v, want UNSUPPORTED", id, err)
		}
		if _, _, err := st.ListClusters(ctx, c, store.ListClustersRequest{PageSize: 10}); err != nil {
			t.Errorf("ListClusters(%.20q) = %v", id, err)
		}
		if _, err := st.GetCluster(ctx, c, "kcl_01jd0000000000000000000000"); !errs.Is(err, errs.NotFound) {
			t.Errorf("GetCluster(%.20q) = %v, want NOT_FOUND", id, err)
		}
	}
}
