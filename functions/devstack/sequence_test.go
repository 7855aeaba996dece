package devstack_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	apiclient "github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// chainOf returns every delivery received so far of the chain's events
// ("cluster/kcl_..." or "substrate/ksb_...", apiclient.Event.Chain), whatever
// their subject, redeliveries included.
func (c *collector) chainOf(chain string) []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []received
	for _, es := range c.bySubject {
		for _, e := range es {
			if (apiclient.Event{Attributes: e.Attrs}).Chain() == chain {
				out = append(out, e)
			}
		}
	}
	return out
}

// checkSequence waits until the chain's events received are numbered 1 to
// N by ce-sequence with no gap, N being the sequence of the chain's
// document (doc), and checks that each number is one event's (ce-id) and
// that every redelivery of an event carries its number. It returns the
// events once each, in sequence order.
func (e *env) checkSequence(t testing.TB, chain string, doc *firestore.DocumentRef) []received {
	t.Helper()
	var ordered []received
	wait.For(t, "the events of "+chain+" numbered without a gap", func() (bool, string) {
		snap, err := doc.Get(context.Background())
		if err != nil {
			return false, err.Error()
		}
		v, err := snap.DataAt(outbox.SequenceField)
		if err != nil {
			return false, fmt.Sprintf("%s has no %s", doc.Path, outbox.SequenceField)
		}
		last := v.(int64)
		byNumber := map[int64]received{}
		for _, ev := range e.events.chainOf(chain) {
			n, ok := (apiclient.Event{Attributes: ev.Attrs}).Sequence()
			if !ok {
				t.Fatalf("%s of %s has ce-sequence %q", ev.Type, chain, ev.Attrs["ce-sequence"])
			}
			if had, ok := byNumber[n]; ok && had.ID != ev.ID {
				t.Fatalf("ce-sequence %d of %s given to two events: %s %s and %s %s", n, chain, had.Type, had.ID, ev.Type, ev.ID)
			}
			byNumber[n] = ev
		}
		ordered = ordered[:0]
		for n := int64(1); n <= last; n++ {
			ev, ok := byNumber[n]
			if !ok {
				return false, fmt.Sprintf("no event %d of %d (document %s)", n, last, doc.Path)
			}
			ordered = append(ordered, ev)
		}
		if len(byNumber) != int(last) {
			return false, fmt.Sprintf("%d events numbered, the document's sequence is %d", len(byNumber), last)
		}
		return true, ""
	})
	// A redelivery keeps its number.
	numbers := map[string]string{}
	for _, ev := range e.events.chainOf(chain) {
		if n, ok := numbers[ev.ID]; ok && n != ev.Attrs["ce-sequence"] {
			t.Errorf("event %s delivered as %s and as %s", ev.ID, n, ev.Attrs["ce-sequence"])
		}
		numbers[ev.ID] = ev.Attrs["ce-sequence"]
	}
	return ordered
}

