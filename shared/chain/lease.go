package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/outbox"
)

// Errors of a run's lease.
var (
	// ErrStale: the task's chain token is not the subject's (a newer chain
	// runs it), or the subject is gone. The task ends without a successor.
	ErrStale = errors.New("reconcile token is stale")
	// ErrBusy: another run holds the subject's lease. The task is retried.
	ErrBusy = errors.New("another run holds the lease")
	// ErrLeaseLost: the run's lease expired and another run took it; the
	// run must stop without writing.
	ErrLeaseLost = errors.New("the run's lease was lost")
)

// Lease is a run's hold on one subject.
type Lease struct {
	fs    *firestore.Client
	ref   *firestore.DocumentRef
	now   func() time.Time
	Owner string
	Token string
	// Expiry is when another run may take the subject.
	Expiry time.Time
	// State is the chain as the lease found it.
	State State
}

// leaseMargin is how long before its expiry a lease may still be dropped
// without a transaction: until then no other run can have taken it, since
// runs only take expired leases, whatever the clocks' small disagreement.
const leaseMargin = 2 * time.Second

// take starts a run of the chain token on the subject at ref: in one
// transaction it checks the token and that no other run holds the lease,
// takes the lease for ttl, sets the watchdog's deadline, and calls load to
// read the rest of what the run needs.
func take(ctx context.Context, fs *firestore.Client, ref *firestore.DocumentRef, token string, ttl time.Duration,
	deadline time.Time, now func() time.Time, load func(*firestore.Transaction, *firestore.DocumentSnapshot) (Run, error)) (*Lease, Run, error) {
	owner := newOwner()
	var l *Lease
	var run Run
	err := fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		l, run = nil, nil
		snap, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			return ErrStale
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", ref.Path, err)
		}
		var h header
		if err := snap.DataTo(&h); err != nil {
			return fmt.Errorf("decode %s: %w", ref.Path, err)
		}
		t := now().UTC().Truncate(time.Microsecond)
		switch s := h.Reconcile; {
		case !h.Active || s.Token != token:
			return ErrStale
		case s.LeaseOwner != "" && s.LeaseOwner != owner && s.LeaseExpiry.After(t):
			return ErrBusy
		}
		if run, err = load(tx, snap); err != nil {
			return err
		}
		s := h.Reconcile
		s.LeaseOwner, s.LeaseExpiry, s.NextAt = owner, t.Add(ttl), deadline
		l = &Lease{fs: fs, ref: ref, now: now, Owner: owner, Token: token, Expiry: s.LeaseExpiry, State: h.Reconcile}
		return tx.Update(ref, []firestore.Update{{Path: Field, Value: s}})
	})
	if err != nil {
		return nil, nil, err
	}
	return l, run, nil
}

// hold checks in tx that l still holds its subject's lease, and returns the
// subject's document and chain as stored now.
func (l *Lease) hold(tx *firestore.Transaction) (*firestore.DocumentSnapshot, State, error) {
	snap, err := tx.Get(l.ref)
	if err != nil {
		return nil, State{}, fmt.Errorf("read %s: %w", l.ref.Path, err)
	}
	var h header
	if err := snap.DataTo(&h); err != nil {
		return nil, State{}, fmt.Errorf("decode %s: %w", l.ref.Path, err)
	}
	if h.Reconcile.LeaseOwner != l.Owner || !h.Reconcile.LeaseExpiry.After(l.now()) {
		return nil, State{}, ErrLeaseLost
	}
	return snap, h.Reconcile, nil
}

// Write runs write in a transaction that first checks that the lease is
// still held (ErrLeaseLost otherwise): a run records what it is about to do
// at the provider through it.
func (l *Lease) Write(ctx context.Context, write func(*firestore.Transaction) error) error {
	return l.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, _, err := l.hold(tx); err != nil {
			return err
		}
		return write(tx)
	})
}

// finish writes a run's outcome (save), its events and the chain's next
// deadline, and releases the lease, in one transaction. It returns the
// events committed and whether the run's token is still the subject's (when
// it is not, a kick started a newer chain and the run must not schedule a
// successor, nor move the newer chain's deadline).
func (l *Lease) finish(ctx context.Context, nextAt time.Time, failures int,
	save func(*firestore.Transaction, *firestore.DocumentSnapshot) ([]outbox.Event, error)) ([]outbox.Event, bool, error) {
	var committed []outbox.Event
	current := false
	err := l.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		committed, current = nil, false
		snap, s, err := l.hold(tx)
		if err != nil {
			return err
		}
		if save != nil {
			if committed, err = save(tx, snap); err != nil {
				return err
			}
		}
		current = s.Token == l.Token
		l.released(&s, nextAt, failures, current)
		if err := tx.Update(l.ref, []firestore.Update{{Path: Field, Value: s}}); err != nil {
			return err
		}
		for _, e := range committed {
			if err := tx.Create(outbox.Ref(l.fs, e), e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return committed, current, nil
}

// released is s with the lease given up and, for the current chain, the
// watchdog's next deadline and the failure count set.
func (l *Lease) released(s *State, nextAt time.Time, failures int, current bool) {
	s.LeaseOwner, s.LeaseExpiry = "", time.Time{}
	if current {
		s.NextAt, s.Failures = nextAt, failures
	}
}

// drop gives up a run's lease with one blind write, so that a kick arriving
// right after a refresh that changed nothing need not wait for the lease to
// expire. It writes only the lease fields, which only runs write, and only
// well before the lease expires; past that it leaves the lease to expire on
// its own.
func (l *Lease) drop(ctx context.Context) error {
	if l.now().Add(leaseMargin).After(l.Expiry) {
		return nil
	}
	_, err := l.ref.Update(ctx, []firestore.Update{
		{Path: Field + ".leaseOwner", Value: ""},
		{Path: Field + ".leaseExpiry", Value: time.Time{}},
	})
	if err != nil {
		return fmt.Errorf("drop lease: %w", err)
	}
	return nil
}
