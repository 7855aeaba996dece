package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// quotaEnv is a tenant, acme, on a store over the Firestore emulator, with
// the quick retries of the deployed functions' client.
type quotaEnv struct {
	fs     *firestore.Client
	st     *store.Store
	clk    *testingclock.FakePassiveClock
	caller auth.Principal
}

func newQuotaEnv(t *testing.T, quota *int) *quotaEnv {
	t.Helper()
	fs := fsemu.ForTest(t, "quota", store.DialOption())
	clk := testingclock.NewFakePassiveClock(time.Now().UTC().Truncate(time.Microsecond))
	st, err := store.New(fs, lifecycle.Rules{}, store.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	e := &quotaEnv{fs: fs, st: st, clk: clk, caller: auth.User("acme", "alice")}
	e.seed(t, quota)
	return e
}

// seed loads acme's seed with its quota of clusters (none when nil).
func (e *quotaEnv) seed(t *testing.T, quota *int) {
	t.Helper()
	seed := &store.Seed{
		Accounts:     []store.Account{{ID: "acc", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}},
		Pools:        []store.Pool{{ID: "pool", TenantID: "acme", AccountID: "acc"}},
		RoleBindings: []auth.Binding{{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin}},
	}
	if quota != nil {
		seed.Tenants = []store.Tenant{{ID: "acme", Quota: model.Quota{Clusters: quota}}}
	}
	if err := e.st.LoadSeed(context.Background(), seed); err != nil {
		t.Fatalf("LoadSeed = %v", err)
	}
}

func (e *quotaEnv) create(name, key string) (store.ClusterResult, error) {
	return e.st.CreateCluster(context.Background(), e.caller, store.CreateClusterRequest{
		PoolID:         "pool",
		Spec:           model.ClusterSpec{Name: name, Mode: resource.ModeAutopilot, Region: "us-central1", ReleaseChannel: "regular"},
		IdempotencyKey: key,
		RequestHash:    "h-" + name,
	})
}

// createAll creates n clusters at once, released together, and returns
// how many were let in and how many refused QUOTA_EXCEEDED; any other
// answer fails the test.
func (e *quotaEnv) createAll(t *testing.T, prefix string, n int) (in, refused int) {
	t.Helper()
	errc := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := e.create(fmt.Sprintf("%s-%d", prefix, i), "")
			errc <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		var de *errs.Error
		switch {
		case err == nil:
			in++
		case errors.As(err, &de) && de.Kind == errs.Quota:
			refused++
		default:
			t.Errorf("CreateCluster = %v, want a cluster or QUOTA_EXCEEDED", err)
		}
	}
	return in, refused
}

// active lists the tenant's clusters that are not deleted.
func (e *quotaEnv) active(t *testing.T) []resource.Cluster {
	t.Helper()
	var all []resource.Cluster
	req := store.ListClustersRequest{PageSize: 100}
	for {
		page, next, err := e.st.ListClusters(context.Background(), e.caller, req)
		if err != nil {
			t.Fatalf("ListClusters = %v", err)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		req.PageToken = next
	}
}

// finishDelete deletes the cluster and saves the run that finds it gone at
// the provider, as the reconciler does.
func (e *quotaEnv) finishDelete(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.st.DeleteCluster(ctx, e.caller, id); err != nil {
		t.Errorf("DeleteCluster(%s) = %v", id, err)
		return
	}
	err := e.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(e.st.ClusterRef("acme", id))
		if err != nil {
			return err
		}
		var before store.ClusterRun
		if err := snap.DataTo(&before.Cluster); err != nil {
			return err
		}
		after := store.ClusterRun{Cluster: lifecycle.BeginRun(before.Cluster)}
		events := lifecycle.ClusterDeleted(&after.Cluster, e.clk.Now())
		_, _, err = e.st.SaveClusterRun(tx, snap, before, after, events)
		return err
	})
	if err != nil {
		t.Errorf("save the run of %s that found it deleted: %v", id, err)
	}
}

func quota(n int) *int { return &n }

// Creates at once at the limit: exactly the quota is let in, the rest are
// QUOTA_EXCEEDED naming it.
func TestClusterQuotaConcurrentCreates(t *testing.T) {
	e := newQuotaEnv(t, quota(5))
	for i := range 2 {
		if _, err := e.create(fmt.Sprintf("old-%d", i), ""); err != nil {
			t.Fatalf("CreateCluster = %v", err)
		}
	}
	in, refused := e.createAll(t, "new", 20)
	if in != 3 || refused != 17 {
		t.Errorf("20 creates at once with 2 of 5 clusters: %d let in, %d QUOTA_EXCEEDED; want 3, 17", in, refused)
	}
	if n := len(e.active(t)); n != 5 {
		t.Errorf("clusters not deleted = %d, want 5", n)
	}
	_, err := e.create("one-more", "")
	var de *errs.Error
	if !errors.As(err, &de) || de.Kind != errs.Quota {
		t.Fatalf("CreateCluster at the quota = %v, want QUOTA_EXCEEDED", err)
	}
	if want := "tenant acme has 5 clusters that are not deleted, its quota of clusters"; de.Message != want {
		t.Errorf("QUOTA_EXCEEDED message = %q, want %q", de.Message, want)
	}
}

