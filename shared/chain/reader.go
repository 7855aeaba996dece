package chain

import (
	"context"
	"strings"
)

// Reader is how a run reads a subject's documents for Subject.Load: in
// the transaction that takes the lease (or saves), or directly for a run's
// first read. The store's functions read through it (it holds the store's
// transaction, if any) and note the version of every document they
// return, so that the runner can tell whether a plan made on a read
// without the lease still holds.
type Reader struct {
	ctx      context.Context
	tx       Tx
	versions []string
}

// NewReader returns a reader in the store's transaction tx, or outside
// any when tx is nil.
func NewReader(ctx context.Context, tx Tx) *Reader {
	return &Reader{ctx: ctx, tx: tx}
}

// InTransaction reports whether the reader reads in the lease's (or a
// save's) transaction; a reader that does not is a run's first read.
func (r *Reader) InTransaction() bool { return r.tx != nil }

// Context is the run's context.
func (r *Reader) Context() context.Context { return r.ctx }

// Tx is the store's transaction the reader reads in; nil for none.
func (r *Reader) Tx() Tx { return r.tx }

// Note records the version of a document read (its path and update time,
// or its absence): the runner compares the versions a run read without
// the lease with those read again before its save. A run notes in the
// order it waits for its reads, from one goroutine.
func (r *Reader) Note(version string) { r.versions = append(r.versions, version) }

// version identifies everything read: the same documents, unchanged.
func (r *Reader) version() string { return strings.Join(r.versions, ",") }
