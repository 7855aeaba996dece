package clusters

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// The water level: what each of the tenants that want a shard may take
// up to when total is theirs together.
func TestWaterLevel(t *testing.T) {
	for _, c := range []struct {
		name  string
		taken []int
		total int
		want  int
	}{
		{"one tenant", []int{0}, 100, 100},
		{"two, none taken", []int{0, 0}, 100, 50},
		{"two, one ahead", []int{0, 70}, 100, 30},
		{"two, one ahead below the level", []int{10, 30}, 100, 50},
		{"five, even", []int{0, 0, 0, 0, 0}, 100, 20},
		{"five, two ahead", []int{0, 0, 0, 40, 45}, 100, 5},
		{"five, rounded down", []int{0, 0, 0, 0, 0}, 99, 19},
		{"more taken than total", []int{30, 90}, 100, 10},
		{"nothing usable", []int{20, 20}, 0, -20},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := waterLevel(c.taken, c.total); got != c.want {
				t.Errorf("waterLevel(%v, %d) = %d, want %d", c.taken, c.total, got, c.want)
			}
		})
	}
}

// How much more of a shard a tenant may take, by who else wants it, what
// each took and how far into the minute.
func TestFairRoom(t *testing.T) {
	const capacity = 120
	for _, c := range []struct {
		name    string
		taken   map[string]int
		others  []string
		tenant  string
		elapsed float64
		want    int
	}{
		// Alone: a fifth at once (four shares kept for tenants that may
		// come), the rest released as the minute passes, all at its end.
		{"alone at the start", nil, nil, "acme", 0, 24},
		{"alone, a quarter gone", map[string]int{"acme": 30}, nil, "acme", 0.25, 18},
		{"alone at the end", map[string]int{"acme": 60}, nil, "acme", 1, 60},
		// Two: a sixth each at once; a newcomer in the middle of another's
		// burst finds its share.
		{"two at the start", nil, []string{"globex"}, "acme", 0, 20},
		{"newcomer after a burst", map[string]int{"acme": 34}, []string{"acme"}, "globex", 0.1, 14},
		{"the burst held for the newcomer", map[string]int{"acme": 34}, []string{"globex"}, "acme", 0.1, -20},
		{"two at the end, one behind", map[string]int{"acme": 70, "globex": 20}, []string{"acme"}, "globex", 1, 30},
		{"two at the end, even", map[string]int{"acme": 60, "globex": 60}, []string{"acme"}, "globex", 1, 0},
		// What a tenant that no longer asks took stays taken; the rest is
		// the others'.
		{"left by a tenant gone", map[string]int{"globex": 10}, nil, "acme", 1, 110},
		// Five: a ninth each at once, a fifth each at the end.
		{"five at the start", nil, []string{"b", "c", "d", "e"}, "a", 0, 13},
		{"five at the end", map[string]int{"b": 24, "c": 24, "d": 24, "e": 24}, []string{"b", "c", "d", "e"}, "a", 1, 24},
		{"five, one ahead at the end", map[string]int{"a": 40, "b": 20, "c": 20, "d": 20}, []string{"b", "c", "d", "e"}, "a", 1, -20},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fairRoom(capacity, c.taken, c.others, c.tenant, c.elapsed); got != c.want {
				t.Errorf("fairRoom(%d, %v, %v, %q, %v) = %d, want %d", capacity, c.taken, c.others, c.tenant, c.elapsed, got, c.want)
			}
		})
	}
}

