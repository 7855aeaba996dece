package chain_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/chain"
)

// deliver runs k's task as Cloud Tasks does: again, a second of backoff
// later, while the run asks for it to be retried (at most four times).
// It returns the errors of the attempts that failed.
func (e *env) deliver(t *testing.T, k chain.Kick, task string) []error {
	t.Helper()
	var failed []error
	for range 4 {
		err := e.runner.Run(context.Background(), k, task)
		if err == nil {
			return failed
		}
		failed = append(failed, err)
		e.clk.Step(time.Second)
	}
	t.Fatalf("task %s of %s failed four times: %v", task, k.Token, failed)
	return failed
}

// failRead fails the next left reads made outside a transaction.
type failRead struct{ left int }

func (f *failRead) React(req any) (bool, any, error) {
	r, ok := req.(*firestorepb.BatchGetDocumentsRequest)
	if !ok || f.left == 0 || r.GetTransaction() != nil || r.GetNewTransaction() != nil {
		return false, nil, nil
	}
	f.left--
	return true, nil, status.Error(codes.ResourceExhausted, "quota exceeded")
}

// The case of a run whose hand-over or save loses its answer.
type lostCase struct {
	name string
	// lease: the run acts, under the lease.
	lease bool
	out   chain.Outcome
	// interval: the chain's next run is due within it.
	interval time.Duration
	// handsOver: the run hands the chain to a steady one.
	handsOver bool
}

var lostCases = []lostCase{
	{name: "hand-over to a steady chain", out: chain.Outcome{Changed: true}, interval: 5 * time.Minute, handsOver: true},
	{name: "hand-over to a steady chain, nothing changed", out: chain.Outcome{}, interval: 5 * time.Minute, handsOver: true},
	{name: "hand-over under the lease", lease: true, out: chain.Outcome{Changed: true}, interval: 5 * time.Minute, handsOver: true},
	{name: "converging save", out: chain.Outcome{Changed: true, Next: chain.Converging}, interval: 30 * time.Second},
	{name: "converging save under the lease", lease: true, out: chain.Outcome{Changed: true, Next: chain.Converging}, interval: 30 * time.Second},
}

// checkNextRun checks that the chain of k's subject has one run due
// within interval of start, carrying the stored token, and that it runs.
func (e *env) checkNextRun(t *testing.T, k chain.Kick, start time.Time, interval time.Duration, handsOver bool) {
	t.Helper()
	stored := e.get(t, k).Reconcile
	if handsOver == (stored.Token == k.Token) || stored.LeaseOwner != "" {
		t.Fatalf("chain after the run = %+v (the run's token %q), want the run's outcome saved (hand-over %v), no lease", stored, k.Token, handsOver)
	}
	var live []scheduled
	for _, s := range e.rec.tasks() {
		if s.k.Token == stored.Token {
			live = append(live, s)
		}
	}
	if len(live) != 1 {
		t.Fatalf("tasks of the subject's chain %q: %+v (all tasks %+v), want one", stored.Token, live, e.rec.tasks())
	}
	next := live[0]
	if due := next.at.Sub(start); due > interval+5*time.Second {
		t.Errorf("next run due %v after the run began, want within the interval %v", due, interval)
	}
	ran := false
	e.sub.step = func(context.Context, *chain.Lease) (chain.Outcome, error) {
		ran = true
		return chain.Outcome{}, nil
	}
	e.clk.SetTime(next.at)
	if err := e.runner.Run(context.Background(), next.k, "task-next"); err != nil || !ran {
		t.Errorf("the next run = %v, stepped %v; want it to run its subject", err, ran)
	}
}

