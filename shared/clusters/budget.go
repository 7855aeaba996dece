package clusters

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/store"
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
//
// With Fair, the minute is divided between the tenants whose runs want it
// (API.md §10): tokens are leased for a tenant, each shard records what
// each tenant took of it and when each last asked, and a lease decides in
// its one transaction, from that document alone, how much of the shard
// the tenant's share leaves it (fairRoom). A lease costs no more round
// trips than without; a tenant whose share of a shard is spent while the
// shard has tokens leaves that shard alone for a while (holdFor), so that
// its put-off runs cost nothing in Firestore.
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
	// Fair divides each minute between tenants (fairRoom); without it a
	// minute goes to whoever asks first.
	Fair bool
	// Active is how long a tenant's last ask for tokens counts as wanting
	// its share; zero: 10 s.
	Active time.Duration
	// Clock is the clock; nil means the real one.
	Clock clock.Clock
	// Metrics counts the calls charged to each project; nil counts
	// nothing.
	Metrics BudgetMetrics

	mu      sync.Mutex
	local   *memLedger
	minutes map[string]*minute // by project and tenant
	swept   time.Time          // the minute whose past ones minutes lost
}

// Ledger is where the tokens taken of each project's minutes are kept
// (store.Store).
type Ledger interface {
	// LeaseBudget decides a lease of tenant on one shard of project's
	// clock minute in one transaction: decide is given the shard as it is
	// and says how many tokens tenant takes and whether its ask is
	// recorded (at at); it returns the shard as the lease left it.
	LeaseBudget(ctx context.Context, project, tenant string, minute time.Time, shard int, at time.Time, decide func(store.BudgetShard) store.BudgetGrant) (store.BudgetShard, error)
}

// minute is what this instance holds and knows of a project's minute for
// one tenant.
type minute struct {
	start  time.Time
	tokens int // leased, not yet spent
	// free is how many of the tokens were above the reserve when leased:
	// those a steady run may spend.
	free int
	left []int // each shard's tokens left, as last seen
	// held is, for each shard, until when the tenant's share of it is
	// spent while the shard has tokens: it is not asked again before.
	held []time.Time
	// next is the shard to lease from first (-1: a random one).
	next int
	// leasing, when not nil, is closed when the lease in flight ends:
	// the instance's runs wait for it rather than each leasing.
	leasing chan struct{}
}

// allowTimeout bounds the Ledger calls of allow, which has no context of
// its own.
const allowTimeout = 10 * time.Second

// allow reports whether a run of tenant in project may start its calls
// now, and if not, after how long to try again and whether it waits for
// the tenant's share (rather than for the project's minute). It leases
// tokens if the instance has none, so that a run is put off rather than
// left waiting mid-way; a Ledger that fails lets the run go, and its
// first call shows why.
func (b *Budget) allow(project, tenant string, steady bool) (ok bool, wait time.Duration, share bool) {
	if b == nil || b.PerMinute <= 0 {
		return true, 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), allowTimeout)
	defer cancel()
	ok, wait, share, err := b.reserve(ctx, project, tenant, steady, false)
	if err != nil || ok {
		return true, 0, false
	}
	if steady && b.Stretch > 0 {
		wait += rand.N(b.Stretch)
	}
	return false, max(wait, time.Second), share
}

// tenantKey is the context key of the tenant whose run spends the budget.
type tenantKey struct{}

