// Package devstack runs the whole system in one process with no cloud
// account (API.md §8): the Firestore emulator, the Pub/Sub emulator
// (emulators/pubsub, whose comment lists how it still differs from
// Pub/Sub), the Cloud Tasks emulator
// dispatching to the reconcile function, the GKE simulator with its
// per-project IAM and the IAM Credentials emulator (iam.go), a development
// token issuer, and every function of the project, built and served by the
// same composition root as on Cloud Run (functions/cloudrun) with its
// configuration pointed at the emulators. The devstack command serves it;
// end-to-end tests start it on free ports.
package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	iamemu "github.com/better-compute/kubernetes/emulators/iamcredentials"
	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
	"github.com/better-compute/kubernetes/shared/telemetry"
)

// DefaultReadTimeout is how long the devstack waits for a request,
// headers and body, before it closes the connection.
const DefaultReadTimeout = 5 * time.Second

// Config configures a stack. Empty addresses mean a free port on
// 127.0.0.1; zero durations mean the defaults of the functions'
// configuration (cloudrun.Defaults) and of the emulators.
type Config struct {
	Addr string // the functions, /healthz, /dev/token, the issuer
	// AllowedHosts are the names (or addresses) a request's Host may
	// give, besides loopback addresses and localhost, with any port;
	// every other Host is refused 403 on every route of Addr (guard.go).
	AllowedHosts  []string
	PubSubAddr    string
	FirestoreAddr string
	Project       string // bc-dev when empty
	Seed          *store.Seed
	// DataFile, if set, keeps the stack's state across restarts, even a
	// kill -9: the Firestore documents, the GKE simulator's clusters, node
	// pools and operations, the Pub/Sub emulator's topics, subscriptions
	// and unacknowledged messages of the stack's project, and the
	// development issuer's signing key. It is loaded at start and written
	// at one instant every SaveInterval when anything changed, and at
	// Close; each write replaces the file whole (a temporary file, then a
	// rename). A start from it restarts every reconcile chain at once.
	DataFile string
	// SaveInterval is DefaultSaveInterval when zero.
	SaveInterval time.Duration

	ConvergingInterval time.Duration
	SteadyInterval     time.Duration
	GKEOperationTime   time.Duration
	// GKERequestQuota is each simulated project's request quota, calls per
	// minute, which the reconciler's budget then spends within (0: none).
	GKERequestQuota int
	// TenantQueues, above one, is how many queues take the changing
	// chains' runs, each tenant's on one (ChangeQueues), as TASKS_QUEUE
	// naming several does in production; each has the one queue's
	// concurrency.
	TenantQueues int
	LeaseTTL     time.Duration
	// WatchdogInterval is how often the watchdog runs: Cloud Scheduler's
	// schedule in production, DefaultWatchdogInterval when zero.
	WatchdogInterval time.Duration
	// WatchdogGrace is how late a run may be before its chain is
	// restarted, and how old an outbox event must be before the watchdog
	// drains it.
	WatchdogGrace time.Duration
	// ReadTimeout bounds the reading of a request, body included, so that
	// a client that stops sending never holds a connection long
	// (DefaultReadTimeout when zero).
	ReadTimeout time.Duration
	// Kubernetes gives the GKE simulator's clusters a real Kubernetes API
	// (API.md §8; kubernetes.go): the API server is built in the
	// background from start-up (several minutes, once per machine), and
	// the clusters authenticate the functions' Google access tokens.
	Kubernetes bool
	// KubernetesAtCreate starts a simulated cluster's API server when the
	// cluster is created, as GKE's control plane, instead of on demand
	// (benchmarks of what the product adds to the provider's time).
	KubernetesAtCreate bool
	// TasksDuplicateRate is the share (0 to 1) of the Cloud Tasks
	// emulator's attempts delivered twice at the same moment, as Cloud
	// Tasks occasionally does (API.md §8, -tasks-duplicate-rate).
	TasksDuplicateRate float64
	// Instances, above 1, serves the functions from that many separate
	// processes of the deployed server, each started again after it dies
	// (instances.go, API.md §8's -instances); 0 or 1 serves them in this
	// process. InstanceCommand is the command line of one instance, a
	// program that runs cloudrun.Main (the devstack command's binary with
	// InstanceArg); InstanceOutput receives the instances' logs, line by
	// line (nil: dropped).
	Instances       int
	InstanceCommand []string
	InstanceOutput  io.Writer

	// KubernetesIdleTimeout and KubernetesMaxRunning are the GKE
	// simulator's Kubernetes.IdleTimeout and MaxRunning: when a cluster's
	// API server nobody uses is stopped, and how many run at once (its
	// defaults when zero).
	KubernetesIdleTimeout time.Duration
	KubernetesMaxRunning  int
	// ImpersonationTokenLifetime is the lifetime of the tokens the
	// reconciler mints of tenants' service accounts (the functions'
	// default, an hour, when zero): how soon a revoked grant shows.
	ImpersonationTokenLifetime time.Duration

	Log *slog.Logger
	// Telemetry is where the functions' metrics and traces go (the
	// command's -telemetry, a test's recorder); nil records nothing. The
	// stack does not shut it down.
	Telemetry *telemetry.Telemetry

	// FirestoreDialOptions are added to the Firestore client's connection
	// (tests count RPCs with interceptors).
	FirestoreDialOptions []grpc.DialOption
	// PubSubReactors are the Pub/Sub emulator's fault reactors (tests fail
	// publishes with them).
	PubSubReactors []psemu.Option
	// ConsolePoll is how often the console's cluster page reads Firestore
	// again, the fleet sending a burst of changes within a quarter of it
	// (a second when zero).
	ConsolePoll time.Duration
	// ConsoleFromStart has the console listen to the fleet's documents
	// from the start, so that its timelines hold every state and
	// reconcile run (the command's default); false, from the first
	// view, so that a stack nobody looks at pays nothing for them (the
	// tests', whose Firestore usage prices the product alone).
	ConsoleFromStart bool
	// ConsoleMaxStreams and ConsoleMaxStreamsPerClient bound the
	// console's open streams, in all and from one client address
	// (console.DefaultMaxStreams and DefaultMaxStreamsPerClient when
	// zero).
	ConsoleMaxStreams          int
	ConsoleMaxStreamsPerClient int
}

