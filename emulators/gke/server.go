package gke

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path"
	"sync"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/emulators/faults"
)

// DefaultOperationTime is how long an operation stays RUNNING unless
// WithOperationTime says otherwise.
const DefaultOperationTime = 3 * time.Second

// WithRequestQuota sets every project's request quota: how many calls a
// project may make per minute before the others of that minute are refused
// with RESOURCE_EXHAUSTED, as GKE's "Requests per minute" quota does. Zero
// (the default) means no quota. SetRequestQuota sets one project's.
func WithRequestQuota(perMinute int) Option { return func(c *config) { c.requestQuota = perMinute } }

// Option configures a Server.
type Option func(*config)

type config struct {
	addr     string
	now      func() time.Time
	opTime   time.Duration
	log      *slog.Logger
	versions map[containerpb.ReleaseChannel_Channel]string
	// requestQuota is every project's calls per minute (0: none).
	requestQuota int
	kube         *Kubernetes
	iam          *iamPolicy
}

// WithAddr makes the server listen on addr (host:port) instead of
// 127.0.0.1:0.
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithClock sets the server's clock (nil: the real one). Operations
// complete when this clock passes their end, checked on every call, so a
// fake clock makes a test fully deterministic. It must be safe for
// concurrent use.
func WithClock(c clock.PassiveClock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.now = c.Now
		}
	}
}

// WithOperationTime sets how long every operation stays RUNNING
// (DefaultOperationTime otherwise). Zero makes operations DONE on the
// first read after they start.
func WithOperationTime(d time.Duration) Option { return func(c *config) { c.opTime = d } }

// WithLogger sends the server's logs to l (discarded otherwise).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithVersions replaces DefaultVersions: the master version a new cluster
// of each release channel gets.
func WithVersions(v map[containerpb.ReleaseChannel_Channel]string) Option {
	return func(c *config) { c.versions = maps.Clone(v) }
}

// Server is an in-process GKE emulator serving
// google.container.v1.ClusterManager over gRPC. Its methods other than
// the RPCs seed, inspect and break its state for tests; all are safe for
// concurrent use.
type Server struct {
	// GServer implements the RPCs; tests normally use Server's helpers.
	GServer *GServer
	// Injector fails, delays and counts the calls of every RPC, before
	// anything else happens to them (package faults): its FailNext,
	// SetLatency, AddReactor and Calls are the Server's.
	*faults.Injector
	srv *grpc.Server
	lis net.Listener
}

// GServer implements containerpb.ClusterManagerServer. RPCs it does not
// implement answer UNIMPLEMENTED.
type GServer struct {
	containerpb.UnimplementedClusterManagerServer

	now      func() time.Time
	opTime   time.Duration
	log      *slog.Logger
	versions map[containerpb.ReleaseChannel_Channel]string

	mu        sync.Mutex
	clusters  map[clusterKey]*cluster
	ops       map[string]*operation // by operation ID
	opList    []*operation          // every operation, oldest first
	running   []*operation
	seq       int
	endpoints int
	opFaults  map[string][]*spb.Status
	loseNext  map[string]int
	stockouts map[string]int // zone → operations still to stock out
	// stockoutForms is the form of each zone's pending stockouts.
	stockoutForms map[string]StockoutForm
	quota         quota
	kube          *kubeEnv   // nil without WithKubernetes
	iam           *iamPolicy // nil without WithIAM
	// tags are the Resource Manager tags that exist (AddTags): TagKey →
	// its TagValues.
	tags map[string]map[string]bool
}

var _ containerpb.ClusterManagerServer = (*GServer)(nil)

// NewServer starts an emulator listening on 127.0.0.1:0 (or WithAddr).
// Close it when done.
func NewServer(opts ...Option) (*Server, error) {
	cfg := config{addr: "127.0.0.1:0", now: time.Now, opTime: DefaultOperationTime, versions: DefaultVersions}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	for _, ch := range []containerpb.ReleaseChannel_Channel{containerpb.ReleaseChannel_RAPID, containerpb.ReleaseChannel_REGULAR, containerpb.ReleaseChannel_STABLE, containerpb.ReleaseChannel_EXTENDED} {
		if !versionRE.MatchString(cfg.versions[ch]) {
			return nil, fmt.Errorf("gke: version %q of channel %v: want a full version like 1.33.4-gke.1000", cfg.versions[ch], ch)
		}
	}
	gs := &GServer{
		now:           cfg.now,
		opTime:        cfg.opTime,
		log:           cfg.log,
		versions:      cfg.versions,
		clusters:      map[clusterKey]*cluster{},
		ops:           map[string]*operation{},
		opFaults:      map[string][]*spb.Status{},
		loseNext:      map[string]int{},
		stockouts:     map[string]int{},
		stockoutForms: map[string]StockoutForm{},
		quota:         quota{perMinute: cfg.requestQuota, projects: map[string]int{}, usage: map[string]map[time.Time]*MinuteUsage{}},
		iam:           cfg.iam,
	}
	if gs.iam != nil && gs.iam.identify == nil {
		return nil, fmt.Errorf("gke: WithIAM needs an Identify function")
	}
	if cfg.kube != nil {
		var err error
		if gs.kube, err = newKubeEnv(*cfg.kube, cfg.log); err != nil {
			return nil, err
		}
	}
	lis, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("gke: listen on %s: %w", cfg.addr, err)
	}
	inj := &faults.Injector{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(inj.UnaryInterceptor, gs.intercept))
	containerpb.RegisterClusterManagerServer(srv, gs)
	inj.SetMethods(faults.MethodsOf(srv))
	go func() {
		if err := srv.Serve(lis); err != nil {
			gs.log.Warn("GKE emulator stopped serving", "err", err)
		}
	}()
	gs.log.Info("GKE emulator listening", "addr", lis.Addr().String())
	return &Server{GServer: gs, Injector: inj, srv: srv, lis: lis}, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops the server at once, failing calls in flight, and stops the
// clusters' Kubernetes API servers.
func (s *Server) Close() error {
	s.srv.Stop()
	s.GServer.closeKubernetes()
	return nil
}

// intercept authenticates and authorizes every call (WithIAM) and
// charges it to its project's request quota before the handler runs. A
// call refused for its credentials does not count against the quota.
func (s *GServer) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	who, err := s.authenticate(ctx)
	s.mu.Lock()
	if err == nil {
		err = s.authorize(who, path.Base(info.FullMethod), req)
	}
	if err == nil {
		err = s.quota.admit(projectOf(req), s.now())
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}
