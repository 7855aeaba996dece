package kubesim

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// TestBuildOnce builds a small module in place of the API server's, from
// several goroutines at once (each lock is its own open file, as in
// separate processes): one builds, the others wait and find its binary.
func TestBuildOnce(t *testing.T) {
	srcDir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.26\n",
		"go.sum":  "",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(srcDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := dirSource(srcDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cache")
	// What a build killed midway leaves: removed by the next.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "kube-apiserver-"+src.hash()+".123.tmp")
	if err := os.WriteFile(stale, []byte("half a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	const n = 3
	paths := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			p, err := buildOnce(context.Background(), log, func(string) {}, src, dir)
			paths <- p
			errs <- err
		}()
	}
	var first string
	for range n {
		p, err := <-paths, <-errs
		if err != nil {
			t.Fatalf("buildOnce: %v", err)
		}
		if first == "" {
			first = p
		}
		if p != first {
			t.Errorf("buildOnce = %q and %q, want one binary", first, p)
		}
	}
	out, err := exec.Command(first).Output()
	if err != nil || string(out) != "hello\n" {
		t.Errorf("running the binary = %q, %v; want hello", out, err)
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if got := strings.Count(text, "Building the Kubernetes API server"); got != 1 {
		t.Errorf("builds = %d, want 1; logs:\n%s", got, text)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// A broken source fails with go build's output.
	if err := os.WriteFile(filepath.Join(srcDir, "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if src, err = dirSource(srcDir); err != nil {
		t.Fatal(err)
	}
	if _, err := buildOnce(context.Background(), log, func(string) {}, src, dir); err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Errorf("buildOnce of a broken source = %v, want go build's error", err)
	}
}

// TestBuildOnceEmbedded builds a module given by its files only, as the
// copy embedded in the package is: they are written out beside the
// binary, over what an interrupted write left there, and built there.
func TestBuildOnceEmbedded(t *testing.T) {
	src := source{files: map[string][]byte{
		"go.mod":  []byte("module example.com/hello\n\ngo 1.26\n"),
		"go.sum":  nil,
		"main.go": []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"embedded\") }\n"),
	}}
	dir := t.TempDir()
	name := "kube-apiserver-" + src.hash()
	// An interrupted write: a directory of that name with part of it.
	if err := os.MkdirAll(filepath.Join(dir, name+".src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".src", "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := buildOnce(context.Background(), slog.New(slog.DiscardHandler), func(string) {}, src, dir)
	if err != nil {
		t.Fatalf("buildOnce: %v", err)
	}
	if path != filepath.Join(dir, name) {
		t.Errorf("buildOnce = %q, want %q", path, filepath.Join(dir, name))
	}
	out, err := exec.Command(path).Output()
	if err != nil || string(out) != "embedded\n" {
		t.Errorf("running the binary = %q, %v; want embedded", out, err)
	}
	written, err := dirSource(filepath.Join(dir, name+".src"))
	if err != nil || !written.same(src) {
		t.Errorf("source written = %v, %v; want the given files", written.files, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// TestEmbeddedSource checks that the copy of emulators/kubeapiserver in
// the package is the module as it is: a binary built outside the
// repository is then the one built inside it (the same name in the
// cache).
func TestEmbeddedSource(t *testing.T) {
	mod, err := dirSource("../kubeapiserver")
	if err != nil {
		t.Fatal(err)
	}
	if emb := embeddedSource(); !emb.same(mod) || emb.hash() != mod.hash() {
		t.Errorf("the embedded copy of emulators/kubeapiserver differs from it: run go generate ./emulators/kubesim")
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
