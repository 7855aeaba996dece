package chain_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
)

func newFirestore(t *testing.T) *firestore.Client {
	t.Helper()
	fs := fsemu.ForTest(t, "chain")
	return fs
}

// The store's transactions and documents are Firestore's: the test
// kinds write through them as the store's functions do.
func fsTx(tx chain.Tx) *firestore.Transaction       { return tx.(*firestore.Transaction) }
func fsDoc(d chain.Doc) *firestore.DocumentSnapshot { return d.(*firestore.DocumentSnapshot) }

// outboxRef is the outbox document of ev.
func outboxRef(fs *firestore.Client, ev event.Event) *firestore.DocumentRef {
	return fs.Collection("tenants").Doc(ev.TenantID).Collection(outbox.Collection).Doc(ev.ID)
}

// newStore is the store that keeps the chains over fs.
func newStore(t *testing.T, fs *firestore.Client) *store.Store {
	t.Helper()
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// thing is the subject of these tests: a document with a counter its
// runs save.
type thing struct {
	Active    bool        `firestore:"active"`
	Saved     int         `firestore:"saved"`
	Reconcile chain.State `firestore:"reconcile"`
}

// things is a chain.Subject whose runs do what step says.
type things struct {
	fs   *firestore.Client
	step func(ctx context.Context, l *chain.Lease) (chain.Outcome, error)
}

func (s *things) Kind() string { return "things" }

func (s *things) Ref(k chain.Kick) *firestore.DocumentRef {
	return s.fs.Collection("tenants").Doc(k.TenantID).Collection("things").Doc(k.ID)
}

func (s *things) Load(_ *chain.Reader, snap chain.Doc) (chain.Run, error) {
	var t thing
	if err := snap.DataTo(&t); err != nil {
		return nil, err
	}
	return &thingRun{s: s, read: t}, nil
}

type thingRun struct {
	s    *things
	read thing
}

// errNeedsLease is what a step without the lease answers when it would
// act (needLease): the run's plan is to act.
var errNeedsLease = errors.New("the step needs the lease")

func needLease() (chain.Outcome, error) { return chain.Outcome{}, errNeedsLease }

// Plan is step without the lease.
func (r *thingRun) Plan(ctx context.Context) (chain.Plan, error) {
	out, err := r.s.step(ctx, nil)
	if errors.Is(err, errNeedsLease) {
		return chain.Plan{Act: true}, nil
	}
	return chain.Plan{Outcome: out}, err
}

// Act is step under the lease.
func (r *thingRun) Act(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
	return r.s.step(ctx, l)
}

func (r *thingRun) Save(tx chain.Tx, now chain.Doc) ([]event.Event, error) {
	e := event.Event{ID: fmt.Sprintf("evt-%s-%d", fsDoc(now).Ref.ID, r.read.Saved+1), Type: "things.saved", TenantID: "acme", ClusterID: fsDoc(now).Ref.ID, Time: time.Now()}
	return []event.Event{e}, fsTx(tx).Update(fsDoc(now).Ref, []firestore.Update{{Path: "saved", Value: r.read.Saved + 1}})
}

type scheduled struct {
	k     chain.Kick
	at    time.Time
	after string
}

type recorder struct {
	mu        sync.Mutex
	scheduled []scheduled
	delivered []event.Event
	// fail fails the next fail schedulings, which make no task; lose
	// makes the next lose schedulings make their task and fail (a lost
	// answer).
	fail, lose int
}

var errQueue = errors.New("the queue is unavailable")

func (r *recorder) Schedule(_ context.Context, k chain.Kick, at time.Time, after string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errQueue
	}
	r.scheduled = append(r.scheduled, scheduled{k, at, after})
	if r.lose > 0 {
		r.lose--
		return errQueue
	}
	return nil
}