// DefaultWatchdogInterval is the watchdog's schedule in production
// (infra/).
const DefaultWatchdogInterval = time.Minute

// Queue is the Cloud Tasks queue of reconcile runs, in the stack's project.
func (c Config) Queue() string {
	return fmt.Sprintf("projects/%s/locations/us-central1/queues/reconcile", c.Project)
}

// ChangeQueues are the queues of changing chains' runs: Queue, and as
// many more as TenantQueues asks (reconcile-1, ...).
func (c Config) ChangeQueues() []string {
	qs := []string{c.Queue()}
	for i := 1; i < c.TenantQueues; i++ {
		qs = append(qs, fmt.Sprintf("%s-%d", c.Queue(), i))
	}
	return qs
}

// SteadyQueue is the Cloud Tasks queue of steady chains' runs
// (chain.Kick.Steady).
func (c Config) SteadyQueue() string { return c.Queue() + "-steady" }

// closeGrace bounds how long Close waits for work in flight, once for the
// Cloud Tasks emulator's attempts and once for the server's requests.
const closeGrace = 5 * time.Second

// Stack is a running devstack.
type Stack struct {
	URL string // http://host:port of the functions

	Firestore *fsemu.Server
	// PubSub is the Pub/Sub emulator (emulators/pubsub, whose comment
	// lists how it differs from Pub/Sub).
	PubSub *psemu.Server
	Tasks  *ctemu.Server
	GKE    *gkeemu.Server
	// Compute serves the GKE simulator's instance groups through the
	// Compute Engine API.
	Compute *gkeemu.ComputeServer
	// IAM is the IAM Credentials emulator: who may impersonate whom
	// (iam.go).
	IAM    *iamemu.Server
	Issuer *devissuer.Issuer

	// What the functions share, as the composition root built it
	// (cloudrun.Parts).
	FirestoreClient *firestore.Client
	PubSubClient    *pubsub.Client
	GKEClient       *container.ClusterManagerClient
	Store           *store.Store
	Relay           *outbox.Relay
	Watchdog        *chain.Watchdog
	// Reconciler runs the reconcile chains; ReconcileHandler is the reconcile
	// function that the Tasks emulator calls, as the Functions Framework
	// serves it (behind the edge); Queue schedules its tasks.
	Reconciler       *chain.Runner
	ReconcileHandler http.Handler
	Queue            *tasks.Queue

	cfg       Config
	functions cloudrun.Config
	log       *slog.Logger
	logTap    *console.LogTap
	requests  *console.RequestLog // what the console's requests view lists
	lis       net.Listener
	app       *cloudrun.App
	http      *http.Server
	handler   http.Handler // the routes of -addr, behind the Host check of http
	fresh     freshConns
	ready     atomic.Bool

	fleet     atomic.Pointer[fleet] // the instances (instances.go), once started
	served    atomic.Int64          // the function requests this process served itself
	startedAt time.Time

	saver      *saver
	issuerData *savedIssuer
	loaded     bool // the state came from the data file

	kube *kubeSide // nil without Config.Kubernetes
	// console is the web console (console.go), served once built.
	console        *console.Console
	consoleHandler atomic.Pointer[http.Handler]
	// platformToken is the reconciler's own access token at the
	// emulators that check callers.
	platformToken string

	stopBackground context.CancelFunc // the watchdog's and the saver's loops
	wg             sync.WaitGroup
	emulators      []func() error // closed last, in reverse

	closeOnce sync.Once
	closeErr  error
}

