// Package devstack runs the whole system in one process with no cloud
// account (API.md §8): the API functions, the reconcile function and its
// watchdog, the Firestore emulator, Pub/Sub (pstest), the Cloud Tasks
// emulator dispatching to the reconcile function, the GKE simulator and a
// development token issuer. The devstack command serves it; end-to-end
// tests start it on free ports.
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/functions/reconcile"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// Config configures a stack. Empty addresses mean a free port on
// 127.0.0.1.
type Config struct {
	Addr          string // the API, the reconcile function, /healthz, /dev/token
	PubSubAddr    string
	FirestoreAddr string
	Project       string
	Seed          *store.Seed
	// DataFile, if set, keeps the Firestore data across restarts: loaded
	// at start, written at Close.
	DataFile string

	ConvergingInterval time.Duration
	SteadyInterval     time.Duration
	GKEOperationTime   time.Duration
	LeaseTTL           time.Duration
	// WatchdogInterval is how often the watchdog runs (Cloud Scheduler's
	// every minute in production).
	WatchdogInterval time.Duration
	// WatchdogGrace is how late a run may be before its chain is
	// restarted, and how old an outbox event must be before the watchdog
	// drains it.
	WatchdogGrace time.Duration

	Log *slog.Logger

	// FirestoreDialOptions are added to the Firestore client's connection
	// (tests count RPCs with interceptors).
	FirestoreDialOptions []grpc.DialOption
	// PubSubReactors are pstest reactors (tests fail publishes with them).
	PubSubReactors []pstest.ServerReactorOption
}

// Queue is the Cloud Tasks queue of reconcile runs, in the stack's project.
func (c Config) Queue() string {
	return fmt.Sprintf("projects/%s/locations/us-central1/queues/reconcile", c.Project)
}

// Stack is a running devstack.
type Stack struct {
	URL string // http://host:port of the API

	Firestore *fsemu.Server
	PubSub    *pstest.Server
	Tasks     *ctemu.Server
	GKE       *gkeemu.Server
	Issuer    *devissuer.Issuer

	FirestoreClient *firestore.Client
	PubSubClient    *pubsub.Client
	GKEClient       *container.ClusterManagerClient
	Store           *store.Store
	Relay           *outbox.Relay
	Watchdog        *chain.Watchdog
	// Reconciler runs the reconcile chains; ReconcileHandler is the
	// reconcile function that the Tasks emulator calls; Queue schedules
	// its tasks.
	Reconciler       *chain.Runner
	ReconcileHandler http.Handler
	Queue            *tasks.Queue

	cfg     Config
	log     *slog.Logger
	http    *http.Server
	closers []func() error
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// Start starts every part of the stack. Close it when done.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	if cfg.Project == "" {
		cfg.Project = "bc-dev"
	}
	if cfg.Log == nil {
		cfg.Log = logging.New(os.Stderr, slog.LevelInfo)
	}
	defaults(&cfg)
	s := &Stack{cfg: cfg, log: cfg.Log, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	lis, err := net.Listen("tcp", orFree(cfg.Addr))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.closers = append(s.closers, func() error { _ = lis.Close(); return nil })
	s.URL = "http://" + lis.Addr().String()

	if s.Issuer, err = devissuer.New(s.URL, devissuer.WithAudience(s.URL)); err != nil {
		return nil, fmt.Errorf("development issuer: %w", err)
	}
	if err := s.startFirestore(ctx); err != nil {
		return nil, err
	}
	if err := s.startPubSub(ctx); err != nil {
		return nil, err
	}
	if err := s.startGKE(ctx); err != nil {
		return nil, err
	}
	queue, err := s.startTasks(ctx)
	if err != nil {
		return nil, err
	}
	s.Queue = queue

	if s.Store, err = store.New(s.FirestoreClient); err != nil {
		return nil, err
	}
	if cfg.Seed != nil {
		if err := s.Store.LoadSeed(ctx, cfg.Seed); err != nil {
			return nil, err
		}
	}
	if s.Relay, err = outbox.NewRelay(s.FirestoreClient, outbox.NewPubSub(s.PubSubClient), s.log); err != nil {
		return nil, err
	}
	s.Relay.Start()
	s.closers = append(s.closers, func() error { s.Relay.Close(); return nil })

	verifier, err := auth.NewVerifier(ctx, auth.Config{IssuerURL: s.URL, Audience: s.URL})
	if err != nil {
		return nil, err
	}
	cr, err := clusters.New(s.Store, s.GKEClient, nil)
	if err != nil {
		return nil, err
	}
	rec, err := chain.NewRunner(s.FirestoreClient, queue, s.Relay, chain.Config{
		ConvergingInterval: cfg.ConvergingInterval,
		SteadyInterval:     cfg.SteadyInterval,
		LeaseTTL:           cfg.LeaseTTL,
	}, cr)
	if err != nil {
		return nil, err
	}
	s.Reconciler = rec
	s.Watchdog = &chain.Watchdog{FS: s.FirestoreClient, Kinds: []string{store.ClustersKind}, Kicker: queue, Events: s.Relay, Grace: cfg.WatchdogGrace, DrainAge: cfg.WatchdogGrace}

	mux := http.NewServeMux()
	routes, err := api.Routes(api.Deps{Auth: verifier, Store: s.Store, Events: s.Relay, Kicker: queue})
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		mux.Handle(r.Path, r.Handler)
	}
	rh, err := reconcile.Handler(verifier, rec)
	if err != nil {
		return nil, err
	}
	s.ReconcileHandler = rh
	mux.Handle(ReconcilePath, rh)
	wh, err := reconcile.WatchdogHandler(verifier, s.Watchdog)
	if err != nil {
		return nil, err
	}
	mux.Handle(WatchdogPath, wh)
	mux.Handle("/.well-known/", s.Issuer.Handler())
	mux.Handle(devissuer.TokenPath, s.Issuer.TokenHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	// Any other path answers in the API's error envelope, not net/http's
	// plain text.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(r.Context(), w, errs.E(errs.NotFound, "no method at %s", r.URL.Path))
	})
	s.http = &http.Server{Handler: withRequestID(logging.Middleware(s.log, cfg.Project)(mux)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(lis) }()
	if err := verifier.Ready(ctx); err != nil {
		return nil, fmt.Errorf("token verifier: %w", err)
	}
	s.wg.Add(1)
	go s.watchdogLoop()
	return s, nil
}

