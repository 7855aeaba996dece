package clusters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// waitLimit bounds every wait of these tests on a cold, loaded machine.
const waitLimit = 60 * time.Second

// rpcCount counts a Firestore client's RPCs by method.
type rpcCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCount) add(method string) {
	c.mu.Lock()
	c.n[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
}

// interceptors count unary calls and streams (BatchGetDocuments, the
// reads, is a stream).
func (c *rpcCount) interceptors() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.add(method)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

func (c *rpcCount) total() (all int, byMethod map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byMethod = map[string]int{}
	for k, v := range c.n {
		all += v
		byMethod[k] = v
	}
	return all, byMethod
}

// ledgers returns n stores over one Firestore emulator, as n instances
// see it, and the count of their RPCs.
func ledgers(t testing.TB, n int) ([]*store.Store, *rpcCount) {
	t.Helper()
	calls := &rpcCount{n: map[string]int{}}
	fs := fsemu.ForTest(t, "budget", calls.interceptors()...)
	out := make([]*store.Store, n)
	for i := range out {
		s, err := store.New(fs, lifecycle.Rules{})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	return out, calls
}

// A steady refresh leaves the reserve to converging runs, and is put off
// past the minute's end (spread within the stretch) once the minute is
// down to it; a converging run may spend the reserve.
func TestBudgetAllow(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start.Add(15 * time.Second))
	st, _ := ledgers(t, 1)
	b := &Budget{PerMinute: 100, Reserve: 0.5, Stretch: time.Minute, Ledger: st[0], Shards: 2, Batch: 1, Clock: clk}
	ctx := context.Background()
	// Of the minute's 100 calls, steady refreshes leave 50.
	for i := range 50 {
		if ok, _, _ := b.allow("p", "", true); !ok {
			t.Fatalf("steady refresh %d refused with %d calls spent, want allowed", i+1, i)
		}
		if err := b.take(ctx, "p"); err != nil {
			t.Fatal(err)
		}
	}
	ok, wait, _ := b.allow("p", "", true)
	if ok || wait < 45*time.Second || wait > 45*time.Second+time.Minute {
		t.Errorf("steady refresh at the reserve = %v, put off %v; want put off past the minute's end (45s) by at most the stretch", ok, wait)
	}
	if ok, _, _ := b.allow("p", "", false); !ok {
		t.Errorf("converging run at the reserve refused, want allowed")
	}
	if ok, _, _ := b.allow("other", "", true); !ok {
		t.Errorf("another project's refresh refused, want allowed (budgets are per project)")
	}
	var none *Budget
	if ok, _, _ := none.allow("p", "", true); !ok || none.take(ctx, "p") != nil {
		t.Errorf("no budget refused a call, want every call allowed")
	}
}

// The budget's parameters: the minute is split into shards as evenly as
// it goes, each seeing at most about 30 leases a minute.
func TestBudgetShape(t *testing.T) {
	for _, c := range []struct {
		perMinute     float64
		shards, batch int
		wantShards    int
		wantBatch     int
	}{
		{perMinute: 480, wantShards: 2, wantBatch: 9},
		{perMinute: 960, wantShards: 2, wantBatch: 19},
		{perMinute: 10, wantShards: 1, wantBatch: 1},
		{perMinute: 6000, wantShards: 10, wantBatch: 20},
		{perMinute: 0.5, wantShards: 1, wantBatch: 1},
		{perMinute: 3, shards: 8, batch: 2, wantShards: 3, wantBatch: 2},
	} {
		b := &Budget{PerMinute: c.perMinute, Shards: c.shards, Batch: c.batch}
		sum := 0
		for i := range b.shards() {
			sum += b.capacity(i)
		}
		if b.shards() != c.wantShards || b.batch() != c.wantBatch || sum != b.perMinute() {
			t.Errorf("PerMinute %v, Shards %d, Batch %d: %d shards holding %d, batch %d; want %d shards holding %d, batch %d",
				c.perMinute, c.shards, c.batch, b.shards(), sum, b.batch(), c.wantShards, b.perMinute(), c.wantBatch)
		}
	}
}

// hammer runs workers goroutines on each of the budgets that call for
// project's tokens as fast as they get them, for minutes clock minutes,
// and returns the calls each minute saw. The clock moves 20 s at a time:
// twice within a minute once a third of the minute's share was spent (so
// that instances hold leased tokens when minutes pass), and past a
// minute once every worker found it spent. Workers call while they
// hold the clock's read lock, so that each call is counted in the minute
// it was made in.
func hammer(t *testing.T, clk *testingclock.FakeClock, budgets []*Budget, workers, minutes, share int, early bool) []int {
	t.Helper()
	var (
		moving  sync.RWMutex
		mu      sync.Mutex
		perMin  = make([]int, minutes+1)
		start   = clk.Now()
		moved   = make(chan struct{}) // closed and replaced at each move
		parked  int64                 // workers that found the clock's current moment spent
		stop    atomic.Bool
		errs    = make(chan error, len(budgets)*workers)
		wg      sync.WaitGroup
		calls   atomic.Int64
		ctx     = context.Background()
		current = func() chan struct{} { mu.Lock(); defer mu.Unlock(); return moved }
	)
	for _, b := range budgets {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					next := current()
					moving.RLock()
					ok, _, _, err := b.reserve(ctx, "p", "", false, true)
					if ok {
						m := int(clk.Now().Sub(start) / time.Minute)
						mu.Lock()
						perMin[m]++
						mu.Unlock()
						calls.Add(1)
					}
					moving.RUnlock()
					if err != nil {
						errs <- err
						return
					}
					if !ok {
						mu.Lock()
						if next == moved {
							parked++
						}
						mu.Unlock()
						<-next
					}
				}
			}()
		}
	}
	all := int64(len(budgets) * workers)
	allParked := func() bool { mu.Lock(); defer mu.Unlock(); return parked == all }
	// Looked at every millisecond: the minutes move while the workers
	// still call, before they spend the whole share.
	waitFor := func(what string, cond func() bool) {
		wait.WithinEvery(t, wait.Timeout, time.Millisecond, what, func() (bool, string) {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			return cond(), fmt.Sprintf("%d calls", calls.Load())
		})
	}
	move := func() {
		moving.Lock()
		clk.Step(20 * time.Second)
		mu.Lock()
		close(moved)
		moved = make(chan struct{})
		parked = 0
		mu.Unlock()
		moving.Unlock()
	}
	for m := range minutes {
		base := calls.Load()
		for third := int64(1); third <= 2; third++ {
			waitFor(fmt.Sprintf("minute %d had a third of its share", m), func() bool {
				return calls.Load()-base >= third*int64(share)/3 || allParked()
			})
			move()
		}
		if early && m%2 == 0 {
			// Even minutes pass while the instances still call and hold
			// leased tokens, which must not be spent in the next.
			waitFor(fmt.Sprintf("minute %d had five sixths of its share", m), func() bool {
				return calls.Load()-base >= 5*int64(share)/6 || allParked()
			})
		} else {
			waitFor(fmt.Sprintf("every worker found minute %d spent", m), allParked)
		}
		if m == minutes-1 {
			stop.Store(true)
		}
		move()
	}
	wg.Wait()
	return perMin[:minutes]
}