// tasks are the tasks the schedulings made, as Cloud Tasks keeps them:
// one per name (the chain token and the task scheduling it).
func (r *recorder) tasks() []scheduled {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []scheduled
	seen := map[string]bool{}
	for _, s := range r.scheduled {
		name := s.k.ID + "/" + s.k.Token + "/" + s.after
		if !seen[name] {
			seen[name] = true
			out = append(out, s)
		}
	}
	return out
}

func (r *recorder) Deliver(_ context.Context, events []event.Event) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delivered = append(r.delivered, events...)
	return len(events), nil
}

type env struct {
	fs     *firestore.Client
	st     *store.Store
	clk    *testingclock.FakeClock
	sub    *things
	rec    *recorder
	runner *chain.Runner
	cfg    chain.Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, newFirestore(t))
}

// newEnvOn is newEnv over the Firestore client fs.
func newEnvOn(t *testing.T, fs *firestore.Client) *env {
	t.Helper()
	e := &env{fs: fs, st: newStore(t, fs), clk: testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), rec: &recorder{}}
	e.sub = &things{fs: e.fs, step: func(context.Context, *chain.Lease) (chain.Outcome, error) { return chain.Outcome{}, nil }}
	e.cfg = chain.Config{ConvergingInterval: 30 * time.Second, SteadyInterval: 5 * time.Minute, LeaseTTL: 30 * time.Second, Clock: e.clk}
	var err error
	if e.runner, err = chain.NewRunner(e.st, e.rec, e.rec, e.cfg, e.sub); err != nil {
		t.Fatal(err)
	}
	return e
}

