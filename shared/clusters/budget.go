package clusters

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Budget is the share of each provider project's request quota that the
// runs of this process may spend: a token bucket per project, refilled at
// PerMinute per minute, holding at most a tenth of a minute's worth.
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
// Calls are charged as they are made; a run's calls may take the bucket
// below zero, which later refills pay back, so that the rate over a minute
// stays within PerMinute.
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
	wait := time.Duration((need - k.tokens) / b.PerMinute * float64(time.Minute))
	if steady && b.Stretch > 0 {
		wait += rand.N(b.Stretch)
	}
	return false, max(wait, time.Second)
}

// charge spends one call of project.
func (b *Budget) charge(project string) {
	if b == nil || b.PerMinute <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(project).tokens--
}

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
		k.tokens = min(b.capacity(), k.tokens+d.Minutes()*b.PerMinute)
		k.at = t
	}
	return k
}
