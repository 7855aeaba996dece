package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// thing is a subject whose runs find out out and save nothing of their
// own.
type thing struct {
	Active    bool        `firestore:"active"`
	Reconcile chain.State `firestore:"reconcile"`
}

type things struct {
	fs  *firestore.Client
	out chain.Outcome
}

func (s *things) Kind() string { return "things" }

func (s *things) Ref(k chain.Kick) *firestore.DocumentRef {
	return s.fs.Collection("tenants").Doc(k.TenantID).Collection("things").Doc(k.ID)
}

func (s *things) Load(*chain.Reader, chain.Doc) (chain.Run, error) {
	return thingRun{s.out}, nil
}

type thingRun struct{ out chain.Outcome }

func (r thingRun) Plan(context.Context) (chain.Plan, error) { return chain.Plan{Outcome: r.out}, nil }

func (r thingRun) Act(context.Context, *chain.Lease) (chain.Outcome, error) { return r.out, nil }

func (thingRun) Save(chain.Tx, chain.Doc) ([]event.Event, error) {
	return nil, nil
}

type noEvents struct{}

func (noEvents) Deliver(_ context.Context, events []event.Event) (int, error) {
	return len(events), nil
}

// A run whose successor's CreateTask failed, or made the task and lost
// its answer, leaves its chain's queue with the one task of its next run,
// due within one interval: the hand-over to a steady chain included,
// whose new token the task that carries the old one, retried by Cloud
// Tasks, must not find stale.
func TestChainSurvivesAFailedEnqueue(t *testing.T) {
	faults := []struct {
		name string
		// inject the fault into the emulator's CreateTask; every
		// attempt: every enqueue of the run's first attempt fails, as
		// when its instance dies after the save.
		inject func(*ctemu.Server)
		every  bool
	}{
		{name: "failed", inject: func(s *ctemu.Server) { s.FailNext("CreateTask", 1, codes.Unavailable, "try again") }},
		{name: "answer lost", inject: func(s *ctemu.Server) { s.LoseNext("CreateTask", 1, codes.DeadlineExceeded, "the answer was lost") }},
		{name: "failed through the first attempt", inject: func(s *ctemu.Server) { s.FailNext("CreateTask", 100, codes.Unavailable, "try again") }, every: true},
	}
	outcomes := []struct {
		name     string
		out      chain.Outcome
		interval time.Duration
	}{
		{"hand-over to a steady chain", chain.Outcome{}, 5 * time.Minute},
		{"converging", chain.Outcome{Next: chain.Converging}, 30 * time.Second},
	}
	for _, o := range outcomes {
		for _, f := range faults {
			t.Run(o.name+"/"+f.name, func(t *testing.T) {
				ctx := context.Background()
				q, srv, _ := setup(t)
				fs := fsemu.ForTest(t, "tasks")
				sub := &things{fs: fs, out: o.out}
				st, err := store.New(fs, lifecycle.Rules{})
				if err != nil {
					t.Fatal(err)
				}
				runner, err := chain.NewRunner(st, q, noEvents{}, chain.Config{ConvergingInterval: 30 * time.Second, SteadyInterval: 5 * time.Minute, LeaseTTL: 30 * time.Second}, sub)
				if err != nil {
					t.Fatal(err)
				}
				k := chain.Kick{Kind: "things", TenantID: "acme", ID: "t1", Token: "tok"}
				if _, err := sub.Ref(k).Set(ctx, thing{Active: true, Reconcile: chain.State{Token: "tok", NextAt: time.Now()}}); err != nil {
					t.Fatal(err)
				}
				task := tasks.TaskID(k, "")
				f.inject(srv)
				start := time.Now()
				var failed []error
				// Cloud Tasks retries the task until it succeeds.
				for i := 0; ; i++ {
					err := runner.Run(ctx, k, task)
					if f.every && i == 0 {
						srv.RemoveFaults()
					}
					if err == nil {
						break
					}
					failed = append(failed, err)
					if i == 3 {
						t.Fatalf("the task failed four times: %v", failed)
					}
				}
				t.Logf("attempts that failed: %v", failed)
				snap, err := sub.Ref(k).Get(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var stored thing
				if err := snap.DataTo(&stored); err != nil {
					t.Fatal(err)
				}
				var live []string
				for _, tk := range srv.Tasks(queue) {
					var p tasks.Payload
					if err := json.Unmarshal(tk.GetHttpRequest().GetBody(), &p); err != nil {
						t.Fatal(err)
					}
					if p.Token != stored.Reconcile.Token {
						continue
					}
					due := tk.GetScheduleTime().AsTime().Sub(start)
					live = append(live, fmt.Sprintf("%s due in %v", tk.GetName(), due))
					if due > o.interval+5*time.Second {
						t.Errorf("task %s due %v after the run began, want within the interval %v", tk.GetName(), due, o.interval)
					}
				}
				if len(live) != 1 {
					t.Errorf("tasks of the chain %q: %v, want one", stored.Reconcile.Token, live)
				}
			})
		}
	}
}
