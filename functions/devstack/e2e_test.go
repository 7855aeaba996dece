package devstack_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestLifecycle creates a cluster, resizes a pool, deletes one and reuses
// its name, then deletes the cluster, checking the states, the provider
// and the events at each step.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	c := e.api
	cl := c.createCluster(t, "life", poolSpec("a", 1), poolSpec("b", 2))
	cl = c.waitCluster(t, cl.ID, resource.StateReady, nil)
	if cl.KubernetesVersion == "" || cl.Endpoint == "" {
		t.Errorf("ready cluster = version %q endpoint %q, want both", cl.KubernetesVersion, cl.Endpoint)
	}
	a, b := poolByName(t, c, cl.ID, "a"), poolByName(t, c, cl.ID, "b")
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterCreated: 1, event.ClusterReady: 1, event.NodePoolReady + "/" + a.ID: 1, event.NodePoolReady + "/" + b.ID: 1})

	// Resize.
	got := c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 3})
	if got.State != resource.StateUpdating || got.Version != 2 {
		t.Errorf("update = %s version %d, want updating version 2", got.State, got.Version)
	}
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	counts, err := e.GKE.NodeCounts(providerName(cl) + "/nodePools/a")
	if err != nil {
		t.Fatal(err)
	}
	for zone, n := range counts {
		if n != 3 {
			t.Errorf("node count of a in %s = %d, want 3", zone, n)
		}
	}
	e.waitEvents(t, cl.ID, map[string]int{event.NodePoolReady + "/" + a.ID: 2, event.ClusterUpdated: 1})

	// Delete a pool, then reuse its name.
	if d := c.deletePool(t, cl.ID, b.ID); d.State != resource.StateDeleting {
		t.Errorf("delete node pool = %s, want deleting", d.State)
	}
	wait.For(t, "node pool b gone from the list", func() (bool, string) {
		ps, err := c.listPools(cl.ID)
		if err != nil {
			return false, err.Error()
		}
		return len(ps) == 1 && ps[0].Name == "a", c.clusterState(cl.ID)
	})
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	if _, err := e.GKE.NodePool(providerName(cl) + "/nodePools/b"); err == nil {
		t.Errorf("GKE still has node pool b after its delete")
	}
	b2 := c.createPool(t, cl.ID, poolSpec("b", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	if n := e.ops(cl, containerpb.Operation_CREATE_NODE_POOL, "b"); n != 1 {
		t.Errorf("CREATE_NODE_POOL operations of b = %d, want 1 (the first b came with the cluster)", n)
	}

	// Delete the cluster: pools, then the cluster.
	if d := c.deleteCluster(t, cl.ID); d.State != resource.StateDeleting {
		t.Errorf("delete cluster = %s, want deleting", d.State)
	}
	wait.For(t, "cluster gone", func() (bool, string) {
		_, err := c.getCluster(cl.ID)
		var ae *apiError
		return errors.As(err, &ae) && ae.Code == "NOT_FOUND", c.clusterState(cl.ID)
	})
	if _, err := e.GKE.Cluster(providerName(cl)); err == nil {
		t.Errorf("GKE still has the cluster after its delete")
	}
	// Two pools were named b, one after the other.
	for pool, want := range map[string]int{"a": 1, "b": 2} {
		if n := e.ops(cl, containerpb.Operation_DELETE_NODE_POOL, pool); n != want {
			t.Errorf("DELETE_NODE_POOL operations of %s = %d, want %d", pool, n, want)
		}
	}
	if n := e.ops(cl, containerpb.Operation_DELETE_CLUSTER, ""); n != 1 {
		t.Errorf("DELETE_CLUSTER operations = %d, want 1", n)
	}
	if n := e.ops(cl, containerpb.Operation_CREATE_CLUSTER, ""); n != 1 {
		t.Errorf("CREATE_CLUSTER operations = %d, want 1", n)
	}
	e.checkEvents(t, cl, map[string]int{
		event.ClusterCreated: 1, event.ClusterReady: 1, event.ClusterUpdated: 3, event.ClusterDeleted: 1, event.ClusterError: 0,
		event.NodePoolCreated + "/" + b2.ID: 1,
		event.NodePoolReady + "/" + a.ID:    2, event.NodePoolReady + "/" + b.ID: 1, event.NodePoolReady + "/" + b2.ID: 1,
		event.NodePoolDeleted + "/" + a.ID: 1, event.NodePoolDeleted + "/" + b.ID: 1, event.NodePoolDeleted + "/" + b2.ID: 1,
		event.NodePoolError: 0,
	})
	// The name of a deleted cluster is free again.
	again := c.createClusterNamed(t, cl.Name, poolSpec("a", 1))
	c.deleteCluster(t, again.ID)
}

// TestAutoscaling turns autoscaling on, changes it, and turns it off with
// a size.
func TestAutoscaling(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	c := e.api
	cl := c.createCluster(t, "autoscale", poolSpec("a", 2))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	a := poolByName(t, c, cl.ID, "a")
	name := providerName(cl) + "/nodePools/a"

	c.updatePool(t, cl.ID, a.ID, map[string]any{"autoscaling": map[string]any{"minNodes": 1, "maxNodes": 4}})
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	np, err := e.GKE.NodePool(name)
	if err != nil {
		t.Fatal(err)
	}
	if as := np.GetAutoscaling(); !as.GetEnabled() || as.GetMinNodeCount() != 1 || as.GetMaxNodeCount() != 4 {
		t.Errorf("GKE autoscaling = %v, want enabled 1..4", as)
	}
	// The autoscaler moves the size; the reconciler leaves it alone.
	if err := e.GKE.Autoscale(name, 4); err != nil {
		t.Fatal(err)
	}
	c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 3})
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	if n := e.ops(cl, containerpb.Operation_SET_NODE_POOL_SIZE, "a"); n != 0 {
		t.Errorf("SET_NODE_POOL_SIZE operations with autoscaling on = %d, want 0", n)
	}

	c.updatePool(t, cl.ID, a.ID, map[string]any{"autoscaling": nil, "nodeCount": 1})
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	np, err = e.GKE.NodePool(name)
	if err != nil {
		t.Fatal(err)
	}
	if np.GetAutoscaling().GetEnabled() {
		t.Errorf("GKE autoscaling = %v, want off", np.GetAutoscaling())
	}
	counts, _ := e.GKE.NodeCounts(name)
	for zone, n := range counts {
		if n != 1 {
			t.Errorf("node count in %s after autoscaling off = %d, want 1", zone, n)
		}
	}
	if got := poolByName(t, c, cl.ID, "a"); got.Autoscaling != nil || got.NodeCount != 1 {
		t.Errorf("pool = autoscaling %v node count %d, want none, 1", got.Autoscaling, got.NodeCount)
	}
	e.checkEvents(t, cl, map[string]int{event.NodePoolReady + "/" + a.ID: 4, event.ClusterUpdated: 3, event.ClusterReady: 1, event.NodePoolError: 0})
}