// faultyEnv is newEnv on a Firestore emulator whose faults the test
// injects.
func faultyEnv(t *testing.T) (*fsemu.Server, *env) {
	t.Helper()
	srv, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := firestore.NewClient(context.Background(), "chain", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return srv, newEnvOn(t, fs)
}

// put stores a thing with chain token "tok" and returns its kick.
func (e *env) put(t *testing.T, id string, s chain.State) chain.Kick {
	t.Helper()
	if s.Token == "" {
		s.Token = "tok"
	}
	k := chain.Kick{Kind: "things", TenantID: "acme", ID: id, Token: s.Token}
	if _, err := e.sub.Ref(k).Set(context.Background(), thing{Active: true, Reconcile: s}); err != nil {
		t.Fatal(err)
	}
	return k
}

func (e *env) get(t *testing.T, k chain.Kick) thing {
	t.Helper()
	snap, err := e.sub.Ref(k).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var th thing
	if err := snap.DataTo(&th); err != nil {
		t.Fatal(err)
	}
	return th
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		state chain.State // of the stored thing; token "tok" unless set
		kick  string      // the kick's token; "tok" unless set
		out   chain.Outcome
		err   error
		// what follows
		wantErr       error
		wantScheduled time.Duration // after now; -1: nothing scheduled
		wantSaved     int
		wantFailures  int
		wantNextAt    time.Duration // the stored deadline after now
		wantDelivered int
	}{
		{name: "steady run that changed nothing writes its deadline a heartbeat ahead", out: chain.Outcome{}, wantScheduled: 5 * time.Minute, wantNextAt: 5*time.Minute + time.Hour},
		{name: "converging run saves", out: chain.Outcome{Changed: true, Next: chain.Converging}, wantScheduled: 30 * time.Second, wantSaved: 1, wantNextAt: time.Minute, wantDelivered: 1},
		{name: "converging run polling an operation comes sooner", out: chain.Outcome{Changed: true, Next: chain.Converging, After: 2 * time.Second}, wantScheduled: 2 * time.Second, wantSaved: 1, wantNextAt: 32 * time.Second, wantDelivered: 1},
		{name: "a poll later than the converging interval comes at it", out: chain.Outcome{Changed: true, Next: chain.Converging, After: time.Minute}, wantScheduled: 30 * time.Second, wantSaved: 1, wantNextAt: time.Minute, wantDelivered: 1},
		{name: "a steady run does not poll", out: chain.Outcome{After: 2 * time.Second}, wantScheduled: 5 * time.Minute, wantNextAt: 5*time.Minute + time.Hour},
		{name: "stale token ends quietly", kick: "old", wantScheduled: -1},
		{name: "busy lease", state: chain.State{LeaseOwner: "other", LeaseExpiry: time.Date(2026, 1, 2, 3, 4, 20, 0, time.UTC)}, wantErr: chain.ErrBusy, wantScheduled: -1},
		{name: "expired lease is taken", state: chain.State{LeaseOwner: "dead", LeaseExpiry: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)}, out: chain.Outcome{Changed: true}, wantScheduled: 5 * time.Minute, wantSaved: 1, wantNextAt: 5*time.Minute + time.Hour, wantDelivered: 1},
		{name: "failed step backs off", state: chain.State{Failures: 2}, err: errors.New("provider down"), wantScheduled: 2 * time.Minute, wantFailures: 3, wantNextAt: 2*time.Minute + 30*time.Second},
		{name: "retry outcome saves and backs off", state: chain.State{Failures: 1}, out: chain.Outcome{Changed: true, Next: chain.Retry}, wantScheduled: time.Minute, wantSaved: 1, wantFailures: 2, wantNextAt: time.Minute + 30*time.Second, wantDelivered: 1},
		{name: "subject done ends the chain", out: chain.Outcome{Changed: true, Next: chain.Done}, wantScheduled: -1, wantSaved: 1, wantNextAt: 5*time.Minute + time.Hour, wantDelivered: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.sub.step = func(context.Context, *chain.Lease) (chain.Outcome, error) { return tt.out, tt.err }
			k := e.put(t, "t1", tt.state)
			if tt.kick != "" {
				k.Token = tt.kick
			}
			now := e.clk.Now()
			err := e.runner.Run(ctx, k, "task-1")
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil && tt.err == nil) {
				t.Fatalf("Run = %v, want %v", err, tt.wantErr)
			}
			switch {
			case tt.wantScheduled < 0 && len(e.rec.scheduled) != 0:
				t.Errorf("scheduled %+v, want nothing", e.rec.scheduled)
			case tt.wantScheduled >= 0 && (len(e.rec.scheduled) != 1 || !e.rec.scheduled[0].at.Equal(now.Add(tt.wantScheduled)) || e.rec.scheduled[0].after != "task-1"):
				t.Errorf("scheduled %+v, want one run at now+%v after task-1", e.rec.scheduled, tt.wantScheduled)
			}
			got := e.get(t, k)
			if got.Saved != tt.wantSaved {
				t.Errorf("saved %d times, want %d", got.Saved, tt.wantSaved)
			}
			if len(e.rec.delivered) != tt.wantDelivered {
				t.Errorf("delivered %d events, want %d", len(e.rec.delivered), tt.wantDelivered)
			}
			if tt.wantErr != nil || tt.kick != "" {
				return
			}
			s := got.Reconcile
			if s.LeaseOwner != "" || s.Failures != tt.wantFailures || !s.NextAt.Equal(now.Add(tt.wantNextAt)) {
				t.Errorf("chain after the run = %+v, want no lease, %d failures, next at now+%v", s, tt.wantFailures, tt.wantNextAt)
			}
		})
	}
}

// A run that outlives its lease writes nothing and asks for its task to be
// retried; the run that took the lease over is not disturbed.
func TestRunLeaseLost(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	k := e.put(t, "t1", chain.State{})
	other, err := chain.NewRunner(e.st, &recorder{}, &recorder{}, e.cfg, e.sub)
	if err != nil {
		t.Fatal(err)
	}
	e.sub.step = func(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
		if l == nil {
			return needLease()
		}
		// The run stalls past its lease; another run takes the thing.
		e.sub.step = func(_ context.Context, l *chain.Lease) (chain.Outcome, error) {
			if l == nil {
				return needLease()
			}
			return chain.Outcome{Next: chain.Converging}, nil
		}
		e.clk.Step(e.cfg.LeaseTTL + time.Second)
		if err := other.Run(ctx, k, "task-2"); err != nil {
			t.Errorf("the other run = %v", err)
		}
		// Its intent, written under the lost lease, is refused.
		err := l.Write(ctx, func(tx chain.Tx) error { return nil })
		if !errors.Is(err, chain.ErrLeaseLost) {
			t.Errorf("Write under a lost lease = %v, want ErrLeaseLost", err)
		}
		return chain.Outcome{Changed: true}, nil
	}
	if err := e.runner.Run(ctx, k, "task-1"); !errors.Is(err, chain.ErrLeaseLost) {
		t.Fatalf("Run = %v, want ErrLeaseLost", err)
	}
	if got := e.get(t, k); got.Saved != 0 {
		t.Errorf("saved %d times, want none from the run that lost its lease", got.Saved)
	}
	if len(e.rec.scheduled) != 0 {
		t.Errorf("the run that lost its lease scheduled %+v", e.rec.scheduled)
	}
}