// A lease's grant: the batch when the shard has it and the tenant's share
// does; the tenant's ask recorded with tokens, or when it was not recent.
func TestBudgetGrant(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	now := start.Add(30 * time.Second)
	b := &Budget{PerMinute: 120, Batch: 10, Fair: true}
	for _, c := range []struct {
		name  string
		sh    store.BudgetShard
		floor int
		want  store.BudgetGrant
	}{
		{"empty shard", store.BudgetShard{}, 0, store.BudgetGrant{Got: 10, Ask: true}},
		{"shard spent", store.BudgetShard{Taken: 120, Tenants: map[string]int{"acme": 120}}, 0, store.BudgetGrant{}},
		{"down to the floor", store.BudgetShard{Taken: 90, Tenants: map[string]int{"acme": 90}}, 30, store.BudgetGrant{}},
		{"share spent, asked lately", store.BudgetShard{Taken: 80, Tenants: map[string]int{"acme": 20, "globex": 60},
			Asks: map[string]time.Time{"acme": now.Add(-time.Second), "globex": now.Add(-time.Second)}}, 0, store.BudgetGrant{}},
		{"share spent, asked long ago", store.BudgetShard{Taken: 80, Tenants: map[string]int{"acme": 20, "globex": 60},
			Asks: map[string]time.Time{"acme": now.Add(-time.Second), "globex": now.Add(-5 * time.Second)}}, 0, store.BudgetGrant{Ask: true}},
		{"the other no longer asks", store.BudgetShard{Taken: 50, Tenants: map[string]int{"acme": 20, "globex": 30},
			Asks: map[string]time.Time{"acme": now.Add(-11 * time.Second), "globex": now.Add(-time.Second)}}, 0, store.BudgetGrant{Got: 10, Ask: true}},
		{"part of a batch", store.BudgetShard{Taken: 76, Tenants: map[string]int{"acme": 60, "globex": 16},
			Asks: map[string]time.Time{"acme": now, "globex": now}}, 0, store.BudgetGrant{Got: 4, Ask: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := b.grant(c.sh, "globex", 120, c.floor, 0.5, now); got != c.want {
				t.Errorf("grant(%+v) = %+v, want %+v", c.sh, got, c.want)
			}
		})
	}
	unfair := &Budget{PerMinute: 120, Batch: 10}
	sh := store.BudgetShard{Taken: 80, Tenants: map[string]int{"acme": 20, "globex": 60}, Asks: map[string]time.Time{"acme": now}}
	if got := unfair.grant(sh, "globex", 120, 0, 0.5, now); got.Got != 10 {
		t.Errorf("without Fair: grant = %+v, want the batch", got)
	}
}

// fairRun is a minute of tenants calling one project's budget from
// several instances at once, each instance its own Budget over one
// Firestore.
type fairRun struct {
	t       *testing.T
	clk     *testingclock.FakeClock
	st      []*store.Store
	share   int
	mu      sync.Mutex
	budgets map[string][]*Budget // each tenant's instances
	made    map[string]int       // calls made in the current minute
}

func (f *fairRun) newBudget(i int) *Budget {
	return &Budget{PerMinute: float64(f.share), Ledger: f.st[i%len(f.st)], Batch: 3, Fair: true, Active: 20 * time.Second, Clock: f.clk}
}

// round lets every worker of every tenant that wants more (demand: the
// calls it wants in the minute, 0 for no limit) call until its instance
// finds nothing for it at this moment of the clock; it returns each
// tenant's calls in the round.
func (f *fairRun) round(demand map[string]int, workers int) map[string]int {
	got := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for tenant, bs := range f.budgets {
		for _, b := range bs {
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						// A call is counted before it is made, so that
						// workers together make no more than demand.
						f.mu.Lock()
						if d := demand[tenant]; d > 0 && f.made[tenant] >= d {
							f.mu.Unlock()
							return
						}
						f.made[tenant]++
						f.mu.Unlock()
						ok, _, _, err := b.reserve(context.Background(), "p", tenant, false, true)
						f.mu.Lock()
						if ok {
							got[tenant]++
						} else {
							f.made[tenant]--
						}
						f.mu.Unlock()
						if err != nil {
							errs <- err
							return
						}
						if !ok {
							return
						}
					}
				}()
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
	return got
}

