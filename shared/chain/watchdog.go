package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
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

// Watchdog restarts the chains whose next run is overdue (an enqueue
// failed, a task was lost), and drains outbox events whose publish failed.
// Its cost grows with the overdue chains, not with the fleet: one query per
// kind of subject returns only those.
type Watchdog struct {
	FS *firestore.Client
	// Kinds are the subjects' kinds (Subject.Kind): their collections.
	Kinds  []string
	Kicker Kicker
	Events Drainer
	// Grace is how late a run may be before its chain counts as dead.
	Grace time.Duration
	// DrainAge is how old an outbox event must be before the watchdog
	// publishes it (younger ones are the relay's).
	DrainAge time.Duration
	// Clock is the watchdog's clock; nil means the real one.
	Clock clock.PassiveClock
	// Metrics counts the chains Tick restarts; nil counts nothing.
	Metrics Metrics
}

// Pass is what one watchdog pass did.
type Pass struct {
	Restarted int `json:"restarted"`
	Drained   int `json:"drained"`
}

// overdueLimit bounds the chains one pass restarts; the next pass takes
// the rest.
const overdueLimit = 100

// Tick runs one watchdog pass.
func (w *Watchdog) Tick(ctx context.Context) (Pass, error) {
	log := logging.FromContext(ctx)
	now := w.now()
	before := now().Add(-w.Grace)
	var res Pass
	var errList []error
	for _, kind := range w.Kinds {
		docs, err := w.overdue(kind, before).Limit(overdueLimit).Documents(ctx).GetAll()
		if err != nil {
			errList = append(errList, fmt.Errorf("query overdue %s: %w", kind, err))
			continue
		}
		for _, d := range docs {
			k, err := w.restart(ctx, kind, d.Ref, before, now)
			if err != nil {
				errList = append(errList, fmt.Errorf("restart chain of %s: %w", d.Ref.Path, err))
				continue
			}
			if k == nil {
				continue
			}
			log.Info("Restarting a dead reconcile chain", "kind", k.Kind, "tenantId", k.TenantID, "id", k.ID)
			if err := w.Kicker.Kick(ctx, *k); err != nil {
				errList = append(errList, fmt.Errorf("kick %s: %w", d.Ref.Path, err))
				continue
			}
			res.Restarted++
			if w.Metrics != nil {
				w.Metrics.ChainRestarted(ctx, kind)
			}
		}
	}
	n, err := w.Events.Drain(ctx, w.DrainAge, 500)
	res.Drained = n
	if err != nil {
		errList = append(errList, err)
	}
	return res, errors.Join(errList...)
}

// overdue is the query of the active subjects of kind whose next run is
// before before, the earliest first.
func (w *Watchdog) overdue(kind string, before time.Time) firestore.Query {
	return w.FS.CollectionGroup(kind).
		Where("active", "==", true).
		Where(Field+".nextAt", "<", before).
		OrderBy(Field+".nextAt", firestore.Asc)
}

// restart starts a new chain for a subject whose chain died, unless its
// next run is no longer overdue (a run or a kick got there first).
func (w *Watchdog) restart(ctx context.Context, kind string, ref *firestore.DocumentRef, before time.Time, now func() time.Time) (*Kick, error) {
	var k *Kick
	err := w.FS.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		k = nil
		snap, err := tx.Get(ref)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		var h header
		if err := snap.DataTo(&h); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if !h.Active || !h.Reconcile.NextAt.Before(before) {
			return nil
		}
		// Subjects live at tenants/{tenantId}/{kind}/{id}, with the IDs
		// encoded where Firestore could not take them as they are: the
		// kick carries the IDs the document holds, which its subject's
		// Ref encodes again.
		tenantID, id := h.TenantID, h.ID
		if tenantID == "" || id == "" {
			tenantID, id = ref.Parent.Parent.ID, ref.ID
		}
		kick := h.Reconcile.Restart(kind, tenantID, id, now().UTC().Truncate(time.Microsecond))
		k = &kick
		return tx.Update(ref, []firestore.Update{{Path: Field, Value: h.Reconcile}})
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
		var docs []*firestore.DocumentSnapshot
		for q := w.overdue(kind, end); ; {
			page, err := q.Limit(500).Documents(ctx).GetAll()
			if err != nil {
				return res, fmt.Errorf("read %s: %w", kind, err)
			}
			docs = append(docs, page...)
			if len(page) < 500 {
				break
			}
			q = w.overdue(kind, end).StartAfter(page[len(page)-1])
		}
		for _, d := range docs {
			k, err := w.restart(ctx, kind, d.Ref, end, now)
			if err != nil {
				return res, fmt.Errorf("restart chain of %s: %w", d.Ref.Path, err)
			}
			if k == nil {
				continue
			}
			if err := w.Kicker.Kick(ctx, *k); err != nil {
				return res, fmt.Errorf("kick %s: %w", d.Ref.Path, err)
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
