package clusters_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// newDriftEnv is newEnv whose runs read the pools' instance groups
// through the official Compute Engine client against the simulator, as
// production's do, sharing a project's listing for a tenth of the steady
// interval.
func newDriftEnv(t *testing.T, ttl time.Duration) *env {
	t.Helper()
	return newEnvFor(t, func(e *env) []clusters.Option {
		cs, err := gkeemu.NewComputeServer(e.gke, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		e.compute = cs
		return []clusters.Option{clusters.WithNodeCounts(clusters.NodeCounts{Compute: computeClient(t, cs, ""), TTL: ttl})}
	})
}

// poolName is the provider's name of the env's cluster's pool.
func (e *env) poolName(pool string) string {
	return "projects/p/locations/us-central1/clusters/" + resource.ProviderClusterName(e.id) + "/nodePools/" + pool
}

// pool is the env's cluster's pool named name, as the API shows it.
func (e *env) pool(t *testing.T, name string) resource.NodePool {
	t.Helper()
	pools, err := e.st.ListNodePools(context.Background(), e.caller, e.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if p.Name == name && p.State != resource.StateDeleted {
			return p
		}
	}
	t.Fatalf("no pool %q", name)
	return resource.NodePool{}
}

// resize is the tenant's kubernetesNodePools.update of pool name; the
// next runs are its kick's.
func (e *env) resize(t *testing.T, name string, nodeCount int) {
	t.Helper()
	res, err := e.st.UpdateNodePool(context.Background(), e.caller, e.id, e.pool(t, name).ID, func(p model.NodePoolSpec) (model.NodePoolSpec, error) {
		p.NodeCount = nodeCount
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.kick = *res.Kick
}

// run makes one run of the cluster's chain.
func (e *env) run(t *testing.T) {
	t.Helper()
	if err := e.runner.Run(context.Background(), e.current(t, e.kick), ""); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// providerSizes are the nodes per zone the provider runs for pool name.
func (e *env) providerSizes(t *testing.T, name string) map[string]int32 {
	t.Helper()
	n, err := e.gke.NodeCounts(e.poolName(name))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkNotReadyWhileDiffering fails when pool name is ready while the
// provider runs another size per zone than its spec's (API.md §4: never
// ready while the provider differs from the spec).
func (e *env) checkNotReadyWhileDiffering(t *testing.T, name, when string) {
	t.Helper()
	p := e.pool(t, name)
	if p.State != resource.StateReady || p.Autoscaling != nil {
		return
	}
	for z, n := range e.providerSizes(t, name) {
		if int(n) != p.NodeCount {
			t.Errorf("%s: pool %s is ready with nodeCount %d while the provider runs %d in %s", when, name, p.NodeCount, n, z)
		}
	}
}

// A resize whose answer is lost (GKE made it, the caller got UNAVAILABLE)
// and a resize back before the next run: the provider ends at the spec's
// size, and the pool is never ready at another.
func TestLostResizeAnswerThenResizeBack(t *testing.T) {
	e := newDriftEnv(t, 6*time.Second)
	e.resize(t, "a", 3)
	e.converge(t)

	e.gke.LoseNext("SetNodePoolSize", 1, codes.Unavailable, "the answer was lost")
	e.resize(t, "a", 1)
	e.run(t)
	if got := e.gke.Lost("SetNodePoolSize"); got != 1 {
		t.Fatalf("lost SetNodePoolSize answers = %d, want 1", got)
	}
	e.clk.Step(opTime + time.Second)
	e.resize(t, "a", 3)
	for i := range 10 {
		e.run(t)
		e.checkNotReadyWhileDiffering(t, "a", fmt.Sprintf("run %d", i+1))
		if e.pool(t, "a").State == resource.StateReady {
			break
		}
		e.clk.Step(opTime + time.Second)
	}
	p := e.pool(t, "a")
	if p.State != resource.StateReady || p.NodeCount != 3 {
		t.Errorf("pool = %s nodeCount %d, want ready 3", p.State, p.NodeCount)
	}
	if got := e.providerSizes(t, "a"); got["us-central1-a"] != 3 {
		t.Errorf("nodes at the provider = %v, want 3 in us-central1-a", got)
	}
	// A later steady refresh leaves it so.
	e.clk.Step(time.Minute)
	e.run(t)
	e.checkNotReadyWhileDiffering(t, "a", "steady refresh")
}

// A call whose answer is lost is not made again: its intent survives the
// error, and the next run finds its operation before calling anything.
func TestLostAnswerKeepsTheIntent(t *testing.T) {
	tests := []struct {
		rpc    string
		kind   string
		opType containerpb.Operation_Type
		pool   string
		change func(*testing.T, *env)
		check  func(*testing.T, *env)
	}{
		{
			rpc: "SetNodePoolSize", kind: clusters.SetSize, opType: containerpb.Operation_SET_NODE_POOL_SIZE, pool: "a",
			change: func(t *testing.T, e *env) { e.resize(t, "a", 2) },
			check: func(t *testing.T, e *env) {
				if got := e.providerSizes(t, "a"); got["us-central1-a"] != 2 {
					t.Errorf("nodes at the provider = %v, want 2", got)
				}
			},
		},
		{
			rpc: "SetNodePoolAutoscaling", kind: clusters.SetAutoscaling, opType: containerpb.Operation_UPDATE_CLUSTER, pool: "a",
			change: func(t *testing.T, e *env) {
				res, err := e.st.UpdateNodePool(context.Background(), e.caller, e.id, e.pool(t, "a").ID, func(p model.NodePoolSpec) (model.NodePoolSpec, error) {
					p.Autoscaling = &resource.Autoscaling{MinNodes: 1, MaxNodes: 3}
					return p, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				e.kick = *res.Kick
			},
			check: func(t *testing.T, e *env) {
				np, err := e.gke.NodePool(e.poolName("a"))
				if err != nil || !np.GetAutoscaling().GetEnabled() {
					t.Errorf("provider's autoscaling = %v, %v; want on", np.GetAutoscaling(), err)
				}
			},
		},
		{
			rpc: "CreateNodePool", kind: clusters.CreateNodePool, opType: containerpb.Operation_CREATE_NODE_POOL, pool: "b",
			change: func(t *testing.T, e *env) {
				res, err := e.st.CreateNodePool(context.Background(), e.caller, store.CreateNodePoolRequest{
					ClusterID: e.id, Spec: model.NodePoolSpec{Name: "b", MachineType: "e2-standard-4", NodeCount: 1}, RequestHash: "b",
				})
				if err != nil {
					t.Fatal(err)
				}
				e.kick = *res.Kick
			},
			check: func(t *testing.T, e *env) {
				if got := e.providerSizes(t, "b"); got["us-central1-a"] != 1 {
					t.Errorf("nodes of b at the provider = %v, want 1", got)
				}
			},
		},
		{
			rpc: "DeleteNodePool", kind: clusters.DeleteNodePool, opType: containerpb.Operation_DELETE_NODE_POOL, pool: "a",
			change: func(t *testing.T, e *env) {
				res, err := e.st.DeleteNodePool(context.Background(), e.caller, e.id, e.pool(t, "a").ID)
				if err != nil {
					t.Fatal(err)
				}
				e.kick = *res.Kick
			},
			check: func(t *testing.T, e *env) {
				if _, err := e.gke.NodePool(e.poolName("a")); err == nil {
					t.Error("the provider still has the deleted pool")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.rpc, func(t *testing.T) {
			e := newDriftEnv(t, 6*time.Second)
			before := e.gke.Calls(tt.rpc)
			e.gke.LoseNext(tt.rpc, 1, codes.Unavailable, "the answer was lost")
			tt.change(t, e)
			e.run(t)
			// The client library may retry a call whose answer was
			// lost (a delete: the retry meets the operation it made);
			// the run makes it once.
			made := e.gke.Calls(tt.rpc)
			if made == before {
				t.Fatalf("%s calls = 0, want the run to make it", tt.rpc)
			}
			if in := e.storedIntent(t, tt.pool); in == nil || in.Kind != tt.kind {
				t.Errorf("stored intent after the lost answer = %+v, want %s", in, tt.kind)
			}
			lists := e.gke.Calls("ListOperations")
			for range 10 {
				e.clk.Step(opTime + time.Second)
				e.run(t)
				if c, err := e.st.GetCluster(context.Background(), e.caller, e.id); err == nil && c.State == resource.StateReady {
					break
				}
			}
			if c, err := e.st.GetCluster(context.Background(), e.caller, e.id); err != nil || c.State != resource.StateReady {
				t.Fatalf("cluster = %v, %v; want ready", c.State, err)
			}
			if got := e.gke.Calls(tt.rpc) - made; got != 0 {
				t.Errorf("%s calls after the lost answer = %d, want 0: the lost one was done", tt.rpc, got)
			}
			if n := e.ops(tt.opType); n != 1 {
				t.Errorf("%s operations = %d, want 1", tt.opType, n)
			}
			if got := e.gke.Calls("ListOperations") - lists; got < 1 {
				t.Errorf("ListOperations calls after the lost answer = %d, want the intent resolved with one", got)
			}
			tt.check(t, e)
		})
	}
}

// storedIntent is the intent the pool named name's document holds.
func (e *env) storedIntent(t *testing.T, name string) *model.Intent {
	t.Helper()
	snap, err := e.st.NodePoolRef("acme", e.id, e.pool(t, name).ID).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var stored model.NodePool
	if err := snap.DataTo(&stored); err != nil {
		t.Fatal(err)
	}
	return stored.Status.Provider.Intent
}

// A pool changed at GKE by another client (the official client, straight
// to the simulator) is brought back within two runs: the first says what
// differed, updating, and makes the call; the second finds it done,
// ready, with kubernetes.nodepool.ready.
func TestChangedAtTheProviderIsBroughtBack(t *testing.T) {
	tests := []struct {
		name    string
		change  func(context.Context, *env) error
		message string
		call    string
	}{
		{
			name: "resized",
			change: func(ctx context.Context, e *env) error {
				_, err := containerClient(t, e).SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: e.poolName("a"), NodeCount: 3})
				return err
			},
			message: "changed at the provider: 3 nodes per zone, spec 1; resizing",
			call:    "SetNodePoolSize",
		},
		{
			name: "given autoscaling",
			change: func(ctx context.Context, e *env) error {
				_, err := containerClient(t, e).SetNodePoolAutoscaling(ctx, &containerpb.SetNodePoolAutoscalingRequest{
					Name: e.poolName("a"), Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, MaxNodeCount: 5},
				})
				return err
			},
			message: "changed at the provider: autoscaling 1-5 nodes per zone, spec off; setting it",
			call:    "SetNodePoolAutoscaling",
		},
		{
			name: "deleted",
			change: func(ctx context.Context, e *env) error {
				_, err := containerClient(t, e).DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: e.poolName("a")})
				return err
			},
			message: "changed at the provider: the pool is gone; creating it again",
			call:    "CreateNodePool",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newDriftEnv(t, 6*time.Second)
			poolID := e.pool(t, "a").ID
			if err := tt.change(ctx, e); err != nil {
				t.Fatal(err)
			}
			// The other client's operation ends; the steady refresh
			// comes.
			e.clk.Step(time.Minute)
			calls := e.gke.Calls(tt.call)
			_, seen := e.events.since(0, "")

			e.run(t)
			p := e.pool(t, "a")
			if p.State != resource.StateUpdating || p.Message != tt.message {
				t.Errorf("after run 1: pool = %s %q, want updating %q", p.State, p.Message, tt.message)
			}
			if got := e.gke.Calls(tt.call) - calls; got != 1 {
				t.Errorf("after run 1: %s calls = %d, want 1", tt.call, got)
			}

			e.clk.Step(opTime + time.Second)
			e.run(t)
			p = e.pool(t, "a")
			if p.State != resource.StateReady || p.Message != "" {
				t.Errorf("after run 2: pool = %s %q, want ready", p.State, p.Message)
			}
			if got, _ := e.events.since(seen, poolID); !slices.Contains(got, event.NodePoolReady) {
				t.Errorf("events = %q, want %s", got, event.NodePoolReady)
			}
			np, err := e.gke.NodePool(e.poolName("a"))
			if err != nil {
				t.Fatal(err)
			}
			if np.GetAutoscaling().GetEnabled() {
				t.Errorf("provider's autoscaling = %v, want off", np.GetAutoscaling())
			}
			if got := e.providerSizes(t, "a"); got["us-central1-a"] != 1 {
				t.Errorf("nodes at the provider = %v, want 1", got)
			}
		})
	}
}

// A field no call changes in place, changed at the provider, is the
// pool's error naming the field (and its cluster's); deleting the pool
// still works.
func TestChangedAtTheProviderInPlaceImpossible(t *testing.T) {
	ctx := context.Background()
	e := newDriftEnv(t, 6*time.Second)
	poolID := e.pool(t, "a").ID
	_, err := containerClient(t, e).UpdateNodePool(ctx, &containerpb.UpdateNodePoolRequest{
		Name: e.poolName("a"), Labels: &containerpb.NodeLabels{Labels: map[string]string{"team": "other"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Step(time.Minute)
	_, seen := e.events.since(0, "")
	calls := e.gke.Calls("SetNodePoolSize") + e.gke.Calls("CreateNodePool") + e.gke.Calls("SetNodePoolAutoscaling") + e.gke.Calls("UpdateNodePool")
	e.run(t)
	p := e.pool(t, "a")
	if p.State != resource.StateError || !strings.Contains(p.Message, "labels team=other, spec none") {
		t.Errorf("pool = %s %q, want error naming labels", p.State, p.Message)
	}
	if got, _ := e.events.since(seen, poolID); !slices.Contains(got, event.NodePoolError) {
		t.Errorf("events = %q, want %s", got, event.NodePoolError)
	}
	c, err := e.st.GetCluster(ctx, e.caller, e.id)
	if err != nil || c.State != resource.StateError {
		t.Errorf("cluster = %v, %v; want error", c.State, err)
	}
	// It stays so at the next run, and nothing is called for it.
	e.clk.Step(time.Minute)
	e.run(t)
	if p := e.pool(t, "a"); p.State != resource.StateError {
		t.Errorf("pool at the next run = %s, want error", p.State)
	}
	if got := e.gke.Calls("SetNodePoolSize") + e.gke.Calls("CreateNodePool") + e.gke.Calls("SetNodePoolAutoscaling") + e.gke.Calls("UpdateNodePool") - calls; got != 0 {
		t.Errorf("calls changing the pool = %d, want 0", got)
	}

	res, err := e.st.DeleteNodePool(ctx, e.caller, e.id, poolID)
	if err != nil {
		t.Fatal(err)
	}
	e.kick = *res.Kick
	for range 5 {
		e.run(t)
		e.clk.Step(opTime + time.Second)
	}
	if _, err := e.gke.NodePool(e.poolName("a")); err == nil {
		t.Error("the provider still has the pool after its delete")
	}
	pools, err := e.st.ListNodePools(ctx, e.caller, e.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if p.ID == poolID && p.State != resource.StateDeleted {
			t.Errorf("pool after its delete = %s, want deleted", p.State)
		}
	}
}

// The project's listing of instance groups is shared for its TTL, so a
// steady refresh may read one made before the run that resized a pool:
// it does not take the size it shows for a change at the provider, but
// reads the pool's own groups (one more listing) and leaves the pool be.
func TestStaleListingDoesNotResizeBack(t *testing.T) {
	e := newDriftEnv(t, time.Hour)
	e.resize(t, "a", 2)
	e.converge(t)
	if p := e.pool(t, "a"); p.State != resource.StateReady {
		t.Fatalf("pool = %s, want ready", p.State)
	}
	calls, lists := e.gke.Calls("SetNodePoolSize"), e.compute.Calls(gkeemu.ComputeAggregatedList)
	e.clk.Step(time.Minute)
	e.run(t)
	if got := e.gke.Calls("SetNodePoolSize") - calls; got != 0 {
		t.Errorf("SetNodePoolSize calls of the steady refresh = %d, want 0", got)
	}
	if got := e.compute.Calls(gkeemu.ComputeAggregatedList) - lists; got != 1 {
		t.Errorf("instance group listings of the steady refresh = %d, want 1 (its pools' own, to confirm)", got)
	}
	if p := e.pool(t, "a"); p.State != resource.StateReady || p.Message != "" {
		t.Errorf("pool = %s %q, want ready", p.State, p.Message)
	}
}

// Comparing with the provider costs a steady refresh that finds nothing
// to do no call beyond those it made before: GetCluster and the
// project's listing of instance groups.
func TestNoopRefreshComparesForFree(t *testing.T) {
	e := newDriftEnv(t, 6*time.Second)
	methods := []string{"GetCluster", "ListOperations", "GetOperation", "SetNodePoolSize", "SetNodePoolAutoscaling", "CreateNodePool"}
	before := map[string]int{}
	for _, m := range methods {
		before[m] = e.gke.Calls(m)
	}
	lists := e.compute.Calls(gkeemu.ComputeAggregatedList)
	e.clk.Step(time.Minute)
	e.run(t)
	want := map[string]int{"GetCluster": 1}
	for _, m := range methods {
		if got := e.gke.Calls(m) - before[m]; got != want[m] {
			t.Errorf("%s calls of a steady refresh = %d, want %d", m, got, want[m])
		}
	}
	if got := e.compute.Calls(gkeemu.ComputeAggregatedList) - lists; got != 1 {
		t.Errorf("instance group listings of a steady refresh = %d, want 1", got)
	}
	if p := e.pool(t, "a"); p.State != resource.StateReady {
		t.Errorf("pool = %s, want ready", p.State)
	}
}

// A pool changed at the provider of a cluster that was steady waits, as
// any change does, for an operation the provider runs on the cluster (a
// release channel's upgrade), saying so, rather than have its call
// refused; it is brought back once the operation ends.
func TestChangedAtTheProviderWaitsForTheProvidersOperation(t *testing.T) {
	ctx := context.Background()
	e := newDriftEnv(t, 6*time.Second)
	if _, err := containerClient(t, e).SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: e.poolName("a"), NodeCount: 2}); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(opTime + time.Second)
	cluster := "projects/p/locations/us-central1/clusters/" + resource.ProviderClusterName(e.id)
	upgrade, err := e.gke.UpgradeMasterFor(cluster, "", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Step(time.Minute)
	resizes := e.gke.Calls("SetNodePoolSize")
	e.run(t)
	want := fmt.Sprintf("waiting for the provider's operation %s (UPGRADE_MASTER) to finish", upgrade)
	if p := e.pool(t, "a"); p.State != resource.StateUpdating || p.Message != want {
		t.Errorf("pool during the upgrade = %s %q, want updating %q", p.State, p.Message, want)
	}
	if got := e.gke.Calls("SetNodePoolSize") - resizes; got != 0 {
		t.Errorf("SetNodePoolSize calls during the upgrade = %d, want 0", got)
	}
	e.clk.Step(5 * time.Minute)
	for range 5 {
		e.run(t)
		if e.pool(t, "a").State == resource.StateReady {
			break
		}
		e.clk.Step(opTime + time.Second)
	}
	if p := e.pool(t, "a"); p.State != resource.StateReady {
		t.Errorf("pool after the upgrade = %s %q, want ready", p.State, p.Message)
	}
	if got := e.providerSizes(t, "a"); got["us-central1-a"] != 1 {
		t.Errorf("nodes at the provider = %v, want 1", got)
	}
}