// Start starts every part of the stack. Close it when done.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	if cfg.Project == "" {
		cfg.Project = "bc-dev"
	}
	if cfg.Log == nil {
		cfg.Log = logging.New(os.Stderr, slog.LevelInfo)
	}
	if cfg.WatchdogInterval <= 0 {
		cfg.WatchdogInterval = DefaultWatchdogInterval
	}
	if cfg.SaveInterval <= 0 {
		cfg.SaveInterval = DefaultSaveInterval
	}
	// The console shows the reasons the log has of failing runs.
	tap := console.NewLogTap()
	s := &Stack{cfg: cfg, log: slog.New(tap.Handler(cfg.Log.Handler())), logTap: tap, requests: console.NewRequestLog()}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.lis, err = net.Listen("tcp", orFree(cfg.Addr)); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.URL = "http://" + selfAddr(s.lis.Addr())
	if !isLoopbackAddr(s.lis.Addr().String()) {
		s.log.Warn("The devstack listens on an address other machines may reach: anyone who can reach it may act as any tenant; "+
			"it answers only requests that name a loopback address, localhost or a name of -allowed-hosts", "addr", s.lis.Addr().String())
	}
	var raw []byte
	var data *savedData
	if cfg.DataFile != "" {
		if raw, data, err = readData(cfg.DataFile); err != nil {
			return nil, err
		}
		s.loaded = data != nil
		s.saver = &saver{path: cfg.DataFile}
	}
	issuerOpts := []devissuer.Option{devissuer.WithAudience(s.URL)}
	if data != nil && data.Issuer != nil {
		key, err := devissuer.ParseKey([]byte(data.Issuer.Key))
		if err != nil {
			return nil, fmt.Errorf("data file %s: %w", cfg.DataFile, err)
		}
		issuerOpts = append(issuerOpts, devissuer.WithKey(key))
	}
	if s.Issuer, err = devissuer.New(s.URL, issuerOpts...); err != nil {
		return nil, fmt.Errorf("development issuer: %w", err)
	}
	key, err := devissuer.MarshalKey(s.Issuer.Key())
	if err != nil {
		return nil, err
	}
	s.issuerData = &savedIssuer{Key: string(key)}
	s.startKubernetes()
	if err := s.startEmulators(raw, data); err != nil {
		return nil, err
	}
	if data != nil && data.PubSub != nil {
		if err := s.restorePubSub(ctx, data.PubSub); err != nil {
			return nil, fmt.Errorf("data file %s: %w", cfg.DataFile, err)
		}
	}
	if err := s.provision(ctx); err != nil {
		return nil, err
	}

	s.functions = s.functionsConfig()
	fsOpts := make([]option.ClientOption, len(cfg.FirestoreDialOptions))
	for i, o := range cfg.FirestoreDialOptions {
		fsOpts[i] = option.WithGRPCDialOption(o)
	}
	if s.app, err = cloudrun.New(s.functions, cloudrun.Options{Log: s.log, FirestoreOptions: fsOpts, Telemetry: cfg.Telemetry}); err != nil {
		return nil, fmt.Errorf("the functions: %w", err)
	}
	mux := s.functionsMux()
	mux.Handle("/.well-known/", s.Issuer.Handler())
	mux.Handle(devissuer.TokenPath, s.Issuer.TokenHandler())
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("POST "+AccessTokenPath, s.accessToken)
	mux.HandleFunc("POST "+PoolsPutPath, s.poolsHandler(event.PoolUpdated))
	mux.HandleFunc("POST "+PoolsArchivePath, s.poolsHandler(event.PoolArchived))
	s.kubernetesRoutes(mux)
	s.gkeRoutes(mux)
	s.faultRoutes(mux)
	s.consoleRoutes(mux)
	mux.HandleFunc("/", otherRoutes(mux))
	s.fresh.conns = map[net.Conn]struct{}{}
	readTimeout := s.cfg.ReadTimeout
	if readTimeout <= 0 {
		readTimeout = DefaultReadTimeout
	}
	// The request log lists what reached the devstack: a request of a
	// foreign Host is refused before it.
	s.handler = s.requests.Wrap(s.front(mux))
	allowed := newHostAllowList(append(slices.Clone(cfg.AllowedHosts), strings.TrimPrefix(s.URL, "http://")))
	s.http = &http.Server{Handler: guardHost(allowed, s.handler), ReadHeaderTimeout: readTimeout, ReadTimeout: readTimeout, ConnState: s.fresh.track}
	s.http.RegisterOnShutdown(s.fresh.close)
	go func() { _ = s.http.Serve(s.lis) }()

	// The functions discover the issuer over the server: build them now
	// that it serves.
	p, err := s.app.Build(ctx)
	if err != nil {
		return nil, err
	}
	s.FirestoreClient, s.PubSubClient, s.GKEClient = p.Firestore, p.PubSub, p.GKE
	s.Store, s.Relay, s.Queue, s.Reconciler, s.Watchdog = p.Store, p.Relay, p.Queue, p.Reconciler, p.Watchdog
	s.ReconcileHandler = s.app.Handler(cloudrun.ReconcileFunction)
	if cfg.Seed != nil {
		if err := s.Store.LoadSeed(ctx, cfg.Seed); err != nil {
			return nil, err
		}
	}
	if err := s.startInstances(ctx); err != nil {
		return nil, err
	}
	if err := s.startConsole(ctx); err != nil {
		return nil, err
	}
	if s.loaded {
		if err := s.restartChains(ctx); err != nil {
			return nil, err
		}
	}
	bctx, stop := context.WithCancel(context.Background())
	s.stopBackground = stop
	if s.saver != nil {
		// At once: a kill from now on finds the issuer's key kept.
		if err := s.save(ctx); err != nil {
			return nil, err
		}
		s.wg.Add(1)
		go s.saveLoop(bctx, cfg.SaveInterval)
	}
	s.wg.Add(1)
	go s.watchdogLoop(bctx)
	s.wg.Add(1)
	go s.deliverPools(bctx)
	s.ready.Store(true)
	return s, nil
}

