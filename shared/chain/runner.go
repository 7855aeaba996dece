package chain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/logging"
)

// Plan is what a run decided without the lease.
type Plan struct {
	// Act: the plan calls the provider; the loop takes the lease and the
	// run's outcome is Act's.
	Act bool
	// Outcome is the run's outcome when it does not act.
	Outcome Outcome
	// Intent, for a plan that acts, names the provider call Act is about
	// to make: the loop records it in the chain under the lease before it
	// calls Act. Nil for a kind that keeps its own intents.
	Intent *Intent
	// Resolved: the plan looked at the provider and settled the chain's
	// pending intent (the call is done, or not done): the loop clears it
	// with the run's save, and lets the run call the provider again. A
	// plan that finds the call still running leaves it unresolved and
	// does not act.
	Resolved bool
}

// Next is what follows a run: when its successor comes, and whether the
// chain goes on.
type Next int

const (
	// Steady: nothing converges; the next run comes after the steady
	// interval, and a change's chain hands the subject to a steady one.
	Steady Next = iota
	// Converging: the next run comes after the converging interval, or
	// Outcome.After when that is sooner (a provider operation in flight
	// may be done by then).
	Converging
	// Retry: a transient failure the outcome records (a provider call
	// that failed); the next run comes after a backoff.
	Retry
	// Deferred: the run did nothing (the provider's budget is spent) and
	// runs again after Outcome.After; its failure count stays.
	Deferred
	// Done: the subject is gone; its chain ends.
	Done
)

// Outcome is how a run ended.
type Outcome struct {
	Next Next
	// Changed: the run has something to save (Save is called).
	Changed bool
	// After is how long a Deferred run is put off; for a Converging one,
	// when positive, how soon its successor may come at the latest.
	After time.Duration
	// Converged, when set, is when the desired change that the run finds
	// converged was asked (its spec's updatedAt): the runner records the
	// reconcile lag from it once the run's outcome is saved.
	Converged time.Time
	// Hint is the successor's Kick.Hint: what it may start reading before
	// its document (Prefetcher). Empty for none.
	Hint string
}

// Waking is a Run whose Save may wake other subjects' chains in its
// transaction (State.Wake): a cluster's run whose save changes what its
// substrate reads. Woken returns the kicks of the last Save, which the
// runner sends once that save committed.
type Waking interface {
	Woken() []Kick
}

// Scheduler schedules a run of a chain at a time (Cloud Tasks). after
// names the task scheduling it, so that a redelivered task schedules the
// same successor (deduplicated) rather than a second one.
type Scheduler interface {
	Schedule(ctx context.Context, k Kick, at time.Time, after string) error
}

// Deliverer publishes committed events and clears them from the outbox
// (outbox.Relay).
type Deliverer interface {
	Deliver(ctx context.Context, events []event.Event) (int, error)
}

// Config sets the runs' timing.
type Config struct {
	// ConvergingInterval is the time between runs while anything
	// converges (30 s).
	ConvergingInterval time.Duration
	// SteadyInterval is the time between runs of a steady subject (5 min).
	SteadyInterval time.Duration
	// LeaseTTL bounds a run; a run killed half way holds the subject no
	// longer than this.
	LeaseTTL time.Duration
	// Heartbeat is how far past its next run a steady chain's watchdog
	// deadline is set when a run writes, so that a steady run that finds
	// nothing to do writes nothing for that long; the watchdog restarts a
	// dead steady chain within it. Zero means 12 steady intervals.
	Heartbeat time.Duration
	// Jitter spreads steady runs: each steady interval is lengthened by a
	// random part of up to this fraction of it, so that chains started
	// together do not stay together. Zero means none.
	Jitter float64
	// Clock is the runs' clock; nil means the real one.
	Clock clock.PassiveClock
	// Tracer traces each run: a span linked to its kick's Link. Nil
	// means no spans.
	Tracer trace.Tracer
	// Metrics records each run's outcome and the reconcile lag. Nil
	// records nothing.
	Metrics Metrics
}

// Runner runs the chains of its subjects.
type Runner struct {
	st       Storage
	subjects map[string]Subject
	sched    Scheduler
	events   Deliverer
	cfg      Config
	now      func() time.Time // cfg.Clock's
}