// A deleted cluster frees its place, also when clusters go deleted while
// creates are under way: the count never lets in more than the quota and
// stays the clusters' own.
func TestClusterQuotaDeletesFreePlaces(t *testing.T) {
	e := newQuotaEnv(t, quota(5))
	in, _ := e.createAll(t, "first", 5)
	if in != 5 {
		t.Fatalf("5 creates under a quota of 5: %d let in", in)
	}
	clusters := e.active(t)

	// Two places freed, then 20 creates at once: two let in.
	for _, c := range clusters[:2] {
		e.finishDelete(t, c.ID)
	}
	if in, refused := e.createAll(t, "second", 20); in != 2 || refused != 18 {
		t.Errorf("20 creates at once after 2 of 5 deleted: %d let in, %d QUOTA_EXCEEDED; want 2, 18", in, refused)
	}

	// Three clusters going deleted while 20 creates run: whichever order
	// they meet in, no more than the quota, and the count is exact after.
	var wg sync.WaitGroup
	for _, c := range clusters[2:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.finishDelete(t, c.ID)
		}()
	}
	in, _ = e.createAll(t, "third", 20)
	wg.Wait()
	if in > 3 {
		t.Errorf("20 creates while 3 clusters went deleted: %d let in, want at most 3", in)
	}
	n := len(e.active(t))
	if n != 2+in {
		t.Errorf("clusters not deleted = %d, want %d", n, 2+in)
	}
	if in, refused := e.createAll(t, "fourth", 20); in != 5-n || refused != 20-(5-n) {
		t.Errorf("20 creates at once with %d of 5: %d let in, %d QUOTA_EXCEEDED; want %d, %d", n, in, refused, 5-n, 20-(5-n))
	}
	if n := len(e.active(t)); n != 5 {
		t.Errorf("clusters not deleted = %d, want 5", n)
	}
}

// A keyed create that was let in is answered with its cluster when
// retried at the quota.
func TestClusterQuotaKeyedReplay(t *testing.T) {
	e := newQuotaEnv(t, quota(1))
	first, err := e.create("keyed", "key-1")
	if err != nil {
		t.Fatalf("CreateCluster = %v", err)
	}
	again, err := e.create("keyed", "key-1")
	if err != nil || again.Cluster.ID != first.Cluster.ID {
		t.Errorf("keyed replay at the quota = %+v, %v; want cluster %s", again.Cluster, err, first.Cluster.ID)
	}
	var de *errs.Error
	if _, err := e.create("other", "key-2"); !errors.As(err, &de) || de.Kind != errs.Quota {
		t.Errorf("another keyed create at the quota = %v, want QUOTA_EXCEEDED", err)
	}
}

// A quota set over clusters that were made with none counts them all, and
// unset again, lets any number in.
func TestClusterQuotaSetLater(t *testing.T) {
	e := newQuotaEnv(t, nil)
	if in, _ := e.createAll(t, "free", 4); in != 4 {
		t.Fatalf("4 creates with no quota: %d let in", in)
	}
	e.seed(t, quota(5))
	if in, refused := e.createAll(t, "capped", 4); in != 1 || refused != 3 {
		t.Errorf("4 creates with 4 of 5: %d let in, %d QUOTA_EXCEEDED; want 1, 3", in, refused)
	}
	e.seed(t, quota(3))
	var de *errs.Error
	if _, err := e.create("over", ""); !errors.As(err, &de) || de.Kind != errs.Quota {
		t.Errorf("CreateCluster over a quota lowered = %v, want QUOTA_EXCEEDED", err)
	}
	e.seed(t, nil)
	// The seed names no tenant: acme keeps its quota of 3.
	if _, err := e.create("still-over", ""); !errors.As(err, &de) || de.Kind != errs.Quota {
		t.Errorf("CreateCluster after a seed that names no tenant = %v, want QUOTA_EXCEEDED", err)
	}
	if err := e.st.LoadSeed(context.Background(), &store.Seed{Tenants: []store.Tenant{{ID: "acme"}}}); err != nil {
		t.Fatal(err)
	}
	if in, _ := e.createAll(t, "unset", 3); in != 3 {
		t.Errorf("3 creates with the quota unset: %d let in, want 3", in)
	}
}
