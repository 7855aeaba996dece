package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/better-compute/kubernetes/shared/event"
)

// Publisher publishes one event and reports whether Pub/Sub accepted it.
type Publisher interface {
	Publish(ctx context.Context, e event.Event) error
}

// Store keeps the outbox (store.Store): the events committed with the
// changes they announce and not yet published.
type Store interface {
	// OutboxEvents returns the events of every tenant's outbox whose
	// time is at or before before, the oldest first, at most limit.
	OutboxEvents(ctx context.Context, before time.Time, limit int) ([]event.Event, error)
	// ClearOutbox deletes the events from the outbox.
	ClearOutbox(ctx context.Context, events []event.Event) error
}

// Relay moves events from the outbox to Pub/Sub: publish, then delete the
// outbox document. Everything it fails to publish stays in the outbox for a
// later Drain.
type Relay struct {
	st  Store
	pub Publisher
	log *slog.Logger
	now func() time.Time

	queues  []chan []event.Event // one per worker; a cluster's events always take the same
	wg      sync.WaitGroup
	once    sync.Once
	metrics Metrics
	// publishTimeout bounds each publish.
	publishTimeout time.Duration
}

// Metrics records what the watchdog's drain finds (telemetry.Metrics).
type Metrics interface {
	// OutboxBacklog records the events a drain found older than its age
	// (at most its limit), and the age of the oldest (0 for none).
	OutboxBacklog(ctx context.Context, events int, oldest time.Duration)
}

// RelayOption configures a Relay.
type RelayOption func(*Relay)

// WithMetrics makes every Drain record the backlog it finds: the watchdog
// drains once a pass, so that is the outbox's age as often as it looks.
func WithMetrics(m Metrics) RelayOption { return func(r *Relay) { r.metrics = m } }

// WithPublishTimeout bounds each publish by d (DefaultPublishTimeout
// otherwise): a publish that Pub/Sub has not accepted by then counts as
// failed, and its event stays in the outbox for a later drain (which may
// publish it a second time, with the same ce-id, if Pub/Sub accepted it
// late).
func WithPublishTimeout(d time.Duration) RelayOption {
	return func(r *Relay) {
		if d > 0 {
			r.publishTimeout = d
		}
	}
}

// DefaultPublishTimeout bounds each publish of a relay: Pub/Sub accepts
// one in milliseconds, and one that hangs must not hold a drain, nor the
// watchdog's pass that drains.
const DefaultPublishTimeout = 5 * time.Second

// drainWorkers deliver that many clusters' events of a drain at once, so
// that one cluster whose publish hangs holds only its own.
const drainWorkers = 8

// NewRelay returns a relay publishing through pub and clearing st's outbox.
// Call Start to deliver Send's events in the background, and Close to stop.
func NewRelay(st Store, pub Publisher, log *slog.Logger, opts ...RelayOption) (*Relay, error) {
	if st == nil || pub == nil || log == nil {
		return nil, errors.New("outbox: NewRelay needs a store, a publisher and a logger")
	}
	r := &Relay{st: st, pub: pub, log: log, now: time.Now, publishTimeout: DefaultPublishTimeout}
	for range relayWorkers {
		r.queues = append(r.queues, make(chan []event.Event, 1024/relayWorkers))
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// relayWorkers deliver Send's events side by side: each publish waits for
// Pub/Sub's answer, and one worker alone falls behind a burst of calls.
const relayWorkers = 8

// Start runs the background delivery of Send's events until Close.
func (r *Relay) Start() {
	for _, q := range r.queues {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for events := range q {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if _, err := r.Deliver(ctx, events); err != nil {
					r.log.Warn("Events left in the outbox for a later drain", "error", err, "events", len(events))
				}
				cancel()
			}
		}()
	}
}

// Send hands committed events to the background delivery and returns at
// once, so a caller's response never waits on Pub/Sub. The events of one
// cluster always go to the same worker, so they are published in the
// order they were sent. When the worker's queue is full the events simply
// wait in the outbox for the next Drain.
func (r *Relay) Send(events []event.Event) {
	if len(events) == 0 {
		return
	}
	h := fnv.New32a()
	h.Write([]byte(events[0].TenantID + "/" + events[0].ClusterID))
	select {
	case r.queues[h.Sum32()%uint32(len(r.queues))] <- events:
	default:
		r.log.Warn("Relay queue full; events wait in the outbox for a drain", "events", len(events))
	}
}

// Close stops accepting events and waits until those already sent have been
// delivered (or left in the outbox).
func (r *Relay) Close() {
	r.once.Do(func() {
		for _, q := range r.queues {
			close(q)
		}
	})
	r.wg.Wait()
}

// Deliver publishes events in order and deletes the outbox documents of
// those Pub/Sub accepted, in one write. It stops at the first failed
// publish (each has a deadline: WithPublishTimeout), so that events of one
// cluster are never published out of order by one call; it returns how
// many were published.
func (r *Relay) Deliver(ctx context.Context, events []event.Event) (int, error) {
	var done []event.Event
	var pubErr error
	for _, e := range events {
		pctx, cancel := context.WithTimeout(ctx, r.publishTimeout)
		err := r.pub.Publish(pctx, e)
		cancel()
		if err != nil {
			pubErr = fmt.Errorf("publish %s %s: %w", e.Type, e.ID, err)
			break
		}
		done = append(done, e)
	}
	if len(done) > 0 {
		// Clear what was published even if the caller gives up now:
		// otherwise a drain would publish it again.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := r.st.ClearOutbox(cctx, done); err != nil {
			// Published but still in the outbox: a drain publishes them
			// again with the same ce-id, which at-least-once allows.
			return len(done), errors.Join(pubErr, err)
		}
	}
	return len(done), pubErr
}