// NewRunner returns a runner of the subjects' chains, kept in st.
func NewRunner(st Storage, sched Scheduler, events Deliverer, cfg Config, subjects ...Subject) (*Runner, error) {
	if st == nil || sched == nil || events == nil || len(subjects) == 0 {
		return nil, errors.New("chain: NewRunner needs a storage, a scheduler, a deliverer and subjects")
	}
	if cfg.ConvergingInterval <= 0 || cfg.SteadyInterval <= 0 || cfg.LeaseTTL <= 0 {
		return nil, errors.New("chain: intervals and lease TTL must be positive")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 12 * cfg.SteadyInterval
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	r := &Runner{st: st, subjects: map[string]Subject{}, sched: sched, events: events, cfg: cfg, now: cfg.Clock.Now}
	for _, s := range subjects {
		r.subjects[s.Kind()] = s
	}
	return r, nil
}

// Run runs the kick's subject once for its chain token: read, observe and
// plan; then, only when the plan calls the provider, take the lease and
// act; save what changed with its events; schedule the chain's next run.
// A run that finds nothing to do writes nothing (ARCHITECTURE rule 5 holds
// where it matters: only runs that act hold the lease, and a run that only
// saves what it saw writes in a transaction that fails if anything it read
// changed). A stale token ends the chain quietly, unless the task's own
// earlier attempt handed the subject to the steady chain that holds it
// now, whose first run it then schedules again (the package comment says
// why); ErrBusy and other errors ask for the task to be retried.
//
// task names the task that asked for the run (its successor's name derives
// from it).
func (r *Runner) Run(ctx context.Context, k Kick, task string) error {
	sub, ok := r.subjects[k.Kind]
	if !ok {
		// A task of a kind this runner does not know never gets better.
		logging.FromContext(ctx).Error("Reconcile task of an unknown kind dropped", "kind", k.Kind)
		return nil
	}
	ctx, span := r.startSpan(ctx, k)
	defer span.End()
	ctx = logging.With(ctx, "kind", k.Kind, "tenantId", k.TenantID, "id", k.ID)
	log := logging.FromContext(ctx)
	if task == "" {
		// Without the task's name the successor's would be the kick's,
		// and deduplicated away: name it after this run instead.
		task = "run-" + newOwner()
	}
	var err error
	var rep report
	for range maxAttempts {
		err = r.attempt(ctx, sub, k, task, &rep)
		if !errors.Is(err, errChanged) {
			break
		}
		log.Info("What the run read changed before it could save; running again")
	}
	if errors.Is(err, errChanged) {
		// Another run keeps changing the subject: its task is retried
		// later, as when it holds the lease.
		err = errors.Join(ErrBusy, err)
	}
	r.record(ctx, span, k.Kind, rep, err)
	switch {
	case errors.Is(err, ErrStale):
		log.Info("Stale reconcile task; a newer chain runs the subject")
		return nil
	case errors.Is(err, ErrBusy):
		log.Warn("Subject is being reconciled by another run; retrying later")
	case errors.Is(err, ErrLeaseLost):
		// The run outlived its lease. The task is retried rather than
		// ended: if no other run holds the subject now, nothing else
		// would schedule its next run before the watchdog. A retry finds
		// the subject busy, stale, or free, and its successor has the
		// same name as ours would have had.
		log.Warn("Lost the lease mid-run; retrying the task", "error", err)
	}
	return err
}

// maxAttempts bounds the runs again after what a run read changed under
// it (each observes the provider again); past that the task is retried by
// Cloud Tasks.
const maxAttempts = 2

// errChanged: what a run read without the lease changed before it could
// save; the run starts again from a fresh read.
var errChanged = errors.New("the subject changed during the run")

// attempt is one run: read, step, and what follows. It notes in rep how
// the run ended and the reconcile lag its save recorded.
func (r *Runner) attempt(ctx context.Context, sub Subject, k Kick, task string, rep *report) error {
	now := r.now()
	p, err := peek(ctx, r.st, k, task, now, sub)
	if ho := (*handedOver)(nil); errors.As(err, &ho) {
		rep.outcome = OutcomeStale
		return r.resume(ctx, k, ho.state, task)
	}
	if err != nil {
		return err
	}
	err = r.proceed(ctx, sub, k, task, now, p, rep)
	if errors.Is(err, ErrStale) && !k.Steady() {
		// The token changed during the run: perhaps to this task's own
		// hand-over, made by a duplicate delivery that may die before it
		// enqueues the steady chain's run.
		return r.ownHandOver(ctx, k, task, rep, err)
	}
	return err
}

// pass is one attempt of a run after its first read: what its steps
// share.
type pass struct {
	sub  Subject
	k    Kick
	task string
	now  time.Time // when the attempt began
	p    *peeked
	run  Run
	// lease is the run's, once it took it; nil for a run that does not
	// act.
	lease *Lease
	// fresh: run was loaded under the lease, what the first read planned
	// on having changed; it has not planned yet.
	fresh bool
	// plan is the run's last plan.
	plan Plan
	// settled: the run's save clears the chain's intent (settles).
	settled bool
	rep     *report
}

// proceed is the run after its first read (p): plan, take the lease and
// act when the plan calls the provider, save, schedule.
func (r *Runner) proceed(ctx context.Context, sub Subject, k Kick, task string, now time.Time, p *peeked, rep *report) error {
	ps := &pass{sub: sub, k: k, task: task, now: now, p: p, run: p.run, rep: rep}
	tell(ps.run, p.state.Intent)
	pl, err := ps.run.Plan(ctx)
	ps.plan, ps.settled = pl, pl.Resolved
	out := pl.Outcome
	if err == nil && pl.Act {
		// The run acts: its work ends with its lease (on the injected
		// clock, so that tests can move it).
		if err = r.takeLease(ctx, ps); err != nil {
			return err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ps.lease.Expiry.Sub(r.now()))
		defer cancel()
		out, err = r.act(ctx, ps)
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
	}
	if err != nil {
		return r.failed(ctx, ps, err)
	}
	rep.outcome = outcomeOf(out)
	next, failures := r.nextRun(out, p.state)
	current, err := r.save(ctx, ps, out, next, failures)
	if err != nil {
		return err
	}
	return r.scheduleNext(ctx, ps, out, next, current)
}

// takeLease takes the subject's lease for the run. When what it read
// under the lease differs from what the run planned on, the run is the
// one loaded under the lease, which plans again before it acts.
func (r *Runner) takeLease(ctx context.Context, ps *pass) error {
	deadline := ps.now.Add(r.cfg.SteadyInterval + r.cfg.LeaseTTL)
	l, fresh, version, err := take(ctx, r.st, ps.k.Key(), ps.k.Token, r.cfg.LeaseTTL, deadline, r.now, ps.sub.Load)
	if err != nil {
		return err
	}
	ps.lease = l
	if version != ps.p.version {
		ps.run, ps.fresh = fresh, true
	}
	return nil
}

// act carries out the run's plan under its lease: a run loaded under the
// lease plans first, and acts only if its plan still does. A pending
// intent the plan did not resolve refuses the call (admit); the plan's
// own intent is recorded before it. The intent is settled by an outcome
// other than Retry: a call that failed, or whose answer was lost, may
// have been done, and the next run looks.
func (r *Runner) act(ctx context.Context, ps *pass) (Outcome, error) {
	pending := ps.lease.State.Intent
	if ps.fresh {
		tell(ps.run, pending)
		pl, err := ps.run.Plan(ctx)
		ps.plan, ps.settled = pl, pl.Resolved
		if err != nil || !pl.Act {
			return pl.Outcome, err
		}
	}
	ps.settled = false
	if err := admit(pending, ps.plan); err != nil {
		return Outcome{}, err
	}
	if in := ps.plan.Intent; in != nil {
		if err := ps.lease.intend(ctx, *in, r.now()); err != nil {
			return Outcome{}, err
		}
	}
	out, err := ps.run.Act(ctx, ps.lease)
	ps.settled = err == nil && out.Next != Retry
	return out, err
}

// failed records a run that failed with err: its failure count and a
// watchdog deadline past its backoff, and schedules its retry.
func (r *Runner) failed(ctx context.Context, ps *pass, err error) error {
	failures := ps.p.state.Failures + 1
	next := r.backoff(failures)
	logging.FromContext(ctx).Warn("Reconcile run failed; retrying with backoff", "error", err, "retryIn", next.String(), "failures", failures)
	w := r.writer(ctx, ps.k, ps.sub, ps.lease, ps.p.version)
	if _, _, werr := w(ps.now.Add(next+r.cfg.LeaseTTL), failures, "", false, nil); werr != nil {
		return errors.Join(err, werr)
	}
	ps.rep.outcome = OutcomeRetry
	return r.schedule(ctx, ps.k, ps.now.Add(next), ps.task)
}

// nextRun is when the run's successor comes, an interval after this run
// ends (not after it began: a provider operation it started is then
// given the whole interval before the next run looks at it), and the
// chain's failure count after it.
func (r *Runner) nextRun(out Outcome, state State) (time.Time, int) {
	interval, failures := r.cfg.SteadyInterval, 0
	switch out.Next {
	case Deferred:
		interval, failures = out.After, state.Failures
	case Retry:
		failures = state.Failures + 1
		interval = r.backoff(failures)
	case Converging:
		interval = r.cfg.ConvergingInterval
		if out.After > 0 {
			interval = min(interval, out.After)
		}
	default:
		if r.cfg.Jitter > 0 {
			interval += time.Duration(rand.Float64() * r.cfg.Jitter * float64(interval))
		}
	}
	return r.now().Add(interval), failures
}

// steady reports whether an outcome leaves its subject steady: its
// successor is a steady chain's, at the steady pace.
func steady(out Outcome) bool { return out.Next == Steady || out.Next == Done }

// save writes the run's outcome when it has something to write
// (mustWrite). It reports whether the run's chain is still the
// subject's, and moves ps.k to the steady chain the run handed its
// subject to.
func (r *Runner) save(ctx context.Context, ps *pass, out Outcome, next time.Time, failures int) (bool, error) {
	deadline := next.Add(r.cfg.LeaseTTL)
	if steady(out) {
		deadline = next.Add(r.steadySlack())
	}
	// A change's chain that finds its subject steady hands it to a steady
	// chain (Kick.Steady), under a new token written with the outcome:
	// the task's own (handOverToken), so that the task knows it again.
	token := ""
	if out.Next == Steady && !ps.k.Steady() {
		token = handOverToken(ps.k.Token, ps.task)
	}
	if !r.mustWrite(ps, out, next, failures, token) {
		return true, nil
	}
	var save saveFunc
	if out.Changed {
		save = ps.run.Save
	}
	events, current, err := r.writer(ctx, ps.k, ps.sub, ps.lease, ps.p.version)(deadline, failures, token, ps.settled, save)
	if err != nil && token != "" && r.handOverStored(ctx, ps.k.Key(), token, err) {
		err, current = nil, true
	}
	if err != nil {
		return false, fmt.Errorf("record run: %w", err)
	}
	if out.Changed && !out.Converged.IsZero() {
		ps.rep.lag, ps.rep.converged = r.now().Sub(out.Converged), true
	}
	if current && token != "" {
		ps.k.Token = token
	}
	r.afterSave(ctx, ps, out, events)
	return current, nil
}

// mustWrite reports whether a run writes: it has something to save, a
// failure count to change, a lease to give up, a chain to hand over, an
// intent to clear, or a watchdog deadline that its next run would miss. A steady run that
// found nothing to do writes nothing.
func (r *Runner) mustWrite(ps *pass, out Outcome, next time.Time, failures int, token string) bool {
	state := ps.p.state
	return out.Changed || ps.lease != nil || failures != state.Failures || token != "" ||
		(ps.settled && state.Intent != nil) || state.NextAt.Before(next.Add(r.cfg.LeaseTTL))
}

// afterSave sends what a committed save woke and publishes its events;
// what fails is the watchdog's to retry.
func (r *Runner) afterSave(ctx context.Context, ps *pass, out Outcome, events []event.Event) {
	if w, ok := ps.run.(Waking); ok && out.Changed {
		r.wake(ctx, w.Woken())
	}
	if len(events) == 0 {
		return
	}
	if _, err := r.events.Deliver(ctx, events); err != nil {
		logging.FromContext(ctx).Warn("Events wait in the outbox for the watchdog's drain", "error", err)
	}
}

// scheduleNext schedules the chain's next run at next, unless the
// subject is gone or a newer chain took it over during the run.
func (r *Runner) scheduleNext(ctx context.Context, ps *pass, out Outcome, next time.Time, current bool) error {
	log := logging.FromContext(ctx)
	k := ps.k
	switch {
	case out.Next == Done:
		log.Info("Subject deleted; its chain ends")
		return nil
	case !current:
		log.Info("A newer chain took over the subject during the run")
		return nil
	case out.Next == Steady:
		// The work the link asked for is done; later runs are the
		// chain's own.
		k.Link = ""
	}
	k.Hint = out.Hint
	return r.schedule(ctx, k, next, ps.task)
}

// writer returns how the run writes its outcome: under its lease when it
// holds one, else in a transaction that checks that nothing the run read
// changed (errChanged) and that no run holds the lease (ErrBusy).
//
// The outcome sets the chain's watchdog deadline (nextAt) and failure
// count, clears its intent when settled, and, when token is not empty,
// hands the chain to that token.
func (r *Runner) writer(ctx context.Context, k Kick, sub Subject, l *Lease, version string) writeFunc {
	if l != nil {
		return func(nextAt time.Time, failures int, token string, settled bool, save saveFunc) ([]event.Event, bool, error) {
			return l.finish(ctx, nextAt, failures, token, settled, save)
		}
	}
	return func(nextAt time.Time, failures int, token string, settled bool, save saveFunc) ([]event.Event, bool, error) {
		return commit(ctx, r.st, k.Key(), k.Token, version, r.now, sub.Load, nextAt, failures, token, settled, save)
	}
}

// saveFunc is Run.Save.
type saveFunc = func(Tx, Doc) ([]event.Event, error)

// writeFunc writes a run's outcome; it returns the events committed and
// whether the run's chain is still the subject's. On an error it returns
// the events its last attempt wrote, which its caller may find committed
// after all (a lost answer).
type writeFunc = func(nextAt time.Time, failures int, token string, settled bool, save saveFunc) ([]event.Event, bool, error)

// handOverStored finds out whether the hand-over of the subject key to
// the steady chain of token is stored, though the save that would have
// made it answered err. An error is not a no: an answer lost after the
// commit reads, to the client, as UNAVAILABLE (then, its retry, as a
// transaction already ended) or as DEADLINE_EXCEEDED; and a save refused
// because the chain's token changed (ErrStale) or its lease was taken
// (ErrLeaseLost) may have met the same hand-over made by a duplicate
// delivery of the task, which may die before it enqueues the steady
// chain's run. Either way the steady chain is the task's own, and the
// run goes on to schedule its run. When the read fails too, the task is
// retried, and its next attempt finds the hand-over, if stored, as its
// own (resume).
func (r *Runner) handOverStored(ctx context.Context, key Key, token string, err error) bool {
	if errors.Is(err, errChanged) || errors.Is(err, ErrBusy) || errors.Is(err, ErrStale) {
		// The chain's token was this run's own, unchanged; or not, and
		// the run looks again (ownHandOver).
		return false
	}
	log := logging.FromContext(ctx)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	h, _, rerr := r.st.ReadChain(NewReader(rctx, nil), key)
	switch {
	case rerr != nil:
		log.Warn("The hand-over's save failed and reading it back failed too; retrying the task to find out", "error", err, "readError", rerr)
		return false
	case h.Reconcile.Token == token:
		log.Warn("The hand-over's save answered an error, but the hand-over is stored; going on with the steady chain", "error", err)
		return true
	case errors.Is(err, ErrLeaseLost):
		return false
	}
	log.Warn("The hand-over's save failed and is not stored; retrying the task", "error", err)
	return false
}

// ownHandOver serves a run of k that found its token stale after its
// first read (ErrStale, err): if the subject's chain is now the one this
// task hands over to, a duplicate delivery of the task made the hand-over,
// and the run schedules the steady chain's run (resume), since Cloud
// Tasks ends the task with this delivery's success whatever became of the
// other. Otherwise the task is stale.
func (r *Runner) ownHandOver(ctx context.Context, k Kick, task string, rep *report, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	h, _, rerr := r.st.ReadChain(NewReader(rctx, nil), k.Key())
	switch {
	case errors.Is(rerr, ErrStale):
		return err
	case rerr != nil:
		// Retried, rather than ended as stale: the retry's first read
		// finds out.
		logging.FromContext(ctx).Warn("Could not read whether the task's own hand-over is stored; retrying the task", "error", rerr)
		return fmt.Errorf("find out whether the task's hand-over is stored: %w", rerr)
	case !h.Active || h.Reconcile.Token != handOverToken(k.Token, task):
		return err
	}
	rep.outcome = OutcomeStale
	return r.resume(ctx, k, h.Reconcile, task)
}

// readBackTimeout bounds the read that finds out what a call whose answer
// was lost did.
const readBackTimeout = 10 * time.Second

// resume serves a task whose own run handed its subject to a steady chain
// (handOverToken) in an earlier attempt that failed after the hand-over
// committed (its answer lost, the successor's enqueue failed or lost, the
// instance killed): it schedules the steady chain's first run again under
// the name the attempt gave it, which Cloud Tasks keeps once, at the time
// the hand-over wrote (its watchdog deadline, less the heartbeat). Once
// that chain holds the lease, or resumeWindow has passed since its first
// run was due, the chain is its own and the task ends.
func (r *Runner) resume(ctx context.Context, k Kick, s State, task string) error {
	log := logging.FromContext(ctx)
	now := r.now()
	at := s.NextAt.Add(-r.steadySlack())
	if (s.LeaseOwner != "" && s.LeaseExpiry.After(now)) || now.After(at.Add(resumeWindow)) {
		log.Info("Stale reconcile task; the steady chain it handed its subject to runs it")
		return nil
	}
	log.Warn("This task handed its subject to a steady chain in an attempt that then failed; scheduling the steady chain's run again", "at", at)
	k.Token, k.Link, k.Hint = s.Token, "", ""
	if at.Before(now) {
		at = now
	}
	return r.schedule(ctx, k, at, task)
}

// resumeWindow is how long after the steady chain's first run was due a
// task that handed its subject over schedules that run again. Cloud Tasks
// keeps an executed or deleted task's name for about an hour, so within
// the window a second scheduling of the name is refused (ALREADY_EXISTS)
// if the first run happened, whatever the steady interval: the window
// only has to outlast Cloud Tasks' retries of the task on a slow day,
// and must not reach the hour, after which the name could make a second
// chain.
const resumeWindow = 30 * time.Minute

// steadySlack is how far past its next run a steady chain's watchdog
// deadline is written.
func (r *Runner) steadySlack() time.Duration { return max(r.cfg.LeaseTTL, r.cfg.Heartbeat) }

// wake sends the kicks of the chains a run's save woke, linked to the
// run's span. A kick that fails is the watchdog's to send: the woken
// chain's next run is due, and overdue after the watchdog's grace.
func (r *Runner) wake(ctx context.Context, kicks []Kick) {
	for _, k := range kicks {
		if k.Link == "" {
			c := propagation.MapCarrier{}
			propagation.TraceContext{}.Inject(ctx, c)
			k.Link = c["traceparent"]
		}
		if err := r.sched.Schedule(ctx, k, r.now(), ""); err != nil {
			logging.FromContext(ctx).Warn("Kick of a woken chain failed; the watchdog will restart it", "kind", k.Kind, "id", k.ID, "error", err)
		}
	}
}

// schedule schedules k's run at at, named after task. The task's name
// makes the call idempotent (Cloud Tasks keeps one task of a name), so a
// failed one is tried again at once, a few times, whatever its error: a
// lost answer's retry meets the task made. Past those the run's task is
// retried by Cloud Tasks, and schedules the same task.
func (r *Runner) schedule(ctx context.Context, k Kick, at time.Time, task string) error {
	var err error
	pause := scheduleBackoff
	for i := 1; ; i++ {
		if err = r.sched.Schedule(ctx, k, at, task); err == nil {
			return nil
		}
		if i == scheduleAttempts || ctx.Err() != nil {
			break
		}
		logging.FromContext(ctx).Warn("Scheduling the chain's next run failed; trying again", "error", err, "attempt", i, "retryIn", pause.String())
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		pause *= 2
	}
	return fmt.Errorf("schedule next run: %w", err)
}

// scheduleAttempts bound the enqueues of a run's successor in one attempt
// of its task, scheduleBackoff the first pause between them (doubled
// after each).
const (
	scheduleAttempts = 3
	scheduleBackoff  = 100 * time.Millisecond
)

// backoff doubles the converging interval with each consecutive failure,
// up to the steady interval.
func (r *Runner) backoff(failures int) time.Duration {
	d := r.cfg.ConvergingInterval
	for i := 1; i < failures && d < r.cfg.SteadyInterval; i++ {
		d *= 2
	}
	return min(d, r.cfg.SteadyInterval)
}