// A kick during a run starts a newer chain. A run acting under the lease
// saves its outcome but schedules no successor, and leaves the newer
// chain's deadline alone; a run without the lease saves nothing, since the
// newer chain runs the subject from what it is now.
func TestRunKickedMidRun(t *testing.T) {
	for _, acting := range []bool{true, false} {
		t.Run(map[bool]string{true: "acting", false: "not acting"}[acting], func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			k := e.put(t, "t1", chain.State{})
			var kick chain.Kick
			e.sub.step = func(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
				if acting && l == nil {
					return needLease()
				}
				th := e.get(t, k)
				kick = th.Reconcile.Restart("things", "acme", "t1", e.clk.Now())
				_, err := e.sub.Ref(k).Update(ctx, []firestore.Update{{Path: chain.Field, Value: th.Reconcile}})
				return chain.Outcome{Changed: true}, err
			}
			if err := e.runner.Run(ctx, k, "task-1"); err != nil {
				t.Fatalf("Run = %v", err)
			}
			got := e.get(t, k)
			wantSaved := map[bool]int{true: 1, false: 0}[acting]
			if got.Saved != wantSaved || len(e.rec.scheduled) != 0 {
				t.Errorf("saved %d, scheduled %+v; want saved %d, nothing scheduled", got.Saved, e.rec.scheduled, wantSaved)
			}
			if got.Reconcile.Token != kick.Token || !got.Reconcile.NextAt.Equal(e.clk.Now()) || got.Reconcile.LeaseOwner != "" {
				t.Errorf("chain = %+v, want the kick's token and deadline, no lease", got.Reconcile)
			}
		})
	}
}

// A change's chain whose run finds nothing to converge hands the subject
// to a steady chain: a new token, written with the run's outcome, whose
// tasks go to the steady queue. A second delivery of the task knows the
// hand-over for its own and schedules the steady chain's run again under
// the same name, which Cloud Tasks keeps once, so only one chain lives on.
func TestRunHandsOverToASteadyChain(t *testing.T) {
	ctx := context.Background()
	for _, changed := range []bool{false, true} {
		t.Run(fmt.Sprintf("changed=%v", changed), func(t *testing.T) {
			e := newEnv(t)
			e.sub.step = func(context.Context, *chain.Lease) (chain.Outcome, error) {
				return chain.Outcome{Changed: changed}, nil
			}
			k := e.put(t, "t1", chain.State{})
			if k.Steady() {
				t.Fatalf("a kick's chain %q is steady", k.Token)
			}
			for _, task := range []string{"task-1", "task-1"} { // delivered twice
				if err := e.runner.Run(ctx, k, task); err != nil {
					t.Fatal(err)
				}
			}
			if got := e.rec.tasks(); len(got) != 1 {
				t.Fatalf("tasks %+v, want one successor", got)
			}
			next := e.rec.scheduled[0].k
			got := e.get(t, k)
			if !next.Steady() || next.Token != got.Reconcile.Token {
				t.Errorf("successor's token %q (steady %v), stored %q: want the stored one, steady", next.Token, next.Steady(), got.Reconcile.Token)
			}
			if want := map[bool]int{true: 1, false: 0}[changed]; got.Saved != want {
				t.Errorf("saved %d, want %d", got.Saved, want)
			}
			// The steady chain stays steady while it converges again.
			e.sub.step = func(context.Context, *chain.Lease) (chain.Outcome, error) {
				return chain.Outcome{Changed: true, Next: chain.Converging}, nil
			}
			if err := e.runner.Run(ctx, next, "task-2"); err != nil {
				t.Fatal(err)
			}
			if last := e.rec.scheduled[len(e.rec.scheduled)-1].k; last.Token != next.Token {
				t.Errorf("a converging run of the steady chain scheduled token %q, want %q", last.Token, next.Token)
			}
		})
	}
}

