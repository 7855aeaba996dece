package chain_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
)

// prefetching is things that prefetch: it records the kicks its runs
// started reading with, and reads a query of its own through Begin.
type prefetching struct {
	*things
	mu     sync.Mutex
	kicks  []chain.Kick
	loaded []int // the documents each prefetched load found
}

// Load reads what Prefetch's load reads, as a Prefetcher must: a run's
// save compares the two.
func (p *prefetching) Load(r *chain.Reader, snap chain.Doc) (chain.Run, error) {
	if _, err := readAll(r, p.query(fsDoc(snap).Ref.Parent.Parent.ID)); err != nil {
		return nil, err
	}
	return p.things.Load(r, snap)
}

// readAll reads q's documents through r, in its transaction if any, and
// notes their versions, as the store's reads do.
func readAll(r *chain.Reader, q firestore.Query) ([]*firestore.DocumentSnapshot, error) {
	var snaps []*firestore.DocumentSnapshot
	var err error
	if r.InTransaction() {
		snaps, err = fsTx(r.Tx()).Documents(q).GetAll()
	} else {
		snaps, err = q.Documents(r.Context()).GetAll()
	}
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		r.Note(s.Ref.Path + "@" + strconv.FormatInt(s.UpdateTime.UnixNano(), 10))
	}
	return snaps, nil
}

// beginAll starts readAll outside a transaction and returns what waits
// for it; the versions are noted at the wait.
func beginAll(r *chain.Reader, q firestore.Query) func() ([]*firestore.DocumentSnapshot, error) {
	done := make(chan []*firestore.DocumentSnapshot, 1)
	errs := make(chan error, 1)
	go func() {
		snaps, err := q.Documents(r.Context()).GetAll()
		done <- snaps
		errs <- err
	}()
	return func() ([]*firestore.DocumentSnapshot, error) {
		snaps, err := <-done, <-errs
		if err != nil {
			return nil, err
		}
		for _, s := range snaps {
			r.Note(s.Ref.Path + "@" + strconv.FormatInt(s.UpdateTime.UnixNano(), 10))
		}
		return snaps, nil
	}
}

func (p *prefetching) query(tenantID string) firestore.Query {
	return p.fs.Collection("tenants").Doc(tenantID).Collection("things").Query
}

func (p *prefetching) Prefetch(r *chain.Reader, k chain.Kick) func(*chain.Reader, chain.Doc) (chain.Run, error) {
	p.mu.Lock()
	p.kicks = append(p.kicks, k)
	p.mu.Unlock()
	wait := beginAll(r, p.query(k.TenantID))
	return func(r *chain.Reader, snap chain.Doc) (chain.Run, error) {
		snaps, err := wait()
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.loaded = append(p.loaded, len(snaps))
		p.mu.Unlock()
		return p.things.Load(r, snap)
	}
}

// A Prefetcher's first read of each run starts from the kick, the Hint
// its predecessor's outcome gave included; the reads in the lease's and
// the save's transactions go through Load; a run that prefetched saves
// as any other (what Begin read is noted, so a change under it is seen).
func TestRunPrefetchesWithTheHint(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	p := &prefetching{things: e.sub}
	runner, err := chain.NewRunner(e.st, e.rec, e.rec, e.cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	k := e.put(t, "t1", chain.State{})
	e.put(t, "t2", chain.State{})
	e.sub.step = func(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
		if l == nil {
			return needLease()
		}
		return chain.Outcome{Changed: true, Hint: "next-hint"}, nil
	}
	if err := runner.Run(ctx, k, "task-1"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.rec.scheduled); n != 1 || e.rec.scheduled[0].k.Hint != "next-hint" {
		t.Fatalf("scheduled %+v, want one successor with the outcome's hint", e.rec.scheduled)
	}
	next := e.rec.scheduled[0].k
	e.sub.step = func(context.Context, *chain.Lease) (chain.Outcome, error) { return chain.Outcome{Changed: true}, nil }
	if err := runner.Run(ctx, next, "task-2"); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.kicks) != 2 || p.kicks[0].Hint != "" || p.kicks[1].Hint != "next-hint" {
		t.Errorf("prefetched with %+v, want the first kick (no hint) then its successor (the hint)", p.kicks)
	}
	if len(p.loaded) != 2 || p.loaded[0] != 2 || p.loaded[1] != 2 {
		t.Errorf("prefetched loads found %v documents, want 2 each (both things)", p.loaded)
	}
	if got := e.get(t, k).Saved; got != 2 {
		t.Errorf("saved %d times, want 2 (each run)", got)
	}
	if n := len(e.rec.scheduled); n != 2 || e.rec.scheduled[1].k.Hint != "" {
		t.Errorf("scheduled %+v, want a second successor without a hint (its outcome gave none)", e.rec.scheduled)
	}
}
