package store_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// An adoption is written as lifecycle.DecideAdoption decides it: refused
// while another active substrate holds the cluster, the adoption of one
// that is gone dropped; a release removes the substrate's own adoption
// and nothing else.
func TestAdoptionWrites(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	subC := mustSubstrate(t, w.st, "acme", "pool-c", &model.SubstrateSpec{Mode: resource.SubstrateAdopt, AccountID: "acc", AdoptClusterID: w.adoptee})
	adopters := func() map[string]string {
		t.Helper()
		c, err := w.st.Cluster(ctx, "acme", w.adoptee)
		if err != nil || c == nil {
			t.Fatalf("Cluster(%s) = %v, %v", w.adoptee, c, err)
		}
		return c.AdoptedBy
	}
	want := func(step string, m map[string]string) {
		t.Helper()
		if got := adopters(); !maps.Equal(got, m) {
			t.Errorf("%s: the cluster's adopters = %v, want %v", step, got, m)
		}
	}
	held := map[string]string{w.subB.ID(): "pool-b"}

	if _, err := w.st.AdoptCluster(ctx, subC, w.adoptee, "acc"); !errs.Is(err, errs.InvalidState) || !strings.Contains(err.Error(), "of pool pool-b") {
		t.Errorf("adopting a cluster another holds = %v, want INVALID_STATE naming pool-b", err)
	}
	want("refused", held)
	if err := w.st.ReleaseCluster(ctx, subC, w.adoptee); err != nil {
		t.Errorf("releasing a cluster it does not hold = %v, want a no-op", err)
	}
	want("released by a stranger", held)

	// subB is gone without releasing the cluster.
	if _, err := w.st.SubstrateRef("acme", w.subB.ID()).Update(ctx, []firestore.Update{{Path: "active", Value: false}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.AdoptCluster(ctx, subC, w.adoptee, "acc"); err != nil {
		t.Errorf("adopting a cluster held by a substrate that is gone = %v", err)
	}
	want("adopted", map[string]string{subC.ID(): "pool-c"})
	if err := w.st.ReleaseCluster(ctx, subC, w.adoptee); err != nil {
		t.Errorf("releasing = %v", err)
	}
	want("released", map[string]string{})
	if err := w.st.ReleaseCluster(ctx, subC, w.adoptee); err != nil {
		t.Errorf("releasing again = %v, want a no-op", err)
	}
}
