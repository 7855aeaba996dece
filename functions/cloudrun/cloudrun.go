// Package cloudrun is the one composition root of the project's
// functions: it builds them from a Config and serves them behind one edge.
// The container image deployed to Cloud Run (one service per function,
// chosen by FUNCTION_TARGET) registers them with the Functions Framework:
// the eight API methods under their function names
// (kubernetesNodePools-create, ...), "reconcile" (the Cloud Tasks target)
// and "watchdog" (the Cloud Scheduler target). The devstack builds its
// functions with the same App, pointed at the emulators.
//
// Importing the package registers the functions in init() and does nothing
// else: no I/O, no clients. Each function's dependencies are built on its
// first request from the configuration (LoadConfig over the environment,
// read once per process), then reused. A build that fails answers 503
// UNAVAILABLE in the API's error envelope and is retried by the next
// request; it is never remembered as a failure.
//
// Every request passes through the edge once (App.Edge): the structured
// logger of shared/logging with the trace of its X-Cloud-Trace-Context (or
// traceparent) header, a span of its own in that trace (shared/telemetry:
// what it kicks links to it), then httpapi.Edge: its X-Request-Id, a panic
// recovered with a generic 500 and the stack in the logs, and one log line.
// A request for a path that is not the function's own is answered 404, so
// that a load balancer's default route cannot reach a method by accident;
// only the API's documents (GET /openapi.json and /asyncapi.json, package
// apidoc) are served by every API function, so that the HTTPS entry's
// default route serves them.
//
// The server command imports this package, calls Check at start (so that
// a revision with a broken configuration fails to start instead of
// answering 503) and Shutdown on SIGTERM (so that events handed to the
// outbox relay are published, and metrics and spans exported, before the
// instance goes away).
package cloudrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/api/option"

	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/telemetry"
)

// process is the application of this process, built over its environment.
var process = NewApp(os.LookupEnv, Options{})

func init() {
	for _, f := range registered {
		if f.kind == kindConsumer {
			functions.CloudEvent(f.Name, process.cloudEvent(f))
			continue
		}
		functions.HTTP(f.Name, process.Handler(f.Name).ServeHTTP)
	}
}

// Check loads the configuration (once per process) and returns its error,
// naming every broken variable. Call it at start to fail fast.
func Check() error { return process.Check() }

// Shutdown stops accepting requests (new ones are answered 503), waits for
// those in flight, then publishes the events still queued in the outbox
// relay, closes the clients and exports the last metrics and spans, all
// within ctx. Events it cannot publish in time stay in the Firestore
// outbox for the watchdog.
func Shutdown(ctx context.Context) error { return process.Shutdown(ctx) }

// builder makes the handler of a function and closes what it made. The
// production one (cloud) makes Google Cloud clients; tests use fakes.
type builder interface {
	Handler(ctx context.Context, function string) (http.Handler, error)
	// Parts builds what the functions share, if not built yet, and
	// returns it.
	Parts(ctx context.Context) (Parts, error)
	Close(ctx context.Context) error
}

// Options are what a process serving the functions in-process (the
// devstack) sets beside the configuration.
type Options struct {
	// Log is the logger of every function; nil means Cloud Logging JSON
	// lines on stdout at the configured LOG_LEVEL.
	Log *slog.Logger
	// FirestoreOptions are added to the Firestore client's options (the
	// devstack's tests count its RPCs with gRPC interceptors).
	FirestoreOptions []option.ClientOption
	// Telemetry is where the functions' metrics and traces go; nil means
	// what the configuration says (TELEMETRY), which Shutdown stops. One
	// given here is the caller's to shut down (the devstack's tests read
	// it after the stack is closed).
	Telemetry *telemetry.Telemetry
}