// Drain publishes the events of every tenant's outbox written at least
// olderThan ago, oldest first, at most limit of them, and returns how many
// it published. The watchdog calls it: it is what retries a publish that
// failed after its commit, or whose process died, so that the event is
// delivered anyway (a run does not drain; that would cost every run a
// query).
func (r *Relay) Drain(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	events, err := r.st.OutboxEvents(ctx, r.now().Add(-olderThan), limit)
	if err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	if r.metrics != nil {
		// Oldest first (the query's order).
		var oldest time.Duration
		if len(events) > 0 {
			oldest = r.now().Sub(events[0].Time)
		}
		r.metrics.OutboxBacklog(ctx, len(events), oldest)
	}
	if len(events) == 0 {
		return 0, nil
	}
	r.log.Info("Draining outbox", "events", len(events))
	return r.deliverByCluster(ctx, events)
}

// deliverByCluster delivers each cluster's events in order, several
// clusters at once (drainWorkers); a cluster whose publish fails or hangs
// does not hold back the others.
func (r *Relay) deliverByCluster(ctx context.Context, events []event.Event) (int, error) {
	var order []string
	byCluster := map[string][]event.Event{}
	for _, e := range events {
		if _, ok := byCluster[e.ClusterID]; !ok {
			order = append(order, e.ClusterID)
		}
		byCluster[e.ClusterID] = append(byCluster[e.ClusterID], e)
	}
	var mu sync.Mutex
	total := 0
	var errs []error
	sem := make(chan struct{}, drainWorkers)
	var wg sync.WaitGroup
	for _, c := range order {
		if err := ctx.Err(); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("drain stopped: %w", err))
			mu.Unlock()
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, err := r.Deliver(ctx, byCluster[c])
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// PubSub publishes events to one topic per event type, ordered by cluster.
type PubSub struct {
	client *pubsub.Client

	mu         sync.Mutex
	publishers map[string]*pubsub.Publisher
}

// NewPubSub returns a publisher over client. Topics must exist (infra
// creates them; the devstack creates them at start).
func NewPubSub(client *pubsub.Client) *PubSub {
	return &PubSub{client: client, publishers: map[string]*pubsub.Publisher{}}
}

// Publish publishes e and waits until Pub/Sub has accepted it.
func (p *PubSub) Publish(ctx context.Context, e event.Event) error {
	pub := p.publisher(e.Type)
	msg := Message(e)
	_, err := pub.Publish(ctx, msg).Get(ctx)
	var paused pubsub.ErrPublishingPaused
	if errors.As(err, &paused) {
		// An earlier publish of the cluster's events failed and paused
		// its key, and its caller has not resumed it yet: this publish
		// is the retry from the outbox that resuming is for.
		pub.ResumePublish(msg.OrderingKey)
		_, err = pub.Publish(ctx, msg).Get(ctx)
	}
	if err != nil {
		// An ordered publisher pauses the key after a failure; resume it
		// so that the retry from the outbox can go through.
		pub.ResumePublish(msg.OrderingKey)
		return err
	}
	return nil
}

func (p *PubSub) publisher(topic string) *pubsub.Publisher {
	p.mu.Lock()
	defer p.mu.Unlock()
	pub, ok := p.publishers[topic]
	if !ok {
		pub = p.client.Publisher(topic)
		pub.EnableMessageOrdering = true
		// Publish at once rather than batching for up to 10 ms: events
		// are few and their latency is what subscribers see.
		pub.PublishSettings.DelayThreshold = time.Millisecond
		p.publishers[topic] = pub
	}
	return pub
}

// Stop flushes and stops every topic's publisher.
func (p *PubSub) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pub := range p.publishers {
		pub.Stop()
	}
}
