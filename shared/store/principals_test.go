package store_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// world is a tenant with clusters of every kind, and substrates of its
// pools, for the tests of who may do what.
type world struct {
	st *store.Store
	// plain and adoptee are the tenant's own clusters (adoptee adopted
	// by subB); mine is the cluster subA made.
	plain, mine, adoptee string
	// plainPool, minePool and adopteePool are node pools of each: the
	// tenant's, subA's and the tenant's; subBPool is subB's, in adoptee.
	plainPool, minePool, adopteePool, subBPool string
	subA, subB, subG                           auth.Principal
}

var platform = store.Account{ID: "acc", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	st, err := store.New(fsemu.ForTest(t, "principals"), lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	err = st.LoadSeed(ctx, &store.Seed{
		Accounts: []store.Account{platform},
		Pools:    []store.Pool{{ID: "pool-dev", TenantID: "acme", AccountID: "acc"}},
		RoleBindings: []auth.Binding{
			{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin},
			{TenantID: "acme", Principal: "eve", Role: auth.RoleEditor},
			{TenantID: "acme", Principal: "bob", Role: auth.RoleViewer},
			{TenantID: "globex", Principal: "dave", Role: auth.RoleAdmin},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{st: st}
	alice := auth.User("acme", "alice")
	w.plain, w.plainPool = mustCluster(t, st, alice, "pool-dev", "plain")
	w.adoptee, w.adopteePool = mustCluster(t, st, alice, "pool-dev", "adoptee")

	w.subA = mustSubstrate(t, st, "acme", "pool-a", &model.SubstrateSpec{Mode: resource.SubstrateCreate, AccountID: "acc", Region: "us-central1"})
	w.subB = mustSubstrate(t, st, "acme", "pool-b", &model.SubstrateSpec{Mode: resource.SubstrateAdopt, AccountID: "acc", AdoptClusterID: w.adoptee})
	w.subG = mustSubstrate(t, st, "globex", "pool-g", &model.SubstrateSpec{Mode: resource.SubstrateCreate, AccountID: "acc", Region: "us-central1"})
	w.mine, w.minePool = mustCluster(t, st, w.subA, "pool-a", "bc-pool-a")
	if _, err := st.AdoptCluster(ctx, w.subB, w.adoptee, "acc"); err != nil {
		t.Fatal(err)
	}
	w.subBPool = mustNodePool(t, st, w.subB, w.adoptee, "bc-pool-b-cpu")
	return w
}

func mustCluster(t *testing.T, st *store.Store, p auth.Principal, pool, name string) (cluster, nodePool string) {
	t.Helper()
	ctx := context.Background()
	res, err := st.CreateCluster(ctx, p, store.CreateClusterRequest{PoolID: pool,
		Spec:      model.ClusterSpec{Name: name, Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools: []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}}, RequestHash: name})
	if err != nil {
		t.Fatalf("CreateCluster(%v, %s) = %v", p, name, err)
	}
	pools, err := st.ActiveNodePools(ctx, p.TenantID(), res.Cluster.ID)
	if err != nil || len(pools) != 1 {
		t.Fatalf("ActiveNodePools(%s) = %v, %v", name, pools, err)
	}
	return res.Cluster.ID, pools[0].ID
}

func mustNodePool(t *testing.T, st *store.Store, p auth.Principal, cluster, name string) string {
	t.Helper()
	res, err := st.CreateNodePool(context.Background(), p, store.CreateNodePoolRequest{ClusterID: cluster,
		Spec: model.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: 1}, RequestHash: name})
	if err != nil {
		t.Fatalf("CreateNodePool(%v, %s) = %v", p, name, err)
	}
	return res.NodePool.ID
}

// mustSubstrate records a pool's substrate, as the pools' events do, and
// returns its principal.
func mustSubstrate(t *testing.T, st *store.Store, tenantID, pool string, spec *model.SubstrateSpec) auth.Principal {
	t.Helper()
	ctx := context.Background()
	if _, err := st.ApplyPoolEvent(ctx, store.PoolEvent{TenantID: tenantID, PoolID: pool, Version: 1, Want: spec}); err != nil {
		t.Fatal(err)
	}
	subs, err := st.ActiveSubstrates(ctx, tenantID, pool)
	if err != nil || len(subs) != 1 {
		t.Fatalf("ActiveSubstrates(%s) = %v, %v", pool, subs, err)
	}
	return auth.Substrate(tenantID, subs[0].ID, pool)
}

// TestPrincipals holds every principal against every store operation:
// each role, a member of one cluster, a stranger, a substrate for its
// tenant (creating and adopting), a substrate named in another tenant,
// a substrate named with another pool. An operation either passes the
// authorizer (it may still fail on the state: INVALID_STATE,
// NOT_FOUND, ...) or is PERMISSION_DENIED.
func TestPrincipals(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	if err := w.st.LoadSeed(ctx, &store.Seed{RoleBindings: []auth.Binding{
		{TenantID: "acme", Principal: "carol", Role: auth.RoleEditor, Resource: w.plain},
	}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	name := func() string { n++; return fmt.Sprintf("n%d", n) }
	resize := func(p model.NodePoolSpec) (model.NodePoolSpec, error) { p.NodeCount++; return p, nil }
	type op struct {
		name string
		do   func(p auth.Principal) error
	}
	get := func(id string) func(auth.Principal) error {
		return func(p auth.Principal) error { _, err := w.st.GetCluster(ctx, p, id); return err }
	}
	listPools := func(id string) func(auth.Principal) error {
		return func(p auth.Principal) error { _, err := w.st.ListNodePools(ctx, p, id); return err }
	}
	addPool := func(id string) func(auth.Principal) error {
		return func(p auth.Principal) error {
			nm := name()
			_, err := w.st.CreateNodePool(ctx, p, store.CreateNodePoolRequest{ClusterID: id, RequestHash: nm,
				Spec: model.NodePoolSpec{Name: nm, MachineType: "e2-standard-4", NodeCount: 1}})
			return err
		}
	}
	resizePool := func(cluster, pool string) func(auth.Principal) error {
		return func(p auth.Principal) error { _, err := w.st.UpdateNodePool(ctx, p, cluster, pool, resize); return err }
	}
	deletePool := func(cluster, pool string) func(auth.Principal) error {
		return func(p auth.Principal) error { _, err := w.st.DeleteNodePool(ctx, p, cluster, pool); return err }
	}
	create := func(pool string) func(auth.Principal) error {
		return func(p auth.Principal) error {
			nm := name()
			_, err := w.st.CreateCluster(ctx, p, store.CreateClusterRequest{PoolID: pool, RequestHash: nm,
				Spec:      model.ClusterSpec{Name: nm, Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
				NodePools: []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}}})
			return err
		}
	}
	// Deletions last: what they delete is gone for the rows after them.
	ops := []op{
		{"create on pool-dev", create("pool-dev")},
		{"create on pool-a", create("pool-a")},
		{"get plain", get(w.plain)},
		{"get mine", get(w.mine)},
		{"get adoptee", get(w.adoptee)},
		{"list", func(p auth.Principal) error {
			_, _, err := w.st.ListClusters(ctx, p, store.ListClustersRequest{PageSize: 50})
			return err
		}},
		{"list pools of plain", listPools(w.plain)},
		{"list pools of mine", listPools(w.mine)},
		{"list pools of adoptee", listPools(w.adoptee)},
		{"add pool to plain", addPool(w.plain)},
		{"add pool to mine", addPool(w.mine)},
		{"add pool to adoptee", addPool(w.adoptee)},
		{"resize plain's pool", resizePool(w.plain, w.plainPool)},
		{"resize mine's pool", resizePool(w.mine, w.minePool)},
		{"resize adoptee's pool", resizePool(w.adoptee, w.adopteePool)},
		{"resize subB's pool", resizePool(w.adoptee, w.subBPool)},
		{"adopt plain", func(p auth.Principal) error { _, err := w.st.AdoptCluster(ctx, p, w.plain, "acc"); return err }},
		{"adopt adoptee", func(p auth.Principal) error { _, err := w.st.AdoptCluster(ctx, p, w.adoptee, "acc"); return err }},
		{"release plain", func(p auth.Principal) error { return w.st.ReleaseCluster(ctx, p, w.plain) }},
		{"delete plain's pool", deletePool(w.plain, w.plainPool)},
		{"delete mine's pool", deletePool(w.mine, w.minePool)},
		{"delete adoptee's pool", deletePool(w.adoptee, w.adopteePool)},
		{"delete subB's pool", deletePool(w.adoptee, w.subBPool)},
		{"delete plain", func(p auth.Principal) error { _, err := w.st.DeleteCluster(ctx, p, w.plain); return err }},
		{"delete adoptee", func(p auth.Principal) error { _, err := w.st.DeleteCluster(ctx, p, w.adoptee); return err }},
		{"delete mine", func(p auth.Principal) error { _, err := w.st.DeleteCluster(ctx, p, w.mine); return err }},
	}
	reads := []string{"get plain", "get mine", "get adoptee", "list", "list pools of plain", "list pools of mine", "list pools of adoptee"}
	updates := []string{"add pool to plain", "add pool to mine", "add pool to adoptee",
		"resize plain's pool", "resize mine's pool", "resize adoptee's pool", "resize subB's pool",
		"delete plain's pool", "delete mine's pool", "delete adoptee's pool", "delete subB's pool"}
	principals := []struct {
		name   string
		p      auth.Principal
		passes []string // the operations that pass the authorizer
	}{
		{"viewer", auth.User("acme", "bob"), reads},
		{"editor", auth.User("acme", "eve"), concat(reads, updates)},
		{"editor of plain", auth.User("acme", "carol"), []string{"get plain", "list", "list pools of plain",
			"add pool to plain", "resize plain's pool", "delete plain's pool"}},
		{"admin", auth.User("acme", "alice"), concat(reads, updates, []string{"create on pool-dev", "create on pool-a",
			"delete plain", "delete adoptee", "delete mine"})},
		{"stranger", auth.User("acme", "mallory"), nil},
		{"another tenant's admin", auth.User("acme", "dave"), nil},
		{"substrate creating", w.subA, []string{"create on pool-a", "get mine", "list", "list pools of mine",
			"add pool to mine", "resize mine's pool", "delete mine's pool", "delete mine"}},
		{"substrate adopting", w.subB, []string{"get adoptee", "list", "list pools of adoptee", "add pool to adoptee",
			"resize subB's pool", "delete subB's pool", "adopt adoptee"}},
		{"substrate of another tenant", auth.Substrate("acme", w.subG.ID(), w.subG.Pool()), nil},
		{"substrate named with another pool", auth.Substrate("acme", w.subA.ID(), "pool-b"), nil},
	}
	for _, o := range ops {
		for _, pr := range principals {
			err := o.do(pr.p)
			want := slices.Contains(pr.passes, o.name)
			denied := errs.Is(err, errs.PermissionDenied)
			if want && denied {
				t.Errorf("%s: %s = %v, want it past the authorizer", pr.name, o.name, err)
			}
			if !want && !denied {
				t.Errorf("%s: %s = %v, want PERMISSION_DENIED", pr.name, o.name, err)
			}
		}
	}
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return out
}

// Of substrates adopting one cluster at once, exactly one wins; the others
// are refused naming the winner's pool, and nothing of theirs is created
// in it.
func TestOneAdopter(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	for round := range 5 {
		cluster, _ := mustCluster(t, w.st, auth.User("acme", "alice"), "pool-dev", fmt.Sprintf("shared-%d", round))
		var subs []auth.Principal
		for i := range 4 {
			subs = append(subs, mustSubstrate(t, w.st, "acme", fmt.Sprintf("pool-r%d-%d", round, i),
				&model.SubstrateSpec{Mode: resource.SubstrateAdopt, AccountID: "acc", AdoptClusterID: cluster}))
		}
		errsOf := make([]error, len(subs))
		var wg sync.WaitGroup
		for i, p := range subs {
			wg.Go(func() { _, errsOf[i] = w.st.AdoptCluster(ctx, p, cluster, "acc") })
		}
		wg.Wait()
		var winner auth.Principal
		won := 0
		for i, err := range errsOf {
			if err == nil {
				won++
				winner = subs[i]
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d adopters won (%v), want exactly one", round, won, errsOf)
		}
		for i, err := range errsOf {
			if err == nil {
				continue
			}
			if !errs.Is(err, errs.InvalidState) || !strings.Contains(err.Error(), "of pool "+winner.Pool()) {
				t.Errorf("round %d: the loser's adoption = %v, want INVALID_STATE naming pool %s", round, err, winner.Pool())
			}
			// A loser may add nothing to the winner's cluster.
			if _, err := w.st.CreateNodePool(ctx, subs[i], store.CreateNodePoolRequest{ClusterID: cluster, RequestHash: "x",
				Spec: model.NodePoolSpec{Name: "bc-x", MachineType: "e2-standard-4", NodeCount: 1}}); !errs.Is(err, errs.PermissionDenied) {
				t.Errorf("round %d: a loser's node pool in the cluster = %v, want PERMISSION_DENIED", round, err)
			}
		}
		// Adopting again is the winner's no-op.
		if _, err := w.st.AdoptCluster(ctx, winner, cluster, "acc"); err != nil {
			t.Errorf("round %d: the winner adopting again = %v", round, err)
		}
	}
}
