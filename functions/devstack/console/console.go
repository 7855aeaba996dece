// Package console is the devstack's web console (API.md §8, GET
// /console): the fleet of every tenant, each cluster's node pools and
// timeline, the kubernetes.* events as they are published, what the
// emulators hold, the requests the devstack served, a search by name or
// ID, forms for the devstack's provider and pool events, and the
// emulators' active faults (POST, GET and DELETE /dev/faults).
// It is Go templates and embedded static files, loads nothing from
// outside the devstack, and updates its pages by server-sent events; a
// timeline's bars that run until now (an operation, a run) grow in the
// page (console.js), which asks the devstack nothing for them.
//
// It reads the product's documents through the store (shared/store, its
// reads and listeners for the console: no path is spelled here), read-only,
// keeping the states the clusters' and pools' documents take for the
// timelines (from Start); the Firestore page alone reads the emulator's
// documents raw, as a browser of the emulator; sees the events as the Pub/Sub emulator takes
// them (Options.Published), with no subscription of its own; and learns
// why runs fail from the devstack's log (LogTap: its own records, and
// its instances' JSON lines with -instances above 1; a reason newly
// logged wakes its cluster's or substrate's streams as a change does)
// and what was served from its requests (RequestLog), both of which the
// devstack wires in.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Path is where the console is served.
const Path = "/console"

// DefaultPageSize is how many clusters a page of the fleet shows.
const DefaultPageSize = 100

// Queue is a Cloud Tasks queue and the tasks it holds.
type Queue struct {
	Name  string
	Tasks []*cloudtaskspb.Task
}

// Instance is a process serving the functions.
type Instance struct {
	Index     int
	PID       int
	Addr      string
	StartedAt time.Time
	Requests  int64
}

// Fault is an active fault of an emulator, as GET /dev/faults lists it:
// the fields of its POST /dev/faults, and the calls it has hit.
type Fault struct {
	ID, Service, Method, Action string
	Code, Latency               string
	Count                       *int
	Share                       *float64
	Seed                        *int64
	Hits                        int
}

// Options are what the console reads and calls. Only Firestore is
// required; a view whose source is nil says so.
type Options struct {
	// Firestore is the stack's client: the console reads the product's
	// documents through a store over it, and the Firestore page browses
	// the emulator with it.
	Firestore *firestore.Client
	// Published registers a function called with every message published
	// to Pub/Sub, until the returned stop is called (nil: no events
	// view). The console keeps those of Topics, by their short names.
	Published func(f func(topic string, m *pubsubpb.PubsubMessage)) (stop func())
	Topics    []string
	// Queues, Operations and Instances are what the emulators hold now.
	Queues     func() []Queue
	Operations func() []*containerpb.Operation
	Instances  func() []Instance
	// Kubernetes is what the simulated clusters' Kubernetes API servers
	// are doing (nil, or a nil answer: the devstack runs without them).
	Kubernetes func() *Kubernetes
	// Faults is the emulators' active faults of POST /dev/faults (nil:
	// the act page lists none).
	Faults func() []Fault
	// Devstack serves the devstack's own endpoints (/dev/gke/*,
	// /dev/pools/*, the API), which the forms call in process.
	Devstack http.Handler
	// Token mints a tenant's development token (for the substrate's plan).
	Token func(sub string) (string, error)
	// Logs has the log's latest warning of each substrate and cluster
	// (nil: the console shows the resources' messages alone); a warning
	// newly logged of one wakes its streams.
	Logs *LogTap
	// Requests is the log of the devstack's requests (nil: the requests
	// view has none).
	Requests *RequestLog
	// Poll is a second when zero: the streams, which listen, send a
	// burst of changes within a quarter of it.
	Poll     time.Duration
	PageSize int
	// Zones are the zones the devstack's clusters may use, which the act
	// page offers and a stockout must name (nil: any).
	Zones []string
	// FromStart has Start begin listening to the fleet's documents (the
	// states and runs of the timelines, from then); false, the first
	// view does.
	FromStart bool
	// MaxStreams and MaxStreamsPerClient bound the open streams, in all
	// and from one client address (DefaultMaxStreams and
	// DefaultMaxStreamsPerClient when zero): a stream past them is
	// refused, 503 and 429.
	MaxStreams, MaxStreamsPerClient int
	Log                             *slog.Logger
}

// Console serves the console's pages.
type Console struct {
	opt   Options
	pages map[string]*template.Template
	rows  *template.Template
	ev    *events
	plans plans
	// store reads the product's documents; opt.Firestore is the
	// emulator's browser's alone (firestorePage).
	store *store.Store
	// tokens mint and check the forms' per-page tokens; slots bound the
	// open streams (guard.go).
	tokens formTokens
	slots  streamSlots

	mu        sync.Mutex
	stop      context.CancelFunc
	wg        sync.WaitGroup
	done      chan struct{} // closed by Close: the streams end
	watch     *watcher
	bg        context.Context // the watcher's, ended by Close
	bgStop    context.CancelFunc
	closeOnce sync.Once
	// unlog stops the log's notes of new reasons (Options.Logs).
	unlog func()
}

