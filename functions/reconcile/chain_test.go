package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
	"github.com/better-compute/kubernetes/shared/wait"
)

// thing is a subject whose runs the test records.
type thing struct {
	Active    bool        `firestore:"active"`
	Reconcile chain.State `firestore:"reconcile"`
}

// things is a chain.Subject whose runs record their token and time, and
// call first at the first run of the change's chain.
type things struct {
	fs    *firestore.Client
	mu    sync.Mutex
	runs  []thingRun
	first func()
}

type thingRun struct {
	token string
	at    time.Time
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
	return &run{s: s, token: t.Reconcile.Token}, nil
}

type run struct {
	s     *things
	token string
}

// Plan finds the subject steady: a change's chain hands it over.
func (r *run) Plan(context.Context) (chain.Plan, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if len(r.s.runs) == 0 && r.s.first != nil {
		r.s.first()
	}
	r.s.runs = append(r.s.runs, thingRun{r.token, time.Now()})
	return chain.Plan{}, nil
}

// Act is never called: the plan does not act.
func (*run) Act(context.Context, *chain.Lease) (chain.Outcome, error) {
	return chain.Outcome{}, errors.New("a steady run does not act")
}

func (*run) Save(chain.Tx, chain.Doc) ([]event.Event, error) {
	return nil, nil
}

type noEvents struct{}

func (noEvents) Deliver(_ context.Context, events []event.Event) (int, error) {
	return len(events), nil
}

// The whole chain on the emulators, with no watchdog: Cloud Tasks
// dispatches each run to the reconcile function, and retries it while it
// fails. A hand-over whose save's answer is lost, or whose successor's
// enqueue fails however often the run tries, is followed by the steady
// chain's run within one interval.
func TestChainGoesOnWithoutTheWatchdog(t *testing.T) {
	const steady = 2 * time.Second
	for _, c := range []struct {
		name  string
		fault func(fs *fsemu.Server, ct *ctemu.Server)
	}{
		{"save's answer lost", func(fs *fsemu.Server, _ *ctemu.Server) {
			fs.LoseNext("Commit", 1, codes.DeadlineExceeded, "the answer was lost")
		}},
		{"save's answer lost and retried", func(fs *fsemu.Server, _ *ctemu.Server) {
			fs.LoseNext("Commit", 1, codes.Unavailable, "the answer was lost")
		}},
		{"every enqueue of the run failed", func(_ *fsemu.Server, ct *ctemu.Server) {
			ct.FailNext("CreateTask", 10, codes.Unavailable, "try again")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fsSrv, err := fsemu.NewServer()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fsSrv.Close() })
			conn, err := grpc.NewClient(fsSrv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			fs, err := firestore.NewClient(ctx, "reconcile", option.WithGRPCConn(conn))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })

			ct, err := ctemu.NewServer(ctemu.WithTokenSource(func(context.Context, string, string) (string, error) { return "good", nil }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ct.Close() })
			client, err := cloudtasks.NewClient(ctx, ct.ClientOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { client.Close() })
			const queue = "projects/p/locations/us-central1/queues/reconcile"
			if _, err := client.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
				Parent: "projects/p/locations/us-central1",
				Queue: &cloudtaskspb.Queue{Name: queue, RetryConfig: &cloudtaskspb.RetryConfig{
					MaxAttempts: -1, MinBackoff: durationpb.New(100 * time.Millisecond), MaxBackoff: durationpb.New(time.Second),
				}},
			}); err != nil {
				t.Fatal(err)
			}

			sub := &things{fs: fs}
			sub.first = func() { c.fault(fsSrv, ct) }
			fn := httptest.NewServer(nil)
			t.Cleanup(fn.Close)
			q, err := tasks.New(client, tasks.Config{Queue: queue, URL: fn.URL, ServiceAccount: "sa"})
			if err != nil {
				t.Fatal(err)
			}
			st, err := store.New(fs, lifecycle.Rules{})
			if err != nil {
				t.Fatal(err)
			}
			runner, err := chain.NewRunner(st, q, noEvents{}, chain.Config{ConvergingInterval: steady / 4, SteadyInterval: steady, LeaseTTL: time.Second}, sub)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Handler(fakeAuth{}, runner)
			if err != nil {
				t.Fatal(err)
			}
			fn.Config.Handler = h

			k := chain.Kick{Kind: "things", TenantID: "acme", ID: "t1", Token: "tok"}
			if _, err := sub.Ref(k).Set(ctx, thing{Active: true, Reconcile: chain.State{Token: "tok", NextAt: time.Now()}}); err != nil {
				t.Fatal(err)
			}
			if err := q.Kick(ctx, k); err != nil {
				t.Fatal(err)
			}
			var runs []thingRun
			wait.For(t, "a run of the steady chain", func() (bool, string) {
				sub.mu.Lock()
				defer sub.mu.Unlock()
				runs = append(runs[:0], sub.runs...)
				var seen []string
				for _, r := range runs {
					seen = append(seen, r.token)
					if strings.HasPrefix(r.token, "s") {
						return true, ""
					}
				}
				return false, fmt.Sprintf("runs of the tokens %v", seen)
			})
			var handOver, next time.Time
			for _, r := range runs {
				if r.token == "tok" {
					handOver = r.at
				} else if next.IsZero() {
					next = r.at
				}
			}
			// Within the interval, and the seconds of Cloud Tasks'
			// retries and a loaded machine's dispatch.
			if gap := next.Sub(handOver); gap > steady+5*time.Second {
				t.Errorf("the steady chain's first run came %v after the hand-over, want within the interval %v", gap, steady)
			}
			if c.name == "every enqueue of the run failed" && ct.Calls("CreateTask") < 4 {
				t.Errorf("CreateTask called %d times, want the run's tries and its task's retry's", ct.Calls("CreateTask"))
			}
		})
	}
}