// N instances, each its own Budget over the one Firestore, calling as
// fast as they can: together they never make more calls than the share
// in any minute, even when a minute passes while they hold leased tokens,
// and spend it all when they call long enough; each new minute holds the
// share again.
func TestBudgetFleetNeverExceedsShare(t *testing.T) {
	const instances, workers, share, minutes = 4, 4, 120, 4
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	st, calls := ledgers(t, instances)
	budgets := make([]*Budget, instances)
	for i := range budgets {
		budgets[i] = &Budget{PerMinute: share, Ledger: st[i], Shards: 3, Batch: 5, Clock: clk}
	}
	perMin := hammer(t, clk, budgets, workers, minutes, share, true)
	made := 0
	for m, n := range perMin {
		made += n
		switch {
		case n > share:
			t.Errorf("minute %d: %d calls, more than the share of %d", m, n, share)
		case m%2 == 1 && n != share:
			t.Errorf("minute %d: %d calls, want the whole share of %d", m, n, share)
		}
	}
	rpcs, by := calls.total()
	t.Logf("calls per minute %v: %d Firestore RPCs (%.2f a call; %v)", perMin, rpcs, float64(rpcs)/float64(made), by)
}

// One busy instance among idle ones spends the whole share; when the
// idle ones made a call each, it spends all but what they hold.
func TestBudgetOneBusyInstanceSpendsTheShare(t *testing.T) {
	const instances, share, batch = 4, 120, 5
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	st, _ := ledgers(t, instances)
	budgets := make([]*Budget, instances)
	for i := range budgets {
		budgets[i] = &Budget{PerMinute: share, Ledger: st[i], Shards: 3, Batch: batch, Clock: clk}
	}
	if perMin := hammer(t, clk, budgets[:1], 4, 1, share, false); perMin[0] != share {
		t.Errorf("the busy instance made %d calls in its minute, want the whole share of %d", perMin[0], share)
	}
	ctx := context.Background()
	for _, b := range budgets[1:] {
		if err := b.take(ctx, "p"); err != nil {
			t.Fatal(err)
		}
	}
	perMin := hammer(t, clk, budgets[:1], 4, 1, share, false)
	if held := (instances - 1) * (batch - 1); perMin[0] < share-(instances-1)-held || perMin[0] > share-(instances-1) {
		t.Errorf("the busy instance made %d calls while 3 others made one each, want %d to %d", perMin[0], share-(instances-1)-held, share-(instances-1))
	}
}

