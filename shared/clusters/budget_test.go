package clusters

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A steady refresh leaves the reserve to converging runs, and is put off
// (spread within the stretch) once the bucket is down to it; a converging
// run may spend the reserve.
func TestBudgetAllow(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := &Budget{PerMinute: 100, Reserve: 0.5, Stretch: time.Minute, Now: func() time.Time { return now }}
	ctx := context.Background()
	// The bucket holds 10 calls; steady refreshes leave 5 of them.
	for i := range 5 {
		if ok, _ := b.allow("p", true); !ok {
			t.Fatalf("steady refresh %d refused with %d calls spent, want allowed", i+1, i)
		}
		if err := b.take(ctx, "p"); err != nil {
			t.Fatal(err)
		}
	}
	ok, wait := b.allow("p", true)
	if ok || wait < time.Second || wait > time.Minute+10*time.Second {
		t.Errorf("steady refresh at the reserve = %v, put off %v; want put off by at most the stretch and the refill", ok, wait)
	}
	if ok, _ := b.allow("p", false); !ok {
		t.Errorf("converging run at the reserve refused, want allowed")
	}
	if ok, _ := b.allow("other", true); !ok {
		t.Errorf("another project's refresh refused, want allowed (budgets are per project)")
	}
	var none *Budget
	if ok, _ := none.allow("p", true); !ok || none.take(ctx, "p") != nil {
		t.Errorf("no budget refused a call, want every call allowed")
	}
}

// However many runs spend a project's budget at once, no more calls are
// made than the bucket holds plus its refill: calls wait for tokens rather
// than overdraw them.
func TestBudgetTakeNeverOverdraws(t *testing.T) {
	b := &Budget{PerMinute: 600} // a bucket of 60, refilled at 540 a minute (9/s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b.take(ctx, "p") == nil {
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if limit := 60 + 9*elapsed + 1; float64(taken.Load()) > limit {
		t.Errorf("took %d calls in %.2fs, want at most %.0f", taken.Load(), elapsed, limit)
	}
	if taken.Load() < 60 {
		t.Errorf("took %d calls, want at least the bucket's 60", taken.Load())
	}
}
