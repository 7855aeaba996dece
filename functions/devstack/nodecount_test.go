package devstack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"

	"github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// count describes a pool's currentNodeCount for failure messages.
func count(p resource.NodePool) string {
	if p.CurrentNodeCount == nil {
		return "absent"
	}
	return fmt.Sprint(*p.CurrentNodeCount)
}

// waitCount waits until the pool named name shows want nodes (-1:
// absent), and returns it.
func waitCount(t *testing.T, c *client, clusterID, name string, want int) resource.NodePool {
	t.Helper()
	var p resource.NodePool
	wait.For(t, fmt.Sprintf("pool %s with currentNodeCount %d", name, want), func() (bool, string) {
		p = poolByName(t, c, clusterID, name)
		if want < 0 {
			return p.CurrentNodeCount == nil, count(p)
		}
		return p.CurrentNodeCount != nil && *p.CurrentNodeCount == want, fmt.Sprintf("%s %s (%q): %s nodes", p.Name, p.State, p.Message, count(p))
	})
	return p
}

// TestCurrentNodeCountFollowsTheAutoscaler: every pool shows the nodes of
// its instance groups in all its zones; when the provider's autoscaler
// moves an autoscaled pool (POST /dev/gke/autoscale), currentNodeCount
// follows while the reconciler calls nothing and publishes nothing; a
// count that cannot be read is absent for a while, and nothing else
// changes.
func TestCurrentNodeCountFollowsTheAutoscaler(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	auto := poolSpec("auto", 1)
	auto["autoscaling"] = map[string]any{"minNodes": 1, "maxNodes": 4}
	cl := c.createCluster(t, "counted", poolSpec("a", 2), auto)
	cl = c.waitCluster(t, cl.ID, resource.StateReady, nil)

	// The seed's account gives the cluster three zones.
	waitCount(t, c, cl.ID, "a", 6)
	before := waitCount(t, c, cl.ID, "auto", 3)
	ops := len(e.GKE.Operations())

	for _, perZone := range []int{4, 2} {
		if code, body := postDev(t, e, devstack.GKEAutoscalePath, map[string]any{"clusterId": cl.ID, "nodePool": "auto", "nodeCount": perZone}); code != http.StatusAccepted {
			t.Fatalf("autoscale to %d = %d %s", perZone, code, body)
		}
		p := waitCount(t, c, cl.ID, "auto", 3*perZone)
		if p.State != resource.StateReady || p.NodeCount != 1 || p.Version != before.Version || p.Message != "" {
			t.Errorf("pool auto = %s %q, nodeCount %d, version %d; want ready as it was (nodeCount 1, version %d)", p.State, p.Message, p.NodeCount, p.Version, before.Version)
		}
	}
	if got := e.GKE.Operations(); len(got) != ops {
		t.Errorf("provider operations while the autoscaler moved the pool: %d, want none (last: %v)", len(got)-ops, got[len(got)-1].GetOperationType())
	}
	if n := e.ops(cl, containerpb.Operation_SET_NODE_POOL_SIZE, "auto"); n != 0 {
		t.Errorf("resizes of auto = %d, want none", n)
	}
	if n := e.Compute.Calls(gke.ComputeAggregatedList); n == 0 {
		t.Errorf("aggregatedList calls = 0, want the counts read through Compute Engine")
	}

	// A count that cannot be read is absent; nothing else changes, and
	// it is back once Compute Engine answers again.
	e.Compute.FailNext(gke.ComputeAggregatedList, 3, codes.Unavailable, "The service is currently unavailable.")
	p := waitCount(t, c, cl.ID, "auto", -1)
	if p.State != resource.StateReady || p.Message != "" {
		t.Errorf("pool auto without its count = %s %q, want ready", p.State, p.Message)
	}
	waitCount(t, c, cl.ID, "auto", 6)
	if got, err := c.getCluster(cl.ID); err != nil || got.State != resource.StateReady {
		t.Errorf("cluster = %v %v, want ready", got.State, err)
	}
	e.checkEvents(t, cl, map[string]int{
		event.NodePoolReady + "/" + before.ID: 1,
		event.NodePoolError:                   0,
		event.ClusterError:                    0,
	})
}