// New builds a console; Start begins collecting events.
func New(opt Options) (*Console, error) {
	if opt.Firestore == nil {
		return nil, errors.New("console: no Firestore client")
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.MaxStreams <= 0 {
		opt.MaxStreams = DefaultMaxStreams
	}
	if opt.MaxStreamsPerClient <= 0 {
		opt.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if opt.PageSize <= 0 {
		opt.PageSize = DefaultPageSize
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	st, err := store.New(opt.Firestore, lifecycle.Rules{})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{opt: opt, store: st, pages: map[string]*template.Template{}, ev: newEvents(5000, 1000), done: make(chan struct{}), watch: newWatcher(st),
		tokens: newFormTokens(), slots: streamSlots{max: opt.MaxStreams, per: opt.MaxStreamsPerClient, perClient: map[string]int{}}}
	c.bg, c.bgStop = context.WithCancel(context.Background())
	base, err := template.New("base").Funcs(funcs).Funcs(template.FuncMap{"formToken": c.tokens.mint}).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, err
	}
	c.rows = base
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		c.pages[name] = t
	}
	// A reason newly in the log wakes its resource's streams, as a change
	// of its documents does.
	c.unlog = opt.Logs.OnNote(c.watch.touchLogged)
	return c, nil
}

// Start begins keeping the events published to Topics, and with
// FromStart the fleet's documents (their states and the reconcile runs,
// for the timelines), until Close. It observes the publications rather
// than subscribing, so that a devstack pays for no subscription, stream
// or acknowledgement per topic. Without FromStart, the console reads the
// fleet's documents from its first view.
func (c *Console) Start(context.Context) error {
	if c.opt.FromStart {
		c.watch.start(c.bg, &c.wg)
	}
	if c.opt.Published == nil {
		return nil
	}
	topics := map[string]bool{}
	for _, t := range c.opt.Topics {
		topics[t] = true
	}
	stop := c.opt.Published(func(topic string, m *pubsubpb.PubsubMessage) {
		if topics[topic[strings.LastIndex(topic, "/")+1:]] {
			c.ev.publish(m.GetAttributes(), m.GetData())
		}
	})
	c.mu.Lock()
	c.stop = stop
	c.mu.Unlock()
	return nil
}

// Close ends the streams and stops observing the publications.
func (c *Console) Close() {
	c.closeOnce.Do(func() { close(c.done); c.bgStop(); c.unlog() })
	c.mu.Lock()
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	c.wg.Wait()
	c.ev.close()
}

// Routes adds the console's routes to mux.
func (c *Console) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Path, c.fleetPage)
	mux.HandleFunc("GET "+Path+"/{$}", c.fleetPage)
	mux.HandleFunc("GET "+Path+"/fleet/stream", c.bounded(c.fleetStream))
	mux.HandleFunc("GET "+Path+"/clusters/{tenant}/{id}", c.clusterPage)
	mux.HandleFunc("GET "+Path+"/clusters/{tenant}/{id}/stream", c.bounded(c.clusterStream))
	mux.HandleFunc("GET "+Path+"/substrates/{tenant}/{id}", c.substratePage)
	mux.HandleFunc("GET "+Path+"/substrates/{tenant}/{id}/stream", c.bounded(c.substrateStream))
	mux.HandleFunc("GET "+Path+"/events", c.eventsPage)
	mux.HandleFunc("GET "+Path+"/events/stream", c.bounded(c.eventsStream))
	mux.HandleFunc("GET "+Path+"/emulators", c.emulatorsPage)
	mux.HandleFunc("GET "+Path+"/firestore", c.firestorePage)
	mux.HandleFunc("GET "+Path+"/act", c.actPage)
	mux.HandleFunc("GET "+Path+"/search", c.search)
	mux.HandleFunc("GET "+Path+"/requests", c.requestsPage)
	mux.HandleFunc("POST "+Path+"/act/{what}", c.act)
	sub, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET "+Path+"/static/", http.StripPrefix(Path+"/static/", http.FileServerFS(sub)))
}

// Handler is a handler of the console's routes alone.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	c.Routes(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		mux.ServeHTTP(w, r)
	})
}

// render writes the named page.
func (c *Console) render(w http.ResponseWriter, name string, data any) {
	t := c.pages[name]
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	securityHeaders(w.Header())
	if err := t.ExecuteTemplate(w, "layout", data); err != nil {
		c.opt.Log.Warn("Console page failed", "page", name, "error", err)
	}
}

// flashed is the page's answer of a form (post-redirect-get): its words
// and whether it tells of a failure.
func flashed(r *http.Request) (string, bool) {
	q := r.URL.Query()
	return q.Get("flash"), q.Get("failed") != ""
}

// page is what every page's layout reads.
type page struct {
	Title string
	Nav   string
	Flash string
	// FlashErr says the flash tells of a failure.
	FlashErr bool
	Body     any
}
