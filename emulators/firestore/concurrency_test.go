package firestore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	gfs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const workers = 50

func TestConcurrentCounter(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	counter := c.Doc("counters/c")
	if _, err := counter.Set(ctx, map[string]any{"n": 0}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
				s, err := tx.Get(counter)
				if err != nil {
					return err
				}
				n, err := s.DataAt("n")
				if err != nil {
					return err
				}
				return tx.Set(counter, map[string]any{"n": n.(int64) + 1})
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("RunTransaction: %v", err)
		}
	}
	s, err := counter.Get(ctx)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := s.Data()["n"]; got != int64(workers) {
		t.Errorf("counter = %v, want %d", got, workers)
	}
}

func TestConcurrentReservation(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	res := c.Doc("reservations/name")
	var wins atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			won := false
			err := c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
				won = false
				_, err := tx.Get(res)
				if err == nil {
					return nil // already claimed
				}
				if status.Code(err) != codes.NotFound {
					return err
				}
				won = true
				return tx.Create(res, map[string]any{"owner": i})
			})
			if err == nil && won {
				wins.Add(1)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("RunTransaction: %v", err)
		}
	}
	if got := wins.Load(); got != 1 {
		t.Errorf("winners = %d, want exactly 1", got)
	}
}

func TestTransactionQueryPhantomRetries(t *testing.T) {
	srv, c := newTestServer(t)
	other := newClient(t, srv, "test-project")
	ctx := testCtx(t)
	jobs := c.Collection("jobs")
	if _, err := jobs.Doc("j1").Set(ctx, map[string]any{"state": "queued"}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	attempts := 0
	var seen int
	err := c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
		attempts++
		docs, err := tx.Documents(jobs.Where("state", "==", "queued")).GetAll()
		if err != nil {
			return err
		}
		seen = len(docs)
		if attempts == 1 {
			// Another client adds a matching document after the query ran.
			if _, err := other.Collection("jobs").Doc("j2").Create(ctx, map[string]any{"state": "queued"}); err != nil {
				return err
			}
		}
		return tx.Set(c.Doc("summary/jobs"), map[string]any{"queued": len(docs)})
	})
	if err != nil {
		t.Fatalf("RunTransaction: %v", err)
	}
	if attempts != 2 {
		t.Errorf("attempts = %d, want 2 (the first commit must abort)", attempts)
	}
	if seen != 2 {
		t.Errorf("documents seen by the last attempt = %d, want 2", seen)
	}
}
