package substrates

import (
	"context"
	"sync"
	"testing"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/model"
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
func flavor(name string, nodeCount int, zones ...string) model.Flavor {
	if zones == nil {
		zones = []string{}
	}
	return model.Flavor{Name: name, NodePool: model.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: nodeCount,
		Zones: zones, Labels: map[string]string{}, Taints: []resource.Taint{}}}
}

// adoptingPool is version of acme's pool-gpu, whose substrate adopts the
// cluster on account acc-gcp with flavors.
func adoptingPool(version int64, cluster string, flavors ...model.Flavor) store.PoolEvent {
	return store.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: version, Want: &model.SubstrateSpec{
		PoolVersion: version, AccountID: "acc-gcp", Mode: resource.SubstrateAdopt, AdoptClusterID: cluster, Flavors: flavors}}
}

// recordPool records what ev asks (Named), as the pool-event consumer
// does, and returns the kicks of the chains to run.
func recordPool(t *testing.T, st *store.Store, ev store.PoolEvent) []chain.Kick {
	t.Helper()
	res, err := st.ApplyPoolEvent(context.Background(), Named(ev))
	if err != nil {
		t.Fatalf("ApplyPoolEvent: %v", err)
	}
	return res.Kicks
}

// Named names the substrate's node pools after its pool and flavors,
// leaving the event it was given as it was; an event that asks for no
// substrate is returned as it is.
func TestNamed(t *testing.T) {
	for _, ev := range []store.PoolEvent{
		adoptingPool(1, "kcl_1", flavor("cpu", 1)),
		adoptingPool(2, "kcl_1", flavor("cpu", 1), flavor("gpu", 2)),
	} {
		got := Named(ev)
		for i, f := range got.Want.Flavors {
			if want := NodePoolName("pool-gpu", f.Name); f.NodePool.Name != want {
				t.Errorf("flavor %s's node pool is named %q, want %q", f.Name, f.NodePool.Name, want)
			}
			if ev.Want.Flavors[i].NodePool.Name != f.Name {
				t.Errorf("Named changed the event it was given: %+v", ev.Want.Flavors[i])
			}
		}
	}
	archive := store.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 2, Archived: true}
	if got := Named(archive); got != archive {
		t.Errorf("Named(archive) = %+v, want it unchanged", got)
	}
}

// The previewer's store is the store.
var _ PreviewStore = (*store.Store)(nil)
