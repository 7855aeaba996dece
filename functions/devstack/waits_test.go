package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"

	"github.com/better-compute/kubernetes/emulators/faults"
	"github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// postDev posts body to one of the devstack's /dev endpoints and returns
// the status and the body.
func postDev(t *testing.T, e *env, path string, body any) (int, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(e.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// TestProviderUpgradeHoldsResize: an upgrade the provider starts itself
// (POST /dev/gke/upgrade) holds a resize: the pool and its cluster stay
// updating and say why in their message, no resize is tried meanwhile,
// and the resize is made once the upgrade ends, with the messages
// cleared and the cluster at the new version.
func TestProviderUpgradeHoldsResize(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	cl := c.createCluster(t, "held", poolSpec("a", 1))
	cl = c.waitCluster(t, cl.ID, resource.StateReady, nil)
	a := poolByName(t, c, cl.ID, "a")

	if code, body := postDev(t, e, devstack.GKEUpgradePath, map[string]string{"clusterId": "kcl_01jd0000000000000000000000"}); code != http.StatusNotFound || !strings.Contains(body, "NOT_FOUND") {
		t.Errorf("upgrade of an unknown cluster = %d %s, want 404 NOT_FOUND", code, body)
	}
	code, body := postDev(t, e, devstack.GKEUpgradePath, map[string]string{"clusterId": cl.ID, "duration": "10s"})
	if code != http.StatusAccepted {
		t.Fatalf("POST %s = %d %s, want 202", devstack.GKEUpgradePath, code, body)
	}
	var started struct{ Operation string }
	if err := json.Unmarshal([]byte(body), &started); err != nil || !strings.HasPrefix(started.Operation, "operation-") {
		t.Fatalf("POST %s answered %s, want the operation", devstack.GKEUpgradePath, body)
	}
	if code, body := postDev(t, e, devstack.GKEUpgradePath, map[string]string{"clusterId": cl.ID}); code != http.StatusConflict || !strings.Contains(body, "INVALID_STATE") {
		t.Errorf("a second upgrade meanwhile = %d %s, want 409 INVALID_STATE", code, body)
	}
	resizes, lists := e.GKE.Calls("SetNodePoolSize"), e.GKE.Calls("ListOperations")
	c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 2})

	want := fmt.Sprintf("waiting for the provider's operation %s (UPGRADE_MASTER) to finish", started.Operation)
	wait.For(t, "the pool saying what it waits for", func() (bool, string) {
		got, err := c.getCluster(cl.ID)
		if err != nil {
			return false, err.Error()
		}
		p := poolByName(t, c, cl.ID, "a")
		return p.State == resource.StateUpdating && p.Message == want && got.State == resource.StateUpdating && got.Message == want, c.clusterState(cl.ID)
	})
	// Runs that find the same wait write nothing of the pool.
	written, seen := poolUpdateTime(t, e, cl.ID, a.ID), e.GKE.Calls("ListOperations")
	wait.For(t, "more runs during the upgrade", func() (bool, string) {
		n := e.GKE.Calls("ListOperations") - seen
		return n >= 3, fmt.Sprintf("%d runs", n)
	})
	if p := poolByName(t, c, cl.ID, "a"); p.Message == want {
		if w := poolUpdateTime(t, e, cl.ID, a.ID); !w.Equal(written) {
			t.Errorf("pool written again at %v (first at %v) while its wait was the same", w, written)
		}
	}
	if n := e.GKE.Calls("SetNodePoolSize") - resizes; n != 0 {
		t.Errorf("SetNodePoolSize calls during the upgrade = %d, want none", n)
	}

	got := c.waitCluster(t, cl.ID, resource.StateReady, map[string]resource.State{"a": resource.StateReady})
	if got.Message != "" || got.KubernetesVersion != gke.NextVersion(cl.KubernetesVersion) {
		t.Errorf("cluster = %q at %s, want no message at %s", got.Message, got.KubernetesVersion, gke.NextVersion(cl.KubernetesVersion))
	}
	if p := poolByName(t, c, cl.ID, "a"); p.Message != "" || p.NodeCount != 2 {
		t.Errorf("pool a = %d nodes %q, want 2 and no message", p.NodeCount, p.Message)
	}
	counts, err := e.GKE.NodeCounts(providerName(cl) + "/nodePools/a")
	if err != nil {
		t.Fatal(err)
	}
	for zone, n := range counts {
		if n != 2 {
			t.Errorf("nodes of a in %s = %d, want 2", zone, n)
		}
	}
	if n := e.GKE.Calls("SetNodePoolSize") - resizes; n != 1 {
		t.Errorf("SetNodePoolSize calls = %d, want 1", n)
	}
	t.Logf("ListOperations calls while the resize waited 10 s: %d", e.GKE.Calls("ListOperations")-lists)
}