// A run whose save committed but whose answer was lost (the client sees
// UNAVAILABLE, then the retry of the commit finds the transaction ended;
// or DEADLINE_EXCEEDED) leaves its chain with a run due within one
// interval: the hand-over to a steady chain included, whose new token the
// task that carries the old one would otherwise find stale.
//
// When the run cannot read back what its save did, its task's retry finds
// the hand-over for its own.
func TestRunLostSaveAnswer(t *testing.T) {
	for _, c := range lostCases {
		for _, f := range []struct {
			code codes.Code
			// readBackFails: the run's next read, outside a
			// transaction, fails.
			readBackFails bool
		}{{codes.Unavailable, false}, {codes.DeadlineExceeded, false}, {codes.DeadlineExceeded, true}} {
			code := f.code
			name := fmt.Sprintf("%s/%v", c.name, code)
			if f.readBackFails {
				name += "/read back failed"
			}
			t.Run(name, func(t *testing.T) {
				srv, e := faultyEnv(t)
				k := e.put(t, "t1", chain.State{})
				lost := false
				e.sub.step = func(_ context.Context, l *chain.Lease) (chain.Outcome, error) {
					if c.lease && l == nil {
						return needLease()
					}
					if !lost {
						// The next commit is the run's save.
						lost = true
						srv.LoseNext("Commit", 1, code, "the answer was lost")
						if f.readBackFails {
							srv.AddReactor("BatchGetDocuments", &failRead{left: 1})
						}
					}
					return c.out, nil
				}
				start := e.clk.Now()
				failed := e.deliver(t, k, "task-1")
				if srv.Lost("Commit") != 1 {
					t.Fatalf("lost %d commits' answers, want 1", srv.Lost("Commit"))
				}
				t.Logf("attempts that failed: %v", failed)
				if got := e.get(t, k); c.out.Changed && got.Saved == 0 {
					t.Errorf("saved %d times, want the save kept", got.Saved)
				}
				e.checkNextRun(t, k, start, c.interval, c.handsOver)
			})
		}
	}
}

// A run whose successor's enqueue failed (no task made) or lost its
// answer (the task made) leaves its chain with a run due within one
// interval, one task and never two, even when every enqueue of its first
// attempt fails (its instance dies before it enqueues).
func TestRunSuccessorEnqueueFails(t *testing.T) {
	for _, c := range lostCases {
		for _, f := range []struct {
			name       string
			fail, lose int
			// dies: every enqueue of the first attempt fails, as when
			// its instance dies after the save.
			dies bool
		}{
			{name: "failed once", fail: 1},
			{name: "instance died before it enqueued", dies: true},
			{name: "answer lost", lose: 1},
		} {
			t.Run(c.name+"/"+f.name, func(t *testing.T) {
				e := newEnv(t)
				k := e.put(t, "t1", chain.State{})
				e.sub.step = func(_ context.Context, l *chain.Lease) (chain.Outcome, error) {
					if c.lease && l == nil {
						return needLease()
					}
					return c.out, nil
				}
				e.rec.fail, e.rec.lose = f.fail, f.lose
				start := e.clk.Now()
				if f.dies {
					e.rec.fail = 1000
					if err := e.runner.Run(context.Background(), k, "task-1"); err == nil {
						t.Fatal("a run none of whose enqueues succeeded = nil, want its task retried")
					}
					e.rec.fail = 0
					e.clk.Step(time.Second)
				}
				failed := e.deliver(t, k, "task-1")
				t.Logf("attempts that failed: %v", failed)
				e.checkNextRun(t, k, start, c.interval, c.handsOver)
			})
		}
	}
}

// Two deliveries of one task run at once: the first hands the subject
// over and dies before it enqueues anything; the second, whose save then
// finds the chain's token changed, knows the hand-over for its task's own
// and schedules the steady chain's run, as Cloud Tasks ends the task with
// its success.
func TestRunDuplicateOfADeadHandOver(t *testing.T) {
	for _, lease := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease=%v", lease), func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			k := e.put(t, "t1", chain.State{})
			steps := 0
			e.sub.step = func(_ context.Context, l *chain.Lease) (chain.Outcome, error) {
				steps++
				if steps > 1 {
					return chain.Outcome{}, nil
				}
				// The first delivery runs to its hand-over while the
				// second has read the subject, and dies before it
				// enqueues; the second goes on to save, or to take the
				// lease.
				e.rec.fail = 1000
				if err := e.runner.Run(ctx, k, "task-1"); err == nil {
					t.Error("the first delivery, none of whose enqueues succeeded, = nil")
				}
				e.rec.fail = 0
				if lease {
					return needLease()
				}
				return chain.Outcome{}, nil
			}
			start := e.clk.Now()
			if err := e.runner.Run(ctx, k, "task-1"); err != nil && !errors.Is(err, chain.ErrBusy) {
				t.Fatalf("the second delivery = %v", err)
			}
			e.checkNextRun(t, k, start, 5*time.Minute, true)
		})
	}
}
