package substrates

import (
	"context"
	"sync"
	"testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// kicks records the kicks of chains.
type kicks struct {
	mu   sync.Mutex
	list []chain.Kick
}

func (k *kicks) Kick(_ context.Context, kick chain.Kick) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.list = append(k.list, kick)
	return nil
}

// flavor is a flavor of nodeCount e2-standard-4 nodes in zones, as a pool
// event decoded at the edge names it (input.PoolUpdated.Want).
func flavor(name string, nodeCount int, zones ...string) lifecycle.Flavor {
	if zones == nil {
		zones = []string{}
	}
	return lifecycle.Flavor{Name: name, NodePool: lifecycle.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: nodeCount,
		Zones: zones, Labels: map[string]string{}, Taints: []resource.Taint{}}}
}

// adoptingPool is version of acme's pool-gpu, whose substrate adopts the
// cluster on account acc-gcp with flavors.
func adoptingPool(version int64, cluster string, flavors ...lifecycle.Flavor) store.PoolEvent {
	return store.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: version, Want: &lifecycle.SubstrateSpec{
		PoolVersion: version, AccountID: "acc-gcp", Mode: resource.SubstrateAdopt, AdoptClusterID: cluster, Flavors: flavors}}
}

// recordPool records what ev asks (Desired), as the pool-event consumer
// does, and returns the kicks of the chains to run.
func recordPool(t *testing.T, st *store.Store, ev store.PoolEvent) []chain.Kick {
	t.Helper()
	ctx := context.Background()
	ev, _, err := Desired(ctx, st, ev)
	if err != nil {
		t.Fatalf("Desired: %v", err)
	}
	res, err := st.ApplyPoolEvent(ctx, ev)
	if err != nil {
		t.Fatalf("ApplyPoolEvent: %v", err)
	}
	return res.Kicks
}

// Desired names the substrate's node pools after its pool and flavors,
// leaving the event it was given as it was, and says why an account
// cannot serve it, in the same words whether it is another tenant's or
// does not exist.
func TestDesired(t *testing.T) {
	ctx := context.Background()
	st, err := store.New(fsemu.ForTest(t, "desired"))
	if err != nil {
		t.Fatal(err)
	}
	err = st.LoadSeed(ctx, &store.Seed{Accounts: []store.Account{
		{ID: "acc-gcp", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}},
		{ID: "acc-globex", TenantID: "globex", Provider: "gcp", Project: "g", Regions: map[string][]string{"us-central1": {"us-central1-a"}}},
		{ID: "acc-metal", Provider: "baremetal", Project: "r", Regions: map[string][]string{"fra": {"fra-1"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	creating := func(account, region string, flavors ...lifecycle.Flavor) store.PoolEvent {
		return store.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 1, Want: &lifecycle.SubstrateSpec{
			PoolVersion: 1, AccountID: account, Mode: resource.SubstrateCreate, Region: region, Flavors: flavors}}
	}
	for _, tt := range []struct {
		name            string
		ev              store.PoolEvent
		problem, accout string
	}{
		{"served", creating("acc-gcp", "us-central1", flavor("cpu", 1)), "", "acc-gcp"},
		{"another tenant's account", creating("acc-globex", "us-central1", flavor("cpu", 1)), "account acc-globex cannot be used by tenant acme", ""},
		{"no such account", creating("acc-nope", "us-central1", flavor("cpu", 1)), "account acc-nope cannot be used by tenant acme", ""},
		{"no managed Kubernetes", creating("acc-metal", "fra", flavor("cpu", 1)), `the provider "baremetal" of account acc-metal has no managed Kubernetes`, ""},
		{"a region not enabled", creating("acc-gcp", "europe-west1", flavor("cpu", 1)), "region europe-west1 is not enabled on account acc-gcp", "acc-gcp"},
		{"a flavor's zone outside the region's", creating("acc-gcp", "us-central1", flavor("cpu", 1, "us-central1-b")),
			"flavors[0].zones[0] is not a zone of region us-central1 enabled on the account (us-central1-a)", "acc-gcp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := Desired(ctx, st, tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if got.Want.Problem != tt.problem || got.AccountID != tt.accout {
				t.Errorf("Desired: problem %q, account %q; want %q, %q", got.Want.Problem, got.AccountID, tt.problem, tt.accout)
			}
			if name := got.Want.Flavors[0].NodePool.Name; name != NodePoolName("pool-gpu", "cpu") {
				t.Errorf("the flavor's node pool is named %q, want %q", name, NodePoolName("pool-gpu", "cpu"))
			}
			if tt.ev.Want.Flavors[0].NodePool.Name != "cpu" || tt.ev.Want.Problem != "" {
				t.Errorf("Desired changed the event it was given: %+v", tt.ev.Want)
			}
		})
	}
	if ev, acc, err := Desired(ctx, st, store.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 2, Archived: true}); err != nil || ev.Want != nil || acc != nil {
		t.Errorf("Desired of an archive = %+v, %v, %v; want no substrate", ev, acc, err)
	}
}
