package clusters

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Budget is the share of each provider project's request quota that the
// runs of the reconciler, on all its instances together, may spend: at
// most PerMinute calls per project in every clock minute (the provider's
// quota window), whatever the number of instances.
//
// The minute's calls are tokens kept in the Ledger (Firestore), split into
// Shards documents so that none is written more than about once a second.
// An instance takes a Batch of tokens from a random shard in one
// transaction (falling back to the others when it is spent) and spends
// them in the process; tokens left when the minute ends are lost, never
// carried over, so the fleet together never takes more than the minute
// holds. An instance that is alone to call spends the whole minute; idle
// instances hold nothing.
//
// Runs that converge something (a tenant's change, a cluster being made)
// have priority: they may spend the whole minute, and when it is spent
// they are put off to the next one. A steady refresh may spend only
// tokens that were above the Reserve kept for them when leased; when a
// project is crowded, it is put off to a random moment within Stretch
// after the minute ends, so that steady refreshes spread instead of coming
// back together. Neither is an error: nothing is shown, nothing is
// written, and the provider never sees the calls that were put off.
//
// Every call takes a token, waiting for the next minute if it must: a
// run's later calls never overdraw the minute, whatever runs go on at the
// same time on any instance.
type Budget struct {
	// PerMinute is the calls per minute per project the reconciler may
	// make, all instances together: the project's quota times the share
	// given to the reconciler. Zero or less: no limit.
	PerMinute float64
	// Reserve is the fraction of the minute that steady refreshes leave
	// for converging runs.
	Reserve float64
	// Stretch bounds how far past the minute a put-off steady refresh is
	// moved.
	Stretch time.Duration
	// Ledger keeps the tokens taken of each project's minutes, shared by
	// every instance (store.Store). Nil keeps them in this process only,
	// which is right only for a reconciler that is one process.
	Ledger Ledger
	// Shards is how many documents hold a project's minute, and Batch how
	// many tokens an instance leases at once. Zero: from PerMinute, a
	// fiftieth of it (1 to 20) a batch and enough shards that each sees at
	// most about 30 leases a minute.
	Shards, Batch int
	// Clock is the clock; nil means the real one.
	Clock clock.Clock
	// Metrics counts the calls charged to each project; nil counts
	// nothing.
	Metrics BudgetMetrics

	mu      sync.Mutex
	local   *memLedger
	minutes map[string]*minute
}

// Ledger is where the tokens taken of each project's minutes are kept
// (store.Store).
type Ledger interface {
	// LeaseBudget takes up to want of the tokens of one shard (holding
	// capacity) of project's clock minute, leaving at least floor; it
	// returns how many it took and how many the shard has left.
	LeaseBudget(ctx context.Context, project string, minute time.Time, shard, capacity, want, floor int) (got, left int, err error)
}

// minute is what this instance holds and knows of a project's minute.
type minute struct {
	start  time.Time
	tokens int // leased, not yet spent
	// free is how many of the tokens were above the reserve when leased:
	// those a steady run may spend.
	free int
	left []int // each shard's tokens left, as last seen
	// leasing, when not nil, is closed when the lease in flight ends:
	// the instance's runs wait for it rather than each leasing.
	leasing chan struct{}
}

// allowTimeout bounds the Ledger calls of allow, which has no context of
// its own.
const allowTimeout = 10 * time.Second

// allow reports whether a run of project may start its calls now, and if
// not, after how long to try again. It leases tokens if the instance has
// none, so that a run is put off rather than left waiting mid-way; a
// Ledger that fails lets the run go, and its first call shows why.
func (b *Budget) allow(project string, steady bool) (bool, time.Duration) {
	if b == nil || b.PerMinute <= 0 {
		return true, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), allowTimeout)
	defer cancel()
	ok, wait, err := b.reserve(ctx, project, steady, false)
	if err != nil || ok {
		return true, 0
	}
	if steady && b.Stretch > 0 {
		wait += rand.N(b.Stretch)
	}
	return false, max(wait, time.Second)
}

// take spends one call of project, waiting until the fleet's minute has
// one or ctx ends.
func (b *Budget) take(ctx context.Context, project string) error {
	if b == nil {
		return nil
	}
	if b.PerMinute <= 0 {
		b.spent(ctx, project)
		return nil
	}
	for {
		ok, wait, err := b.reserve(ctx, project, false, true)
		if err != nil {
			return fmt.Errorf("the provider's request budget of %s: %w", project, err)
		}
		if ok {
			b.spent(ctx, project)
			return nil
		}
		t := b.clock().NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the provider's request budget of %s: %w", project, ctx.Err())
		case <-t.C():
		}
	}
}

