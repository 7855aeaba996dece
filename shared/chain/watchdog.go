package chain

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/logging"
)

// Kicker asks for a run of a chain now (tasks.Queue: a Cloud Task). It is
// the one kicker: the watchdog restarts chains through it, and so do the
// substrates' runs, the pool-event consumer and the API's handlers.
type Kicker interface {
	Kick(ctx context.Context, k Kick) error
}

// Drainer publishes outbox events older than an age (outbox.Relay). It is
// what retries a publish that failed after its commit, or whose process
// died: the relay tries once, the watchdog's drain until it succeeds.
type Drainer interface {
	Drain(ctx context.Context, olderThan time.Duration, limit int) (int, error)
}

// Watchdog restarts the chains whose next run is overdue (a task was lost,
// or its run's successor could not be enqueued for as long as Cloud Tasks
// retried it), and drains outbox events whose publish failed. Its cost
// grows with the overdue chains, not with the fleet: one query per kind of
// subject returns only those.
//
// No one slow call holds a pass: the drain runs beside the restarts, each
// restart (its transaction and its kick) has a deadline of its own
// (CallTimeout) and several run at once, and the drain has a deadline
// (DrainTimeout) besides its publishes' own (outbox.Relay).
type Watchdog struct {
	// Store keeps the chains (store.Store).
	Store Storage
	// Kinds are the subjects' kinds (Subject.Kind): their collections.
	Kinds  []string
	Kicker Kicker
	Events Drainer
	// Grace is how late a run may be before its chain counts as dead.
	Grace time.Duration
	// DrainAge is how old an outbox event must be before the watchdog
	// publishes it (younger ones are the relay's).
	DrainAge time.Duration
	// CallTimeout bounds each call of a restart: its transaction, and
	// its kick. Zero means 5 s.
	CallTimeout time.Duration
	// DrainTimeout bounds a pass's drain. Zero means 30 s, half of
	// Cloud Scheduler's deadline of a pass (infra/tasks.tf).
	DrainTimeout time.Duration
	// Clock is the watchdog's clock; nil means the real one.
	Clock clock.PassiveClock
	// Metrics counts the chains Tick restarts; nil counts nothing.
	Metrics Metrics
}

// restartWorkers restart that many chains of a pass at once.
const restartWorkers = 8

// Pass is what one watchdog pass did.
type Pass struct {
	Restarted int `json:"restarted"`
	Drained   int `json:"drained"`
}

// overdueLimit bounds the chains one pass restarts; the next pass takes
// the rest.
const overdueLimit = 100

