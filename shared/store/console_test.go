package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// consoleFleet writes, at the data model's paths, the clusters of the
// tenants named (n each, the i-th created i minutes after base, every
// third deleted), two node pools of each (the second deleted), and a
// substrate of each tenant that uses its first cluster.
func consoleFleet(t *testing.T, fs *firestore.Client, base time.Time, n int, tenants ...string) {
	t.Helper()
	ctx := context.Background()
	bw := fs.BulkWriter(ctx)
	for _, tenant := range tenants {
		for i := range n {
			id := fmt.Sprintf("kcl-%s-%03d", tenant[:1], i)
			cl := model.Cluster{ID: id, TenantID: tenant, CreatedAt: base.Add(time.Duration(i) * time.Minute), Active: i%3 != 2,
				Spec: model.ClusterSpec{Name: fmt.Sprintf("c-%d", i), Project: "p", Region: "r", ProviderName: "bc-" + id}}
			ref := store.TenantDoc(fs, tenant).Collection("clusters").Doc(store.DocID(id))
			if _, err := bw.Set(ref, cl); err != nil {
				t.Fatal(err)
			}
			for j := range 2 {
				p := model.NodePool{ID: fmt.Sprintf("knp-%s-%d", id, j), TenantID: tenant, ClusterID: id, Active: j == 0,
					CreatedAt: base, Spec: model.NodePoolSpec{Name: fmt.Sprintf("p%d", j)}}
				if _, err := bw.Set(ref.Collection("nodePools").Doc(p.ID), p); err != nil {
					t.Fatal(err)
				}
			}
		}
		sb := model.Substrate{ID: "ksb-" + tenant[:1], TenantID: tenant, CreatedAt: base, Active: true,
			Status: model.SubstrateStatus{State: resource.StateReady, ClusterID: fmt.Sprintf("kcl-%s-000", tenant[:1])}}
		if _, err := bw.Set(store.TenantDoc(fs, tenant).Collection("substrates").Doc(sb.ID), sb); err != nil {
			t.Fatal(err)
		}
	}
	bw.End()
}

func clusterIDs(cls []model.Cluster) []string {
	var out []string
	for _, c := range cls {
		out = append(out, c.ID)
	}
	return out
}

// TestConsoleFleetReads reads the fleet as the console does: pages in
// the fleet's order, counts, clusters by key and by ID alone, node pools
// of many clusters, the tenants (one whose ID DocID encodes) and
// their substrates.
func TestConsoleFleetReads(t *testing.T) {
	ctx := context.Background()
	fs := fsemu.ForTest(t, "console")
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// 40 clusters in "acme": their pools take two "in" queries.
	consoleFleet(t, fs, base, 40, "acme")
	consoleFleet(t, fs, base, 4, "zeta/x") // encoded: store.DocID("zeta/x") is "~..."

	tests := []struct {
		name       string
		q          store.FleetQuery
		page, size int
		wantN      int
		want       []string
	}{
		{"one tenant, newest first", store.FleetQuery{Tenant: "acme"}, 1, 3, 40, []string{"kcl-a-039", "kcl-a-038", "kcl-a-037"}},
		{"one tenant, page 2", store.FleetQuery{Tenant: "acme"}, 2, 3, 40, []string{"kcl-a-036", "kcl-a-035", "kcl-a-034"}},
		{"active only", store.FleetQuery{Tenant: "acme", ActiveOnly: true}, 1, 3, 27, []string{"kcl-a-039", "kcl-a-037", "kcl-a-036"}},
		{"every tenant, by tenant", store.FleetQuery{}, 14, 3, 44, []string{"kcl-a-000", "kcl-z-003", "kcl-z-002"}},
		{"page 0 is the first", store.FleetQuery{Tenant: "zeta/x"}, 0, 2, 4, []string{"kcl-z-003", "kcl-z-002"}},
		{"past the last page", store.FleetQuery{Tenant: "zeta/x"}, 9, 2, 4, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := st.CountClusters(ctx, tc.q)
			if err != nil || n != tc.wantN {
				t.Errorf("CountClusters = %d, %v; want %d", n, err, tc.wantN)
			}
			cls, err := st.ClustersPage(ctx, tc.q, tc.page, tc.size)
			if err != nil || !slices.Equal(clusterIDs(cls), tc.want) {
				t.Errorf("ClustersPage = %v, %v; want %v", clusterIDs(cls), err, tc.want)
			}
		})
	}

	if n, err := st.CountSubstrates(ctx, store.FleetQuery{ActiveOnly: true}); err != nil || n != 2 {
		t.Errorf("CountSubstrates = %d, %v; want 2", n, err)
	}
	subs, err := st.SubstratesPage(ctx, store.FleetQuery{Tenant: "zeta/x"}, 1, 10)
	if err != nil || len(subs) != 1 || subs[0].ID != "ksb-z" || subs[0].ClusterID() != "kcl-z-000" {
		t.Errorf("SubstratesPage = %+v, %v; want ksb-z of kcl-z-000", subs, err)
	}

	cls, err := st.ClustersOf(ctx, []store.ClusterKey{{"zeta/x", "kcl-z-001"}, {"acme", "kcl-a-nope"}, {"acme", "kcl-a-002"}})
	if got := clusterIDs(cls); err != nil || !slices.Equal(got, []string{"kcl-z-001", "kcl-a-002"}) {
		t.Errorf("ClustersOf = %v, %v; want the two that exist, in order", got, err)
	}
	if cls, err := st.ClustersOf(ctx, nil); err != nil || cls != nil {
		t.Errorf("ClustersOf(nil) = %v, %v", cls, err)
	}

	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("kcl-a-%03d", i))
	}
	pools, err := st.NodePoolsOfClusters(ctx, append(ids, "kcl-z-000"))
	if err != nil || len(pools) != 82 {
		t.Errorf("NodePoolsOfClusters = %d pools, %v; want 82 (deleted ones too)", len(pools), err)
	}

	tenants, err := st.TenantIDs(ctx)
	slices.Sort(tenants)
	if err != nil || !slices.Equal(tenants, []string{"acme", "zeta/x"}) {
		t.Errorf("TenantIDs = %q, %v; want acme and zeta/x", tenants, err)
	}

	subs, err = st.TenantSubstrates(ctx, "acme")
	if err != nil || len(subs) != 1 || subs[0].ID != "ksb-a" {
		t.Errorf("TenantSubstrates = %+v, %v; want ksb-a", subs, err)
	}

	cl, err := st.ClusterByID(ctx, "kcl-z-002")
	if err != nil || cl == nil || cl.TenantID != "zeta/x" || cl.Spec.ProviderName != "bc-kcl-z-002" {
		t.Errorf("ClusterByID = %+v, %v; want kcl-z-002 of zeta/x", cl, err)
	}
	if cl, err := st.ClusterByID(ctx, "kcl-nope"); err != nil || cl != nil {
		t.Errorf("ClusterByID of none = %+v, %v; want nil", cl, err)
	}
}

