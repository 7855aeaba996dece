package clusters_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/resource"
)

// A steady cluster's run hands its successor the cluster's provider
// coordinates (Kick.Hint), and the successor reads the provider with its
// documents. A hint is never trusted: one that names another cluster, or
// is not a hint at all, costs at most a wasted read, and the run observes
// the cluster its document names.
func TestRefreshPrefetchesWhatItsHintNames(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// One steady run, whose successor carries the hint.
	e.clk.Step(time.Minute)
	if err := e.runner.Run(ctx, e.current(t, e.kick), "steady-1"); err != nil {
		t.Fatal(err)
	}
	next := e.sched.last(t)
	c, err := e.st.GetCluster(ctx, e.caller, e.id)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(next.Hint, "/")
	if len(f) != 4 || f[0] != "p" || f[1] != "us-central1" || f[2] != c.ProviderName || f[3] != "" {
		t.Fatalf("successor's hint = %q, want p/us-central1/%s/ (project, region, provider name, no account to impersonate)", next.Hint, c.ProviderName)
	}
	for _, tc := range []struct {
		name  string
		hint  string
		reads int // GetCluster calls of the run
	}{
		{"its own", next.Hint, 1},
		{"another cluster's", "p/us-central1/gone/", 2},
		{"garbage", "not a hint", 1},
		{"none", "", 1},
	} {
		k := next
		k.Hint = tc.hint
		e.clk.Step(time.Minute)
		before := e.gke.Calls("GetCluster")
		if err := e.runner.Run(ctx, k, "steady-"+tc.name); err != nil {
			t.Fatalf("%s: Run = %v", tc.name, err)
		}
		if got := e.gke.Calls("GetCluster") - before; got != tc.reads {
			t.Errorf("%s: %d GetCluster calls, want %d", tc.name, got, tc.reads)
		}
		c, err := e.st.GetCluster(ctx, e.caller, e.id)
		if err != nil {
			t.Fatal(err)
		}
		pools, err := e.st.ListNodePools(ctx, e.caller, e.id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != resource.StateReady || len(pools) != 1 || pools[0].State != resource.StateReady {
			t.Errorf("%s: cluster %s (%s), pools %+v after the run; want it ready as it is at the provider", tc.name, c.State, c.Message, pools)
		}
		if got := e.sched.last(t).Hint; got != next.Hint {
			t.Errorf("%s: successor's hint = %q, want the cluster's own %q", tc.name, got, next.Hint)
		}
	}
}