// restartChains starts every reconcile chain again, and publishes what the
// outbox holds: the tasks that ran the chains lived in the Cloud Tasks
// emulator, which loses them when the process ends. The watchdog would
// restart each chain once it is overdue by its grace (a steady one only
// after its heartbeat); this does not wait. A run that the process's end
// cut still holds its subject until its lease expires: the new chain's
// first task is retried until then.
func (s *Stack) restartChains(ctx context.Context) error {
	res, err := s.Watchdog.RestartAll(ctx)
	if err != nil {
		return fmt.Errorf("restart the reconcile chains: %w", err)
	}
	s.log.Info("Restarted the reconcile chains of the data file", "restarted", res.Restarted, "drained", res.Drained)
	return nil
}

// FunctionsConfig returns the configuration the stack's functions are
// built from.
func (s *Stack) FunctionsConfig() cloudrun.Config { return s.functions }

// functionsConfig is the configuration of the stack's functions: the
// Cloud Run settings, pointed at the emulators and the development
// issuer, which signs both the tenants' tokens and the internal callers'
// OIDC tokens.
func (s *Stack) functionsConfig() cloudrun.Config {
	c := cloudrun.Defaults()
	c.Project = s.cfg.Project
	c.AuthIssuerURL, c.AuthAudience = s.URL, s.URL
	c.TasksQueue, c.TasksSteadyQueue = strings.Join(s.cfg.ChangeQueues(), ","), s.cfg.SteadyQueue()
	c.ReconcileURL = s.URL + functionPath(cloudrun.ReconcileFunction)
	// The internal functions' callers (iam.go), their tokens signed by
	// the development issuer for the stack's URL.
	c.TasksServiceAccount = s.cfg.TasksServiceAccount()
	c.TasksAudience = s.URL
	c.ReconcileIssuerURL, c.ReconcileAudience = s.URL, s.URL
	c.SchedulerServiceAccount = s.cfg.SchedulerServiceAccount()
	c.PushServiceAccount, c.PushAudience = s.cfg.PushServiceAccount(), s.URL
	c.FirestoreEmulatorHost = s.Firestore.Addr
	c.PubSubEmulatorHost = s.PubSub.Addr
	c.TasksEmulatorHost = s.Tasks.Addr()
	c.GKEEmulatorHost = s.GKE.Addr()
	c.ComputeEmulatorHost = s.Compute.Addr()
	// bcd runs nowhere here: the GKE simulator plays it from the
	// DaemonSet's environment.
	c.BcdImage = "bcd.invalid/bcd:dev"
	c.JoinURL = s.joinURL()
	// One instance serves every run: it may spend the reconciler's whole
	// share of the simulator's quota.
	c.ProviderQuota = s.cfg.GKERequestQuota
	c.ReconcileInstances = 1
	s.iamConfig(&c)
	for _, d := range []struct {
		dst *time.Duration
		v   time.Duration
	}{
		{&c.ConvergingInterval, s.cfg.ConvergingInterval},
		{&c.SteadyInterval, s.cfg.SteadyInterval},
		{&c.LeaseTTL, s.cfg.LeaseTTL},
		{&c.WatchdogGrace, s.cfg.WatchdogGrace},
	} {
		if d.v > 0 {
			*d.dst = d.v
		}
	}
	return c
}

