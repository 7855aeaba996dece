package cloudrun

import (
	"context"
	"sync"
)

// lazy builds a value on first use and keeps it once a build succeeds. A
// failed build is not remembered: the next get builds again, so an
// instance that started while a dependency was unreachable recovers by
// itself instead of failing every request until it is replaced.
//
// Builds are serialized; callers that arrive during one wait for it, and
// give up when their own context ends.
type lazy[T any] struct {
	build func(ctx context.Context) (T, error)
	sem   chan struct{} // one slot: held while building

	mu    sync.Mutex // guards the fields below
	done  bool
	value T
}

func newLazy[T any](build func(ctx context.Context) (T, error)) *lazy[T] {
	return &lazy[T]{build: build, sem: make(chan struct{}, 1)}
}

// get returns the built value, building it if no build has succeeded yet.
// The build runs with ctx's values but not its cancellation: what it makes
// (clients, background goroutines) outlives the request that caused it.
func (l *lazy[T]) get(ctx context.Context) (T, error) {
	if v, ok := l.peek(); ok {
		return v, nil
	}
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	defer func() { <-l.sem }()
	// Another caller may have built it while we waited.
	if v, ok := l.peek(); ok {
		return v, nil
	}
	v, err := l.build(context.WithoutCancel(ctx))
	if err != nil {
		var zero T
		return zero, err
	}
	l.mu.Lock()
	l.value, l.done = v, true
	l.mu.Unlock()
	return v, nil
}

// peek returns the value if a build has succeeded, without building.
func (l *lazy[T]) peek() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value, l.done
}