// A steady run that changed nothing writes nothing, and takes no lease:
// the thing's document is as it was.
func TestRunNoopWritesNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	k := e.put(t, "t1", chain.State{NextAt: e.clk.Now().Add(time.Hour)})
	// The kick's chain hands the thing to a steady chain (written once).
	if err := e.runner.Run(ctx, k, "task-kick"); err != nil {
		t.Fatal(err)
	}
	k = e.rec.scheduled[0].k
	e.rec.scheduled = nil
	before, err := e.sub.Ref(k).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := e.runner.Run(ctx, k, fmt.Sprintf("task-%d", i)); err != nil {
			t.Fatal(err)
		}
		e.clk.Step(5 * time.Minute)
	}
	after, err := e.sub.Ref(k).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdateTime.Equal(before.UpdateTime) {
		t.Errorf("the thing was written by runs that found nothing to do: updated %v, was %v", after.UpdateTime, before.UpdateTime)
	}
	if len(e.rec.scheduled) != 3 {
		t.Errorf("scheduled %d runs, want 3 (each run its successor)", len(e.rec.scheduled))
	}
	// Once its watchdog deadline would pass before the next run, a run
	// writes the deadline a heartbeat ahead.
	e.clk.Step(time.Hour)
	if err := e.runner.Run(ctx, k, "task-late"); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, k).Reconcile.NextAt; !got.After(e.clk.Now().Add(time.Hour)) {
		t.Errorf("deadline after a heartbeat = %v, want more than an hour past %v", got, e.clk.Now())
	}
}

// A run that acts holds the lease while it acts, and gives it up after.
func TestRunActsUnderTheLease(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	k := e.put(t, "t1", chain.State{})
	calls := 0
	e.sub.step = func(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
		calls++
		if l == nil {
			return needLease()
		}
		if got := e.get(t, k).Reconcile; got.LeaseOwner != l.Owner {
			t.Errorf("lease while acting = %q, want the run's %q", got.LeaseOwner, l.Owner)
		}
		return chain.Outcome{Changed: true, Next: chain.Converging}, nil
	}
	if err := e.runner.Run(ctx, k, "task-1"); err != nil {
		t.Fatal(err)
	}
	got := e.get(t, k)
	if calls != 2 || got.Saved != 1 || got.Reconcile.LeaseOwner != "" {
		t.Errorf("steps %d, saved %d, lease %q; want a step without then with the lease, saved once, no lease after", calls, got.Saved, got.Reconcile.LeaseOwner)
	}
}

// A run whose subject changed between its plan and its lease acts on the
// subject as the lease read it: that run plans again, then acts.
func TestRunReplansWhatChangedBeforeTheLease(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	k := e.put(t, "t1", chain.State{})
	var calls []string
	e.sub.step = func(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
		if l != nil {
			calls = append(calls, "act")
			return chain.Outcome{Changed: true}, nil
		}
		calls = append(calls, "plan")
		if len(calls) == 1 {
			// Someone writes the thing after the run planned on it.
			if _, err := e.sub.Ref(k).Update(ctx, []firestore.Update{{Path: "saved", Value: 10}}); err != nil {
				t.Fatal(err)
			}
		}
		return needLease()
	}
	if err := e.runner.Run(ctx, k, "task-1"); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, k).Saved; fmt.Sprint(calls) != "[plan plan act]" || got != 11 {
		t.Errorf("calls %v, saved %d; want plan, plan again under the lease, act, saving over the change (11)", calls, got)
	}
}