// App serves the functions of one process, built with the production
// builder from one configuration.
type App struct {
	lookup     func(string) (string, bool)
	logOut     io.Writer
	baseLog    *slog.Logger // when set, the logger instead of one on logOut
	newBuilder func(Config, *slog.Logger, *telemetry.Telemetry) builder

	cfgOnce sync.Once
	cfg     Config
	cfgErr  error
	log     *slog.Logger
	// tel is baseTel when set, else made from the configuration, and
	// then stopped by Shutdown (ownTel).
	baseTel *telemetry.Telemetry
	tel     *telemetry.Telemetry
	ownTel  bool
	b       builder

	handlers map[string]*lazy[http.Handler]

	mu       sync.Mutex // guards the fields below
	inflight int
	draining bool
	idle     chan struct{} // closed when draining and inflight reaches 0
}

// NewApp returns an app reading its configuration through lookup (as
// LoadConfig does; the server passes os.LookupEnv, the devstack a map),
// once, on first use. Nothing is built before the first request, Build or
// Check.
func NewApp(lookup func(string) (string, bool), opts Options) *App {
	a := newApp(lookup, os.Stdout, opts.Log, newCloudBuilder(opts.FirestoreOptions))
	a.baseTel = opts.Telemetry
	return a
}

// newApp returns an app reading its configuration through lookup, logging
// with log (or, when nil, to logOut at the configured level), and building
// its functions with the builder newBuilder makes. Neither is called
// before the first request (or Check).
func newApp(lookup func(string) (string, bool), logOut io.Writer, log *slog.Logger, newBuilder func(Config, *slog.Logger, *telemetry.Telemetry) builder) *App {
	a := &App{lookup: lookup, logOut: logOut, baseLog: log, newBuilder: newBuilder, handlers: map[string]*lazy[http.Handler]{}, idle: make(chan struct{})}
	for _, f := range registered {
		name := f.Name
		a.handlers[name] = newLazy(func(ctx context.Context) (http.Handler, error) {
			return a.b.Handler(ctx, name)
		})
	}
	return a
}

// config loads the configuration once: the environment of a process does
// not change, so a broken one stays broken and is reported on every call.
func (a *App) config() (Config, error) {
	a.cfgOnce.Do(func() {
		a.cfg, a.cfgErr = LoadConfig(a.lookup)
		a.log = a.baseLog
		if a.log == nil {
			level := slog.LevelInfo
			if a.cfgErr == nil {
				level = a.cfg.LogLevel
			}
			a.log = logging.New(a.logOut, level)
		}
		a.tel = a.baseTel
		if a.tel == nil {
			a.tel, a.ownTel = telemetry.Off(), true
			if a.cfgErr == nil {
				a.tel = newTelemetry(a.cfg, a.logOut, a.log)
			}
		}
		if a.cfgErr == nil {
			a.b = a.newBuilder(a.cfg, a.log, a.tel)
		}
	})
	return a.cfg, a.cfgErr
}

// Check loads the configuration (once) and returns its error, naming every
// broken setting.
func (a *App) Check() error {
	_, err := a.config()
	return err
}

// Handler returns the named function behind the edge: what the Functions
// Framework serves for it. It panics if no function has that name.
func (a *App) Handler(name string) http.Handler {
	f, ok := functionByName[name]
	if !ok {
		panic(fmt.Sprintf("cloudrun: no function %q", name))
	}
	return a.handler(f)
}

func (a *App) handler(f Function) http.Handler { return a.Edge(a.function(f)) }

// Mux returns a new mux serving every function on its Path, and the API's
// documents (apidoc.OpenAPIPath, apidoc.AsyncAPIPath), without the
// edge: a process serving them all on one port (the devstack) adds its own
// routes and serves the mux through Edge, so that each request passes
// through the edge once, as each function registered with the Functions
// Framework does.
func (a *App) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, f := range registered {
		mux.Handle(f.Path, a.function(f))
	}
	mux.Handle(apidoc.OpenAPIPath, apidoc.Handler())
	mux.Handle(apidoc.AsyncAPIPath, apidoc.Handler())
	return mux
}

