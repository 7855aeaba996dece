package poolevents

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// tenantsWorld is a platform account and one account of each of two
// tenants, acme and globex, with an admin in each.
func tenantsWorld(t *testing.T) (*Consumer, *store.Store, *firestore.Client) {
	t.Helper()
	ctx := context.Background()
	fs := fsemu.ForTest(t, "accounts")
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	regions := map[string][]string{"us-central1": {"us-central1-a"}}
	err = st.LoadSeed(ctx, &store.Seed{
		Accounts: []store.Account{
			{ID: "acc-gcp", Provider: "gcp", Project: "bc", Regions: regions},
			{ID: "acc-acme", TenantID: "acme", Provider: "gcp", Project: "acme-prod", Regions: regions},
			{ID: "acc-globex", TenantID: "globex", Provider: "gcp", Project: "globex-prod", Regions: regions},
		},
		Pools: []store.Pool{{ID: "pool-dev", TenantID: "acme", AccountID: "acc-gcp"}},
		RoleBindings: []auth.Binding{
			{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin},
			{TenantID: "globex", Principal: "dave", Role: auth.RoleAdmin},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConsumer(st, &kicks{})
	if err != nil {
		t.Fatal(err)
	}
	return c, st, fs
}

func poolOf(tenant, id string, version int64, account string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "tenantId": tenant, "version": version,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": account,
			"cluster": map[string]any{"create": map[string]any{"region": "us-central1"}}}},
		"flavors": []any{map[string]any{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}}})
	return b
}

func poolRecord(t *testing.T, fs *firestore.Client, id string) *store.Pool {
	t.Helper()
	snap, err := fs.Doc("pools/" + id).Get(context.Background())
	if err != nil && !snap.Exists() {
		return nil
	}
	var p store.Pool
	if err := snap.DataTo(&p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func createOn(st *store.Store, p auth.Principal, pool, name string) error {
	_, err := st.CreateCluster(context.Background(), p, store.CreateClusterRequest{PoolID: pool, RequestHash: name, IdempotencyKey: name,
		Spec:      model.ClusterSpec{Name: name, Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools: []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}}})
	return err
}

// A pool uses a platform account or its own tenant's: an event naming
// another tenant's account puts the substrate in error in the words of
// an account that does not exist, records no pool and builds nothing;
// the pool's record moves only to an account its tenant may use.
func TestConsumeAnotherTenantsAccount(t *testing.T) {
	ctx := context.Background()
	c, st, fs := tenantsWorld(t)
	handle := func(data []byte) {
		t.Helper()
		if err := c.Handle(ctx, event.PoolUpdated, data); err != nil {
			t.Fatal(err)
		}
	}
	dave := auth.User("globex", "dave")

	handle(poolOf("globex", "pool-g", 1, "acc-acme"))
	subs := substratesOfTenant(t, fs, "globex")
	if len(subs) != 1 || subs[0].Spec.Problem != "account acc-acme cannot be used by tenant globex" {
		t.Fatalf("globex's substrate = %+v, want one whose problem is that account acc-acme cannot be used", subs)
	}
	if p := poolRecord(t, fs, "pool-g"); p != nil {
		t.Errorf("pools/pool-g = %+v, want no record", p)
	}
	if err := createOn(st, dave, "pool-g", "there"); !errs.Is(err, errs.NotFound) {
		t.Errorf("dave's cluster on pool-g = %v, want NOT_FOUND", err)
	}
	// The substrate's run builds nothing: its plan is error, with no
	// action but to show it.
	d := substrates.Plan(substrates.Input{Substrate: subs[0], PreviousGone: true}, time.Now())
	if d.Action != nil || d.Substrate.Status.State != resource.StateError || d.Substrate.Status.Message != subs[0].Spec.Problem {
		t.Errorf("the run's plan = %+v (state %s, %q), want error and nothing done", d.Action, d.Substrate.Status.State, d.Substrate.Status.Message)
	}

	// An account that does not exist: the same words.
	handle(poolOf("globex", "pool-h", 1, "acc-nope"))
	for _, s := range substratesOfTenant(t, fs, "globex") {
		if s.PoolID == "pool-h" && s.Spec.Problem != "account acc-nope cannot be used by tenant globex" {
			t.Errorf("pool-h's problem = %q, want the words of an unusable account", s.Spec.Problem)
		}
	}

	// Its own account: the pool is recorded on it, and dave may create
	// clusters there.
	handle(poolOf("globex", "pool-g", 2, "acc-globex"))
	if p := poolRecord(t, fs, "pool-g"); p == nil || p.AccountID != "acc-globex" || p.TenantID != "globex" {
		t.Fatalf("pools/pool-g = %+v, want globex's on acc-globex", p)
	}
	if err := createOn(st, dave, "pool-g", "here"); err != nil {
		t.Errorf("dave's cluster on pool-g = %v", err)
	}
	// A newer event naming acme's account again leaves the record.
	handle(poolOf("globex", "pool-g", 3, "acc-acme"))
	if p := poolRecord(t, fs, "pool-g"); p == nil || p.AccountID != "acc-globex" {
		t.Errorf("pools/pool-g = %+v, want it still on acc-globex", p)
	}

	// acme's own account is acme's to use.
	handle(poolOf("acme", "pool-a", 1, "acc-acme"))
	for _, s := range substratesOfTenant(t, fs, "acme") {
		if s.Spec.Problem != "" {
			t.Errorf("acme's substrate on its own account: problem %q", s.Spec.Problem)
		}
	}
	if p := poolRecord(t, fs, "pool-a"); p == nil || p.AccountID != "acc-acme" {
		t.Errorf("pools/pool-a = %+v, want acme's on acc-acme", p)
	}
}

// The seed holds the same rule: a pool on another tenant's account is no
// seed.
func TestSeedAnotherTenantsAccount(t *testing.T) {
	_, err := store.ParseSeed([]byte(`{"accounts": [{"id": "acc-acme", "tenantId": "acme", "provider": "gcp", "project": "p"}],
		"pools": [{"id": "pool-g", "tenantId": "globex", "accountId": "acc-acme"}]}`), lifecycle.Rules{})
	if err == nil {
		t.Fatal("ParseSeed took a pool of globex on acme's account")
	}
}

// An archived pool takes no new cluster; the clusters already on it stay
// their tenant's and manageable. Another tenant's archive of the ID
// changes nothing.
func TestConsumeArchivedPoolTakesNoCluster(t *testing.T) {
	ctx := context.Background()
	c, st, fs := tenantsWorld(t)
	alice := auth.User("acme", "alice")
	if err := createOn(st, alice, "pool-dev", "before"); err != nil {
		t.Fatal(err)
	}
	archive := func(tenant string, version int64) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"id": "pool-dev", "tenantId": tenant, "version": version})
		if err := c.Handle(ctx, event.PoolArchived, b); err != nil {
			t.Fatal(err)
		}
	}
	archive("globex", 1)
	if err := createOn(st, alice, "pool-dev", "after-globex"); err != nil {
		t.Fatalf("globex's archive of acme's pool ID stopped acme: %v", err)
	}
	archive("acme", 1)
	if p := poolRecord(t, fs, "pool-dev"); p == nil || !p.Archived {
		t.Fatalf("pools/pool-dev = %+v, want it archived", p)
	}
	err := createOn(st, alice, "pool-dev", "after")
	if !errs.Is(err, errs.InvalidState) || !strings.Contains(err.Error(), "pool-dev") {
		t.Fatalf("a cluster on the archived pool = %v, want INVALID_STATE naming it", err)
	}
	// A retry of the create made before is still answered.
	if err := createOn(st, alice, "pool-dev", "before"); err != nil {
		t.Errorf("the create of before, again = %v", err)
	}
	list, _, err := st.ListClusters(ctx, alice, store.ListClustersRequest{PoolID: "pool-dev", PageSize: 50})
	if err != nil || len(list) != 2 {
		t.Fatalf("acme's clusters on the archived pool = %v, %v, want both", list, err)
	}
	for _, cl := range list {
		if _, err := st.CreateNodePool(ctx, alice, store.CreateNodePoolRequest{ClusterID: cl.ID, RequestHash: "b",
			Spec: model.NodePoolSpec{Name: "b", MachineType: "e2-standard-4", NodeCount: 1}}); err != nil {
			t.Errorf("a node pool in %s on the archived pool = %v", cl.Name, err)
		}
		if _, err := st.DeleteCluster(ctx, alice, cl.ID); err != nil {
			t.Errorf("deleting %s on the archived pool = %v", cl.Name, err)
		}
	}
}

