package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/outbox"
)

// The store keeps the subjects' chains for the runner and the watchdog.
var _ chain.Storage = (*Store)(nil)

// subjectRef is the document of a chain's subject:
// tenants/{tenantId}/{kind}/{id}.
func (s *Store) subjectRef(k chain.Key) *firestore.DocumentRef {
	return s.tenant(k.TenantID).Collection(k.Kind).Doc(DocID(k.ID))
}

// ReadChain reads the subject's document through r and decodes the
// chain's part of it (chain.Storage).
func (s *Store) ReadChain(r *chain.Reader, k chain.Key) (chain.Header, chain.Doc, error) {
	var h chain.Header
	snap, err := get(r, s.subjectRef(k))
	if err != nil {
		return h, nil, fmt.Errorf("read subject: %w", err)
	}
	if !snap.Exists() {
		return h, nil, chain.ErrStale
	}
	if err := snap.DataTo(&h); err != nil {
		return h, nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
	}
	return h, snap, nil
}

// UpdateChain runs fn in a transaction and writes the chain and the
// events it returns (chain.Storage): the events numbered after the
// subject's sequence, which moves to the last of them, each in the
// outbox.
func (s *Store) UpdateChain(ctx context.Context, k chain.Key, fn func(*chain.Reader, chain.Tx) (*chain.Write, error)) error {
	ref := s.subjectRef(k)
	return s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		w, err := fn(chain.NewReader(ctx, tx), tx)
		if err != nil || w == nil {
			return err
		}
		updates := []firestore.Update{{Path: chain.Field, Value: w.State}}
		if len(w.Events) > 0 {
			updates = append(updates, firestore.Update{Path: outbox.SequenceField, Value: outbox.Number(w.Events, w.Sequence)})
		}
		if err := tx.Update(ref, updates); err != nil {
			return err
		}
		return s.createEvents(tx, w.Events)
	})
}

// txOf is the Firestore transaction a chain.Tx holds: the store made it
// (UpdateChain). Nil for none.
func txOf(t chain.Tx) *firestore.Transaction {
	if t == nil {
		return nil
	}
	return t.(*firestore.Transaction)
}

// snapOf is the Firestore document a chain.Doc is: the store read it
// (ReadChain).
func snapOf(d chain.Doc) *firestore.DocumentSnapshot { return d.(*firestore.DocumentSnapshot) }

// get returns the document at ref, which may not exist, read through r
// (in its transaction, if any), and notes its version in r.
func get(r *chain.Reader, ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
	var snap *firestore.DocumentSnapshot
	var err error
	if tx := txOf(r.Tx()); tx != nil {
		snap, err = tx.Get(ref)
	} else {
		snap, err = ref.Get(r.Context())
	}
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	note(r, snap)
	return snap, nil
}

// beginRead starts q's read through r now and returns what waits for its
// documents, which it notes in r when it returns them: so a run's reads
// overlap, and its versions are noted in the order it waits for them. In
// a transaction the read is made at the wait. The wait is called once.
func beginRead(r *chain.Reader, q firestore.Query) func() ([]*firestore.DocumentSnapshot, error) {
	if tx := txOf(r.Tx()); tx != nil {
		return func() ([]*firestore.DocumentSnapshot, error) {
			snaps, err := tx.Documents(q).GetAll()
			return noted(r, snaps, err)
		}
	}
	type result struct {
		snaps []*firestore.DocumentSnapshot
		err   error
	}
	done := make(chan result, 1)
	go func() {
		snaps, err := q.Documents(r.Context()).GetAll()
		done <- result{snaps, err}
	}()
	return func() ([]*firestore.DocumentSnapshot, error) {
		res := <-done
		return noted(r, res.snaps, res.err)
	}
}

func noted(r *chain.Reader, snaps []*firestore.DocumentSnapshot, err error) ([]*firestore.DocumentSnapshot, error) {
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		note(r, s)
	}
	return snaps, nil
}

// note notes in r the version of the document snap: its path and update
// time, or its absence.
func note(r *chain.Reader, snap *firestore.DocumentSnapshot) {
	if !snap.Exists() {
		r.Note(snap.Ref.Path + "@none")
		return
	}
	r.Note(snap.Ref.Path + "@" + strconv.FormatInt(snap.UpdateTime.UnixNano(), 10))
}

// overduePage is how many overdue subjects one query reads.
const overduePage = 500

// OverdueChains returns the active subjects of kind whose next run is
// before before, the earliest first (chain.Storage): limit of them, or
// all when limit is 0, read by pages.
func (s *Store) OverdueChains(ctx context.Context, kind string, before time.Time, limit int) ([]chain.Key, error) {
	q := s.fs.CollectionGroup(kind).
		Where("active", "==", true).
		Where(chain.Field+".nextAt", "<", before).
		OrderBy(chain.Field+".nextAt", firestore.Asc)
	var keys []chain.Key
	for page := q; ; {
		n := overduePage
		if limit > 0 {
			n = limit - len(keys)
		}
		snaps, err := page.Limit(n).Documents(ctx).GetAll()
		if err != nil {
			return nil, err
		}
		for _, snap := range snaps {
			keys = append(keys, subjectKey(kind, snap))
		}
		if limit > 0 || len(snaps) < n {
			return keys, nil
		}
		page = q.StartAfter(snaps[len(snaps)-1])
	}
}

// subjectKey names the subject of snap by the IDs its document holds. Its
// path holds them encoded (DocID): a document without them is named
// by its path's IDs, which a store that encoded nothing wrote.
func subjectKey(kind string, snap *firestore.DocumentSnapshot) chain.Key {
	var ids struct {
		TenantID string `firestore:"tenantId"`
		ID       string `firestore:"id"`
	}
	if err := snap.DataTo(&ids); err != nil || ids.TenantID == "" || ids.ID == "" {
		return chain.Key{Kind: kind, TenantID: snap.Ref.Parent.Parent.ID, ID: snap.Ref.ID}
	}
	return chain.Key{Kind: kind, TenantID: ids.TenantID, ID: ids.ID}
}