// TestRetryingSince: while GKE is unavailable, a resize's runs fail and
// are retried; for the first minute (of the runs' clock) nothing shows,
// then the pool and its cluster say "retrying since <time>: <reason>",
// written once, while they stay updating; once GKE answers again, the
// resize is made and the messages are cleared.
func TestRetryingSince(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	e := startEnv(t, cfg)
	c := e.api
	cl := c.createCluster(t, "retrying", poolSpec("a", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	a := poolByName(t, c, cl.ID, "a")

	// The stack's own runs wait while a runner of the test's, on a clock
	// it moves, runs the cluster.
	ctx := context.Background()
	tc, err := cloudtasks.NewClient(ctx, e.Tasks.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := tc.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: e.cfgQueue()}); err != nil {
		t.Fatal(err)
	}
	outage := faults.NewOutage(codes.Unavailable, "GKE is unavailable")
	outage.Set(true)
	for _, rpc := range []string{"GetCluster", "ListClusters", "GetOperation", "ListOperations"} {
		e.GKE.AddReactor(rpc, outage)
	}
	c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 2})

	clk := &offsetClock{}
	r, err := newRunner(e, noRetries{e.GKEClient}, &noSchedule{}, chain.Config{
		ConvergingInterval: 30 * time.Second, SteadyInterval: 5 * time.Minute, LeaseTTL: 30 * time.Second, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	first := clk.Now().UTC()
	run := func(after time.Duration) {
		t.Helper()
		clk.offset.Store(int64(after))
		// The chain's current token: a run of the stack's that was under
		// way when the queue paused may have handed the chain on.
		// the stack's watchdog may hand a chain whose runs wait in the
		// paused queue to a new one: a run that found its token stale
		// is run again under the new one.
		for attempt := 0; ; attempt++ {
			k := chain.Kick{Kind: store.ClustersKind, TenantID: "acme", ID: cl.ID, Token: e.clusterDoc(t, cl.ID).Reconcile.Token}
			if err := r.Run(ctx, k, fmt.Sprintf("retry-%s-%d", after, attempt)); err != nil {
				t.Fatalf("Run at +%s: %v", after, err)
			}
			if e.clusterDoc(t, cl.ID).Reconcile.Token == k.Token {
				break
			}
			if attempt == 10 {
				t.Fatalf("the chain's token keeps changing under the runs")
			}
		}
	}
	poolMsg := func() (resource.State, string) {
		p := poolByName(t, c, cl.ID, "a")
		return p.State, p.Message
	}

	run(0)
	run(30 * time.Second)
	if st, msg := poolMsg(); st != resource.StateUpdating || msg != "" {
		t.Errorf("pool after 30 s of failures = %s %q, want updating and no message", st, msg)
	}
	if got, _ := c.getCluster(cl.ID); got.State != resource.StateUpdating || got.Message != "" {
		t.Errorf("cluster after 30 s of failures = %s %q, want updating and no message", got.State, got.Message)
	}
	if rt := e.clusterDoc(t, cl.ID).Status.Retrying; rt == nil || rt.Since.Sub(first).Abs() > 5*time.Second {
		t.Errorf("retrying = %+v, want since about %v", rt, first)
	}

	run(90 * time.Second)
	st, msg := poolMsg()
	if st != resource.StateUpdating || !strings.HasPrefix(msg, "retrying since ") || !strings.Contains(msg, "Unavailable: GKE is unavailable") {
		t.Errorf("pool after 90 s of failures = %s %q, want updating, retrying since ...: ... Unavailable: GKE is unavailable", st, msg)
	}
	if got, _ := c.getCluster(cl.ID); got.State != resource.StateUpdating || got.Message != msg {
		t.Errorf("cluster after 90 s of failures = %s %q, want updating %q", got.State, got.Message, msg)
	}
	written := poolUpdateTime(t, e, cl.ID, a.ID)
	run(210 * time.Second)
	if _, again := poolMsg(); again != msg {
		t.Errorf("pool message = %q, want still %q", again, msg)
	}
	if w := poolUpdateTime(t, e, cl.ID, a.ID); !w.Equal(written) {
		t.Errorf("pool written again at %v (first at %v): the message is the same", w, written)
	}

	// GKE answers again: the stack's runs make the resize.
	outage.Set(false)
	if _, err := tc.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: e.cfgQueue()}); err != nil {
		t.Fatal(err)
	}
	got := c.waitCluster(t, cl.ID, resource.StateReady, map[string]resource.State{"a": resource.StateReady})
	if st, msg := poolMsg(); got.Message != "" || msg != "" || st != resource.StateReady {
		t.Errorf("after GKE is back: cluster %q, pool %s %q; want both ready without a message", got.Message, st, msg)
	}
	if rt := e.clusterDoc(t, cl.ID).Status.Retrying; rt != nil {
		t.Errorf("retrying = %+v after a run observed GKE, want none", rt)
	}
}

