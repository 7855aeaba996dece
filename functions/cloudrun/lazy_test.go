package cloudrun

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLazyRetriesUntilABuildSucceeds(t *testing.T) {
	var calls atomic.Int32
	fail := 2
	l := newLazy(func(ctx context.Context) (string, error) {
		if n := calls.Add(1); int(n) <= fail {
			return "", errors.New("unreachable")
		}
		return "built", nil
	})
	ctx := context.Background()
	for i := range fail {
		if v, err := l.get(ctx); err == nil {
			t.Fatalf("get #%d = %q, want the build's error", i+1, v)
		}
	}
	for i := range 3 {
		v, err := l.get(ctx)
		if err != nil || v != "built" {
			t.Fatalf("get #%d = %q, %v, want \"built\"", fail+i+1, v, err)
		}
	}
	if got, want := calls.Load(), int32(fail+1); got != want {
		t.Errorf("builds = %d, want %d (failures retried, success kept)", got, want)
	}
}

func TestLazyBuildsOnceForConcurrentCallers(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	l := newLazy(func(ctx context.Context) (int, error) {
		calls.Add(1)
		<-release
		return 42, nil
	})
	const callers = 8
	var wg sync.WaitGroup
	results := make(chan int, callers)
	for range callers {
		wg.Go(func() {
			v, err := l.get(context.Background())
			if err != nil {
				t.Errorf("get = %v", err)
			}
			results <- v
		})
	}
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != 42 {
			t.Errorf("get = %d, want 42", v)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("builds = %d, want 1", got)
	}
}

func TestLazyWaiterGivesUpWithItsContext(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	l := newLazy(func(ctx context.Context) (int, error) {
		calls.Add(1)
		close(started)
		<-release
		return 1, nil
	})
	go func() { _, _ = l.get(context.Background()) }()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.get(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("get while another build runs, with an expiring context = %v, want %v", err, context.DeadlineExceeded)
	}
	close(release)
	// This get waits for the first build and must not start another.
	if v, err := l.get(context.Background()); err != nil || v != 1 {
		t.Errorf("get after the build = %d, %v, want 1", v, err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("builds = %d, want 1", got)
	}
}

func TestLazyBuildOutlivesTheRequest(t *testing.T) {
	var buildCtx context.Context
	l := newLazy(func(ctx context.Context) (int, error) {
		buildCtx = ctx
		return 1, nil
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "request"))
	if _, err := l.get(ctx); err != nil {
		t.Fatalf("get = %v", err)
	}
	cancel()
	if err := buildCtx.Err(); err != nil {
		t.Errorf("build context after the request ended: Err() = %v, want nil", err)
	}
	if got := buildCtx.Value(ctxKey{}); got != "request" {
		t.Errorf("build context value = %v, want the request's", got)
	}
}

type ctxKey struct{}
