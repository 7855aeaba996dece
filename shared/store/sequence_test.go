package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
)

// outboxOf returns the events waiting in the tenant's outbox, by ce-id.
func outboxOf(t *testing.T, e *runEnv) map[string]event.Event {
	t.Helper()
	docs, err := e.fs.Collection("tenants").Doc("acme").Collection(outbox.Collection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]event.Event{}
	for _, d := range docs {
		var ev event.Event
		if err := d.DataTo(&ev); err != nil {
			t.Fatal(err)
		}
		out[ev.ID] = ev
	}
	return out
}

// clusterSequence is the sequence field of the cluster's document.
func clusterSequence(t *testing.T, e *runEnv) int64 {
	t.Helper()
	snap, err := e.st.ClusterRef("acme", e.cluster.ID).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, err := snap.DataAt(outbox.SequenceField)
	if err != nil {
		t.Fatalf("cluster document has no %s: %v", outbox.SequenceField, err)
	}
	return v.(int64)
}

// TestSequenceUnderConcurrentCalls creates node pools on one cluster from
// many goroutines at once, with resizes (which write no event) in
// between: the cluster's events are numbered 1 to N, each number once, N
// is the cluster document's sequence, and the calls return the events
// numbered as the outbox holds them.
func TestSequenceUnderConcurrentCalls(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	created := outboxOf(t, e)
	if len(created) != 1 {
		t.Fatalf("outbox after the create = %v, want the cluster's created event", created)
	}
	for _, ev := range created {
		if ev.Type != event.ClusterCreated || ev.Sequence != 1 {
			t.Fatalf("first event = %s #%d, want %s #1", ev.Type, ev.Sequence, event.ClusterCreated)
		}
	}
	if got := clusterSequence(t, e); got != 1 {
		t.Fatalf("cluster sequence after the create = %d, want 1", got)
	}

	// Nine creates fill the cluster to resource.MaxNodePools with its
	// first pool.
	const workers, each = 9, 1
	var (
		mu       sync.Mutex
		returned []event.Event
		failed   []error
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := e.st.CreateNodePool(ctx, e.caller, store.CreateNodePoolRequest{
					ClusterID: e.cluster.ID, RequestHash: "h",
					Spec: model.NodePoolSpec{Name: fmt.Sprintf("w%d-%d", w, i), MachineType: "e2-standard-4", NodeCount: 1},
				})
				_, rerr := e.st.UpdateNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID, func(s model.NodePoolSpec) (model.NodePoolSpec, error) {
					s.NodeCount = 1 + w + i
					return s, nil
				})
				mu.Lock()
				returned = append(returned, res.Events...)
				for _, err := range []error{err, rerr} {
					if err != nil {
						failed = append(failed, err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range failed {
		// Contention may wear a call out (UNAVAILABLE, retried by the
		// client); it must then have written nothing.
		t.Logf("a call failed: %v", err)
	}
	if len(returned) < workers/2 {
		t.Fatalf("%d of %d creates succeeded (%v)", len(returned), workers*each, failed)
	}

	events := outboxOf(t, e)
	if len(events) != len(returned)+1 {
		t.Fatalf("outbox holds %d events, want %d: the cluster's and one per pool created", len(events), len(returned)+1)
	}
	var nums []int64
	for _, ev := range events {
		nums = append(nums, ev.Sequence)
	}
	slices.Sort(nums)
	for i, n := range nums {
		if n != int64(i+1) {
			t.Fatalf("sequence numbers %v, want 1 to %d each once", nums, len(nums))
		}
	}
	if got := clusterSequence(t, e); got != int64(len(nums)) {
		t.Errorf("cluster sequence = %d, want %d, the last number given", got, len(nums))
	}
	for _, ev := range returned {
		if stored := events[ev.ID]; stored.Sequence != ev.Sequence || ev.Sequence == 0 {
			t.Errorf("call returned %s numbered %d, the outbox holds %d", ev.ID, ev.Sequence, stored.Sequence)
		}
	}
}