// reserve makes sure this instance holds a token of project's current
// minute, leasing a batch if it must, and spends it if spend. A steady
// run is only given a token that was above the reserve. When no token can
// be had, it returns how long until the minute ends.
func (b *Budget) reserve(ctx context.Context, project string, steady, spend bool) (ok bool, wait time.Duration, err error) {
	for {
		b.mu.Lock()
		if b.Ledger == nil && b.local == nil {
			b.local = &memLedger{taken: map[memKey]int{}}
		}
		now := b.clock().Now()
		m := b.minute(project, now)
		if m.free > 0 || m.tokens > 0 && !steady {
			if spend {
				// A converging run spends the reserve's tokens first.
				m.tokens--
				m.free = min(m.free, m.tokens)
			}
			b.mu.Unlock()
			return true, 0, nil
		}
		if m.leasing != nil {
			done := m.leasing
			b.mu.Unlock()
			select {
			case <-ctx.Done():
				return false, 0, ctx.Err()
			case <-done:
			}
			continue
		}
		floors := b.floors(steady)
		open := m.open(floors)
		if len(open) == 0 {
			b.mu.Unlock()
			return false, m.start.Add(time.Minute).Sub(now), nil
		}
		done := make(chan struct{})
		m.leasing = done
		b.mu.Unlock()

		err := b.lease(ctx, project, m, open, floors)
		b.mu.Lock()
		m.leasing = nil
		close(done)
		b.mu.Unlock()
		if err != nil {
			return false, 0, err
		}
	}
}

// lease takes a batch for m from the first of the open shards, tried in a
// random order, that has some. Only reserve's one lease of m at a time
// calls it.
func (b *Budget) lease(ctx context.Context, project string, m *minute, open []int, floors []int) error {
	rand.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
	reserve := b.floors(true)
	for _, i := range open {
		got, left, err := b.ledger().LeaseBudget(ctx, project, m.start, i, b.capacity(i), b.batch(), floors[i])
		if err != nil {
			return err
		}
		b.mu.Lock()
		m.left[i] = left
		m.tokens += got
		m.free += max(0, got-max(0, reserve[i]-left))
		b.mu.Unlock()
		if got > 0 {
			return nil
		}
	}
	return nil
}

// minute returns what the instance holds of project's minute at now; a
// past minute's tokens are dropped. Must be called with the lock held.
func (b *Budget) minute(project string, now time.Time) *minute {
	start := now.Truncate(time.Minute)
	if b.minutes == nil {
		b.minutes = map[string]*minute{}
	}
	m := b.minutes[project]
	if m == nil || !m.start.Equal(start) {
		m = &minute{start: start, left: make([]int, b.shards())}
		for i := range m.left {
			m.left[i] = b.capacity(i)
		}
		b.minutes[project] = m
	}
	return m
}

// open returns the shards that, as last seen, hold more than their floor.
func (m *minute) open(floors []int) []int {
	var open []int
	for i, l := range m.left {
		if l > floors[i] {
			open = append(open, i)
		}
	}
	return open
}

// perMinute is the tokens of a project's minute.
func (b *Budget) perMinute() int { return max(1, int(b.PerMinute)) }

// batch is how many tokens a lease asks for.
func (b *Budget) batch() int {
	if b.Batch > 0 {
		return b.Batch
	}
	return min(20, max(1, b.perMinute()/50))
}

// shards is how many shards hold a project's minute.
func (b *Budget) shards() int {
	if b.Shards > 0 {
		return min(b.Shards, b.perMinute())
	}
	leases := (b.perMinute() + b.batch() - 1) / b.batch()
	return max(1, (leases+29)/30)
}

// capacity is shard i's tokens: the minute's, split as evenly as they go.
func (b *Budget) capacity(i int) int {
	n := b.shards()
	c := b.perMinute() / n
	if i < b.perMinute()%n {
		c++
	}
	return c
}

// floors are the tokens of each shard that a run must leave: the reserve
// for a steady one, none for a converging one.
func (b *Budget) floors(steady bool) []int {
	f := make([]int, b.shards())
	if steady {
		for i := range f {
			f[i] = int(b.Reserve * float64(b.capacity(i)))
		}
	}
	return f
}

func (b *Budget) clock() clock.Clock {
	if b.Clock == nil {
		return clock.RealClock{}
	}
	return b.Clock
}

// ledger returns the Ledger, or the process's own (made by reserve).
func (b *Budget) ledger() Ledger {
	if b.Ledger != nil {
		return b.Ledger
	}
	return b.local
}

// memLedger is a Ledger in memory, for a reconciler that is one process.
type memLedger struct {
	mu    sync.Mutex
	taken map[memKey]int
}

type memKey struct {
	project string
	minute  time.Time
	shard   int
}

// LeaseBudget implements Ledger. Past minutes are forgotten as they pass.
func (l *memLedger) LeaseBudget(_ context.Context, project string, minute time.Time, shard, capacity, want, floor int) (got, left int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	minute = minute.Truncate(time.Minute)
	for k := range l.taken {
		if k.minute.Before(minute) {
			delete(l.taken, k)
		}
	}
	k := memKey{project, minute, shard}
	left = max(0, capacity-l.taken[k])
	got = max(0, min(want, left-floor))
	l.taken[k] += got
	return got, left - got, nil
}
