package chain

import (
	"context"

	"github.com/better-compute/kubernetes/shared/event"
)

// Doc is a subject's document as the store read it (Subject.Load,
// Run.Save): the kind decodes it into its own type.
type Doc interface {
	DataTo(v any) error
}

// Tx is the store's transaction that a run's writes go through (Run.Save,
// Lease.Write). It is opaque to the chain and to the kinds, which hand it
// to the store's functions: only the store knows what it holds.
type Tx any

// Subject is one kind of reconciled document: the part of a reconciler
// that differs from the others.
type Subject interface {
	// Kind is the subject's collection ("clusters"), also its Kick.Kind.
	Kind() string
	// Load reads through r what a run needs besides the subject's
	// document (snap), and returns the run.
	Load(r *Reader, snap Doc) (Run, error)
}

// Prefetcher is a Subject whose runs can start reading before their
// document arrives: the reads that need only the kick (its queries, by
// the document's path) and those its Hint names (the provider's view of a
// steady subject). Prefetch starts them through r, without waiting, and
// returns the Load that finishes the run's first read with them once the
// document is read. It serves only the first read of a run, which is
// outside a transaction; the reads in the lease's or a save's
// transaction go through Load, and the load Prefetch returns must read
// what Load reads (a run that saves without the lease compares the two
// reads). What a run that ends at its first read (a stale token, a held
// lease) prefetched finishes unused.
type Prefetcher interface {
	Prefetch(r *Reader, k Kick) func(*Reader, Doc) (Run, error)
}

// Run is one run's work on its subject, made by Subject.Load. The loop
// calls Plan once; then, when the plan acts, Act once under the lease;
// then Save when the outcome changed anything.
type Run interface {
	// Plan observes the provider and decides, without the lease: it
	// must not act. It compares what is wanted with what the provider
	// reports now, never with what a run remembered: the loop plans
	// every run afresh, so an intent recorded before a call whose answer
	// was lost is settled by the next run's look. A plan that would call
	// the provider says so (Plan.Act), names the call (Plan.Intent), and
	// says whether its look resolved the chain's pending intent
	// (Plan.Resolved; an Intending run is told it): while one is pending
	// and unresolved the loop refuses the call (ErrIntentPending). The
	// loop takes the lease and calls Act on the same run, when
	// what it read is unchanged (so it keeps what it observed); when it
	// changed, the loop plans again on a run loaded under the lease. An
	// error is a transient failure of the whole run: nothing is saved and
	// the run is retried with backoff.
	Plan(ctx context.Context) (Plan, error)
	// Act carries out the plan under the lease, and returns the run's
	// outcome: the loop recorded the plan's intent first, and keeps it
	// when Act fails or its outcome is Retry (the call may have been
	// done), and clears it with any other outcome's save. A kind whose
	// intents the loop's one cannot express records its own through
	// lease.Write first. Errors are as Plan's; ErrLeaseLost ends the run
	// without a write.
	Act(ctx context.Context, lease *Lease) (Outcome, error)
	// Save writes the run's outcome in the transaction that ends the run,
	// given the subject's document as it is now (the API may have changed
	// it during the run), and returns the events to commit with it.
	Save(tx Tx, now Doc) ([]event.Event, error)
}
