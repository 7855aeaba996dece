package kubesim

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuilder(t *testing.T) {
	b := NewBuilder(TestLogger(t))
	if ready, progress := b.Status(); ready || progress != "not started" {
		t.Errorf("Status before Start = %v, %q; want false, not started", ready, progress)
	}
	b.Start()
	path, err := b.Wait(context.Background())
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if want, err := Binary(context.Background(), nil); err != nil || path != want {
		t.Errorf("Wait = %q, Binary = %q, %v; want the same binary", path, want, err)
	}
	if !strings.HasPrefix(filepath.Base(path), "kube-apiserver-") || len(filepath.Base(path)) != len("kube-apiserver-")+12 {
		t.Errorf("binary %q: want kube-apiserver-<12 hex>", path)
	}
	if ready, progress := b.Status(); !ready || !strings.Contains(progress, path) {
		t.Errorf("Status after Wait = %v, %q; want true and the path", ready, progress)
	}
	b.Close()
}

func TestBuilderClosedBeforeStart(t *testing.T) {
	b := NewBuilder(nil)
	b.Close()
	if _, err := b.Wait(context.Background()); err == nil {
		t.Errorf("Wait after Close = nil error")
	}
}

// TestLockFile checks that the build's lock excludes a second holder
// until the first releases it, as it does across processes (flock locks
// belong to the open file, not the process).
func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	log := slog.New(slog.DiscardHandler)
	unlock, err := lockFile(context.Background(), path, log, func(string) {})
	if err != nil {
		t.Fatalf("lockFile: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var reported []string
	if _, err := lockFile(ctx, path, log, func(s string) { reported = append(reported, s) }); err == nil {
		t.Fatalf("second lockFile while held = nil error, want it to wait until its context ends")
	}
	if len(reported) != 1 || !strings.Contains(reported[0], "waiting") {
		t.Errorf("progress while waiting = %q, want one waiting line", reported)
	}
	got := make(chan error, 1)
	go func() {
		unlock2, err := lockFile(context.Background(), path, log, func(string) {})
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("lockFile after release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("lockFile still waiting 10s after the release")
	}
}

func TestModulePath(t *testing.T) {
	for _, tc := range []struct{ mod, want string }{
		{"module github.com/better-compute/kubernetes\n\ngo 1.26\n", Module},
		{"// c\nmodule \"github.com/better-compute/kubernetes/emulators/kubeapiserver\"\n", Module + "/emulators/kubeapiserver"},
		{"go 1.26\n", ""},
	} {
		if got := modulePath([]byte(tc.mod)); got != tc.want {
			t.Errorf("modulePath(%q) = %q, want %q", tc.mod, got, tc.want)
		}
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("repoRoot: %v", err)
	}
	if want, _ := filepath.Abs("../.."); root != want {
		t.Errorf("repoRoot = %q, want %q", root, want)
	}
}