// Two and five tenants calling one project's budget as fast as they can,
// from two instances each (one of them killed and replaced in the middle
// of each minute, losing the tokens it held), the clock moving 10 s at a
// time: no minute ever gives more than the budget, and each minute is
// divided equally between the tenants that want it (within 10% of the
// minute's fair share), what a tenant leaves going to the others, and a
// tenant alone using all of it. A tenant that comes in the middle of
// another's burst gets calls at once.
func TestBudgetFairShares(t *testing.T) {
	for _, c := range []struct {
		name    string
		tenants []string
		demand  map[string]int // calls a minute; none: all it can
		from    map[string]int // the round (of 6 a minute) a tenant starts at in the first minute
	}{
		{name: "alone", tenants: []string{"acme"}},
		{name: "two", tenants: []string{"acme", "globex"}},
		{name: "two, one late", tenants: []string{"acme", "globex"}, from: map[string]int{"globex": 2}},
		{name: "two, one wanting little", tenants: []string{"acme", "globex"}, demand: map[string]int{"globex": 12}},
		{name: "five", tenants: []string{"a", "b", "c", "d", "e"}},
		{name: "five, two late", tenants: []string{"a", "b", "c", "d", "e"}, from: map[string]int{"d": 1, "e": 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const share, instances, workers, minutes = 120, 2, 1, 2
			start := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
			clk := testingclock.NewFakeClock(start)
			st, calls := ledgers(t, 3)
			t0 := time.Now()
			defer func() { n, by := calls.total(); t.Logf("%d Firestore RPCs in %v: %v", n, time.Since(t0), by) }()
			f := &fairRun{t: t, clk: clk, st: st, share: share, budgets: map[string][]*Budget{}}
			for m := range minutes {
				f.made = map[string]int{}
				for r := range 6 {
					clk.SetTime(start.Add(time.Duration(m)*time.Minute + time.Duration(r)*10*time.Second))
					for i, tenant := range c.tenants {
						if m == 0 && r < c.from[tenant] {
							continue
						}
						if f.budgets[tenant] == nil {
							for j := range instances {
								f.budgets[tenant] = append(f.budgets[tenant], f.newBudget(i+j))
							}
						}
					}
					if r == 3 {
						// An instance of each tenant is killed; a new
						// one takes its place.
						for i, tenant := range c.tenants {
							if bs := f.budgets[tenant]; bs != nil {
								bs[0] = f.newBudget(i)
							}
						}
					}
					got := f.round(c.demand, workers)
					for tenant, from := range c.from {
						if m == 0 && r == from && got[tenant] == 0 {
							t.Errorf("minute %d, %ds: %s, coming in the middle of the others' burst, made no call", m, r*10, tenant)
						}
					}
				}
				// The minute's last moment: what is left is released.
				clk.SetTime(start.Add(time.Duration(m)*time.Minute + time.Minute - time.Millisecond))
				f.round(c.demand, workers)
				f.check(m, c.tenants, c.demand, c.from)
				f.budgets = map[string][]*Budget{} // instances restarted between minutes
				if m == 0 {
					c.from = nil
				}
			}
		})
	}
}

// check holds minute m's calls to the budget and the fair shares.
func (f *fairRun) check(m int, tenants []string, demand, from map[string]int) {
	t := f.t
	total := 0
	for _, n := range f.made {
		total += n
	}
	t.Logf("minute %d: %v (%d of %d)", m, f.made, total, f.share)
	if total > f.share {
		t.Errorf("minute %d: %d calls, more than the budget of %d", m, total, f.share)
	}
	// Tokens lost: those the killed instances held, a batch each, and
	// leased but not spent by the end.
	lost := 3 * 2 * len(tenants)
	if total < f.share-lost {
		t.Errorf("minute %d: %d calls of the budget's %d, want at least %d (a tenant's share left unused goes to the others)", m, total, f.share, f.share-lost)
	}
	// The tenants that wanted all they could, from the start, share what
	// the others left equally.
	left := f.share
	var greedy []string
	for _, tenant := range tenants {
		if demand[tenant] > 0 || from[tenant] > 0 {
			left -= f.made[tenant]
			continue
		}
		greedy = append(greedy, tenant)
	}
	fair := float64(left) / float64(len(greedy))
	for _, tenant := range greedy {
		if n := f.made[tenant]; math.Abs(float64(n)-fair) > 0.1*fair {
			t.Errorf("minute %d: %s made %d calls, want %.0f ± 10%% (calls %v)", m, tenant, n, fair, f.made)
		}
	}
	for tenant, d := range demand {
		if f.made[tenant] != d {
			t.Errorf("minute %d: %s made %d calls, wanting %d", m, tenant, f.made[tenant], d)
		}
	}
	names := make([]string, 0, len(from))
	for tenant := range from {
		names = append(names, tenant)
	}
	sort.Strings(names)
	for _, tenant := range names {
		if f.made[tenant] == 0 {
			t.Errorf("minute %d: late %s made no call", m, tenant)
		}
	}
}

