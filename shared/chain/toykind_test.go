package chain_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
)

// The toy kind: what a new reconciled kind needs on the loop, from here
// to the end of toyRun.Save. A toy asks its provider for a count of
// replicas.
type toy struct {
	Active bool `firestore:"active"`
	Want   int  `firestore:"want"`
	// Intent is the count last asked of the provider whose answer the
	// run did not see; 0 for none.
	Intent    int         `firestore:"intent"`
	Reconcile chain.State `firestore:"reconcile"`
}

type toys struct {
	fs *firestore.Client
	p  *toyProvider
}

func (*toys) Kind() string { return "toys" }

func (s *toys) Ref(k chain.Kick) *firestore.DocumentRef {
	return s.fs.Collection("tenants").Doc(k.TenantID).Collection("toys").Doc(k.ID)
}

func (s *toys) Load(_ *chain.Reader, snap chain.Doc) (chain.Run, error) {
	u := &toyRun{s: s, ref: fsDoc(snap).Ref}
	return u, snap.DataTo(&u.read)
}

type toyRun struct {
	s      *toys
	ref    *firestore.DocumentRef
	read   toy
	intent int // as the run leaves it
}

// Plan compares what is wanted with what the provider reports now, never
// with what a run remembered: an intent whose answer was lost is settled
// by that look, whatever became of the call.
func (u *toyRun) Plan(context.Context) (chain.Plan, error) {
	if u.s.p.count() == u.read.Want {
		return chain.Plan{Outcome: chain.Outcome{Changed: u.read.Intent != 0}}, nil
	}
	return chain.Plan{Act: true}, nil
}

// Act records its intent under the lease, then calls the provider.
func (u *toyRun) Act(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
	u.intent = u.read.Want
	if err := l.Write(ctx, func(tx chain.Tx) error {
		return fsTx(tx).Update(u.ref, []firestore.Update{{Path: "intent", Value: u.intent}})
	}); err != nil {
		return chain.Outcome{}, err
	}
	if err := u.s.p.scale(u.intent); err != nil {
		return chain.Outcome{Next: chain.Retry, Changed: true}, nil
	}
	u.intent = 0
	return chain.Outcome{Changed: true}, nil
}

func (u *toyRun) Save(tx chain.Tx, now chain.Doc) ([]event.Event, error) {
	return nil, fsTx(tx).Update(fsDoc(now).Ref, []firestore.Update{{Path: "intent", Value: u.intent}})
}

// toyProvider is the toys' provider, in memory; lose makes its next
// scale happen and answer an error (a lost answer).
type toyProvider struct {
	mu    sync.Mutex
	n     int
	calls int
	lose  bool
}

var errLostAnswer = errors.New("the provider's answer was lost")

func (p *toyProvider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *toyProvider) scale(n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	p.n = n
	if p.lose {
		p.lose = false
		return errLostAnswer
	}
	return nil
}

// A toy converges on the loop; a scale whose answer was lost is retried
// as a look at the provider, which shows it done, not as a second call.
func TestToyKind(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	p := &toyProvider{lose: true}
	sub := &toys{fs: e.fs, p: p}
	runner, err := chain.NewRunner(e.st, e.rec, e.rec, e.cfg, sub)
	if err != nil {
		t.Fatal(err)
	}
	k := chain.Kick{Kind: "toys", TenantID: "acme", ID: "t1", Token: "tok"}
	if _, err := sub.Ref(k).Set(ctx, toy{Active: true, Want: 3, Reconcile: chain.State{Token: "tok"}}); err != nil {
		t.Fatal(err)
	}
	read := func() toy {
		t.Helper()
		snap, err := sub.Ref(k).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var d toy
		if err := snap.DataTo(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// next runs the chain's last scheduled task.
	next := func(name string) {
		t.Helper()
		tasks := e.rec.tasks()
		if len(tasks) == 0 {
			t.Fatal("no run scheduled")
		}
		if err := runner.Run(ctx, tasks[len(tasks)-1].k, name); err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
	}

	if err := runner.Run(ctx, k, "task-1"); err != nil {
		t.Fatal(err)
	}
	if d := read(); p.count() != 3 || p.calls != 1 || d.Intent != 3 || d.Reconcile.Failures != 1 {
		t.Fatalf("after the lost answer: provider %d after %d calls, intent %d, failures %d; want 3 after 1, intent 3 kept, 1 failure",
			p.count(), p.calls, d.Intent, d.Reconcile.Failures)
	}
	next("task-2")
	if d := read(); p.calls != 1 || d.Intent != 0 || d.Reconcile.Failures != 0 {
		t.Fatalf("after the look: %d calls, intent %d, failures %d; want the intent settled without a call", p.calls, d.Intent, d.Reconcile.Failures)
	}
	if _, err := sub.Ref(k).Update(ctx, []firestore.Update{{Path: "want", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	next("task-3")
	if d := read(); p.count() != 5 || p.calls != 2 || d.Intent != 0 {
		t.Errorf("after want 5: provider %d after %d calls, intent %d; want 5 after 2, no intent", p.count(), p.calls, d.Intent)
	}
}