// withRequestID gives every response an X-Request-Id: the request's, or a
// new one that the API handlers then echo.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
			r.Header.Set("X-Request-Id", id)
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r)
	})
}

// Paths of the reconciler's functions in the devstack.
const (
	ReconcilePath = "/internal/reconcile"
	WatchdogPath  = "/internal/watchdog"
)

func defaults(c *Config) {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.ConvergingInterval, 30*time.Second)
	set(&c.SteadyInterval, 5*time.Minute)
	set(&c.GKEOperationTime, 3*time.Second)
	set(&c.LeaseTTL, 30*time.Second)
	set(&c.WatchdogInterval, time.Minute)
	set(&c.WatchdogGrace, time.Minute)
}

func orFree(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

func dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	return grpc.NewClient(addr, opts...)
}

func (s *Stack) startFirestore(ctx context.Context) error {
	srv, err := fsemu.NewServer(fsemu.WithAddr(orFree(s.cfg.FirestoreAddr)))
	if err != nil {
		return fmt.Errorf("firestore emulator: %w", err)
	}
	s.Firestore = srv
	s.closers = append(s.closers, srv.Close)
	if s.cfg.DataFile != "" {
		if f, err := os.Open(s.cfg.DataFile); err == nil {
			err = srv.Import(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("import %s: %w", s.cfg.DataFile, err)
			}
			s.log.Info("Loaded Firestore data", "file", s.cfg.DataFile)
		}
	}
	conn, err := dial(srv.Addr, s.cfg.FirestoreDialOptions...)
	if err != nil {
		return err
	}
	s.FirestoreClient, err = firestore.NewClient(ctx, s.cfg.Project, option.WithGRPCConn(conn))
	if err != nil {
		return fmt.Errorf("firestore client: %w", err)
	}
	s.closers = append(s.closers, s.FirestoreClient.Close)
	return nil
}