// Archival is final: an archive at the version of the last update is
// applied (so a pool at the greatest version can be archived), a
// duplicate changes nothing, and no later event revives the pool.
func TestConsumeArchiveIsFinal(t *testing.T) {
	ctx := context.Background()
	c, _, fs := tenantsWorld(t)
	const greatest = 1<<53 - 1
	if err := c.Handle(ctx, event.PoolUpdated, poolOf("acme", "pool-x", greatest, "acc-gcp")); err != nil {
		t.Fatal(err)
	}
	subs := substratesOfTenant(t, fs, "acme")
	if len(subs) != 1 || subs[0].Spec.Deleting {
		t.Fatalf("substrates = %+v, want one", subs)
	}
	arch, _ := json.Marshal(map[string]any{"id": "pool-x", "tenantId": "acme", "version": greatest})
	if err := c.Handle(ctx, event.PoolArchived, arch); err != nil {
		t.Fatal(err)
	}
	subs = substratesOfTenant(t, fs, "acme")
	if len(subs) != 1 || !subs[0].Spec.Deleting {
		t.Fatalf("after the archive at the same version: %+v, want the substrate torn down", subs)
	}
	was := subs[0].Spec.Generation
	if err := c.Handle(ctx, event.PoolArchived, arch); err != nil {
		t.Fatal(err)
	}
	if subs = substratesOfTenant(t, fs, "acme"); len(subs) != 1 || subs[0].Spec.Generation != was {
		t.Errorf("a duplicate archive changed %+v", subs)
	}
	// Above the greatest version is malformed; and nothing after the
	// archive changes anything.
	over, _ := json.Marshal(map[string]any{"id": "pool-x", "tenantId": "acme", "version": float64(1 << 53)})
	if err := c.Handle(ctx, event.PoolArchived, over); err != nil {
		t.Fatal(err)
	}
	if subs = substratesOfTenant(t, fs, "acme"); len(subs) != 1 || subs[0].Spec.Generation != was {
		t.Errorf("an event past the greatest version changed %+v", subs)
	}
}