// TestStockoutSaidPlainly: a pool that a stockout leaves short (POST
// /dev/gke/stockout) is error with the zone, the machine type and the
// nodes got of those wanted, and one kubernetes.nodepool.error;
// currentNodeCount shows the nodes that exist; nothing is called again
// meanwhile; it goes ready by itself with one kubernetes.nodepool.ready
// when the provider gets the nodes. So in each form GKE reports a
// stockout in: its instance group manager's words, a pool's terse
// message (ERROR, no zone named), and conditions alone.
func TestStockoutSaidPlainly(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"instances", "capacity", "conditions"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			testStockoutSaidPlainly(t, form)
		})
	}
}

func testStockoutSaidPlainly(t *testing.T, form string) {
	e := startEnv(t, fastConfig())
	c := e.api
	cl := c.createCluster(t, "stocked", poolSpec("a", 1))
	cl = c.waitCluster(t, cl.ID, resource.StateReady, nil)

	// Every try in zone b fails for about 1000 operation times (30 s):
	// the create, then the instance group's own retries.
	if code, body := postDev(t, e, devstack.GKEStockoutPath, map[string]any{"zone": "us-central1-b", "count": 1000, "form": form}); code != http.StatusAccepted {
		t.Fatalf("stockout = %d %s, want 202", code, body)
	}
	spec := poolSpec("short", 2)
	spec["zones"] = []string{"us-central1-b"}
	short := c.createPool(t, cl.ID, spec)

	const want = "us-central1-b: no e2-standard-4 available (GCE_STOCKOUT); 1 of 2 nodes; retried every 2 seconds"
	wait.For(t, "the stockout said plainly", func() (bool, string) {
		p := poolByName(t, c, cl.ID, "short")
		return p.State == resource.StateError && p.Message == want && p.CurrentNodeCount != nil && *p.CurrentNodeCount == 1,
			fmt.Sprintf("%s %q, %s nodes", p.State, p.Message, count(p))
	})
	if got, err := c.getCluster(cl.ID); err != nil || got.State != resource.StateError {
		t.Errorf("cluster during the stockout = %v %v, want error", got.State, err)
	}
	e.waitEvents(t, cl.ID, map[string]int{event.NodePoolError + "/" + short.ID: 1})

	got := c.waitCluster(t, cl.ID, resource.StateReady, nil)
	p := waitCount(t, c, cl.ID, "short", 2)
	if p.State != resource.StateReady || p.Message != "" || got.Message != "" {
		t.Errorf("after the stockout: pool %s %q, cluster %q; want ready, no messages", p.State, p.Message, got.Message)
	}
	if n := e.ops(cl, containerpb.Operation_CREATE_NODE_POOL, "short"); n != 1 {
		t.Errorf("creates of short = %d, want 1: the provider gets the nodes by itself", n)
	}
	if n := e.ops(cl, containerpb.Operation_SET_NODE_POOL_SIZE, "short"); n != 0 {
		t.Errorf("resizes of short = %d, want none", n)
	}
	e.checkEvents(t, cl, map[string]int{
		event.NodePoolError + "/" + short.ID: 1,
		event.NodePoolReady + "/" + short.ID: 1,
	})
	// Each event carries the nodes there were then.
	for _, ev := range e.events.of(cl.ID) {
		want := map[string]int{event.NodePoolError: 1, event.NodePoolReady: 2}[ev.Type]
		if ev.Attrs["nodePoolId"] != short.ID || want == 0 {
			continue
		}
		var p resource.NodePool
		if err := json.Unmarshal(ev.Data, &p); err != nil || p.CurrentNodeCount == nil || *p.CurrentNodeCount != want {
			t.Errorf("%s of short: currentNodeCount %s (%v), want %d", ev.Type, count(p), err, want)
		}
	}
}
