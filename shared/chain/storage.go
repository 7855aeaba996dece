package chain

import (
	"context"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
)

// Storage keeps the subjects' chains (store.Store): the chain's part of
// each subject's document, the transactions that change it, and the
// outbox that a run's events go to with its save. The runner and the
// watchdog do their reads and writes through it; what they decide stays
// here.
type Storage interface {
	// ReadChain reads the subject's document through r (in r's
	// transaction, if it has one; r notes its version) and returns the
	// chain's part of it and the document for Subject.Load. ErrStale
	// when the document does not exist.
	ReadChain(r *Reader, k Key) (Header, Doc, error)
	// UpdateChain runs fn in one transaction, which it may run again
	// when it contends; fn reads through r (ReadChain first) and writes
	// through tx. When fn returns a Write, the transaction also writes
	// its chain to the subject's document and its events to the outbox,
	// numbered after its Sequence, the new last sequence with them.
	UpdateChain(ctx context.Context, k Key, fn func(r *Reader, tx Tx) (*Write, error)) error
	// OverdueChains returns the active subjects of kind whose chain's
	// next run is before before, the earliest first: at most limit of
	// them, every one when limit is 0.
	OverdueChains(ctx context.Context, kind string, before time.Time, limit int) ([]Key, error)
}

// Key names a subject: its kind (Subject.Kind, the collection of its
// document) and its IDs as the API knows them (the store encodes them).
type Key struct {
	Kind     string
	TenantID string
	ID       string
}

// Key names k's subject.
func (k Kick) Key() Key { return Key{Kind: k.Kind, TenantID: k.TenantID, ID: k.ID} }

// Header is the chain's part of a subject's document.
type Header struct {
	// TenantID and ID are the subject's own: its path holds them as the
	// store encoded them, which may differ.
	TenantID  string `firestore:"tenantId"`
	ID        string `firestore:"id"`
	Active    bool   `firestore:"active"`
	Reconcile State  `firestore:"reconcile"`
	// Sequence is the last ce-sequence given to the subject's events
	// (outbox.SequenceField).
	Sequence int64 `firestore:"sequence"`
}

// Write is what a chain's transaction writes besides what the kind's
// Save wrote: the chain, and the events to put in the outbox after
// Sequence, the last number the subject's events were given.
type Write struct {
	State    State
	Sequence int64
	Events   []event.Event
}
