package clusters

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Budget is the share of each provider project's request quota that the
// runs of this process may spend: a token bucket per project, refilled at
// nine tenths of PerMinute per minute and holding at most a tenth, so that
// no clock minute (the provider's quota window) sees more than PerMinute.
//
// Runs that converge something (a tenant's change, a cluster being made)
// have priority: they may spend the whole bucket, and when it is empty they
// wait a moment and run again. A steady refresh may spend only what is
// above the Reserve kept for them; when a project is crowded, it is put off
// to a random later moment within Stretch, so that steady refreshes spread
// instead of coming back together. Neither is an error: nothing is shown,
// nothing is written, and the provider never sees the calls that were put
// off.
//
// Every call takes a token, waiting for one if it must: a run's later
// calls never overdraw the bucket, whatever runs go on at the same time.
type Budget struct {
	// PerMinute is the calls per minute per project this process may
	// make: the project's quota times the share given to the reconciler,
	// divided by the reconciler's most instances. Zero or less: no limit.
	PerMinute float64
	// Reserve is the fraction of the bucket that steady refreshes leave
	// for converging runs.
	Reserve float64
	// Stretch bounds how far a put-off steady refresh is moved.
	Stretch time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Metrics counts the calls charged to each project; nil counts
	// nothing.
	Metrics BudgetMetrics

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// allow reports whether a run of project may start its calls now, and if
// not, after how long to try again.
func (b *Budget) allow(project string, steady bool) (bool, time.Duration) {
	if b == nil || b.PerMinute <= 0 {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.refill(project)
	need := 1.0
	if steady {
		need += b.Reserve * b.capacity()
	}
	if k.tokens >= need {
		return true, 0
	}
	wait := time.Duration((need - k.tokens) / b.rate() * float64(time.Minute))
	if steady && b.Stretch > 0 {
		wait += rand.N(b.Stretch)
	}
	return false, max(wait, time.Second)
}

// take spends one call of project, waiting until the bucket has one or
// ctx ends.
func (b *Budget) take(ctx context.Context, project string) error {
	if b == nil {
		return nil
	}
	if b.PerMinute <= 0 {
		b.spent(ctx, project)
		return nil
	}
	for {
		b.mu.Lock()
		k := b.refill(project)
		if k.tokens >= 1 {
			k.tokens--
			b.mu.Unlock()
			b.spent(ctx, project)
			return nil
		}
		wait := time.Duration((1 - k.tokens) / b.rate() * float64(time.Minute))
		b.mu.Unlock()
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the provider's request budget of %s: %w", project, ctx.Err())
		case <-t.C:
		}
	}
}

// rate is the refill per minute.
func (b *Budget) rate() float64 { return 0.9 * b.PerMinute }

func (b *Budget) capacity() float64 { return max(1, b.PerMinute/10) }

// refill returns project's bucket, refilled for the time since it was last.
// Must be called with the lock held.
func (b *Budget) refill(project string) *bucket {
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	t := now()
	if b.buckets == nil {
		b.buckets = map[string]*bucket{}
	}
	k := b.buckets[project]
	if k == nil {
		k = &bucket{tokens: b.capacity(), at: t}
		b.buckets[project] = k
	}
	if d := t.Sub(k.at); d > 0 {
		k.tokens = min(b.capacity(), k.tokens+d.Minutes()*b.rate())
		k.at = t
	}
	return k
}