func (s *Stack) startPubSub(ctx context.Context) error {
	addr := orFree(s.cfg.PubSubAddr)
	// pstest panics when it cannot listen: find out first.
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pubsub emulator: listen on %s: %w", addr, err)
	}
	addr = probe.Addr().String()
	probe.Close()
	s.PubSub = pstest.NewServerWithAddress(addr, s.cfg.PubSubReactors...)
	s.closers = append(s.closers, s.PubSub.Close)
	conn, err := dial(s.PubSub.Addr)
	if err != nil {
		return err
	}
	s.PubSubClient, err = pubsub.NewClient(ctx, s.cfg.Project, option.WithGRPCConn(conn))
	if err != nil {
		return fmt.Errorf("pubsub client: %w", err)
	}
	s.closers = append(s.closers, s.PubSubClient.Close)
	for _, t := range outbox.Types {
		name := fmt.Sprintf("projects/%s/topics/%s", s.cfg.Project, t)
		if _, err := s.PubSubClient.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); err != nil {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	return nil
}

func (s *Stack) startGKE(ctx context.Context) error {
	srv, err := gkeemu.NewServer(gkeemu.WithOperationTime(s.cfg.GKEOperationTime), gkeemu.WithLogger(s.log))
	if err != nil {
		return fmt.Errorf("gke simulator: %w", err)
	}
	s.GKE = srv
	s.closers = append(s.closers, srv.Close)
	conn, err := dial(srv.Addr())
	if err != nil {
		return err
	}
	s.GKEClient, err = container.NewClusterManagerClient(ctx, option.WithGRPCConn(conn))
	if err != nil {
		return fmt.Errorf("gke client: %w", err)
	}
	s.closers = append(s.closers, s.GKEClient.Close)
	return nil
}

func (s *Stack) startTasks(ctx context.Context) (*tasks.Queue, error) {
	tokens := func(ctx context.Context, audience, serviceAccount string) (string, error) {
		return s.Issuer.Token(serviceAccount, audience, 10*time.Minute)
	}
	srv, err := ctemu.NewServer(ctemu.WithTokenSource(tokens), ctemu.WithLogger(s.log))
	if err != nil {
		return nil, fmt.Errorf("cloud tasks emulator: %w", err)
	}
	s.Tasks = srv
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("cloud tasks client: %w", err)
	}
	// Closed in reverse: the client, then the server (which waits for
	// dispatches in flight).
	s.closers = append(s.closers, srv.Close, client.Close)
	_, err = client.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
		Parent: fmt.Sprintf("projects/%s/locations/us-central1", s.cfg.Project),
		Queue: &cloudtaskspb.Queue{
			Name: s.cfg.Queue(),
			RetryConfig: &cloudtaskspb.RetryConfig{
				MaxAttempts: -1,
				MinBackoff:  durationpb.New(100 * time.Millisecond),
				MaxBackoff:  durationpb.New(10 * time.Second),
			},
			RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 50},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create queue: %w", err)
	}
	return tasks.New(client, tasks.Config{
		Queue:          s.cfg.Queue(),
		URL:            s.URL + ReconcilePath,
		ServiceAccount: "reconciler@" + s.cfg.Project + ".iam.gserviceaccount.com",
		Audience:       s.URL,
	})
}

func (s *Stack) watchdogLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.WatchdogInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// A pass cut short between publishing events and clearing
			// them from the outbox publishes them again on the next
			// pass: give it time even when the interval is short.
			ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.WatchdogInterval, 30*time.Second))
			res, err := s.Watchdog.Tick(ctx)
			cancel()
			if err != nil {
				s.log.Warn("Watchdog pass incomplete; the next one retries", "error", err)
			} else if res.Restarted > 0 || res.Drained > 0 {
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
func (s *Stack) Close() error {
	var errList []error
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := s.http.Shutdown(ctx); err != nil {
				errList = append(errList, err)
			}
			cancel()
		}
		if s.cfg.DataFile != "" && s.Firestore != nil {
			if err := s.save(); err != nil {
				errList = append(errList, err)
			}
		}
		for i := len(s.closers) - 1; i >= 0; i-- {
			if err := s.closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
				errList = append(errList, err)
			}
		}
	})
	return errors.Join(errList...)
}

func (s *Stack) save() error {
	f, err := os.Create(s.cfg.DataFile)
	if err != nil {
		return fmt.Errorf("save data: %w", err)
	}
	if err := s.Firestore.Export(f); err != nil {
		f.Close()
		return fmt.Errorf("save data: %w", err)
	}
	return f.Close()
}