// joinURL is the join method's URL: where the functions tell bcd to
// join, and the only one where the GKE simulator's bcd posts its tokens.
func (s *Stack) joinURL() string { return s.URL + "/api/compute/kubernetesSubstrates/join" }

// otherRoutes answers what no route of mux serves in the API's error
// envelope, not net/http's plain text, as the API does (API.md §1): 405
// with an Allow header for a path that a route serves for another method
// (the stack's own routes each take one, but for /dev/faults), 404 for
// any other path.
func otherRoutes(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if method == r.Method {
				continue
			}
			other := r.Clone(r.Context())
			other.Method = method
			if _, pattern := mux.Handler(other); pattern != "/" {
				allow = append(allow, method)
			}
		}
		switch {
		case len(allow) == 1:
			httpapi.Allow(w, r, allow[0])
			return
		case len(allow) > 1:
			if allow[0] == http.MethodGet {
				allow = slices.Insert(allow, 1, http.MethodHead)
			}
			httpapi.Allow(w, r, strings.Join(allow, ", "))
			return
		}
		httpapi.WriteError(r.Context(), w, errs.E(errs.NotFound, "no method at %s", r.URL.Path))
	}
}

// functionPath is where the named function is served.
func functionPath(name string) string {
	for _, f := range cloudrun.Functions() {
		if f.Name == name {
			return f.Path
		}
	}
	panic("devstack: no function " + name)
}

func (s *Stack) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	if !s.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("starting\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// selfAddr is the address the stack calls itself at: the listener's, or
// the loopback address with its port when it listens on every address.
func selfAddr(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok && t.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(t.Port))
	}
	return a.String()
}

