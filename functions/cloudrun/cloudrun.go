// Package cloudrun is the one composition root of the project's
// functions: it builds them from a Config and serves them behind one edge.
// The container image deployed to Cloud Run (one service per function,
// chosen by FUNCTION_TARGET) serves them with the Functions Framework:
// every API method (api.Methods, thirteen) under its function name
// (kubernetesNodePools-create, ...), "reconcile" (the Cloud Tasks target),
// "watchdog" (the Cloud Scheduler target) and the pool events' consumer
// (pushed by Pub/Sub). The handlers are the edge's (functions/api,
// functions/reconcile, functions/poolevents); this package wires them to
// their clients. The devstack builds its functions with the same App,
// from a Config pointed at the emulators.
//
// Importing the package registers the functions with the Functions
// Framework in init() and does nothing else: no I/O, no clients, no
// environment. The server command reads the environment (LoadConfig),
// makes the App (New) and registers it (Register). Each function's
// dependencies are built on its first request, then reused. A build that
// fails answers 503 UNAVAILABLE in the API's error envelope and is retried
// by the next request; it is never remembered as a failure.
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
// The server command loads the configuration before the port opens (so
// that a revision with a broken environment fails to start instead of
// answering 503) and calls App.Shutdown on SIGTERM (so that events handed
// to the outbox relay are published, and metrics and spans exported,
// before the instance goes away).
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
	"sync/atomic"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"google.golang.org/api/option"

	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/telemetry"
)

// served is the app whose functions the Functions Framework serves: the
// framework's registry is global and filled at init, so the functions
// registered there find the app of the process here (Register).
var served atomic.Pointer[App]

// Every function is registered as an HTTP function, the CloudEvent
// function of the pool events too: the framework's own CloudEvent
// handling would hand it the event without the request, whose token must
// be checked first (poolevents.Handler.ServeHTTP reads the push as the
// framework would).
func init() {
	for _, f := range registered {
		unregistered := httpapi.Edge(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpapi.WriteError(r.Context(), w, errs.E(errs.Unavailable, "the function is not configured; retry later"))
		}))
		functions.HTTP(f.Name, func(w http.ResponseWriter, r *http.Request) {
			h := unregistered
			if a := served.Load(); a != nil {
				h = a.edged[f.Name]
			}
			h.ServeHTTP(w, r)
		})
	}
}

// Register makes a the app whose functions the Functions Framework serves
// under their names (they are registered at init, as the framework asks,
// and answer 503 UNAVAILABLE until an app is registered). The server
// command registers its one app before it starts the framework; a test
// may register another, or nil, at any time.
func Register(a *App) { served.Store(a) }

// builder makes the handler of a function and closes what it made. The
// production one (cloud) makes Google Cloud clients; tests use fakes.
type builder interface {
	Handler(ctx context.Context, function string) (http.Handler, error)
	// Parts builds what the functions share, if not built yet, and
	// returns it.
	Parts(ctx context.Context) (Parts, error)
	Close(ctx context.Context) error
}

// Options are what a process sets beside the configuration: what is no
// setting of a deployed function.
type Options struct {
	// Log is the logger of every function; nil means Cloud Logging JSON
	// lines on stdout at the configured LogLevel.
	Log *slog.Logger
	// FirestoreOptions are added to the Firestore client's options (the
	// devstack's tests count its RPCs with gRPC interceptors).
	FirestoreOptions []option.ClientOption
	// Telemetry is where the functions' metrics and traces go; nil means
	// what the configuration says (Config.Telemetry), which Shutdown
	// stops. One given here is the caller's to shut down (the devstack's
	// tests read it after the stack is closed).
	Telemetry *telemetry.Telemetry
}

// App serves the functions of one process, built with the production
// builder from one configuration.
type App struct {
	cfg Config
	log *slog.Logger
	// tel is Options.Telemetry when set, else made from the
	// configuration, and then stopped by Shutdown (ownTel).
	tel    *telemetry.Telemetry
	ownTel bool
	b      builder

	handlers map[string]*lazy[http.Handler]
	// edged is what the Functions Framework serves of each function
	// (Handler).
	edged map[string]http.Handler

	mu       sync.Mutex // guards the fields below
	inflight int
	draining bool
	idle     chan struct{} // closed when draining and inflight reaches 0
}

// New returns an app serving the functions cfg configures, or an error
// naming every broken setting of cfg (by its environment variable, as
// LoadConfig's does). It makes the telemetry and the logger; the
// functions' clients are built on their first request, or by Build.
func New(cfg Config, opts Options) (*App, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newApp(cfg, os.Stdout, opts, newCloudBuilder(opts.FirestoreOptions)), nil
}

// newApp returns an app over cfg, logging with opts.Log (or, when nil, to
// logOut at the configured level), and building its functions with the
// builder newBuilder makes.
func newApp(cfg Config, logOut io.Writer, opts Options, newBuilder func(Config, *slog.Logger, *telemetry.Telemetry) builder) *App {
	a := &App{cfg: cfg, log: opts.Log, tel: opts.Telemetry, handlers: map[string]*lazy[http.Handler]{},
		edged: map[string]http.Handler{}, idle: make(chan struct{})}
	if a.log == nil {
		a.log = logging.New(logOut, cfg.LogLevel)
	}
	if a.tel == nil {
		a.tel, a.ownTel = newTelemetry(cfg, logOut, a.log), true
	}
	a.b = newBuilder(cfg, a.log, a.tel)
	for _, f := range registered {
		name := f.Name
		a.handlers[name] = newLazy(func(ctx context.Context) (http.Handler, error) {
			return a.b.Handler(ctx, name)
		})
		a.edged[name] = a.Edge(a.function(f))
	}
	return a
}

// Handler returns the named function behind the edge: what the Functions
// Framework serves for it. It panics if no function has that name.
func (a *App) Handler(name string) http.Handler {
	h, ok := a.edged[name]
	if !ok {
		panic(fmt.Sprintf("cloudrun: no function %q", name))
	}
	return h
}

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
		ctx := logging.NewContext(r.Context(), a.log)
		ctx = logging.WithTrace(ctx, r.Header, a.cfg.Project)
		serveTraced(a.tel.Tracer(), a.cfg.Project, inner, w, r.WithContext(ctx))
	})
}

// function returns f's handler without the edge: its name in the logs,
// draining, its paths, and the lazily built handler.
func (a *App) function(f Function) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		if p := r.URL.Path; p != "/" && p != "/"+f.Name && p != f.Path && !f.pushedTo(p) {
			httpapi.WriteError(ctx, w, errs.E(errs.NotFound, "no method at this path"))
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

// Build builds every function now instead of on its first request, and
// returns what they share. The devstack calls it at start, so that a
// broken stack fails to start and its tests can reach the store, the
// reconciler and the clients the functions use.
func (a *App) Build(ctx context.Context) (Parts, error) {
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
	if err := a.b.Close(ctx); err != nil {
		errList = append(errList, err)
	}
	// Last, so that what the closing recorded is exported too.
	if a.ownTel {
		if err := a.tel.Shutdown(ctx); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}
