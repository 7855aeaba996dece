package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
)

// Leases of one shard, however many run at once on separate stores, never
// take more than it holds nor below the floor asked for; a shard of
// another minute, shard or project is another count.
func TestLeaseBudget(t *testing.T) {
	ctx := context.Background()
	fs := fsemu.ForTest(t, "budget")
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	const capacity, want, leases = 50, 3, 40
	var (
		mu  sync.Mutex
		sum int
		wg  sync.WaitGroup
	)
	errs := make(chan error, leases)
	for i := range leases {
		st, err := store.New(fs, lifecycle.Rules{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			floor := 0
			if i%2 == 0 {
				floor = 10 // a steady run's reserve
			}
			// A project's ID goes through store.DocID: any is stored.
			got, left, err := lease(ctx, st, "projects/p 1", fmt.Sprint("t", i%3), minute.Add(30*time.Second), 0, capacity, want, floor)
			if err != nil {
				errs <- err
				return
			}
			if got < 0 || got > want || left < 0 || got > 0 && left < floor {
				errs <- fmt.Errorf("LeaseBudget(floor %d) = %d, %d left; want at most %d, leaving the floor", floor, got, left, want)
			}
			mu.Lock()
			sum += got
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if sum != capacity {
		t.Errorf("%d leases of %d took %d in all, want the shard's %d", leases, want, sum, capacity)
	}
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		project string
		minute  time.Time
		shard   int
		want    int
	}{
		{"spent", "projects/p 1", minute.Add(59 * time.Second), 0, 0},
		{"next minute", "projects/p 1", minute.Add(time.Minute), 0, want},
		{"other shard", "projects/p 1", minute, 1, want},
		{"other project", "p2", minute, 0, want},
	} {
		got, _, err := lease(ctx, st, c.project, "t0", c.minute, c.shard, capacity, want, 0)
		if err != nil || got != c.want {
			t.Errorf("%s: LeaseBudget() = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	// The spent shard tells each tenant's part and ask.
	var sh store.BudgetShard
	_, err = st.LeaseBudget(ctx, "projects/p 1", "t0", minute, 0, minute.Add(time.Second), func(s store.BudgetShard) store.BudgetGrant {
		sh = s
		return store.BudgetGrant{}
	})
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, n := range sh.Tenants {
		parts += n
	}
	if sh.Taken != capacity || parts != capacity || len(sh.Tenants) != 3 || len(sh.Asks) != 3 {
		t.Errorf("spent shard = %+v; want %d taken by 3 tenants, each with its ask", sh, capacity)
	}
}

// lease takes up to want tokens of the shard leaving floor, as a Budget
// without fair shares decides.
func lease(ctx context.Context, st *store.Store, project, tenant string, minute time.Time, shard, capacity, want, floor int) (got, left int, err error) {
	var g store.BudgetGrant
	sh, err := st.LeaseBudget(ctx, project, tenant, minute, shard, minute, func(sh store.BudgetShard) store.BudgetGrant {
		g = store.BudgetGrant{Got: max(0, min(want, capacity-sh.Taken-floor))}
		return g
	})
	return g.Got, capacity - sh.Taken, err
}

// A lease that takes nothing but asks to be recorded writes the ask
// alone; one that does neither writes nothing.
func TestLeaseBudgetAsk(t *testing.T) {
	ctx := context.Background()
	st, err := store.New(fsemu.ForTest(t, "budget"), lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	at := minute.Add(7 * time.Second)
	for _, g := range []store.BudgetGrant{{}, {Ask: true}, {}} {
		if _, err := st.LeaseBudget(ctx, "p", "globex", minute, 0, at, func(store.BudgetShard) store.BudgetGrant { return g }); err != nil {
			t.Fatal(err)
		}
	}
	sh, err := st.LeaseBudget(ctx, "p", "acme", minute, 0, at, func(store.BudgetShard) store.BudgetGrant { return store.BudgetGrant{Got: 2} })
	if err != nil {
		t.Fatal(err)
	}
	if sh.Taken != 2 || sh.Tenants["acme"] != 2 || sh.Tenants["globex"] != 0 || !sh.Asks["globex"].Equal(at) || !sh.Asks["acme"].Equal(at) {
		t.Errorf("shard = %+v; want acme's 2 taken, both asks at %v", sh, at)
	}
}
