package chain_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
)

// The toy kind: what a new reconciled kind needs on the loop, from here
// to the end of toyRun.Save. A toy asks its provider for a count of
// replicas. Its intents are the loop's (Plan.Intent).
type toy struct {
	Active    bool        `firestore:"active"`
	Want      int         `firestore:"want"`
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
	u := &toyRun{s: s}
	return u, snap.DataTo(&u.read)
}

type toyRun struct {
	s    *toys
	read toy
}

// Plan compares what is wanted with what the provider reports now, never
// with what a run remembered. That look resolves any pending scale: the
// count shows whether it was done, and a scale is a level.
func (u *toyRun) Plan(context.Context) (chain.Plan, error) {
	if u.s.p.count() == u.read.Want {
		return chain.Plan{Resolved: true}, nil
	}
	return chain.Plan{Act: true, Resolved: true, Intent: &chain.Intent{Action: "scale", Detail: strconv.Itoa(u.read.Want)}}, nil
}

// Act calls the provider; the loop recorded the intent first.
func (u *toyRun) Act(context.Context, *chain.Lease) (chain.Outcome, error) {
	if err := u.s.p.scale(u.read.Want); err != nil {
		return chain.Outcome{Next: chain.Retry}, nil
	}
	return chain.Outcome{}, nil
}

func (u *toyRun) Save(chain.Tx, chain.Doc) ([]event.Event, error) { return nil, nil }

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
	if d := read(); p.count() != 3 || p.calls != 1 || d.Reconcile.Intent == nil || d.Reconcile.Intent.Detail != "3" || d.Reconcile.Failures != 1 {
		t.Fatalf("after the lost answer: provider %d after %d calls, intent %+v, failures %d; want 3 after 1, intent scale 3 kept, 1 failure",
			p.count(), p.calls, d.Reconcile.Intent, d.Reconcile.Failures)
	}
	next("task-2")
	if d := read(); p.calls != 1 || d.Reconcile.Intent != nil || d.Reconcile.Failures != 0 {
		t.Fatalf("after the look: %d calls, intent %+v, failures %d; want the intent settled without a call", p.calls, d.Reconcile.Intent, d.Reconcile.Failures)
	}
	if _, err := sub.Ref(k).Update(ctx, []firestore.Update{{Path: "want", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	next("task-3")
	if d := read(); p.count() != 5 || p.calls != 2 || d.Reconcile.Intent != nil {
		t.Errorf("after want 5: provider %d after %d calls, intent %+v; want 5 after 2, no intent", p.count(), p.calls, d.Reconcile.Intent)
	}
}

// forgetful is a toy kind whose plan ignores the pending intent: it plans
// its call without resolving it.
type forgetful struct{ *toys }

func (s forgetful) Load(r *chain.Reader, snap chain.Doc) (chain.Run, error) {
	run, err := s.toys.Load(r, snap)
	return forgetfulRun{run.(*toyRun)}, err
}

type forgetfulRun struct{ *toyRun }

func (u forgetfulRun) Plan(ctx context.Context) (chain.Plan, error) {
	pl, err := u.toyRun.Plan(ctx)
	pl.Resolved = false
	return pl, err
}

// The loop refuses the call of a kind that plans one while an intent is
// pending and unresolved: the intent stays, the run fails for a retry,
// and the provider is not called.
func TestPendingIntentRefusesCall(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	p := &toyProvider{}
	sub := forgetful{&toys{fs: e.fs, p: p}}
	runner, err := chain.NewRunner(e.st, e.rec, e.rec, e.cfg, sub)
	if err != nil {
		t.Fatal(err)
	}
	k := chain.Kick{Kind: "toys", TenantID: "acme", ID: "t2", Token: "tok"}
	pending := &chain.Intent{Action: "scale", Detail: "3", At: e.clk.Now()}
	if _, err := sub.Ref(k).Set(ctx, toy{Active: true, Want: 5, Reconcile: chain.State{Token: "tok", Intent: pending}}); err != nil {
		t.Fatal(err)
	}
	if err := runner.Run(ctx, k, "task-1"); err != nil {
		t.Fatal(err)
	}
	snap, err := sub.Ref(k).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var d toy
	if err := snap.DataTo(&d); err != nil {
		t.Fatal(err)
	}
	if p.calls != 0 || d.Reconcile.Intent == nil || d.Reconcile.Intent.Detail != "3" || d.Reconcile.Failures != 1 || d.Reconcile.LeaseOwner != "" {
		t.Errorf("after a call planned over a pending intent: %d calls, intent %+v, failures %d, lease %q; want no call, scale 3 kept, 1 failure, no lease",
			p.calls, d.Reconcile.Intent, d.Reconcile.Failures, d.Reconcile.LeaseOwner)
	}
}