// A run that saves without the lease fails if what it read changed, and
// runs again from a fresh read.
func TestRunSavesOnlyWhatItRead(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	k := e.put(t, "t1", chain.State{})
	steps := 0
	e.sub.step = func(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
		steps++
		if steps == 1 {
			// Someone writes the thing after the run read it.
			if _, err := e.sub.Ref(k).Update(ctx, []firestore.Update{{Path: "saved", Value: 10}}); err != nil {
				t.Fatal(err)
			}
		}
		return chain.Outcome{Changed: true}, nil
	}
	if err := e.runner.Run(ctx, k, "task-1"); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, k).Saved; steps != 2 || got != 11 {
		t.Errorf("steps %d, saved %d; want the first run refused, the second saving over the change (11)", steps, got)
	}
}

type fakeKicker struct {
	mu    sync.Mutex
	kicks []chain.Kick
	err   error
}

func (k *fakeKicker) Kick(_ context.Context, kick chain.Kick) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	k.kicks = append(k.kicks, kick)
	return nil
}

type fakeDrainer struct {
	n   int
	age time.Duration
}

func (d *fakeDrainer) Drain(_ context.Context, olderThan time.Duration, _ int) (int, error) {
	d.age = olderThan
	return d.n, nil
}

func TestWatchdog(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	now := e.clk.Now()
	put := func(id string, active bool, nextAt time.Time) {
		t.Helper()
		ref := e.fs.Collection("tenants").Doc("acme").Collection("things").Doc(id)
		if _, err := ref.Set(ctx, thing{Active: active, Reconcile: chain.State{Token: "old-" + id, NextAt: nextAt}}); err != nil {
			t.Fatal(err)
		}
	}
	put("dead", true, now.Add(-time.Hour))
	put("late", true, now.Add(-30*time.Second)) // late, within the grace
	put("gone", false, now.Add(-time.Hour))
	k := &fakeKicker{}
	d := &fakeDrainer{n: 3}
	w := &chain.Watchdog{Store: e.st, Kinds: []string{"things"}, Kicker: k, Events: d, Grace: time.Minute, DrainAge: 2 * time.Minute, Clock: e.clk}

	res, err := w.Tick(ctx)
	if err != nil {
		t.Fatalf("Tick: %v", err)
	}
	if res != (chain.Pass{Restarted: 1, Drained: 3}) || d.age != 2*time.Minute {
		t.Errorf("Tick = %+v, drained older than %v; want 1 restarted, 3 drained, older than 2m", res, d.age)
	}
	if len(k.kicks) != 1 || k.kicks[0] != (chain.Kick{Kind: "things", TenantID: "acme", ID: "dead", Token: k.kicks[0].Token}) {
		t.Fatalf("kicks = %+v, want one of acme's dead", k.kicks)
	}
	if got := e.get(t, k.kicks[0]).Reconcile.Token; got != k.kicks[0].Token || got == "old-dead" {
		t.Errorf("stored token = %q, kicked %q; want a new token, the one kicked", got, k.kicks[0].Token)
	}

	// The restarted chain is no longer overdue: a second pass leaves it.
	if res, err := w.Tick(ctx); err != nil || res.Restarted != 0 {
		t.Errorf("second Tick = %+v, %v; want nothing restarted", res, err)
	}

	// A failed kick is reported, and the chain is restarted by a later
	// pass once it is overdue again.
	put("dead2", true, now.Add(-time.Hour))
	k.err = errors.New("queue unavailable")
	if res, err := w.Tick(ctx); err == nil || res.Restarted != 0 {
		t.Errorf("Tick with failing kicks = %+v, %v; want an error, nothing restarted", res, err)
	}
	k.err = nil
	k.kicks = nil
	e.clk.Step(2 * time.Minute)
	res, err = w.Tick(ctx)
	kicked := map[string]bool{}
	for _, kk := range k.kicks {
		kicked[kk.ID] = true
	}
	if err != nil || !kicked["dead2"] || kicked["gone"] || res.Restarted != len(k.kicks) {
		t.Errorf("Tick after the queue recovered = %+v, %v, kicked %v; want dead2 restarted, never gone", res, err, kicked)
	}
}