// TestConsoleTenantIDsLeaveOutHashed checks that a tenant whose ID is
// too long to encode whole (DocID hashes it) is left out, and the
// others are read back.
func TestConsoleTenantIDsLeaveOutHashed(t *testing.T) {
	ctx := context.Background()
	fs := fsemu.ForTest(t, "console")
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("t", 2000)
	for _, tenant := range []string{"acme", "__x__", "~tilde", long} {
		if _, err := store.TenantDoc(fs, tenant).Set(ctx, map[string]any{"x": 1}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.TenantIDs(ctx)
	slices.Sort(got)
	if want := []string{"__x__", "acme", "~tilde"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("TenantIDs = %q, %v; want %q", got, err, want)
	}
}

// TestConsoleListeners checks the listeners' changes: every document
// first, then each write with its chain, and a document removed or
// unreadable as gone.
func TestConsoleListeners(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fs := fsemu.ForTest(t, "console")
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	consoleFleet(t, fs, base, 2, "acme")

	cls := st.ListenClusters(ctx)
	defer cls.Stop()
	first, err := cls.Next()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ch := range first {
		if ch.Gone || ch.UpdateTime.IsZero() {
			t.Errorf("first snapshot's %s: gone %v, written %v", ch.Key, ch.Gone, ch.UpdateTime)
		}
		_, path, _ := strings.Cut(ch.Key, "/documents/")
		keys = append(keys, path+" "+ch.Value.ID)
	}
	slices.Sort(keys)
	if want := []string{"tenants/acme/clusters/kcl-a-000 kcl-a-000", "tenants/acme/clusters/kcl-a-001 kcl-a-001"}; !slices.Equal(keys, want) {
		t.Errorf("first snapshot = %q, want %q", keys, want)
	}

	pools := st.ListenNodePools(ctx)
	defer pools.Stop()
	if ps, err := pools.Next(); err != nil || len(ps) != 4 || ps[0].Value.ClusterID == "" {
		t.Errorf("first node pools = %+v, %v; want 4", ps, err)
	}
	subs := st.ListenSubstrates(ctx)
	defer subs.Stop()
	if ss, err := subs.Next(); err != nil || len(ss) != 1 || ss[0].Value.ID != "ksb-a" {
		t.Errorf("first substrates = %+v, %v; want ksb-a", ss, err)
	}

	// next is the listener's next change of a cluster.
	next := func(what string) store.Change[store.WatchedCluster] {
		t.Helper()
		chs, err := cls.Next()
		if err != nil || len(chs) != 1 {
			t.Fatalf("%s: changes %+v, %v; want one", what, chs, err)
		}
		return chs[0]
	}
	ref := store.TenantDoc(fs, "acme").Collection("clusters").Doc("kcl-a-001")
	nextAt := base.Add(time.Hour)
	if _, err := ref.Update(ctx, []firestore.Update{{Path: "reconcile", Value: chain.State{LeaseOwner: "run-1", NextAt: nextAt}}}); err != nil {
		t.Fatal(err)
	}
	ch := next("the lease taken")
	if ch.Gone || !strings.HasSuffix(ch.Key, "/documents/tenants/acme/clusters/kcl-a-001") || ch.Value.ID != "kcl-a-001" ||
		ch.Value.Reconcile.LeaseOwner != "run-1" || !ch.Value.Reconcile.NextAt.Equal(nextAt) {
		t.Errorf("change = %+v, want kcl-a-001 leased by run-1", ch)
	}

	if _, err := ref.Update(ctx, []firestore.Update{{Path: "spec", Value: "not a spec"}}); err != nil {
		t.Fatal(err)
	}
	if ch := next("an unreadable document"); !ch.Gone || ch.Value.ID != "" {
		t.Errorf("change = %+v, want gone with no value", ch)
	}

	if _, err := ref.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if ch := next("the document removed"); !ch.Gone || !strings.HasSuffix(ch.Key, "/documents/tenants/acme/clusters/kcl-a-001") {
		t.Errorf("change = %+v, want kcl-a-001 gone", ch)
	}

	cancel()
	if _, err := cls.Next(); err == nil {
		t.Error("Next after the context ended: no error")
	}
}
