package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
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
	st    Storage
	key   Key
	now   func() time.Time
	Owner string
	Token string
	// Expiry is when another run may take the subject.
	Expiry time.Time
	// State is the chain as the lease found it.
	State State
}

// loader is Subject.Load.
type loader func(*Reader, Doc) (Run, error)

// check is the chain's admission of a run of token at t: the subject is
// active and token is its chain's (ErrStale), and no other run holds an
// unexpired lease on it (ErrBusy).
func check(h Header, token, owner string, t time.Time) error {
	switch s := h.Reconcile; {
	case !h.Active || s.Token != token:
		return ErrStale
	case s.LeaseOwner != "" && s.LeaseOwner != owner && s.LeaseExpiry.After(t):
		return ErrBusy
	}
	return nil
}

// peeked is what a run read without the lease.
type peeked struct {
	run     Run
	state   State
	version string
}

// handedOver: the task's chain token is stale because the task's own run
// handed the subject to a steady chain (handOverToken), in an attempt
// that failed after its save committed. state is the chain as stored.
type handedOver struct{ state State }

func (*handedOver) Error() string { return "the task handed its subject over to a steady chain" }

// peek reads k's subject and what its run needs without a transaction (a
// point read and the subject's own queries, which a Prefetcher starts
// with the point read), and checks that the run may go on. A task whose
// own hand-over is stored gets *handedOver.
func peek(ctx context.Context, st Storage, k Kick, task string, now time.Time, sub Subject) (*peeked, error) {
	r := NewReader(ctx, nil)
	load := sub.Load
	if p, ok := sub.(Prefetcher); ok {
		load = p.Prefetch(r, k)
	}
	h, snap, err := st.ReadChain(r, k.Key())
	if err != nil {
		return nil, err
	}
	if h.Active && !k.Steady() && h.Reconcile.Token == handOverToken(k.Token, task) {
		return nil, &handedOver{state: h.Reconcile}
	}
	if err := check(h, k.Token, "", now); err != nil {
		return nil, err
	}
	run, err := load(r, snap)
	if err != nil {
		return nil, err
	}
	return &peeked{run: run, state: h.Reconcile, version: r.version()}, nil
}

// take starts a run of the chain token on the subject key: in one
// transaction it checks the token and that no other run holds the lease,
// takes the lease for ttl, sets the watchdog's deadline, and calls load to
// read the rest of what the run needs. It returns the version of what it
// read (Reader).
func take(ctx context.Context, st Storage, key Key, token string, ttl time.Duration,
	deadline time.Time, now func() time.Time, load loader) (*Lease, Run, string, error) {
	owner := newOwner()
	var l *Lease
	var run Run
	var version string
	err := st.UpdateChain(ctx, key, func(r *Reader, _ Tx) (*Write, error) {
		l, run = nil, nil
		h, snap, err := st.ReadChain(r, key)
		if err != nil {
			return nil, err
		}
		t := now().UTC().Truncate(time.Microsecond)
		if err := check(h, token, owner, t); err != nil {
			return nil, err
		}
		if run, err = load(r, snap); err != nil {
			return nil, err
		}
		version = r.version()
		s := h.Reconcile
		s.LeaseOwner, s.LeaseExpiry, s.NextAt = owner, t.Add(ttl), deadline
		l = &Lease{st: st, key: key, now: now, Owner: owner, Token: token, Expiry: s.LeaseExpiry, State: h.Reconcile}
		return &Write{State: s}, nil
	})
	if err != nil {
		return nil, nil, "", err
	}
	return l, run, version, nil
}