// RestartAll restarts every active chain, however many, and none of a
// subject that is gone.
func TestWatchdogRestartAll(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for i := range 150 {
		ref := e.fs.Collection("tenants").Doc("acme").Collection("things").Doc(fmt.Sprintf("t%d", i))
		if _, err := ref.Set(ctx, thing{Active: i%50 != 0, Reconcile: chain.State{Token: "old", NextAt: e.clk.Now().Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	k := &fakeKicker{}
	w := &chain.Watchdog{Store: e.st, Kinds: []string{"things"}, Kicker: k, Events: &fakeDrainer{}, Clock: e.clk}
	res, err := w.RestartAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarted != 147 || len(k.kicks) != 147 {
		t.Errorf("restarted %d, kicked %d, want the 147 active chains", res.Restarted, len(k.kicks))
	}
	for _, kk := range k.kicks {
		if kk.Token == "old" {
			t.Errorf("kick of %s carries the old token", kk.ID)
		}
	}
}

// A subject stored under encoded IDs (its path is not its IDs) is kicked
// with the IDs its document holds.
func TestWatchdogKicksTheDocumentsIDs(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ref := e.fs.Collection("tenants").Doc("~X194X18").Collection("things").Doc("~Li4")
	doc := map[string]any{"tenantId": "__x__", "id": "..", "active": true,
		"reconcile": chain.State{Token: "old", NextAt: e.clk.Now().Add(-time.Hour)}}
	if _, err := ref.Set(ctx, doc); err != nil {
		t.Fatal(err)
	}
	k := &fakeKicker{}
	w := &chain.Watchdog{Store: e.st, Kinds: []string{"things"}, Kicker: k, Events: &fakeDrainer{}, Grace: time.Minute, Clock: e.clk}
	if _, err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if len(k.kicks) != 1 || k.kicks[0].TenantID != "__x__" || k.kicks[0].ID != ".." {
		t.Errorf("kicks = %+v, want one of tenant __x__, subject ..", k.kicks)
	}
}

// TestRunNumbersEvents: the events a run saves are numbered after the
// subject's sequence, in the transaction that writes them, run after run,
// whether the run saves without a lease or under one.
func TestRunNumbersEvents(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var runs int
	e.sub.step = func(_ context.Context, l *chain.Lease) (chain.Outcome, error) {
		if runs >= 3 && l == nil {
			return needLease()
		}
		return chain.Outcome{Changed: true}, nil
	}
	k := e.put(t, "t1", chain.State{})
	for i := range 5 {
		runs = i
		k.Token = e.get(t, k).Reconcile.Token
		if err := e.runner.Run(ctx, k, fmt.Sprintf("task-%d", i)); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	var got []int64
	for _, ev := range e.rec.delivered {
		got = append(got, ev.Sequence)
	}
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("delivered events numbered %v, want [1 2 3 4 5]", got)
	}
	snap, err := e.sub.Ref(k).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := snap.DataAt(outbox.SequenceField); err != nil || v.(int64) != 5 {
		t.Errorf("subject's sequence = %v (%v), want 5", v, err)
	}
	for _, ev := range e.rec.delivered {
		snap, err := outboxRef(e.fs, ev).Get(ctx)
		if err != nil {
			t.Fatalf("outbox %s: %v", ev.ID, err)
		}
		var stored event.Event
		if err := snap.DataTo(&stored); err != nil || stored.Sequence != ev.Sequence {
			t.Errorf("outbox holds %s numbered %d (%v), delivered %d", ev.ID, stored.Sequence, err, ev.Sequence)
		}
	}
}
