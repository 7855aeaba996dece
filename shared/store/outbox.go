package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/outbox"
)

// The store keeps the outbox for the relay.
var _ outbox.Store = (*Store)(nil)

// outboxRef is the outbox document of e: tenants/{t}/outbox/{eventId}.
func (s *Store) outboxRef(e event.Event) *firestore.DocumentRef {
	return s.tenant(e.TenantID).Collection(outbox.Collection).Doc(DocID(e.ID))
}

// createEvents writes events to the outbox in tx, with the change they
// announce.
func (s *Store) createEvents(tx *firestore.Transaction, events []event.Event) error {
	for _, e := range events {
		if err := tx.Create(s.outboxRef(e), e); err != nil {
			return err
		}
	}
	return nil
}

// OutboxEvents returns the events of every tenant's outbox whose time is
// at or before before, the oldest first, at most limit (outbox.Store).
func (s *Store) OutboxEvents(ctx context.Context, before time.Time, limit int) ([]event.Event, error) {
	it := s.fs.CollectionGroup(outbox.Collection).
		Where("time", "<=", before).
		OrderBy("time", firestore.Asc).
		Limit(limit).
		Documents(ctx)
	defer it.Stop()
	var events []event.Event
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return events, nil
		}
		if err != nil {
			return nil, err
		}
		var e event.Event
		if err := snap.DataTo(&e); err != nil {
			return nil, fmt.Errorf("decode outbox event %s: %w", snap.Ref.Path, err)
		}
		events = append(events, e)
	}
}

// ClearOutbox deletes the events from the outbox (outbox.Store), in as
// few commits as Firestore allows.
func (s *Store) ClearOutbox(ctx context.Context, events []event.Event) error {
	for len(events) > 0 {
		n := min(len(events), 500) // Firestore's limit of writes per commit
		b := s.fs.Batch()
		for _, e := range events[:n] {
			b.Delete(s.outboxRef(e))
		}
		if _, err := b.Commit(ctx); err != nil {
			return fmt.Errorf("clear %d outbox events: %w", n, err)
		}
		events = events[n:]
	}
	return nil
}