// commit writes, without a lease, the outcome of a run that read at
// version: in one transaction that reads again what the run read and fails
// with errChanged if any of it changed, and with ErrBusy if a run holds
// the lease. A successor token, when not empty, takes over the chain. It
// returns the events committed and whether the run's token was still the
// subject's.
func commit(ctx context.Context, st Storage, key Key, token, version string, now func() time.Time, load loader,
	nextAt time.Time, failures int, successor string, settled bool, save saveFunc) ([]event.Event, bool, error) {
	var committed []event.Event
	current := false
	err := st.UpdateChain(ctx, key, func(r *Reader, tx Tx) (*Write, error) {
		committed, current = nil, false
		h, snap, err := st.ReadChain(r, key)
		if err != nil {
			return nil, err
		}
		if err := check(h, token, "", now()); err != nil {
			return nil, err
		}
		if _, err := load(r, snap); err != nil {
			return nil, err
		}
		if r.version() != version {
			return nil, errChanged
		}
		if save != nil {
			if committed, err = save(tx, snap); err != nil {
				return nil, err
			}
		}
		current = true
		s := h.Reconcile
		s.NextAt, s.Failures = nextAt, failures
		if successor != "" {
			s.Token = successor
		}
		if settled {
			s.Intent = nil
		}
		if s.LeaseOwner != "" {
			// An expired lease (check refuses a live one) of a run
			// that died.
			s.LeaseOwner, s.LeaseExpiry = "", time.Time{}
		}
		return &Write{State: s, Sequence: h.Sequence, Events: committed}, nil
	})
	if err != nil {
		return committed, false, err
	}
	return committed, current, nil
}

// errGone: the subject's document is gone while a run holds its lease.
// Not ErrStale: the task is retried, as for any failed write.
var errGone = errors.New("the subject's document is gone")

// hold checks through r, in the transaction of a write, that l still
// holds its subject's lease, and returns the subject's document and its
// chain's part as stored now.
func (l *Lease) hold(r *Reader) (Doc, Header, error) {
	h, snap, err := l.st.ReadChain(r, l.key)
	if errors.Is(err, ErrStale) {
		err = errGone
	}
	if err != nil {
		return nil, Header{}, fmt.Errorf("read %s %s/%s: %w", l.key.Kind, l.key.TenantID, l.key.ID, err)
	}
	if h.Reconcile.LeaseOwner != l.Owner || !h.Reconcile.LeaseExpiry.After(l.now()) {
		return nil, Header{}, ErrLeaseLost
	}
	return snap, h, nil
}

// Write runs write in a transaction that first checks that the lease is
// still held (ErrLeaseLost otherwise): a run records what it is about to do
// at the provider through it.
func (l *Lease) Write(ctx context.Context, write func(Tx) error) error {
	return l.st.UpdateChain(ctx, l.key, func(r *Reader, tx Tx) (*Write, error) {
		if _, _, err := l.hold(r); err != nil {
			return nil, err
		}
		return nil, write(tx)
	})
}

// intend records in, made at t, as the chain's intent, in a transaction
// that first checks that the lease is still held: before the call it
// names, so that a lost answer leaves it for the next run to resolve.
func (l *Lease) intend(ctx context.Context, in Intent, t time.Time) error {
	in.At = t.UTC().Truncate(time.Microsecond)
	err := l.st.UpdateChain(ctx, l.key, func(r *Reader, _ Tx) (*Write, error) {
		_, h, err := l.hold(r)
		if err != nil {
			return nil, err
		}
		s := h.Reconcile
		s.Intent = &in
		return &Write{State: s, Sequence: h.Sequence}, nil
	})
	if err != nil {
		return fmt.Errorf("record intent %s: %w", in.Action, err)
	}
	return nil
}

// finish writes a run's outcome (save), its events and the chain's next
// deadline, and releases the lease, in one transaction. It returns the
// events committed and whether the run's token is still the subject's (when
// it is not, a kick started a newer chain and the run must not schedule a
// successor, nor move the newer chain's deadline).
func (l *Lease) finish(ctx context.Context, nextAt time.Time, failures int, token string, settled bool, save saveFunc) ([]event.Event, bool, error) {
	var committed []event.Event
	current := false
	err := l.st.UpdateChain(ctx, l.key, func(r *Reader, tx Tx) (*Write, error) {
		committed, current = nil, false
		snap, h, err := l.hold(r)
		if err != nil {
			return nil, err
		}
		if save != nil {
			if committed, err = save(tx, snap); err != nil {
				return nil, err
			}
		}
		s := h.Reconcile
		current = s.Token == l.Token
		l.released(&s, nextAt, failures, current)
		if settled {
			// The run settled the call, whichever chain runs the
			// subject now.
			s.Intent = nil
		}
		if current && token != "" {
			s.Token = token
		}
		return &Write{State: s, Sequence: h.Sequence, Events: committed}, nil
	})
	if err != nil {
		return committed, false, err
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