func orFree(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// emulatorOptions point a Google client at an emulator.
func emulatorOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// startEmulators starts the Firestore emulator, Pub/Sub, the GKE
// simulator and the Cloud Tasks emulator, whose tasks carry tokens of the
// development issuer; raw and data are the data file, if any, whose
// documents and GKE state they start with.
func (s *Stack) startEmulators(raw []byte, data *savedData) error {
	fs, err := fsemu.NewServer(fsemu.WithAddr(orFree(s.cfg.FirestoreAddr)))
	if err != nil {
		return fmt.Errorf("firestore emulator: %w", err)
	}
	s.Firestore = fs
	s.emulators = append(s.emulators, fs.Close)
	if data != nil {
		if err := fs.Import(bytes.NewReader(raw)); err != nil {
			return fmt.Errorf("data file %s: %w", s.cfg.DataFile, err)
		}
	}

	if s.PubSub, err = psemu.NewServer(orFree(s.cfg.PubSubAddr), s.cfg.PubSubReactors...); err != nil {
		return err
	}
	s.emulators = append(s.emulators, s.PubSub.Close)

	// The GKE simulator asks the IAM Credentials emulator who calls.
	if err := s.startIAM(); err != nil {
		return err
	}
	gkeOpts := []gkeemu.Option{gkeemu.WithLogger(s.log)}
	if s.cfg.GKEOperationTime > 0 {
		gkeOpts = append(gkeOpts, gkeemu.WithOperationTime(s.cfg.GKEOperationTime))
	}
	if s.cfg.GKERequestQuota > 0 {
		gkeOpts = append(gkeOpts, gkeemu.WithRequestQuota(s.cfg.GKERequestQuota))
	}
	gkeOpts = append(gkeOpts, s.kubernetesOptions()...)
	gkeOpts = append(gkeOpts, s.iamOptions()...)
	gke, err := gkeemu.NewServer(gkeOpts...)
	if err != nil {
		return fmt.Errorf("gke simulator: %w", err)
	}
	s.GKE = gke
	s.emulators = append(s.emulators, gke.Close)
	if s.Compute, err = gkeemu.NewComputeServer(gke, "127.0.0.1:0"); err != nil {
		return err
	}
	s.emulators = append(s.emulators, s.Compute.Close)
	if data != nil && len(data.GKE) > 0 {
		if err := gke.Restore(data.GKE); err != nil {
			return fmt.Errorf("data file %s: %w", s.cfg.DataFile, err)
		}
	}
	switch {
	case data != nil && data.Version == 0:
		s.log.Warn("The data file has only Firestore documents, from an older devstack: the clusters they name are unknown to the GKE simulator", "file", s.cfg.DataFile)
	case data != nil:
		s.log.Info("Loaded the data file", "file", s.cfg.DataFile)
	}

	// A task's OIDC token, as Cloud Tasks mints it for the task's
	// service account.
	tokens := func(ctx context.Context, audience, serviceAccount string) (string, error) {
		return s.Issuer.ServiceAccountToken(serviceAccount, audience, callerTokenLifetime)
	}
	// Closed by Close before the server, not with the other emulators.
	if s.Tasks, err = ctemu.NewServer(ctemu.WithTokenSource(tokens), ctemu.WithLogger(s.log),
		ctemu.WithDuplicateRate(s.cfg.TasksDuplicateRate)); err != nil {
		return fmt.Errorf("cloud tasks emulator: %w", err)
	}
	return nil
}

// provision creates what infra/ creates in production: a topic per event
// type and the reconcile queues.
func (s *Stack) provision(ctx context.Context) error {
	ps, err := pubsub.NewClient(ctx, s.cfg.Project, emulatorOptions(s.PubSub.Addr)...)
	if err != nil {
		return fmt.Errorf("pubsub client: %w", err)
	}
	defer ps.Close()
	for _, t := range event.Types {
		name := fmt.Sprintf("projects/%s/topics/%s", s.cfg.Project, t)
		// A topic restored from the data file exists already.
		if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); err != nil && status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	if err := s.provisionPools(ctx, ps); err != nil {
		return err
	}
	tc, err := cloudtasks.NewClient(ctx, s.Tasks.ClientOptions()...)
	if err != nil {
		return fmt.Errorf("cloud tasks client: %w", err)
	}
	defer tc.Close()
	// Changes and converging runs on one queue, steady refreshes on the
	// other, with fewer runs in flight: however many refreshes are due,
	// they take a bounded share of the process, and a change's run is
	// dispatched as soon as it is due.
	queues := map[string]int32{s.cfg.SteadyQueue(): 10}
	for _, q := range s.cfg.ChangeQueues() {
		queues[q] = 50
	}
	for name, inFlight := range queues {
		_, err = tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
			Parent: fmt.Sprintf("projects/%s/locations/us-central1", s.cfg.Project),
			Queue: &cloudtaskspb.Queue{
				Name: name,
				RetryConfig: &cloudtaskspb.RetryConfig{
					MaxAttempts: -1,
					MinBackoff:  durationpb.New(100 * time.Millisecond),
					MaxBackoff:  durationpb.New(10 * time.Second),
				},
				RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: inFlight},
			},
		})
		if err != nil {
			return fmt.Errorf("create queue %s: %w", name, err)
		}
	}
	return nil
}

