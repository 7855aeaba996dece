// Package cloudrun registers every function of the project with the
// Functions Framework, for the one container image deployed to Cloud Run
// (one service per function, chosen by FUNCTION_TARGET): the eight API
// methods under their function names (kubernetesNodePools-create, ...),
// "reconcile" (the Cloud Tasks target) and "watchdog" (the Cloud Scheduler
// target).
//
// Importing the package registers the functions in init() and does nothing
// else: no I/O, no clients. Each function's dependencies are built on its
// first request from the configuration (LoadConfig over the environment,
// read once per process), then reused. A build that fails answers 503
// UNAVAILABLE in the API's error envelope and is retried by the next
// request; it is never remembered as a failure.
//
// Every request gets the structured logger of shared/logging with the
// trace of its X-Cloud-Trace-Context (or traceparent) header, and a panic
// is recovered at this edge with a generic 500 and the stack in the logs.
// A request for a path that is not the function's own is answered 404, so
// that a load balancer's default route cannot reach a method by accident.
//
// The server command imports this package, calls Check at start (so that
// a revision with a broken configuration fails to start instead of
// answering 503) and Shutdown on SIGTERM (so that events handed to the
// outbox relay are published before the instance goes away).
package cloudrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"sync"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
)

type kind int

const (
	kindAPI kind = iota
	kindReconcile
	kindWatchdog
)

// function is one registered function.
type function struct {
	name string
	// path is where the HTTPS load balancer sends the function's requests
	// (empty for the internal functions, called on their service URL).
	path string
	kind kind
}

func apiFunction(resource, method string) function {
	return function{name: resource + "-" + method, path: "/api/compute/" + resource + "/" + method, kind: kindAPI}
}

// Function names of the reconciler's functions (FUNCTION_TARGET values).
const (
	ReconcileFunction = "reconcile"
	WatchdogFunction  = "watchdog"
)

// registered is every function, in the order of API.md.
var registered = []function{
	apiFunction("kubernetesNodePools", "create"),
	apiFunction("kubernetesNodePools", "list"),
	apiFunction("kubernetesNodePools", "update"),
	apiFunction("kubernetesNodePools", "delete"),
	apiFunction("kubernetesClusters", "create"),
	apiFunction("kubernetesClusters", "get"),
	apiFunction("kubernetesClusters", "list"),
	apiFunction("kubernetesClusters", "delete"),
	{name: ReconcileFunction, kind: kindReconcile},
	{name: WatchdogFunction, kind: kindWatchdog},
}

var functionByName = func() map[string]function {
	m := make(map[string]function, len(registered))
	for _, f := range registered {
		m[f.name] = f
	}
	return m
}()

// Functions returns the names of every registered function, the values
// FUNCTION_TARGET may take.
func Functions() []string {
	names := make([]string, len(registered))
	for i, f := range registered {
		names[i] = f.name
	}
	return names
}

// process is the application of this process, built over its environment.
var process = newApp(os.LookupEnv, os.Stdout, newCloud)

func init() {
	for _, f := range registered {
		functions.HTTP(f.name, process.handler(f).ServeHTTP)
	}
}

// Check loads the configuration (once per process) and returns its error,
// naming every broken variable. Call it at start to fail fast.
func Check() error {
	_, err := process.config()
	return err
}

// Shutdown stops accepting requests (new ones are answered 503), waits for
// those in flight, then publishes the events still queued in the outbox
// relay and closes the clients, all within ctx. Events it cannot publish
// in time stay in the Firestore outbox for the watchdog.
func Shutdown(ctx context.Context) error { return process.shutdown(ctx) }

// builder makes the handler of a function and closes what it made. The
// production one (cloud) makes Google Cloud clients; tests use fakes.
type builder interface {
	Handler(ctx context.Context, function string) (http.Handler, error)
	Close(ctx context.Context) error
}