// Tick runs one watchdog pass: it restarts the overdue chains and, beside
// them, drains the outbox.
func (w *Watchdog) Tick(ctx context.Context) (Pass, error) {
	now := w.now()
	before := now().Add(-w.Grace)
	var res Pass
	var drainedN int
	var drainErr error
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		dctx, cancel := context.WithTimeout(ctx, orDefault(w.DrainTimeout, 30*time.Second))
		defer cancel()
		drainedN, drainErr = w.Events.Drain(dctx, w.DrainAge, 500)
	}()
	var mu sync.Mutex
	var errList []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errList = append(errList, err)
	}
	sem := make(chan struct{}, restartWorkers)
	var wg sync.WaitGroup
	for _, kind := range w.Kinds {
		qctx, cancel := context.WithTimeout(ctx, w.callTimeout())
		keys, err := w.Store.OverdueChains(qctx, kind, before, overdueLimit)
		cancel()
		if err != nil {
			fail(fmt.Errorf("query overdue %s: %w", kind, err))
			continue
		}
		for _, key := range keys {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				ok, err := w.restartOne(ctx, key, before, now)
				if err != nil {
					fail(err)
				}
				if ok {
					mu.Lock()
					res.Restarted++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	<-drained
	res.Drained = drainedN
	if drainErr != nil {
		errList = append(errList, drainErr)
	}
	return res, errors.Join(errList...)
}

// restartOne restarts the chain of the subject key, if still overdue,
// and kicks it, each within the watchdog's deadline of a call. It reports
// whether it kicked a new chain. A restart whose commit answered an error
// is read back before it is given up: if its token is stored, the chain
// is kicked; otherwise, as after a failed kick, the chain is due now, and
// overdue for a later pass.
func (w *Watchdog) restartOne(ctx context.Context, key Key, before time.Time, now func() time.Time) (bool, error) {
	log := logging.FromContext(ctx)
	cctx, cancel := context.WithTimeout(ctx, w.callTimeout())
	defer cancel()
	k, err := w.restart(cctx, key, before, now)
	if err != nil && k != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), w.callTimeout())
		h, _, rerr := w.Store.ReadChain(NewReader(rctx, nil), key)
		rcancel()
		if rerr != nil || h.Reconcile.Token != k.Token {
			log.Warn("Restart of a dead reconcile chain failed; a later pass restarts it", "subject", key, "error", err)
			return false, fmt.Errorf("restart chain of %v: %w", key, err)
		}
		log.Warn("Restart of a dead reconcile chain answered an error but committed; kicking it", "subject", key, "error", err)
		err = nil
	}
	if err != nil {
		return false, fmt.Errorf("restart chain of %v: %w", key, err)
	}
	if k == nil {
		return false, nil
	}
	log.Info("Restarting a dead reconcile chain", "kind", k.Kind, "tenantId", k.TenantID, "id", k.ID)
	kctx, kcancel := context.WithTimeout(ctx, w.callTimeout())
	defer kcancel()
	if err := w.Kicker.Kick(kctx, *k); err != nil {
		log.Warn("Kick of a restarted reconcile chain failed; a later pass restarts it", "kind", k.Kind, "tenantId", k.TenantID, "id", k.ID, "error", err)
		return false, fmt.Errorf("kick %v: %w", key, err)
	}
	if w.Metrics != nil {
		w.Metrics.ChainRestarted(ctx, key.Kind)
	}
	return true, nil
}

func (w *Watchdog) callTimeout() time.Duration { return orDefault(w.CallTimeout, 5*time.Second) }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// restart starts a new chain for a subject whose chain died, unless its
// next run is no longer overdue (a run or a kick got there first). On an
// error it returns the kick its transaction last wrote, if any, which may
// have committed (a lost answer).
func (w *Watchdog) restart(ctx context.Context, key Key, before time.Time, now func() time.Time) (*Kick, error) {
	var k *Kick
	err := w.Store.UpdateChain(ctx, key, func(r *Reader, _ Tx) (*Write, error) {
		k = nil
		h, _, err := w.Store.ReadChain(r, key)
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		if !h.Active || !h.Reconcile.NextAt.Before(before) {
			return nil, nil
		}
		kick := h.Reconcile.Restart(key.Kind, key.TenantID, key.ID, now().UTC().Truncate(time.Microsecond))
		k = &kick
		return &Write{State: h.Reconcile, Sequence: h.Sequence}, nil
	})
	return k, err
}

// RestartAll starts a new chain for every active subject of the kinds, and
// publishes every event the outbox holds: for a process that lost its tasks
// (the devstack started again from its data file), which must not wait for
// each chain to be overdue. Unlike Tick, its cost grows with the fleet.
func (w *Watchdog) RestartAll(ctx context.Context) (Pass, error) {
	now := w.now()
	// Every chain's next run is before the end of time.
	end := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	var res Pass
	for _, kind := range w.Kinds {
		// Every subject is read before any is restarted: a restart moves
		// its chain's next run, and so its place in the query.
		keys, err := w.Store.OverdueChains(ctx, kind, end, 0)
		if err != nil {
			return res, fmt.Errorf("read %s: %w", kind, err)
		}
		for _, key := range keys {
			k, err := w.restart(ctx, key, end, now)
			if err != nil {
				return res, fmt.Errorf("restart chain of %v: %w", key, err)
			}
			if k == nil {
				continue
			}
			if err := w.Kicker.Kick(ctx, *k); err != nil {
				return res, fmt.Errorf("kick %v: %w", key, err)
			}
			res.Restarted++
		}
	}
	for {
		n, err := w.Events.Drain(ctx, 0, 500)
		res.Drained += n
		if err != nil || n < 500 {
			return res, err
		}
	}
}

// now is the clock's Now: Clock's, or the real one's.
func (w *Watchdog) now() func() time.Time {
	if w.Clock == nil {
		return time.Now
	}
	return w.Clock.Now
}