// noRetries makes the reconciler's reads fail at once, rather than after
// the client's retries, so that a run outlasts no watchdog.
type noRetries struct{ clusters.GKE }

func none() gax.Retryer { return nil }

func (g noRetries) GetCluster(ctx context.Context, req *containerpb.GetClusterRequest, opts ...gax.CallOption) (*containerpb.Cluster, error) {
	return g.GKE.GetCluster(ctx, req, append(opts, gax.WithRetry(none))...)
}

func (g noRetries) GetOperation(ctx context.Context, req *containerpb.GetOperationRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return g.GKE.GetOperation(ctx, req, append(opts, gax.WithRetry(none))...)
}

// poolUpdateTime is when the pool's document was last written.
func poolUpdateTime(t *testing.T, e *env, clusterID, poolID string) time.Time {
	t.Helper()
	snap, err := e.Store.NodePoolRef("acme", clusterID, poolID).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.UpdateTime
}

// TestProviderAutoscaleAndStockout: POST /dev/gke/autoscale moves an
// autoscaled pool's nodes at the provider, within its bounds, and the
// reconciler never resizes it back; POST /dev/gke/stockout makes the
// next pool that needs nodes in the zone get fewer than asked (for long
// enough to be seen: each try of its instance group uses one of the
// count), which the pool shows.
func TestProviderAutoscaleAndStockout(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	auto := poolSpec("auto", 1)
	auto["autoscaling"] = map[string]any{"minNodes": 1, "maxNodes": 3}
	cl := c.createCluster(t, "events", poolSpec("a", 1), auto)
	cl = c.waitCluster(t, cl.ID, resource.StateReady, nil)

	tests := []struct {
		body     map[string]any
		want     int
		wantCode string
	}{
		{map[string]any{"clusterId": cl.ID, "nodePool": "auto", "nodeCount": 3}, http.StatusAccepted, ""},
		{map[string]any{"clusterId": cl.ID, "nodePool": "auto", "nodeCount": 9}, http.StatusConflict, "INVALID_STATE"},
		{map[string]any{"clusterId": cl.ID, "nodePool": "a", "nodeCount": 2}, http.StatusConflict, "INVALID_STATE"},
		{map[string]any{"clusterId": cl.ID, "nodePool": "nope", "nodeCount": 2}, http.StatusNotFound, "NOT_FOUND"},
	}
	for _, tt := range tests {
		if code, body := postDev(t, e, devstack.GKEAutoscalePath, tt.body); code != tt.want || !strings.Contains(body, tt.wantCode) {
			t.Errorf("autoscale %v = %d %s, want %d %s", tt.body, code, body, tt.want, tt.wantCode)
		}
	}
	// A change of another pool makes the runs look at the cluster again.
	c.updatePool(t, cl.ID, poolByName(t, c, cl.ID, "a").ID, map[string]any{"nodeCount": 2})
	wait.For(t, "pool a resized", func() (bool, string) {
		counts, err := e.GKE.NodeCounts(providerName(cl) + "/nodePools/a")
		return err == nil && counts["us-central1-a"] == 2, fmt.Sprint(counts, err)
	})
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	counts, err := e.GKE.NodeCounts(providerName(cl) + "/nodePools/auto")
	if err != nil {
		t.Fatal(err)
	}
	for zone, n := range counts {
		if n != 3 {
			t.Errorf("nodes of auto in %s = %d, want the autoscaler's 3", zone, n)
		}
	}
	if n := e.ops(cl, containerpb.Operation_SET_NODE_POOL_SIZE, "auto"); n != 0 {
		t.Errorf("resizes of auto = %d, want none", n)
	}

	if code, body := postDev(t, e, devstack.GKEStockoutPath, map[string]any{"zone": "us-central1-b", "count": 1000, "form": "nope"}); code != http.StatusBadRequest || !strings.Contains(body, "form") {
		t.Errorf("stockout of an unknown form = %d %s, want 400 naming form", code, body)
	}
	if code, body := postDev(t, e, devstack.GKEStockoutPath, map[string]any{"zone": "us-central1-b", "count": 1000}); code != http.StatusAccepted {
		t.Fatalf("stockout = %d %s, want 202", code, body)
	}
	spec := poolSpec("short", 1)
	spec["zones"] = []string{"us-central1-b"}
	c.createPool(t, cl.ID, spec)
	wait.For(t, "the stockout shown", func() (bool, string) {
		p := poolByName(t, c, cl.ID, "short")
		return p.State == resource.StateError && strings.Contains(p.Message, "GCE_STOCKOUT"), string(p.State) + " " + p.Message
	})
}

// offsetClock is the real clock moved ahead by offset (nanoseconds): a
// runner's that runs a chain as if that much later, while the stack's
// own runs keep real time.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