// app serves the registered functions of one process.
type app struct {
	lookup     func(string) (string, bool)
	logOut     io.Writer
	newBuilder func(Config, *slog.Logger) builder

	cfgOnce sync.Once
	cfg     Config
	cfgErr  error
	log     *slog.Logger
	b       builder

	handlers map[string]*lazy[http.Handler]

	mu       sync.Mutex // guards the fields below
	inflight int
	draining bool
	idle     chan struct{} // closed when draining and inflight reaches 0
}

// newApp returns an app reading its configuration through lookup, logging
// to logOut, and building its functions with the builder newBuilder makes.
// Neither is called before the first request (or Check).
func newApp(lookup func(string) (string, bool), logOut io.Writer, newBuilder func(Config, *slog.Logger) builder) *app {
	a := &app{lookup: lookup, logOut: logOut, newBuilder: newBuilder, handlers: map[string]*lazy[http.Handler]{}, idle: make(chan struct{})}
	for _, f := range registered {
		name := f.name
		a.handlers[name] = newLazy(func(ctx context.Context) (http.Handler, error) {
			return a.b.Handler(ctx, name)
		})
	}
	return a
}

// config loads the configuration once: the environment of a process does
// not change, so a broken one stays broken and is reported on every call.
func (a *app) config() (Config, error) {
	a.cfgOnce.Do(func() {
		a.cfg, a.cfgErr = LoadConfig(a.lookup)
		level := slog.LevelInfo
		if a.cfgErr == nil {
			level = a.cfg.LogLevel
		}
		a.log = logging.New(a.logOut, level)
		if a.cfgErr == nil {
			a.b = a.newBuilder(a.cfg, a.log)
		}
	})
	return a.cfg, a.cfgErr
}

// handler returns f's handler: the edge (logging, panics, paths, draining)
// around the lazily built handler.
func (a *app) handler(f function) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg, cfgErr := a.config()
		ctx := logging.NewContext(r.Context(), a.log)
		ctx = logging.WithTrace(ctx, r.Header, cfg.Project)
		ctx = logging.With(ctx, "function", f.name)
		r = r.WithContext(ctx)
		rw := &httpapi.StatusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				logging.FromContext(ctx).Error("Panic serving request", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rw.Status == 0 {
					httpapi.WriteError(ctx, rw, errs.E(errs.Internal, "internal error"))
				}
			}
		}()

		if !a.enter() {
			httpapi.WriteError(ctx, rw, errs.E(errs.Unavailable, "the instance is shutting down; retry"))
			return
		}
		defer a.leave()

		if p := r.URL.Path; p != "/" && p != "/"+f.name && (f.path == "" || p != f.path) {
			httpapi.WriteError(ctx, rw, errs.E(errs.NotFound, "no method at this path"))
			return
		}
		if cfgErr != nil {
			logging.FromContext(ctx).Error("Function cannot start: fix the service's environment", "error", cfgErr)
			httpapi.WriteError(ctx, rw, errs.Wrap(errs.Unavailable, cfgErr, "the function is not configured; retry later"))
			return
		}
		h, err := a.handlers[f.name].get(ctx)
		if err != nil {
			logging.FromContext(ctx).Warn("Building the function failed; the next request retries", "error", err)
			httpapi.WriteError(ctx, rw, errs.Wrap(errs.Unavailable, err, "the function is starting; retry"))
			return
		}
		h.ServeHTTP(rw, r)
	})
}

// enter counts a request in, unless the app is draining.
func (a *app) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining {
		return false
	}
	a.inflight++
	return true
}

func (a *app) leave() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight--
	if a.draining && a.inflight == 0 {
		close(a.idle)
	}
}

func (a *app) shutdown(ctx context.Context) error {
	a.mu.Lock()
	if !a.draining {
		a.draining = true
		if a.inflight == 0 {
			close(a.idle)
		}
	}
	a.mu.Unlock()
	var errList []error
	select {
	case <-a.idle:
	case <-ctx.Done():
		errList = append(errList, fmt.Errorf("requests still in flight at shutdown: %w", ctx.Err()))
	}
	// config synchronizes with the build of a.b.
	if _, err := a.config(); err == nil {
		if err := a.b.Close(ctx); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}