// Edge wraps h in what every request passes through once: the app's
// logger with the request's trace, the request's span in that trace,
// then httpapi.Edge (the request ID, a recovered panic, one log line).
func (a *App) Edge(h http.Handler) http.Handler {
	inner := httpapi.Edge(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg, _ := a.config()
		ctx := logging.NewContext(r.Context(), a.log)
		ctx = logging.WithTrace(ctx, r.Header, cfg.Project)
		serveTraced(a.tel.Tracer(), cfg.Project, inner, w, r.WithContext(ctx))
	})
}

// function returns f's handler without the edge: its name in the logs,
// draining, its paths, and the lazily built handler.
func (a *App) function(f Function) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, cfgErr := a.config()
		ctx := logging.With(r.Context(), "function", f.Name)
		r = r.WithContext(ctx)

		if !a.enter() {
			httpapi.WriteError(ctx, w, errs.E(errs.Unavailable, "the instance is shutting down; retry"))
			return
		}
		defer a.leave()

		if f.kind == kindAPI && apidoc.Serves(r.URL.Path) {
			apidoc.Handler().ServeHTTP(w, r)
			return
		}
		if p := r.URL.Path; p != "/" && p != "/"+f.Name && p != f.Path {
			httpapi.WriteError(ctx, w, errs.E(errs.NotFound, "no method at this path"))
			return
		}
		if cfgErr != nil {
			logging.FromContext(ctx).Error("Function cannot start: fix the service's environment", "error", cfgErr)
			httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, cfgErr, "the function is not configured; retry later"))
			return
		}
		h, err := a.handlers[f.Name].get(ctx)
		if err != nil {
			logging.FromContext(ctx).Warn("Building the function failed; the next request retries", "error", err)
			httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, err, "the function is starting; retry"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// cloudEvent returns the CloudEvent function f as the Functions Framework
// calls it, built on its first event. An event that comes while the
// function cannot be built fails, and Pub/Sub delivers it again.
func (a *App) cloudEvent(f Function) func(context.Context, event.Event) error {
	return func(ctx context.Context, e event.Event) error {
		_, cfgErr := a.config()
		ctx = logging.With(logging.NewContext(ctx, a.log), "function", f.Name)
		if cfgErr != nil {
			logging.FromContext(ctx).Error("Function cannot start: fix the service's environment", "error", cfgErr)
			return cfgErr
		}
		if !a.enter() {
			return errs.E(errs.Unavailable, "the instance is shutting down")
		}
		defer a.leave()
		h, err := a.handlers[f.Name].get(ctx)
		if err != nil {
			logging.FromContext(ctx).Warn("Building the function failed; the next event retries", "error", err)
			return err
		}
		r, ok := h.(interface {
			Receive(context.Context, event.Event) error
		})
		if !ok {
			return fmt.Errorf("function %s is not a CloudEvent function", f.Name)
		}
		return r.Receive(ctx, e)
	}
}

// Build builds every function now instead of on its first request, and
// returns what they share. The devstack calls it at start, so that a
// broken stack fails to start and its tests can reach the store, the
// reconciler and the clients the functions use.
func (a *App) Build(ctx context.Context) (Parts, error) {
	if _, err := a.config(); err != nil {
		return Parts{}, err
	}
	for _, f := range registered {
		if _, err := a.handlers[f.Name].get(ctx); err != nil {
			return Parts{}, fmt.Errorf("build %s: %w", f.Name, err)
		}
	}
	return a.b.Parts(ctx)
}

// enter counts a request in, unless the app is draining.
func (a *App) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining {
		return false
	}
	a.inflight++
	return true
}

func (a *App) leave() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight--
	if a.draining && a.inflight == 0 {
		close(a.idle)
	}
}

// Shutdown stops accepting requests (new ones are answered 503), waits for
// those in flight, then closes what the builder made (publishing the
// events still queued in the outbox relay), then stops the telemetry it
// made from the configuration (exporting what is left), all within ctx.
func (a *App) Shutdown(ctx context.Context) error {
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
	// Last, so that what the closing recorded is exported too.
	if a.ownTel {
		if err := a.tel.Shutdown(ctx); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}
