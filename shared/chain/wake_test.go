package chain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
)

func TestWake(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name  string
		state chain.State
		kick  bool
	}{
		{"a chain whose next run is later: restarted now", chain.State{Token: "tok", NextAt: now.Add(time.Minute)}, true},
		{"a steady chain: restarted now", chain.State{Token: "stok", NextAt: now.Add(time.Hour)}, true},
		{"a chain due, its run not begun: it reads the change", chain.State{Token: "tok", NextAt: now}, false},
		{"a chain overdue: the watchdog's", chain.State{Token: "tok", NextAt: now.Add(-time.Minute)}, false},
		{"a run under the lease, begun before the change: restarted", chain.State{Token: "tok", NextAt: now.Add(-time.Second), LeaseOwner: "o", LeaseExpiry: now.Add(time.Minute)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.state
			k := s.Wake("things", "acme", "t2", now)
			if (k != nil) != c.kick {
				t.Fatalf("Wake = %+v, want a kick %v", k, c.kick)
			}
			if k == nil {
				if s != c.state {
					t.Errorf("Wake changed the chain: %+v, was %+v", s, c.state)
				}
				return
			}
			if k.Token == c.state.Token || s.Token != k.Token || !s.NextAt.Equal(now) || k.Steady() || k.ID != "t2" {
				t.Errorf("Wake = %+v, chain %+v; want a new converging token, due now", k, s)
			}
			if s.LeaseOwner != c.state.LeaseOwner {
				t.Errorf("Wake changed the lease: %+v", s)
			}
		})
	}
}

// wakers are things whose saves wake thing t2 in their transaction, as a
// cluster's run wakes its substrate.
type wakers struct {
	things
	now func() time.Time
}

func (s *wakers) Load(_ *chain.Reader, snap chain.Doc) (chain.Run, error) {
	var t thing
	if err := snap.DataTo(&t); err != nil {
		return nil, err
	}
	return &wakerRun{thingRun: thingRun{s: &s.things, read: t}, now: s.now}, nil
}

type wakerRun struct {
	thingRun
	now   func() time.Time
	woken []chain.Kick
}

var _ chain.Waking = (*wakerRun)(nil)

func (r *wakerRun) Save(tx chain.Tx, now chain.Doc) ([]event.Event, error) {
	r.woken = nil
	other := r.s.Ref(chain.Kick{TenantID: "acme", ID: "t2"})
	snap, err := fsTx(tx).Get(other)
	if err != nil {
		return nil, err
	}
	var o thing
	if err := snap.DataTo(&o); err != nil {
		return nil, err
	}
	if k := o.Reconcile.Wake("things", "acme", "t2", r.now()); k != nil {
		r.woken = append(r.woken, *k)
		if err := fsTx(tx).Update(other, []firestore.Update{{Path: chain.Field, Value: o.Reconcile}}); err != nil {
			return nil, err
		}
	}
	return r.thingRun.Save(tx, now)
}

func (r *wakerRun) Woken() []chain.Kick { return r.woken }

// A save that wakes another chain kicks it once it committed; woken
// again before it ran, it is not kicked again; its old chain's task ends
// stale, and the kick's run is its only one.
func TestRunWakes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	w := &wakers{things: things{fs: e.fs, step: func(context.Context, *chain.Lease) (chain.Outcome, error) {
		return chain.Outcome{Changed: true, Next: chain.Converging}, nil
	}}, now: e.clk.Now}
	rec := &recorder{}
	runner, err := chain.NewRunner(e.st, rec, rec, e.cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	old := e.put(t, "t2", chain.State{Token: "old", NextAt: e.clk.Now().Add(time.Hour)})
	k := chain.Kick{Kind: "things", TenantID: "acme", ID: "t1", Token: "tok"}
	if _, err := w.Ref(k).Set(ctx, thing{Active: true, Reconcile: chain.State{Token: "tok"}}); err != nil {
		t.Fatal(err)
	}

	if err := runner.Run(ctx, k, "task-1"); err != nil {
		t.Fatal(err)
	}
	kicks := func() []chain.Kick {
		var out []chain.Kick
		for _, s := range rec.scheduled {
			if s.k.ID == "t2" {
				out = append(out, s.k)
			}
		}
		return out
	}
	got := kicks()
	woken := e.get(t, old).Reconcile
	if len(got) != 1 || got[0].Token != woken.Token || got[0].Token == "old" {
		t.Fatalf("kicks of t2 %+v, stored chain %+v; want one, of its new chain", got, woken)
	}

	// Woken again before its run: no second kick.
	if err := runner.Run(ctx, k, "task-2"); err != nil {
		t.Fatal(err)
	}
	if again := kicks(); len(again) != 1 || e.get(t, old).Reconcile.Token != woken.Token {
		t.Errorf("after a second wake: kicks %+v, chain %+v; want the first kick alone", again, e.get(t, old).Reconcile)
	}

	// The old chain's task ends stale; the kick runs t2 once.
	e.sub.step = func(context.Context, *chain.Lease) (chain.Outcome, error) { return chain.Outcome{Changed: true}, nil }
	if err := e.runner.Run(ctx, old, "task-old"); err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Run(ctx, got[0], ""); err != nil {
		t.Fatal(err)
	}
	if n := e.get(t, old).Saved; n != 1 {
		t.Errorf("t2 saved %d times, want once: by its kick's run alone", n)
	}
	if len(e.rec.scheduled) != 1 {
		t.Errorf("t2's successors %+v, want one", e.rec.scheduled)
	}

	// Once it ran, a change wakes it again.
	if err := runner.Run(ctx, k, "task-3"); err != nil {
		t.Fatal(err)
	}
	if after := kicks(); len(after) != 2 {
		t.Errorf("kicks of t2 after its run and a change %+v, want a second one", after)
	}
}

// A save that fails kicks nothing.
func TestRunWakesOnlyOnCommit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	w := &wakers{things: things{fs: e.fs, step: func(context.Context, *chain.Lease) (chain.Outcome, error) {
		return chain.Outcome{Changed: true}, nil
	}}, now: e.clk.Now}
	rec := &recorder{}
	runner, err := chain.NewRunner(e.st, rec, rec, e.cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	// No t2: the save fails reading it.
	k := chain.Kick{Kind: "things", TenantID: "acme", ID: "t1", Token: "tok"}
	if _, err := w.Ref(k).Set(ctx, thing{Active: true, Reconcile: chain.State{Token: "tok"}}); err != nil {
		t.Fatal(err)
	}
	if err := runner.Run(ctx, k, "task-1"); err == nil || errors.Is(err, chain.ErrStale) {
		t.Fatalf("Run = %v, want the save's failure", err)
	}
	if len(rec.scheduled) != 0 {
		t.Errorf("scheduled %+v after a failed save, want nothing", rec.scheduled)
	}
}