// A run put off for its tenant's share records when its wait began, and
// says so in the cluster's and its changing pools' message only once it
// has waited more than a minute; a wait for the project's minute spent
// says nothing.
func TestShareWaitSaidAfterAMinute(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	now := start.Add(30 * time.Second)
	clk := testingclock.NewFakeClock(now)
	ledger := &memLedger{shards: map[memKey]*store.BudgetShard{}}
	// acme has taken half the minute; globex wants its share.
	ledger.shards[memKey{"p", start, 0}] = &store.BudgetShard{Taken: 5,
		Tenants: map[string]int{"acme": 5}, Asks: map[string]time.Time{"acme": now, "globex": now}}
	b := &Budget{PerMinute: 10, Batch: 1, Fair: true, Ledger: ledger, Clock: clk}
	r := &Reconciler{now: clk.Now, budget: b}
	pending := poolDoc("a", resource.StatePending, 1)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		retrying *model.Retry
		wantMsg  string
	}{
		{"first put off", nil, ""},
		{"put off for 30 s", &model.Retry{Since: now.Add(-30 * time.Second), Reason: ShareWait}, ""},
		{"put off for 61 s", &model.Retry{Since: now.Add(-61 * time.Second), Reason: ShareWait}, ShareWait},
		{"after another failure", &model.Retry{Since: now.Add(-5 * time.Minute), Reason: "GKE is unavailable"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := clusterDoc(resource.StateProvisioning, func(cl *model.Cluster) { cl.Status.Retrying = c.retrying })
			u := &run{r: r, read: store.ClusterRun{Cluster: cl, Pools: []model.NodePool{pending}}}
			pl, err := u.Plan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if out := pl.Outcome; pl.Act || out.Next != chain.Deferred || out.After <= 0 || !out.Changed && c.retrying == nil {
				t.Fatalf("Plan() = %+v, want put off, the wait recorded", pl)
			}
			got := u.d.Cluster.Status
			since := now
			if c.retrying != nil && c.retrying.Reason == ShareWait {
				since = c.retrying.Since
			}
			if got.Retrying == nil || got.Retrying.Reason != ShareWait || !got.Retrying.Since.Equal(since) {
				t.Errorf("Retrying = %+v, want the share's wait since %v", got.Retrying, since)
			}
			if (got.Message == ShareWait) != (c.wantMsg != "") || (u.d.Pools[0].Status.Message == ShareWait) != (c.wantMsg != "") {
				t.Errorf("messages: cluster %q, pool %q; want %q", got.Message, u.d.Pools[0].Status.Message, c.wantMsg)
			}
		})
	}
	// A failure after a long wait for the share starts its own record.
	waited := clusterDoc(resource.StateProvisioning, func(cl *model.Cluster) {
		cl.Status.Retrying = &model.Retry{Since: now.Add(-5 * time.Minute), Reason: ShareWait}
	})
	f := &run{r: r, read: store.ClusterRun{Cluster: waited}}
	f.failed(ctx, errors.New("GKE is unavailable"))
	if got := f.d.Cluster.Status.Retrying; got == nil || !got.Since.Equal(now) || got.Reason != "GKE is unavailable" {
		t.Errorf("a failure after waiting for the share: Retrying = %+v, want the failure's own since %v", got, now)
	}
	// The project's minute spent: put off, nothing written.
	ledger.shards[memKey{"p", start, 0}] = &store.BudgetShard{Taken: 10, Tenants: map[string]int{"globex": 10}}
	b2 := &Budget{PerMinute: 10, Batch: 1, Fair: true, Ledger: ledger, Clock: clk}
	u := &run{r: &Reconciler{now: clk.Now, budget: b2}, read: store.ClusterRun{Cluster: clusterDoc(resource.StateProvisioning)}}
	if pl, err := u.Plan(ctx); err != nil || pl.Outcome.Next != chain.Deferred || pl.Outcome.After <= 0 || pl.Outcome.Changed {
		t.Errorf("Plan() with the minute spent = %+v, %v; want put off, nothing changed", pl, err)
	}
}
