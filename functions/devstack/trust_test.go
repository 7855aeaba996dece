package devstack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// The trust model against the running stack (API.md §8-9): accounts that
// belong to tenants, archived pools, one adopter per cluster.

// asTenant is a client of the stack for principal, made an admin of
// tenant.
func asTenant(t *testing.T, e *env, tenant, principal string) *client {
	t.Helper()
	err := e.Store.LoadSeed(context.Background(), &store.Seed{RoleBindings: []auth.Binding{
		{TenantID: tenant, Principal: principal, Role: auth.RoleAdmin},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.Token(principal)
	if err != nil {
		t.Fatal(err)
	}
	return &client{url: e.URL, token: tok}
}

func (c *client) substratesOf(tenant, poolID string) ([]resource.Substrate, error) {
	var out struct {
		Substrates []resource.Substrate `json:"substrates"`
	}
	err := c.call("kubernetesSubstrates/list", map[string]any{"tenantId": tenant, "poolId": poolID}, &out)
	return out.Substrates, err
}

// A pool event of globex naming acme's own account (acc-acme, in acme's
// project) leaves globex's substrate in error in the words of an account
// that does not exist; nothing is built, no pool is recorded, and globex
// can create no cluster on the pool.
func TestForeignAccountRefused(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	dave := asTenant(t, e, "globex", "dave")
	pool := fmt.Sprintf("pool-gx%d", poolSeq.Add(1))
	p := createPolicy(pool, 1, flavor("cpu", 1))
	p["tenantId"] = "globex"
	p["policy"].(map[string]any)["substrate"].(map[string]any)["account"] = "acc-acme"
	putPool(t, e, p)

	var s resource.Substrate
	wait.For(t, "globex's substrate in error", func() (bool, string) {
		list, err := dave.substratesOf("globex", pool)
		if err != nil || len(list) != 1 {
			return false, fmt.Sprintf("%v %s", err, jsonOf(list))
		}
		s = list[0]
		return s.State == resource.StateError, jsonOf(s)
	})
	if want := "account acc-acme cannot be used by tenant globex"; s.Message != want || s.ClusterID != "" {
		t.Errorf("globex's substrate = %s, want error %q and no cluster", jsonOf(s), want)
	}
	ctx := context.Background()
	if snap, err := e.FirestoreClient.Doc("pools/" + pool).Get(ctx); err == nil || snap.Exists() {
		t.Errorf("pools/%s recorded: %v", pool, snap.Data())
	}
	clusters, err := e.FirestoreClient.Collection("tenants").Doc("globex").Collection("clusters").Documents(ctx).GetAll()
	if err != nil || len(clusters) != 0 {
		t.Errorf("globex has %d clusters (%v), want none built", len(clusters), err)
	}
	err = dave.call("kubernetesClusters/create", map[string]any{"tenantId": "globex", "poolId": pool, "name": "there",
		"mode": "standard", "region": "us-central1", "nodePools": []any{poolSpec("a", 1)}}, nil)
	if ae, ok := err.(*apiError); !ok || ae.Code != "NOT_FOUND" {
		t.Errorf("dave's cluster on %s = %v, want NOT_FOUND", pool, err)
	}
	// plan answers the same.
	var plan resource.SubstratePlan
	if err := dave.call("kubernetesSubstrates/plan", map[string]any{"tenantId": "globex", "pool": p}, &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Substrate == nil || plan.Substrate.State != resource.StateError || plan.Substrate.Message != s.Message {
		t.Errorf("plan = %s, want the substrate in error with %q", jsonOf(plan), s.Message)
	}
}

// An archived pool takes no new cluster: create on it is INVALID_STATE
// naming it, while the clusters already on it stay the tenant's and
// manageable.
func TestArchivedPoolTakesNoCluster(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	pool := fmt.Sprintf("pool-ar%d", poolSeq.Add(1))
	if err := e.Store.LoadSeed(context.Background(), &store.Seed{Pools: []store.Pool{{ID: pool, TenantID: "acme", AccountID: "acc-gcp"}}}); err != nil {
		t.Fatal(err)
	}
	create := func(name string) (resource.Cluster, error) {
		var cl resource.Cluster
		err := e.api.call("kubernetesClusters/create", map[string]any{"tenantId": "acme", "poolId": pool, "name": name,
			"mode": "standard", "region": "us-central1", "nodePools": []any{poolSpec("a", 1)}}, &cl)
		return cl, err
	}
	before, err := create(fmt.Sprintf("before-%d", clusterSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	archivePool(t, e, pool, 1)
	wait.For(t, "create on the archived pool refused", func() (bool, string) {
		_, err := create(fmt.Sprintf("after-%d", clusterSeq.Add(1)))
		ae, ok := err.(*apiError)
		return ok && ae.Code == "INVALID_STATE" && strings.Contains(ae.Message, pool), fmt.Sprint(err)
	})
	e.api.waitCluster(t, before.ID, resource.StateReady, nil)
	np := e.api.createPool(t, before.ID, poolSpec("b", 1))
	e.api.waitCluster(t, before.ID, resource.StateReady, map[string]resource.State{"a": resource.StateReady, "b": resource.StateReady})
	e.api.deletePool(t, before.ID, np.ID)
	e.api.deleteCluster(t, before.ID)
}

// Two pools adopting one cluster at once: exactly one substrate adopts
// it and becomes ready; the other is in error naming the winner's pool,
// having created nothing in the cluster. Archiving the loser leaves the
// winner as it was.
func TestTwoAdopters(t *testing.T) {
	t.Parallel()
	e := kubeEnv(t, nil)
	cl := e.api.createCluster(t, "shared", poolSpec("own", 1))
	cl = e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	pools := []string{fmt.Sprintf("pool-ad%d", poolSeq.Add(1)), fmt.Sprintf("pool-ad%d", poolSeq.Add(1))}
	// Published one after the other, their substrates' runs adopt at
	// once.
	for _, p := range pools {
		putPool(t, e, adoptPolicy(p, 1, cl.ID, flavor("cpu", 1)))
	}
	states := map[string]resource.Substrate{}
	wait.For(t, "one adopter ready, the other in error", func() (bool, string) {
		ready, failed := 0, 0
		for _, p := range pools {
			list, err := e.api.substrates(p)
			if err != nil || len(list) != 1 {
				return false, fmt.Sprintf("%s: %v %s", p, err, jsonOf(list))
			}
			states[p] = list[0]
			switch {
			case list[0].State == resource.StateReady && list[0].JoinedNodes == 3:
				ready++
			case list[0].State == resource.StateError:
				failed++
			}
		}
		return ready == 1 && failed == 1, jsonOf(states)
	})
	winner, loser := pools[0], pools[1]
	if states[winner].State != resource.StateReady {
		winner, loser = loser, winner
	}
	if msg := states[loser].Message; !strings.Contains(msg, "of pool "+winner) || !strings.Contains(msg, cl.ID) {
		t.Errorf("the loser's message = %q, want it naming the cluster and the winner's pool %s", msg, winner)
	}
	list, err := e.api.listPools(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Name)
	}
	if want := []string{"own", states[winner].NodePools[0].Name}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("the cluster's node pools = %v, want %v: nothing of the loser's", names, want)
	}
	archivePool(t, e, loser, 2)
	wait.For(t, "the loser deleted", func() (bool, string) {
		list, err := e.api.substrates(loser)
		return err == nil && len(list) == 0, jsonOf(list)
	})
	if s := e.api.waitSubstrate(t, winner, "still ready", readyWith(3)); s.ClusterID != cl.ID {
		t.Errorf("the winner = %s, want it on %s", jsonOf(s), cl.ID)
	}
	substrateObjects(t, adminClient(t, e, cl.ID), winner)
	archivePool(t, e, winner, 2)
	wait.For(t, "the winner deleted", func() (bool, string) {
		list, err := e.api.substrates(winner)
		return err == nil && len(list) == 0, jsonOf(list)
	})
	e.api.deleteCluster(t, cl.ID)
}
