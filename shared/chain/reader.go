package chain

import (
	"context"
	"strconv"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reader reads a subject's documents for Subject.Load: in the transaction
// that takes the lease, or directly for a run that only reads and confirms.
// It notes the version of every document it returns, so that the runner
// can tell whether a plan made on a read without the lease still holds.
type Reader struct {
	ctx      context.Context
	tx       *firestore.Transaction
	versions []string
}

// NewReader returns a reader through tx, or directly when tx is nil.
func NewReader(ctx context.Context, tx *firestore.Transaction) *Reader {
	return &Reader{ctx: ctx, tx: tx}
}

// InTransaction reports whether the reader reads in the lease's (or a
// save's) transaction; a reader that does not is a run's first read.
func (r *Reader) InTransaction() bool { return r.tx != nil }

// Context is the run's context.
func (r *Reader) Context() context.Context { return r.ctx }

// Query returns the documents of q.
func (r *Reader) Query(q firestore.Query) ([]*firestore.DocumentSnapshot, error) {
	var snaps []*firestore.DocumentSnapshot
	var err error
	if r.tx != nil {
		snaps, err = r.tx.Documents(q).GetAll()
	} else {
		snaps, err = q.Documents(r.ctx).GetAll()
	}
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		r.note(s)
	}
	return snaps, nil
}

// Begin starts q's read now and returns what waits for its documents,
// which it notes when it returns them, as Query does: so a run's reads
// overlap, and its versions are noted in the order it waits for them. In
// a transaction the read is made at the wait, as Query makes it. The wait
// is called once.
func (r *Reader) Begin(q firestore.Query) func() ([]*firestore.DocumentSnapshot, error) {
	if r.tx != nil {
		return func() ([]*firestore.DocumentSnapshot, error) { return r.Query(q) }
	}
	type result struct {
		snaps []*firestore.DocumentSnapshot
		err   error
	}
	done := make(chan result, 1)
	go func() {
		snaps, err := q.Documents(r.ctx).GetAll()
		done <- result{snaps, err}
	}()
	return func() ([]*firestore.DocumentSnapshot, error) {
		res := <-done
		if res.err != nil {
			return nil, res.err
		}
		for _, s := range res.snaps {
			r.note(s)
		}
		return res.snaps, nil
	}
}

func (r *Reader) note(s *firestore.DocumentSnapshot) {
	if !s.Exists() {
		r.versions = append(r.versions, s.Ref.Path+"@none")
		return
	}
	r.versions = append(r.versions, s.Ref.Path+"@"+strconv.FormatInt(s.UpdateTime.UnixNano(), 10))
}

// version identifies everything read: the same documents, unchanged.
func (r *Reader) version() string { return strings.Join(r.versions, ",") }

// Get returns the document at ref, which may not exist.
func (r *Reader) Get(ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
	var snap *firestore.DocumentSnapshot
	var err error
	if r.tx != nil {
		snap, err = r.tx.Get(ref)
	} else {
		snap, err = ref.Get(r.ctx)
	}
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	r.note(snap)
	return snap, nil
}
