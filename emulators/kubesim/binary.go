package kubesim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Module is the module path of the repository whose
// emulators/kubeapiserver Binary builds.
const Module = "github.com/better-compute/kubernetes"

// Binary returns the path of the Kubernetes API server binary
// (emulators/kubeapiserver), building it when it is missing: once per
// version of its sources and of Go, into os.UserCacheDir()/better-compute.
// The build takes several minutes; parallel callers, in this process or
// in others (test binaries of several packages), wait for one build under
// a file lock rather than each starting their own. Inside the repository
// (found by walking up from the working directory) it builds
// emulators/kubeapiserver as it is there; elsewhere, from the copy of its
// files embedded in this package, written out beside the binary first, so
// that an installed devstack works from any directory. Canceling ctx stops
// a build this call started.
func Binary(ctx context.Context, log *slog.Logger) (string, error) {
	return binary(ctx, orDiscard(log), func(string) {})
}

// binary is Binary, reporting its progress to report.
func binary(ctx context.Context, log *slog.Logger, report func(string)) (string, error) {
	src := embeddedSource()
	if root, err := repoRoot(); err == nil {
		if src, err = dirSource(filepath.Join(root, "emulators", "kubeapiserver")); err != nil {
			return "", err
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kubesim: cache directory: %w", err)
	}
	return buildOnce(ctx, log, report, src, filepath.Join(cache, "better-compute"))
}

// buildOnce returns the binary of the module src, kept in dir, building it
// there when missing.
func buildOnce(ctx context.Context, log *slog.Logger, report func(string), src source, dir string) (string, error) {
	name := "kube-apiserver-" + src.hash()
	path := filepath.Join(dir, name)
	if isExecutable(path) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kubesim: %w", err)
	}
	unlock, err := lockFile(ctx, path+".lock", log, report)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have built it while this one waited.
	if isExecutable(path) {
		return path, nil
	}
	// What a build killed midway left: no other runs while this holds
	// the lock.
	if stale, _ := filepath.Glob(path + ".*.tmp"); len(stale) > 0 {
		for _, p := range stale {
			_ = os.RemoveAll(p)
		}
		log.Info("Removed what an interrupted build of the Kubernetes API server left", "files", stale)
	}
	srcDir, err := src.materialize(dir, name+".src")
	if err != nil {
		return "", err
	}
	report("building the Kubernetes API server from source (once; several minutes)")
	start := time.Now()
	log.Info("Building the Kubernetes API server from source (once; several minutes)", "source", srcDir, "binary", path)
	if err := build(ctx, srcDir, path); err != nil {
		log.Warn("Building the Kubernetes API server failed", "source", srcDir, "after", time.Since(start).Round(time.Second), "error", err)
		return "", err
	}
	log.Info("Built the Kubernetes API server", "binary", path, "took", time.Since(start).Round(time.Second))
	return path, nil
}

// repoRoot walks up from the working directory to the go.mod of Module.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kubesim: working directory: %w", err)
	}
	for dir := wd; ; {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(mod) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("kubesim: no go.mod of module %s in %s or above: run from inside the repository", Module, wd)
		}
		dir = parent
	}
}

// modulePath is the path on the module line of a go.mod.
func modulePath(mod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(mod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// lockFile takes an exclusive lock on path, waiting for it until ctx ends,
// and returns its release. The lock is the kernel's (flock), so it ends
// with the process that holds it, even one killed mid-build.
func lockFile(ctx context.Context, path string, log *slog.Logger, report func(string)) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubesim: open lock: %w", err)
	}
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("kubesim: lock %s: %w", path, err)
		}
		if !waiting {
			waiting = true
			report("waiting for another process that builds the Kubernetes API server")
			log.Info("Waiting for another process that builds the Kubernetes API server", "lock", path)
		}
		// flock cannot be interrupted by a context: poll.
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("kubesim: wait for the build's lock: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// build runs go build in src into a temporary file beside path, then
// renames it to path, so that path is only ever a complete binary.
func build(ctx context.Context, src, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("kubesim: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpPath) // a no-op once renamed

	goCmd, err := goTool()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-o", tmpPath, ".")
	cmd.Dir = src
	// The module is not part of any workspace of the repository's.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	setGroup(cmd)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("kubesim: build the API server: %w", ctx.Err())
		}
		return fmt.Errorf("kubesim: go build in %s: %w\n%s", src, err, out.String())
	}
	if err := os.Chmod(tmpPath, 0o755); err != nil {
		return fmt.Errorf("kubesim: %w", err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return fmt.Errorf("kubesim: %w", err)
	}
	return nil
}

// goTool is the go command of the toolchain running this program when it
// can be found, so that the binary's name (which has runtime.Version()
// in it) tells the truth; the go on PATH otherwise.
func goTool() (string, error) {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("kubesim: building the API server needs the go command: %w", err)
	}
	return p, nil
}

// Builder gets the binary ready in the background, for a program that
// must not wait for it at start-up (the devstack) and reports how far it
// is. Its methods are safe for concurrent use.
type Builder struct {
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}

	mu       sync.Mutex
	progress string
	since    time.Time
	path     string
	err      error
}

// NewBuilder returns a Builder that has not started. log receives the
// build's progress (discarded when nil).
func NewBuilder(log *slog.Logger) *Builder {
	ctx, cancel := context.WithCancel(context.Background())
	return &Builder{log: orDiscard(log), ctx: ctx, cancel: cancel, done: make(chan struct{}), progress: "not started"}
}

// Start gets the binary ready in the background (see Binary). Later calls
// do nothing. A failed build stays failed: Wait returns its error.
func (b *Builder) Start() {
	b.once.Do(func() {
		b.set("looking for the Kubernetes API server binary")
		go func() {
			path, err := binary(b.ctx, b.log, b.set)
			b.mu.Lock()
			b.path, b.err = path, err
			b.mu.Unlock()
			close(b.done)
		}()
	})
}

func (b *Builder) set(progress string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.progress, b.since = progress, time.Now()
}

// Status reports whether the binary is ready, and otherwise what is
// happening (with how long it has been going on) or why it failed.
func (b *Builder) Status() (ready bool, progress string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.done:
		if b.err != nil {
			return false, "the Kubernetes API server could not be built: " + b.err.Error()
		}
		return true, "ready: " + b.path
	default:
	}
	if b.since.IsZero() {
		return false, b.progress
	}
	return false, fmt.Sprintf("%s (for %v)", b.progress, time.Since(b.since).Round(time.Second))
}

// Wait returns the binary's path once it is ready, or the build's error.
// It starts the build if Start was not called.
func (b *Builder) Wait(ctx context.Context) (string, error) {
	b.Start()
	select {
	case <-b.done:
	case <-ctx.Done():
		return "", fmt.Errorf("kubesim: wait for the API server binary: %w", ctx.Err())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.path, b.err
}

// Close stops a build still running (the go build cache keeps what it
// compiled, so the next build goes faster) and waits for it to end. Wait
// returns an error after Close.
func (b *Builder) Close() {
	b.cancel()
	b.once.Do(func() {
		b.mu.Lock()
		b.err = errors.New("kubesim: the builder was closed")
		b.mu.Unlock()
		close(b.done)
	})
	<-b.done
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// tailBuffer keeps the last tailSize bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 8 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
