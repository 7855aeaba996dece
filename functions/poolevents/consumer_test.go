package poolevents

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

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

func newConsumer(t *testing.T) (*Consumer, *firestore.Client, *kicks) {
	t.Helper()
	return newConsumerWith(t, nil)
}

// newConsumerWith is newConsumer with the seed's provider pools.
func newConsumerWith(t *testing.T, pools []store.Pool) (*Consumer, *firestore.Client, *kicks) {
	t.Helper()
	ctx := context.Background()
	fs := fsemu.ForTest(t, "consume")
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	err = st.LoadSeed(ctx, &store.Seed{Accounts: []store.Account{
		{ID: "acc-gcp", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a", "us-central1-b"}}},
		{ID: "acc-metal", Provider: "baremetal", Project: "r", Regions: map[string][]string{"fra": {"fra-1"}}},
	}, Pools: pools})
	if err != nil {
		t.Fatal(err)
	}
	k := &kicks{}
	c, err := NewConsumer(st, k)
	if err != nil {
		t.Fatal(err)
	}
	return c, fs, k
}

func pool(version int, account, region string, nodeCount int) []byte {
	b, _ := json.Marshal(map[string]any{"id": "pool-gpu", "tenantId": "acme", "version": version,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": account,
			"cluster": map[string]any{"create": map[string]any{"region": region}}}},
		"flavors": []any{map[string]any{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": nodeCount}}})
	return b
}

// substratesOf returns the pool's substrates by creation.
func substratesOf(t *testing.T, fs *firestore.Client) []model.Substrate {
	t.Helper()
	return substratesOfTenant(t, fs, "acme")
}

func substratesOfTenant(t *testing.T, fs *firestore.Client, tenantID string) []model.Substrate {
	t.Helper()
	snaps, err := fs.Collection("tenants").Doc(tenantID).Collection(substrates.Kind).OrderBy("createdAt", firestore.Asc).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]model.Substrate, len(snaps))
	for i, s := range snaps {
		if err := s.DataTo(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestConsume(t *testing.T) {
	ctx := context.Background()
	c, fs, k := newConsumer(t)
	handle := func(typ string, data []byte) {
		t.Helper()
		if err := c.Handle(ctx, typ, data); err != nil {
			t.Fatalf("Handle(%s) = %v", data, err)
		}
	}

	handle(event.PoolUpdated, pool(2, "acc-gcp", "us-central1", 1))
	subs := substratesOf(t, fs)
	if len(subs) != 1 || subs[0].Spec.PoolVersion != 2 || subs[0].Spec.Mode != resource.SubstrateCreate ||
		subs[0].Spec.Flavors[0].NodePool.Name != "bc-pool-gpu-cpu" || subs[0].Spec.Problem != "" || len(k.list) != 1 {
		t.Fatalf("after the first event: %+v, kicks %v", subs, k.list)
	}
	first := subs[0]

	// Stale and duplicate events are ignored: no write, no kick.
	handle(event.PoolUpdated, pool(1, "acc-gcp", "us-central1", 5))
	handle(event.PoolUpdated, pool(2, "acc-gcp", "us-central1", 5))
	if subs = substratesOf(t, fs); len(subs) != 1 || subs[0].Spec.Generation != 1 || len(k.list) != 1 {
		t.Fatalf("stale events changed %+v (kicks %d)", subs, len(k.list))
	}

	// A flavor change updates the substrate in place.
	handle(event.PoolUpdated, pool(3, "acc-gcp", "us-central1", 2))
	if subs = substratesOf(t, fs); len(subs) != 1 || subs[0].Spec.Generation != 2 || subs[0].Spec.Flavors[0].NodePool.NodeCount != 2 {
		t.Fatalf("flavor change: %+v", subs)
	}

	// A malformed event of the known pool puts its substrate in error.
	bad, _ := json.Marshal(map[string]any{"id": "pool-gpu", "tenantId": "acme", "version": 4,
		"policy":  map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp", "cluster": map[string]any{}}},
		"flavors": []any{}})
	handle(event.PoolUpdated, bad)
	if subs = substratesOf(t, fs); subs[0].Spec.Problem == "" {
		t.Fatalf("malformed event left no problem: %+v", subs[0].Spec)
	}
	// Garbage is acknowledged (nil) and changes nothing.
	was, kicked := substratesOf(t, fs), len(k.list)
	handle(event.PoolUpdated, []byte("not json"))
	if subs = substratesOf(t, fs); !reflect.DeepEqual(subs, was) || len(k.list) != kicked {
		t.Fatalf("garbage changed the substrates: %+v, then %+v (kicks %d, then %d)", was, subs, kicked, len(k.list))
	}

	// Another account: the substrate is torn down, a new one (with a
	// problem: no managed Kubernetes there) waits for it.
	handle(event.PoolUpdated, pool(5, "acc-metal", "fra", 1))
	subs = substratesOf(t, fs)
	if len(subs) != 2 || !subs[0].Spec.Deleting || subs[1].ID == first.ID || subs[1].Spec.After != first.ID ||
		subs[1].Spec.Problem == "" {
		t.Fatalf("changed account: %+v", subs)
	}

	// Archive tears the current one down.
	arch, _ := json.Marshal(map[string]any{"id": "pool-gpu", "tenantId": "acme", "version": 6})
	handle(event.PoolArchived, arch)
	if subs = substratesOf(t, fs); !subs[1].Spec.Deleting {
		t.Fatalf("archive left %+v", subs[1].Spec)
	}
	// An update older than the archive is ignored.
	handle(event.PoolUpdated, pool(5, "acc-gcp", "us-central1", 1))
	if subs = substratesOf(t, fs); len(subs) != 2 {
		t.Fatalf("an update older than the archive made a substrate: %+v", subs)
	}
}

// An event whose pool, tenant or version cannot be read changes nothing:
// it cannot be ordered against the events applied, so it must not put the
// substrate in error, after which the current version sent again would be
// ignored as not newer.
func TestConsumeUnorderedEvent(t *testing.T) {
	ctx := context.Background()
	c, fs, k := newConsumer(t)
	if err := c.Handle(ctx, event.PoolUpdated, pool(3, "acc-gcp", "us-central1", 1)); err != nil {
		t.Fatal(err)
	}
	was, kicked := substratesOf(t, fs), len(k.list)
	badPolicy := map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp", "cluster": map[string]any{}}}
	for name, ev := range map[string]map[string]any{
		"no version":        {"id": "pool-gpu", "tenantId": "acme", "policy": badPolicy},
		"a version of zero": {"id": "pool-gpu", "tenantId": "acme", "version": 0, "policy": badPolicy},
		"a string version":  {"id": "pool-gpu", "tenantId": "acme", "version": "4", "policy": badPolicy},
		"a bad id":          {"id": "pool gpu", "tenantId": "acme", "version": 4, "policy": badPolicy},
		"no tenant":         {"id": "pool-gpu", "version": 4, "policy": badPolicy},
	} {
		b, _ := json.Marshal(ev)
		if err := c.Handle(ctx, event.PoolUpdated, b); err != nil {
			t.Fatalf("%s: Handle = %v, want the event acknowledged", name, err)
		}
		if subs := substratesOf(t, fs); !reflect.DeepEqual(subs, was) || len(k.list) != kicked {
			t.Fatalf("an event with %s changed the substrates: %+v, then %+v", name, was, subs)
		}
	}
}

// A pool ID is the tenant's that first announced it: another tenant's
// event naming it changes nothing of the owner's, and that tenant's
// substrate shows the conflict.
func TestConsumeOtherTenantsPool(t *testing.T) {
	ctx := context.Background()
	c, fs, _ := newConsumerWith(t, []store.Pool{{ID: "pool-gpu", TenantID: "acme", AccountID: "acc-gcp"}})
	b, _ := json.Marshal(map[string]any{"id": "pool-gpu", "tenantId": "globex", "version": 1,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp",
			"cluster": map[string]any{"create": map[string]any{"region": "us-central1"}}}},
		"flavors": []any{map[string]any{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}}})
	if err := c.Handle(ctx, event.PoolUpdated, b); err != nil {
		t.Fatal(err)
	}
	snap, err := fs.Doc("pools/pool-gpu").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var p store.Pool
	if err := snap.DataTo(&p); err != nil || p.TenantID != "acme" {
		t.Errorf("pools/pool-gpu = %+v (%v), want acme's still", p, err)
	}
	subs := substratesOfTenant(t, fs, "globex")
	if len(subs) != 1 || !strings.Contains(subs[0].Spec.Problem, "another tenant's pool") {
		t.Errorf("globex's substrates = %+v, want one whose problem names the conflict", subs)
	}
	if subs := substratesOf(t, fs); len(subs) != 0 {
		t.Errorf("acme's substrates = %+v, want none", subs)
	}
}

// An event that cannot be stored is acknowledged (logged with its
// reason), never asked for again: a redelivery would fail the same way.
func TestConsumeUnstorable(t *testing.T) {
	c, _, _ := newConsumer(t)
	for _, id := range []string{"__x__", "..", "."} {
		b, _ := json.Marshal(map[string]any{"id": id, "tenantId": "acme", "version": 1})
		if err := c.Handle(context.Background(), event.PoolArchived, b); err != nil {
			t.Errorf("Handle of pool %q = %v, want it acknowledged", id, err)
		}
	}
}
