package kubesim

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// ForTest starts an API server for t, in t.TempDir(), and stops it when
// t ends. It builds the binary first if it is missing, which takes several
// minutes once per machine: a test that needs a server waits for it rather
// than skip. It fails t if the server cannot start.
func ForTest(t testing.TB) *APIServer {
	t.Helper()
	log := TestLogger(t)
	ctx := context.Background()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	bin, err := Binary(ctx, log)
	if err != nil {
		t.Fatalf("kubesim.Binary: %v", err)
	}
	s, err := StartAPIServer(ctx, bin, Options{Dir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatalf("kubesim.StartAPIServer: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop the API server: %v", err)
		}
	})
	return s
}

// TestLogger returns a logger that writes to t's log, for as long as t
// runs (later records are dropped: testing panics on a log after the end).
func TestLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