// A call on a spent minute waits for the next one, and is made in it.
func TestBudgetTakeWaitsForTheNextMinute(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 50, 0, time.UTC))
	st, _ := ledgers(t, 2)
	a := &Budget{PerMinute: 4, Ledger: st[0], Clock: clk}
	b := &Budget{PerMinute: 4, Ledger: st[1], Clock: clk}
	ctx := context.Background()
	for range 2 {
		for _, x := range []*Budget{a, b} {
			if err := x.take(ctx, "p"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ok, wait, _ := a.allow("p", "", false); ok || wait != 10*time.Second {
		t.Errorf("converging run on a spent minute = %v, put off %v; want put off 10s, to the minute's end", ok, wait)
	}
	done := make(chan error, 1)
	go func() { done <- b.take(ctx, "p") }()
	wait.For(t, "take on a spent minute to wait for the next", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("take on a spent minute returned %v before the minute ended", err)
		default:
		}
		return clk.HasWaiters(), "nothing waits on the clock"
	})
	clk.Step(10 * time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("take did not return once the next minute began")
	}
	if ok, _, _ := a.allow("p", "", false); !ok {
		t.Errorf("converging run in the new minute refused, want allowed")
	}
}

// BenchmarkBudgetTake reports the Firestore round trips of a GKE call's
// token, amortized over the batch an instance leases at once.
func BenchmarkBudgetTake(b *testing.B) {
	for _, batch := range []int{1, 10, 20} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			st, calls := ledgers(b, 1)
			clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
			bg := &Budget{PerMinute: 1e9, Ledger: st[0], Shards: 4, Batch: batch, Clock: clk}
			ctx := context.Background()
			n := 0
			for b.Loop() {
				if err := bg.take(ctx, "p"); err != nil {
					b.Fatal(err)
				}
				n++
			}
			rpcs, by := calls.total()
			b.ReportMetric(float64(rpcs)/float64(n), "rpcs/call")
			b.ReportMetric(float64(by["Commit"])/float64(n), "commits/call")
		})
	}
}

// failingLedger is a Ledger whose Firestore is unreachable.
type failingLedger struct{}

var errUnreachable = errors.New("firestore unreachable")

func (failingLedger) LeaseBudget(context.Context, string, string, time.Time, int, time.Time, func(store.BudgetShard) store.BudgetGrant) (store.BudgetShard, error) {
	return store.BudgetShard{}, errUnreachable
}

// A Ledger that fails lets a run start, and its first call fails with
// why, so that the run is retried with backoff rather than put off
// unseen.
func TestBudgetLedgerFails(t *testing.T) {
	b := &Budget{PerMinute: 100, Ledger: failingLedger{}, Clock: testingclock.NewFakeClock(time.Now())}
	if ok, _, _ := b.allow("p", "", true); !ok {
		t.Errorf("allow with a failing ledger = false, want the run let through")
	}
	if err := b.take(context.Background(), "p"); !errors.Is(err, errUnreachable) {
		t.Errorf("take with a failing ledger = %v, want the ledger's error", err)
	}
}