// withTenant returns ctx for a run of tenant: take charges its calls to
// tenant's share.
func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantOf is the tenant withTenant put in ctx ("" for none).
func tenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// take spends one call of project for the tenant of ctx (withTenant),
// waiting until the fleet's minute has one for it or ctx ends.
func (b *Budget) take(ctx context.Context, project string) error {
	if b == nil {
		return nil
	}
	if b.PerMinute <= 0 {
		b.spent(ctx, project)
		return nil
	}
	tenant := tenantOf(ctx)
	for {
		ok, wait, _, err := b.reserve(ctx, project, tenant, false, true)
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
// minute for tenant, leasing a batch if it must, and spends it if spend.
// A steady run is only given a token that was above the reserve. When no
// token can be had, it returns how long until one may be (the minute's
// end, or when the tenant's share of a shard is looked at again), and
// share when the tenant waits for its share while the project has tokens.
func (b *Budget) reserve(ctx context.Context, project, tenant string, steady, spend bool) (ok bool, wait time.Duration, share bool, err error) {
	for {
		b.mu.Lock()
		if b.Ledger == nil && b.local == nil {
			b.local = &memLedger{shards: map[memKey]*store.BudgetShard{}}
		}
		now := b.clock().Now()
		m := b.minute(project, tenant, now)
		if m.free > 0 || m.tokens > 0 && !steady {
			if spend {
				// A converging run spends the reserve's tokens first.
				m.tokens--
				m.free = min(m.free, m.tokens)
			}
			b.mu.Unlock()
			return true, 0, false, nil
		}
		if m.leasing != nil {
			done := m.leasing
			b.mu.Unlock()
			select {
			case <-ctx.Done():
				return false, 0, false, ctx.Err()
			case <-done:
			}
			continue
		}
		floors := b.floors(steady)
		open, until := m.open(floors, now)
		if len(open) == 0 {
			b.mu.Unlock()
			end := m.start.Add(time.Minute)
			if !until.IsZero() && until.Before(end) {
				return false, until.Sub(now), true, nil
			}
			return false, end.Sub(now), !until.IsZero(), nil
		}
		done := make(chan struct{})
		m.leasing = done
		b.mu.Unlock()

		err := b.lease(ctx, project, tenant, m, open, floors, now)
		b.mu.Lock()
		m.leasing = nil
		close(done)
		b.mu.Unlock()
		if err != nil {
			return false, 0, false, err
		}
	}
}

// lease takes a batch for m from the first of the open shards that gives
// some to tenant, in turn from the one after the shard it last leased
// from (a random one first): so that a tenant that wants tokens asks
// every shard in turn, and each shard knows it wants its share there.
// Only reserve's one lease of m at a time calls it.
func (b *Budget) lease(ctx context.Context, project, tenant string, m *minute, open []int, floors []int, now time.Time) error {
	if m.next < 0 {
		m.next = rand.N(len(m.left))
	}
	slices.SortFunc(open, func(i, j int) int {
		n := len(m.left)
		return (i-m.next+n)%n - (j-m.next+n)%n
	})
	reserve := b.floors(true)
	elapsed := float64(now.Sub(m.start)) / float64(time.Minute)
	for _, i := range open {
		var g store.BudgetGrant
		capacity := b.capacity(i)
		sh, err := b.ledger().LeaseBudget(ctx, project, tenant, m.start, i, now, func(sh store.BudgetShard) store.BudgetGrant {
			g = b.grant(sh, tenant, capacity, floors[i], elapsed, now)
			return g
		})
		if err != nil {
			return err
		}
		left := max(0, capacity-sh.Taken)
		b.mu.Lock()
		m.left[i] = left
		m.tokens += g.Got
		m.free += max(0, g.Got-max(0, reserve[i]-left))
		if g.Got == 0 && left > floors[i] {
			// The project has tokens here, the tenant's share not.
			m.held[i] = now.Add(b.holdFor())
		}
		b.mu.Unlock()
		if g.Got > 0 {
			b.mu.Lock()
			m.next = (i + 1) % len(m.left)
			b.mu.Unlock()
			return nil
		}
	}
	return nil
}

// grant decides a lease of a batch by tenant on a shard of capacity
// tokens as it is (sh), leaving floor, elapsed (0 to 1) of the minute
// gone. Without Fair, the batch or what the shard has above floor.
func (b *Budget) grant(sh store.BudgetShard, tenant string, capacity, floor int, elapsed float64, now time.Time) store.BudgetGrant {
	base := min(b.batch(), capacity-sh.Taken-floor)
	if base <= 0 {
		return store.BudgetGrant{}
	}
	if !b.Fair {
		return store.BudgetGrant{Got: base}
	}
	active := b.active()
	var wanting []string
	for t, at := range sh.Asks {
		if t != tenant && now.Sub(at) < active {
			wanting = append(wanting, t)
		}
	}
	got := min(base, fairRoom(capacity, sh.Tenants, wanting, tenant, elapsed))
	last, asked := sh.Asks[tenant]
	return store.BudgetGrant{Got: max(0, got), Ask: got > 0 || !asked || now.Sub(last) >= active/4}
}

// fairRoom is how many more tokens of a shard of capacity tenant may take,
// when taken holds what each tenant took of it and others are the other
// tenants that want some (they asked lately), elapsed (0 to 1) of the
// minute gone.
//
// The tenants that want tokens share the shard by max-min fairness: a
// water level L such that each of them may take up to L, the tenants that
// took more than L (before the others came) keeping theirs, and what
// tenants that no longer want some took being theirs. Of what is not
// taken, a part is kept for tenants that do not want any yet: the shares
// of newcomers more tenants, released evenly as the minute passes. So n
// tenants take n/(n+4) of the minute at once and the rest as the minute
// goes (a tenant alone, a fifth, and all of it by the minute's end); one
// that comes in the middle of another's burst finds its share there; and
// tenants that come at the same moment cannot take more than their fair
// share before they know of each other.
func fairRoom(capacity int, taken map[string]int, others []string, tenant string, elapsed float64) int {
	elapsed = min(1, max(0, elapsed))
	want := map[string]bool{tenant: true}
	levels := []int{taken[tenant]}
	for _, o := range others {
		if !want[o] {
			want[o] = true
			levels = append(levels, taken[o])
		}
	}
	n := len(levels)
	usable := capacity - int(float64(capacity)*(1-elapsed)*newcomers/float64(n+newcomers))
	for t, n := range taken {
		if !want[t] {
			usable -= n
		}
	}
	return waterLevel(levels, usable) - taken[tenant]
}

// newcomers is how many tenants' shares a minute keeps, released as it
// passes, for tenants that do not want any of it yet (fairRoom).
const newcomers = 4

// waterLevel is the level L such that the sum over taken of max(t, L) is
// total, rounded down: what each of the tenants that took taken may take
// up to when total is theirs together. Below the least taken when they
// took more than total.
func waterLevel(taken []int, total int) int {
	x := slices.Clone(taken)
	slices.Sort(x)
	above := 0
	for _, v := range x {
		above += v
	}
	for i, v := range x {
		// The i+1 lowest at the level, the rest above it.
		above -= v
		l := floorDiv(total-above, i+1)
		if i == len(x)-1 || l <= x[i+1] {
			return l
		}
	}
	return total
}

// floorDiv is a/b rounded toward minus infinity, for b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// active is how long a tenant's last ask counts as wanting a share.
func (b *Budget) active() time.Duration {
	if b.Active > 0 {
		return b.Active
	}
	return 10 * time.Second
}

// holdFor is how long a shard whose tokens the tenant's share does not
// reach is left before it is asked again: a quarter of active, so that
// the tenant, still wanting, keeps its ask fresh.
func (b *Budget) holdFor() time.Duration {
	return max(time.Second, b.active()/4)
}

// minute returns what the instance holds of project's minute at now for
// tenant; a past minute's tokens are dropped. Must be called with the
// lock held.
func (b *Budget) minute(project, tenant string, now time.Time) *minute {
	start := now.Truncate(time.Minute)
	if b.minutes == nil {
		b.minutes = map[string]*minute{}
	}
	if start.After(b.swept) {
		// Once a minute, forget the past minutes of every project and
		// tenant, those that called no more as well.
		for k, m := range b.minutes {
			if m.start.Before(start) && m.leasing == nil {
				delete(b.minutes, k)
			}
		}
		b.swept = start
	}
	key := project + "\x00" + tenant
	m := b.minutes[key]
	if m == nil || !m.start.Equal(start) {
		m = &minute{start: start, left: make([]int, b.shards()), held: make([]time.Time, b.shards()), next: -1}
		for i := range m.left {
			m.left[i] = b.capacity(i)
		}
		b.minutes[key] = m
	}
	return m
}

// open returns the shards that, as last seen, hold more than their floor
// and are not held for the tenant at now; until is when the first held
// one may be asked again (zero if none is held).
func (m *minute) open(floors []int, now time.Time) (open []int, until time.Time) {
	for i, l := range m.left {
		if l <= floors[i] {
			continue
		}
		if h := m.held[i]; h.After(now) {
			if until.IsZero() || h.Before(until) {
				until = h
			}
			continue
		}
		open = append(open, i)
	}
	return open, until
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
	mu     sync.Mutex
	shards map[memKey]*store.BudgetShard
}

type memKey struct {
	project string
	minute  time.Time
	shard   int
}

// LeaseBudget implements Ledger. Past minutes are forgotten as they pass.
func (l *memLedger) LeaseBudget(_ context.Context, project, tenant string, minute time.Time, shard int, at time.Time, decide func(store.BudgetShard) store.BudgetGrant) (store.BudgetShard, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	minute = minute.Truncate(time.Minute)
	for k := range l.shards {
		if k.minute.Before(minute) {
			delete(l.shards, k)
		}
	}
	k := memKey{project, minute, shard}
	sh := l.shards[k]
	if sh == nil {
		sh = &store.BudgetShard{Tenants: map[string]int{}, Asks: map[string]time.Time{}}
		l.shards[k] = sh
	}
	g := decide(copyShard(*sh))
	sh.Taken += max(0, g.Got)
	if g.Got > 0 && tenant != "" {
		sh.Tenants[tenant] += g.Got
	}
	if (g.Got > 0 || g.Ask) && tenant != "" {
		sh.Asks[tenant] = at
	}
	return copyShard(*sh), nil
}

func copyShard(sh store.BudgetShard) store.BudgetShard {
	sh.Tenants, sh.Asks = maps.Clone(sh.Tenants), maps.Clone(sh.Asks)
	return sh
}