// TestRefusedPool adds a pool the provider refuses: the pool and the
// cluster are in error, naming the pool, until the pool is deleted.
func TestRefusedPool(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	c := e.api
	cl := c.createCluster(t, "refused", poolSpec("a", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	bad := c.createPool(t, cl.ID, map[string]any{"name": "bad", "machineType": "e2-nonexistent", "nodeCount": 1})
	got := c.waitCluster(t, cl.ID, resource.StateError, map[string]resource.State{"bad": resource.StateError})
	if !strings.Contains(got.Message, `"bad"`) {
		t.Errorf("cluster message = %q, want it to name the pool bad", got.Message)
	}
	if p := poolByName(t, c, cl.ID, "bad"); !strings.Contains(p.Message, "e2-nonexistent") {
		t.Errorf("pool message = %q, want the provider's refusal", p.Message)
	}
	e.waitEvents(t, cl.ID, map[string]int{event.NodePoolError + "/" + bad.ID: 1, event.ClusterError: 1})

	c.deletePool(t, cl.ID, bad.ID)
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	e.checkEvents(t, cl, map[string]int{
		event.NodePoolError + "/" + bad.ID: 1, event.ClusterError: 1, event.NodePoolDeleted + "/" + bad.ID: 1,
		event.ClusterReady: 1, event.ClusterUpdated: 1, event.NodePoolReady + "/" + bad.ID: 0,
	})
	if n := e.ops(cl, containerpb.Operation_CREATE_NODE_POOL, "bad"); n != 0 {
		t.Errorf("CREATE_NODE_POOL operations of the refused pool = %d, want 0", n)
	}
}

// TestRefusedPoolAtCreate creates a cluster with a pool the provider
// refuses (an accelerator its machine cannot take): the cluster is made
// with its other pool, the refused one and the cluster show the error, and
// deleting the pool makes the cluster ready.
func TestRefusedPoolAtCreate(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	c := e.api
	gpu := poolSpec("gpu", 1)
	gpu["accelerators"] = map[string]any{"type": "nvidia-l4", "count": 1}
	cl := c.createCluster(t, "refused-at-create", poolSpec("a", 1), gpu)
	got := c.waitCluster(t, cl.ID, resource.StateError, map[string]resource.State{"gpu": resource.StateError})
	if !strings.Contains(got.Message, `"gpu"`) || !strings.Contains(got.Message, "nvidia-l4") {
		t.Errorf("cluster message = %q, want it to name the pool gpu and the provider's reason", got.Message)
	}
	if _, err := e.GKE.NodePool(providerName(cl) + "/nodePools/a"); err != nil {
		t.Errorf("GKE node pool a: %v; want the cluster created with its good pool", err)
	}
	p := poolByName(t, c, cl.ID, "gpu")
	c.deletePool(t, cl.ID, p.ID)
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	e.checkEvents(t, cl, map[string]int{
		event.NodePoolError + "/" + p.ID: 1, event.ClusterError: 1, event.NodePoolDeleted + "/" + p.ID: 1,
		event.ClusterReady: 1, event.ClusterUpdated: 0,
	})
	if n := e.ops(cl, containerpb.Operation_CREATE_CLUSTER, ""); n != 1 {
		t.Errorf("CREATE_CLUSTER operations = %d, want 1", n)
	}
}

// TestReleaseChannelUpgrade moves the cluster's version at the provider:
// the cluster shows it and kubernetes.cluster.updated is published.
func TestReleaseChannelUpgrade(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	c := e.api
	cl := c.createCluster(t, "upgrade", poolSpec("a", 1))
	cl = c.waitCluster(t, cl.ID, resource.StateReady, nil)
	const next = "1.33.5-gke.1200"
	if cl.KubernetesVersion == next {
		t.Fatalf("cluster already at %s", next)
	}
	if _, err := e.GKE.UpgradeMaster(providerName(cl), next); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the new version shown", func() (bool, string) {
		got, err := c.getCluster(cl.ID)
		if err != nil {
			return false, err.Error()
		}
		return got.KubernetesVersion == next && got.State == resource.StateReady, got.KubernetesVersion + " " + string(got.State)
	})
	e.checkEvents(t, cl, map[string]int{event.ClusterReady: 1, event.ClusterUpdated: 1})
	for _, ev := range e.events.of(cl.ID) {
		if ev.Type != event.ClusterUpdated {
			continue
		}
		var data resource.Cluster
		if err := json.Unmarshal(ev.Data, &data); err != nil || data.KubernetesVersion != next {
			t.Errorf("kubernetes.cluster.updated data = %s, want the cluster at %s", ev.Data, next)
		}
	}
}
