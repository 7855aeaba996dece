package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// newStore is the store that keeps the outbox over fs.
func newStore(t *testing.T, fs *firestore.Client) *store.Store {
	t.Helper()
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// outboxRef is the outbox document of e.
func outboxRef(fs *firestore.Client, e event.Event) *firestore.DocumentRef {
	return fs.Collection("tenants").Doc(e.TenantID).Collection(outbox.Collection).Doc(e.ID)
}

type backlog struct {
	mu     sync.Mutex
	events []int
	oldest []time.Duration
}

func (b *backlog) OutboxBacklog(_ context.Context, events int, oldest time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, events)
	b.oldest = append(b.oldest, oldest)
}

type publisher struct{}

func (publisher) Publish(context.Context, event.Event) error { return nil }

// Each drain records what it found older than its age: how many events,
// and how old the oldest is; an empty outbox is 0 and 0.
func TestDrainRecordsTheBacklog(t *testing.T) {
	ctx := context.Background()
	fs := fsemu.ForTest(t, "outbox")
	m := &backlog{}
	relay, err := outbox.NewRelay(newStore(t, fs), publisher{}, logging.New(t.Output(), slog.LevelInfo), outbox.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i, age := range []time.Duration{5 * time.Minute, 3 * time.Minute, 10 * time.Second} {
		e := event.Event{ID: string(rune('a' + i)), Type: event.ClusterReady, TenantID: "acme", ClusterID: "kcl_1", Time: start.Add(-age).UTC()}
		if _, err := outboxRef(fs, e).Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := relay.Drain(ctx, time.Minute, 500); err != nil || n != 2 {
		t.Fatalf("Drain(1m) = %d, %v; want the 2 older events", n, err)
	}
	if n, err := relay.Drain(ctx, time.Minute, 500); err != nil || n != 0 {
		t.Fatalf("second Drain(1m) = %d, %v; want none", n, err)
	}
	took := time.Since(start)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.events) != 2 || m.events[0] != 2 || m.events[1] != 0 {
		t.Fatalf("backlogs recorded %v, want [2 0]", m.events)
	}
	if o := m.oldest[0]; o < 5*time.Minute || o > 5*time.Minute+took {
		t.Errorf("oldest = %v, want the 5m old event's age", o)
	}
	if m.oldest[1] != 0 {
		t.Errorf("oldest of an empty backlog = %v, want 0", m.oldest[1])
	}
}

// gate is a publisher that holds every publish until want of them are in
// flight at once, then lets every publish through: a relay with fewer
// workers than want cannot get past it before the deadline.
type gate struct {
	want     int
	deadline context.Context
	mu       sync.Mutex
	inside   int
	peak     int
	open     chan struct{} // closed once want publishes were in flight together
}

func newGate(t *testing.T, want int) *gate {
	deadline, cancel := context.WithTimeout(context.Background(), wait.Timeout)
	t.Cleanup(cancel)
	return &gate{want: want, deadline: deadline, open: make(chan struct{})}
}

func (g *gate) Publish(context.Context, event.Event) error {
	g.mu.Lock()
	g.inside++
	g.peak = max(g.peak, g.inside)
	if g.inside == g.want {
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-g.deadline.Done():
	}
	g.mu.Lock()
	g.inside--
	g.mu.Unlock()
	return nil
}

// Send's events are published by the relay's 8 workers at once (the
// README's figure): events of ever new clusters are sent until each
// worker holds one in the gate. One worker, or fewer than 8, never opens it.
func TestSendPublishesOnEightWorkersAtOnce(t *testing.T) {
	fs := fsemu.ForTest(t, "outbox")
	g := newGate(t, 8)
	relay, err := outbox.NewRelay(newStore(t, fs), g, logging.New(t.Output(), slog.LevelWarn))
	if err != nil {
		t.Fatal(err)
	}
	relay.Start()
	defer relay.Close()
	// A worker's queue holds more than 100 events: the clusters' hashes
	// reach every worker long before one overflows.
	sent := 0
	wait.For(t, fmt.Sprintf("%d publishes in flight at once", g.want), func() (bool, string) {
		select {
		case <-g.open:
			return true, ""
		default:
		}
		if sent < 1000 {
			relay.Send([]event.Event{{ID: fmt.Sprintf("evt_%d", sent), Type: event.ClusterUpdated, TenantID: "acme", ClusterID: fmt.Sprintf("kcl_%d", sent), Time: time.Now().UTC()}})
			sent++
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return false, fmt.Sprintf("after %d clusters' events, at most %d at once", sent, g.peak)
	})
}

// recorder is a publisher that records what it publishes, with a pause
// that lets the relay's workers interleave.
type recorder struct {
	mu        sync.Mutex
	published map[string][]string // cluster → event IDs
}

func (r *recorder) Publish(_ context.Context, e event.Event) error {
	time.Sleep(time.Duration(len(e.ID)%3) * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.published[e.ClusterID] = append(r.published[e.ClusterID], e.ID)
	return nil
}

// Send's events are delivered by several workers, but those of one
// cluster in the order they were sent.
func TestSendKeepsEachClustersOrder(t *testing.T) {
	fs := fsemu.ForTest(t, "outbox")
	rec := &recorder{published: map[string][]string{}}
	relay, err := outbox.NewRelay(newStore(t, fs), rec, logging.New(t.Output(), slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	relay.Start()
	want := map[string][]string{}
	for i := range 40 {
		for c := range 10 {
			cluster := fmt.Sprintf("kcl_%d", c)
			id := fmt.Sprintf("evt_%d_%d%s", c, i, strings.Repeat("x", i%3))
			want[cluster] = append(want[cluster], id)
			relay.Send([]event.Event{{ID: id, Type: event.ClusterUpdated, TenantID: "acme", ClusterID: cluster, Time: time.Now().UTC()}})
		}
	}
	relay.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for cluster, ids := range want {
		if got := rec.published[cluster]; !slices.Equal(got, ids) {
			t.Errorf("%s published %v, want %v", cluster, got, ids)
		}
	}
}

// hanging is a publisher whose publishes of the clusters in hang never
// answer (until their deadline), and which records the others.
type hanging struct {
	hang map[string]bool
	recorder
}

func (h *hanging) Publish(ctx context.Context, e event.Event) error {
	if h.hang[e.ClusterID] {
		<-ctx.Done()
		return ctx.Err()
	}
	return h.recorder.Publish(ctx, e)
}

// A drain whose publishes of one cluster hang publishes every other
// cluster's events, each cluster's in order, and returns once the hung
// publish's deadline passes; the hung cluster's events stay in the outbox.
func TestDrainIsNotHeldByAHungPublish(t *testing.T) {
	ctx := context.Background()
	fs := fsemu.ForTest(t, "outbox")
	pub := &hanging{hang: map[string]bool{"kcl_0": true}, recorder: recorder{published: map[string][]string{}}}
	const timeout = 500 * time.Millisecond
	relay, err := outbox.NewRelay(newStore(t, fs), pub, logging.New(t.Output(), slog.LevelInfo), outbox.WithPublishTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).UTC()
	want := map[string][]string{}
	for c := range 20 {
		for i := range 3 {
			e := event.Event{ID: fmt.Sprintf("evt_%d_%d", c, i), Type: event.ClusterUpdated, TenantID: "acme", ClusterID: fmt.Sprintf("kcl_%d", c),
				Time: old.Add(time.Duration(i) * time.Second)}
			if _, err := outboxRef(fs, e).Create(ctx, e); err != nil {
				t.Fatal(err)
			}
			if c != 0 {
				want[e.ClusterID] = append(want[e.ClusterID], e.ID)
			}
		}
	}
	start := time.Now()
	n, err := relay.Drain(ctx, time.Minute, 500)
	took := time.Since(start)
	if n != 57 || err == nil {
		t.Errorf("Drain = %d, %v; want the 57 events of the 19 other clusters, and the hung publish's error", n, err)
	}
	// One hung publish costs its deadline, not one per cluster.
	if took > 4*timeout+2*time.Second {
		t.Errorf("Drain took %v, want about the publish's deadline %v", took, timeout)
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	for cluster, ids := range want {
		if got := pub.published[cluster]; !slices.Equal(got, ids) {
			t.Errorf("%s published %v, want %v", cluster, got, ids)
		}
	}
	for i := range 3 {
		e := event.Event{ID: fmt.Sprintf("evt_0_%d", i), TenantID: "acme", ClusterID: "kcl_0"}
		if _, err := outboxRef(fs, e).Get(ctx); err != nil {
			t.Errorf("the hung cluster's event %s: %v, want it kept in the outbox", e.ID, err)
		}
	}
}