func types(events []received) string {
	var out []string
	for _, e := range events {
		s := strings.TrimPrefix(e.Type, "kubernetes.")
		if p := e.Attrs["nodePoolId"]; p != "" {
			s += "(" + p + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// TestEventsSequence takes a cluster and its pools through create,
// resize and delete: its events, node pools' included, are numbered 1 to
// N in the order they were written, N is the cluster document's
// sequence, and the deleted cluster's is the last.
func TestEventsSequence(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	cl := e.api.createCluster(t, "seq", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	b := e.api.createPool(t, cl.ID, poolSpec("b", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	a := poolByName(t, e.api, cl.ID, "a")
	e.api.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 2})
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	e.api.deletePool(t, cl.ID, b.ID)
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	e.api.deleteCluster(t, cl.ID)
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterDeleted: 1})

	events := e.checkSequence(t, "cluster/"+cl.ID, e.Store.ClusterRef("acme", cl.ID))
	if first, last := events[0], events[len(events)-1]; first.Type != event.ClusterCreated || last.Type != event.ClusterDeleted {
		t.Errorf("events in sequence order: %s; want created first and deleted last", types(events))
	}
	// Each pool's own events come in its lifecycle's order (a pool
	// made with its cluster has no created event of its own).
	for _, p := range []struct{ id, want string }{{a.ID, "ready, ready, deleted"}, {b.ID, "created, ready, deleted"}} {
		var got []string
		for _, ev := range events {
			if ev.Attrs["nodePoolId"] == p.id {
				got = append(got, strings.TrimPrefix(ev.Type, "kubernetes.nodepool."))
			}
		}
		if strings.Join(got, ", ") != p.want {
			t.Errorf("pool %s's events in sequence order: %v; want %s", p.id, got, p.want)
		}
	}
	t.Logf("sequence of %s: %s", cl.ID, types(events))
}

// TestEventsSequenceConcurrentCalls hammers one cluster with creates,
// resizes and deletes of its pools from several clients at once: its
// events are still numbered 1 to N, each number once.
func TestEventsSequenceConcurrentCalls(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	cl := e.api.createCluster(t, "seq-hammer", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	a := poolByName(t, e.api, cl.ID, "a")
	const workers = 4
	var wg sync.WaitGroup
	errc := make(chan error, workers*8)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2 {
				var p resource.NodePool
				body := poolSpec(fmt.Sprintf("w%d-%d", w, i), 1)
				body["tenantId"], body["clusterId"] = "acme", cl.ID
				if err := callRetrying(e.api, "kubernetesNodePools/create", body, &p); err != nil {
					errc <- fmt.Errorf("create: %w", err)
					continue
				}
				if err := callRetrying(e.api, "kubernetesNodePools/update", map[string]any{"tenantId": "acme", "clusterId": cl.ID, "nodePoolId": a.ID, "nodeCount": 1 + w + i}, nil); err != nil {
					errc <- fmt.Errorf("resize: %w", err)
				}
				if i == 1 {
					if err := callRetrying(e.api, "kubernetesNodePools/delete", map[string]any{"tenantId": "acme", "clusterId": cl.ID, "nodePoolId": p.ID}, nil); err != nil {
						errc <- fmt.Errorf("delete: %w", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("a call failed: %v", err)
	}
	wait.For(t, "the cluster settled with its pools", func() (bool, string) {
		cl, err := e.api.getCluster(cl.ID)
		if err != nil || cl.State != resource.StateReady {
			return false, e.api.clusterState(cl.ID)
		}
		ps, err := e.api.listPools(cl.ID)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.State != resource.StateReady {
				return false, e.api.clusterState(cl.ID)
			}
		}
		return len(ps) == 1+workers, e.api.clusterState(cl.ID)
	})
	want := map[string]int{event.NodePoolCreated: 2 * workers, event.NodePoolDeleted: workers}
	e.waitEvents(t, cl.ID, want)
	events := e.checkSequence(t, "cluster/"+cl.ID, e.Store.ClusterRef("acme", cl.ID))
	t.Logf("%d events of %s in sequence", len(events), cl.ID)
}

// TestSubstrateEventsSequence: a substrate's events count in a sequence
// of their own, on its document, from 1.
func TestSubstrateEventsSequence(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	pool := fmt.Sprintf("pool-s%d", poolSeq.Add(1))
	policy := createPolicy(pool, 1, flavor("cpu", 1))
	policy["policy"].(map[string]any)["substrate"].(map[string]any)["account"] = "acc-metal"
	putPool(t, e, policy)
	s := e.api.waitSubstrate(t, pool, "error: no managed Kubernetes", func(s resource.Substrate) bool { return s.State == resource.StateError })
	archivePool(t, e, pool, 2)
	doc := e.FirestoreClient.Collection("tenants").Doc("acme").Collection("substrates").Doc(s.ID)
	wait.For(t, "the substrate's deleted event", func() (bool, string) {
		evs := e.events.chainOf("substrate/" + s.ID)
		return slices.ContainsFunc(evs, func(ev received) bool { return ev.Type == event.SubstrateDeleted }), types(evs)
	})
	events := e.checkSequence(t, "substrate/"+s.ID, doc)
	if got := types(events); got != "substrate.error, substrate.deleted" {
		t.Errorf("substrate events in sequence order: %s; want error, deleted", got)
	}
}