// watchdogLoop plays Cloud Scheduler: a call of the watchdog function
// every interval until ctx ends (tick).
func (s *Stack) watchdogLoop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.WatchdogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A pass cut short between publishing events and clearing
			// them from the outbox publishes them again on the next
			// pass: give it time even when the interval is short.
			pctx, cancel := context.WithTimeout(ctx, max(s.cfg.WatchdogInterval, 30*time.Second))
			res, err := s.tick(pctx)
			cancel()
			switch {
			case ctx.Err() != nil:
				return // the stack is closing; the next start drains the rest
			case err != nil:
				s.log.Warn("Watchdog pass incomplete; the next one retries", "error", err)
			case res.Restarted > 0 || res.Drained > 0:
				s.log.Info("Watchdog pass", "restarted", res.Restarted, "drained", res.Drained)
			}
		}
	}
}

// Token returns a development token for sub, valid for the stack's API.
func (s *Stack) Token(sub string) (string, error) {
	return s.Issuer.Token(sub, s.URL, time.Hour)
}

// Close stops everything, saving the Firestore data first if configured.
// It returns within a few seconds whatever is in flight: work still
// running after closeGrace is cut, and reported. Later calls return the
// first one's result.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

// close stops the parts in the order they depend on each other: first
// the stack's own callers of its functions (the watchdog's schedule, the
// Cloud Tasks dispatcher), so that none is still calling, or holding a
// connection to, the server when it stops; then the server; then the
// functions, which publish what their relay still holds; then the
// emulators they used.
func (s *Stack) close() error {
	var errList []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, net.ErrClosed) {
			errList = append(errList, err)
		}
	}
	if s.stopBackground != nil {
		s.stopBackground()
		s.wg.Wait()
	}
	if s.console != nil {
		// Its streams end, and its subscriptions, before the server and
		// Pub/Sub stop.
		s.console.Close()
	}
	// The emulator's Close stops dispatching, waits for the attempts in
	// flight, then closes its idle connections to the server.
	tasksClosed := make(chan error, 1)
	if s.Tasks != nil {
		go func() { tasksClosed <- s.Tasks.Close() }()
	} else {
		tasksClosed <- nil
	}
	select {
	case err := <-tasksClosed:
		tasksClosed <- err
	case <-time.After(closeGrace):
	}
	if s.http != nil {
		keep(s.shutdownServer())
	} else if s.lis != nil {
		keep(s.lis.Close())
	}
	// Attempts still in flight ended when the server cut their requests.
	keep(<-tasksClosed)
	keep(s.stopInstances())
	if s.app != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		keep(s.app.Shutdown(ctx))
		cancel()
	}
	if s.saver != nil && s.ready.Load() {
		// The last save, once nothing runs any more.
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		if err := s.save(ctx); err != nil {
			keep(err)
		} else {
			s.log.Info("Saved the data file", "file", s.cfg.DataFile)
		}
		cancel()
	}
	for i := len(s.emulators) - 1; i >= 0; i-- {
		keep(s.emulators[i]())
	}
	return errors.Join(errList...)
}

// shutdownServer stops the server: requests in flight get closeGrace to
// finish, and what is left after it is cut.
func (s *Stack) shutdownServer() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		_ = s.http.Close()
		return fmt.Errorf("requests still in flight after %v were cut: %w", closeGrace, err)
	}
	return nil
}

// freshConns are the server's connections that have not sent a request
// yet. Go's http.Transport, asked for two requests at once, may dial a
// connection for the second and then send it on the first one's, freed
// meanwhile, keeping the new one idle and unused (the tests' client and the
// token verifiers' key fetches share http.DefaultTransport). net/http's
// Shutdown counts such a connection as active until it is more than five
// seconds old. At shutdown they are closed at once: nothing was asked on
// them, and the listener is already closed.
type freshConns struct {
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
}

// track is the server's ConnState hook.
func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st != http.StateNew {
		delete(f.conns, c)
		return
	}
	if f.closing {
		c.Close()
		return
	}
	f.conns[c] = struct{}{}
}

// close closes the fresh connections, and those accepted later. The
// server calls it once Shutdown has closed its listener.
func (f *freshConns) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closing = true
	for c := range f.conns {
		c.Close()
	}
	clear(f.conns)
}
