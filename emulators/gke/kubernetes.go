package gke

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"

	"github.com/better-compute/kubernetes/emulators/kubesim"
)

// DefaultKubernetesSyncInterval is how often a cluster's Kubernetes API is
// brought in line with the simulator (its Nodes, bcd's joins, deleted
// Namespaces) unless Kubernetes.SyncInterval says otherwise.
const DefaultKubernetesSyncInterval = 500 * time.Millisecond

// DefaultKubernetesIdleTimeout is how long a cluster's API server runs
// with no request to its endpoint before it is stopped, unless
// Kubernetes.IdleTimeout says otherwise. Short enough that a client
// calling every 5 minutes (the product's steady runs) lets the server
// stop in between.
const DefaultKubernetesIdleTimeout = time.Minute

// DefaultKubernetesMaxRunning is how many clusters' API servers run at
// once at most, unless Kubernetes.MaxRunning says otherwise: about
// 2.5 GB (each takes about 300 MB in use).
const DefaultKubernetesMaxRunning = 8

// Kubernetes gives the simulator's clusters a real Kubernetes API
// (WithKubernetes). See the package comment for what it does and does
// not do.
type Kubernetes struct {
	// Binary returns the kube-apiserver binary (kubesim.Binary, or a
	// kubesim.Builder's Wait when it is being built in the background). It
	// is called when a cluster's API server is first needed. Required.
	Binary func(ctx context.Context) (string, error)
	// Dir keeps a directory per cluster (named by the cluster's ID): its
	// etcd data, certificates and log. Restore into a simulator with the
	// same Dir to keep the clusters' objects. Empty: a temporary directory
	// that Close removes.
	Dir string
	// Tokens are static bearer tokens that every cluster's API server
	// accepts, besides its admin token (Server.KubernetesAccess).
	Tokens []kubesim.Token
	// HTTPClient makes bcd's join calls (http.DefaultClient when nil).
	HTTPClient *http.Client
	// JoinURLs, when set, are the only URLs bcd posts its join tokens
	// to, as a real node would reach only the platform's join method: a
	// DaemonSet that names another joins no node, its error logged.
	JoinURLs []string
	// SyncInterval is DefaultKubernetesSyncInterval when zero.
	SyncInterval time.Duration
	// AtCreate starts a created cluster's API server at once, while the
	// cluster provisions, as GKE's control plane comes up within the
	// create operation; otherwise it starts on demand, at the first
	// request, so that clusters nobody reaches cost nothing.
	AtCreate bool
	// IdleTimeout stops a cluster's API server once no request to its
	// endpoint has been under way for this long (an idle keep-alive
	// connection does not count), nor anything of the simulator's own
	// been pending there (Nodes to register, bcd's joins to retry); its
	// state stays in Dir and the next request starts it again, as at the
	// first. DefaultKubernetesIdleTimeout when zero;
	// never when negative.
	IdleTimeout time.Duration
	// MaxRunning bounds how many API servers run at once, firmly: a start
	// beyond it stops the least recently used server that serves no
	// request (idle keep-alive connections do not hold a server: their
	// next request starts it again), or waits, first come first served,
	// until one can be stopped; a request under way, a watch included, is
	// never cut for it, and a request that waits longer than 10 seconds is
	// answered 503 with Retry-After while the start goes on.
	// DefaultKubernetesMaxRunning when zero; no bound when negative.
	MaxRunning int
}

// WithKubernetes gives every cluster created from now on a Kubernetes API
// server of its own, started on demand. Without it a cluster's endpoint is
// an address nothing listens on, and nothing runs per cluster.
func WithKubernetes(k Kubernetes) Option {
	return func(c *config) { c.kube = &k }
}

// ErrNoKubernetes is wrapped by Server.KubernetesAccess's errors: the
// cluster does not exist, has no control plane yet, or the simulator runs
// without WithKubernetes.
var ErrNoKubernetes = errors.New("gke: no Kubernetes API")

// KubernetesAccess is how to reach a cluster's Kubernetes API as its
// administrator.
type KubernetesAccess struct {
	// Endpoint is host:port, on 127.0.0.1: the cluster's endpoint.
	Endpoint string
	// CAPEM is the cluster's CA (its clusterCaCertificate, decoded).
	CAPEM []byte
	// AdminToken is a bearer token of group system:masters.
	AdminToken string
}

// RESTConfig returns a client-go configuration with the admin's token.
func (a KubernetesAccess) RESTConfig() *rest.Config {
	return kubesim.RESTConfig(a.Endpoint, a.CAPEM, a.AdminToken)
}

// Kubeconfig returns a kubeconfig (YAML) whose context is named name.
func (a KubernetesAccess) Kubeconfig(name string) ([]byte, error) {
	return kubesim.Kubeconfig(name, a.Endpoint, a.CAPEM, a.AdminToken)
}

// KubernetesAccess returns how to reach the Kubernetes API of the cluster
// named projects/P/locations/L/clusters/C once its create has ended. It
// does not start the API server: the first request to the endpoint
// does.
func (s *Server) KubernetesAccess(clusterName string) (KubernetesAccess, error) {
	g := s.GServer
	k, pool, err := parseNameArg(clusterName)
	if err != nil || pool != "" {
		return KubernetesAccess{}, fmt.Errorf("gke: KubernetesAccess(%q): not a cluster name", clusterName)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settle()
	c := g.clusters[k]
	switch {
	case g.kube == nil:
		return KubernetesAccess{}, fmt.Errorf("%w: the simulator runs without WithKubernetes", ErrNoKubernetes)
	case c == nil:
		return KubernetesAccess{}, fmt.Errorf("%w: cluster %s not found", ErrNoKubernetes, k)
	case c.kube == nil:
		return KubernetesAccess{}, fmt.Errorf("%w: cluster %s was created without one", ErrNoKubernetes, k)
	case !c.kube.up:
		return KubernetesAccess{}, fmt.Errorf("%w: cluster %s is %v", ErrNoKubernetes, k, c.pb.Status)
	}
	return KubernetesAccess{Endpoint: c.kube.endpoint(), CAPEM: c.kube.ca.CertPEM, AdminToken: c.kube.adminToken}, nil
}

// kubeEnv is what the clusters' Kubernetes APIs share.
type kubeEnv struct {
	cfg     Kubernetes
	dir     string
	tempDir bool
	log     *slog.Logger
	http    *http.Client
	// wg counts the goroutines of every cluster: accept loops, proxied
	// connections, starts, sync loops and teardowns, and the reaper.
	wg sync.WaitGroup
	// reaper starts the reaper with the first cluster; done ends it.
	reaper  sync.Once
	done    chan struct{}
	closing sync.Once

	mu sync.Mutex
	// all are the open clusters' Kubernetes APIs.
	all map[*kubeCluster]struct{}
	// running counts the API servers running or starting: the slots of
	// cfg.MaxRunning taken.
	running int
	// freed is closed (and replaced) when a slot is given back or a
	// server's last request ends: what a start that waits for a slot
	// waits for.
	freed chan struct{}
	// queue are the starts waiting for a slot, first come first served.
	queue []*kubeCluster
	// peak is the most slots ever taken at once, and reaps counts the
	// reaper's passes, for tests.
	peak  int
	reaps atomic.Int64
	// auth answers the API servers' webhooks (WithIAM).
	auth kubeAuth
}

func newKubeEnv(cfg Kubernetes, log *slog.Logger) (*kubeEnv, error) {
	if cfg.Binary == nil {
		return nil, errors.New("gke: WithKubernetes needs Binary")
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultKubernetesSyncInterval
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultKubernetesIdleTimeout
	}
	if cfg.MaxRunning == 0 {
		cfg.MaxRunning = DefaultKubernetesMaxRunning
	}
	e := &kubeEnv{cfg: cfg, dir: cfg.Dir, log: log, http: cfg.HTTPClient,
		done: make(chan struct{}), all: map[*kubeCluster]struct{}{}, freed: make(chan struct{})}
	if e.http == nil {
		e.http = http.DefaultClient
	}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "gke-kubernetes-")
		if err != nil {
			return nil, fmt.Errorf("gke: %w", err)
		}
		e.dir, e.tempDir = d, true
	}
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return nil, fmt.Errorf("gke: %w", err)
	}
	return e, nil
}

// kubeCluster is one cluster's Kubernetes API: a listener that is the
// cluster's endpoint, and behind it, once a connection asks for it, an API
// server with a loop that keeps it in line with the simulator.
type kubeCluster struct {
	env *kubeEnv
	g   *GServer
	// c, id and name are set when attached, with g.mu held.
	c          *cluster
	id         string // the cluster's ID: its directory
	name       string // for logs
	lis        net.Listener
	ca         kubesim.CA
	adminToken string
	log        *slog.Logger
	ctx        context.Context
	cancel     context.CancelFunc

	// up says the control plane exists: the create operation has ended
	// (not with an injected failure). Guarded by g.mu.
	up bool

	// st is what the sync loop remembers, kept across the server's
	// stops and starts as bcd's Pods would keep running.
	st *syncState

	mu  sync.Mutex
	api *kubesim.APIServer
	run *serverRun // of api
	// busy is closed when the start or stop under way ends; nil when none
	// is.
	busy     chan struct{}
	lastErr  error
	failedAt time.Time
	conns    map[net.Conn]struct{}
	// active counts the clients' requests under way; lastUsed is when the
	// last one ended, the server started or the simulator last had work
	// pending in it.
	active   int
	lastUsed time.Time
	closed   bool
	// startedAt is when the running server's start ended, and startTook
	// how long it took.
	startedAt time.Time
	startTook time.Duration

	// passes counts the sync loop's passes, for tests to wait on.
	passes atomic.Int64
}

// serverRun is a running API server and its sync loop.
type serverRun struct {
	api      *kubesim.APIServer
	cancel   context.CancelFunc // ends the loop
	loopDone chan struct{}
	// proxy serves the endpoint's requests over transport.
	proxy     *httputil.ReverseProxy
	transport *http.Transport
}

// startRetry is how long a failed start keeps failing requests before
// the next one tries again.
const startRetry = 2 * time.Second

// newClusterKube returns the Kubernetes API of a new cluster, not yet
// attached to it, or nil without WithKubernetes.
func (s *GServer) newClusterKube() (*kubeCluster, error) {
	if s.kube == nil {
		return nil, nil
	}
	k, err := s.kube.newKubeCluster(s, 0, kubesim.CA{}, "")
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "Cannot give the cluster a Kubernetes API: %v", err)
	}
	return k, nil
}

// newKubeCluster opens a cluster's endpoint (on port, or a free one when
// 0) with ca and adminToken (new ones when empty).
func (e *kubeEnv) newKubeCluster(g *GServer, port int, ca kubesim.CA, adminToken string) (*kubeCluster, error) {
	var err error
	if ca.CertPEM == nil {
		if ca, err = kubesim.NewCA("gke-simulator"); err != nil {
			return nil, err
		}
	}
	if adminToken == "" {
		adminToken = kubesim.RandomToken()
	}
	lis, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil && port != 0 {
		e.log.Warn("The cluster's endpoint port is taken; the cluster gets another endpoint", "port", port, "error", err)
		lis, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, fmt.Errorf("gke: listen for a cluster's endpoint: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubeCluster{env: e, g: g, lis: lis, ca: ca, adminToken: adminToken, log: e.log,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}, st: newSyncState()}
	e.mu.Lock()
	e.all[k] = struct{}{}
	e.mu.Unlock()
	if e.cfg.IdleTimeout > 0 {
		e.reaper.Do(func() {
			e.wg.Add(1)
			go e.reap()
		})
	}
	e.wg.Add(1)
	go k.serveFront()
	return k, nil
}

// attach makes k the Kubernetes API of c. Must be called with the lock
// held.
func (k *kubeCluster) attach(c *cluster) {
	k.c = c
	k.id = c.pb.Id
	k.name = c.key.String()
	k.log = k.env.log.With("cluster", k.name)
	c.kube = k
}

func (k *kubeCluster) endpoint() string { return k.lis.Addr().String() }

// dir is where the cluster's API server keeps its state.
func (k *kubeCluster) dir() string { return filepath.Join(k.env.dir, k.id) }

// kubeUp gives c's control plane its endpoint and CA, as GKE reports them
// once the cluster is created. Must be called with the lock held.
func (s *GServer) kubeUp(c *cluster) {
	if c.kube == nil || c.gone {
		return
	}
	c.kube.up = true
	c.pb.Endpoint = c.kube.endpoint()
	c.pb.MasterAuth = &containerpb.MasterAuth{ClusterCaCertificate: base64.StdEncoding.EncodeToString(c.kube.ca.CertPEM)}
}

// kubeGone tears down the Kubernetes API of a cluster that has gone,
// state included, in the background. Must be called with the lock held.
func (s *GServer) kubeGone(c *cluster) {
	if c.kube == nil {
		return
	}
	c.kube.closeAsync(true)
}

// closeAsync is close, in the background; Server.Close waits for it.
func (k *kubeCluster) closeAsync(removeState bool) {
	k.env.wg.Add(1)
	go func() {
		defer k.env.wg.Done()
		k.close(removeState)
	}()
}

// close stops k's API server, its loop and its endpoint, and with
// removeState deletes its directory.
func (k *kubeCluster) close(removeState bool) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.closed = true
	run, busy := k.run, k.busy
	k.api, k.run = nil, nil
	conns := k.conns
	k.conns = map[net.Conn]struct{}{}
	k.mu.Unlock()

	k.cancel()
	k.lis.Close()
	for c := range conns {
		c.Close()
	}
	// A start under way ends (its context is canceled) and stops what it
	// started before it lets this go on; a stop under way finishes.
	if busy != nil {
		<-busy
	}
	if run != nil {
		<-run.loopDone
		if err := run.api.Stop(); err != nil {
			k.log.Warn("Kubernetes API server had failed", "error", err)
		}
		run.transport.CloseIdleConnections()
		k.env.release()
	}
	k.env.mu.Lock()
	delete(k.env.all, k)
	k.env.mu.Unlock()
	if removeState {
		if err := os.RemoveAll(k.dir()); err != nil {
			k.log.Warn("Could not remove the cluster's Kubernetes state", "dir", k.dir(), "error", err)
		}
		k.log.Info("Removed the cluster's Kubernetes API", "dir", k.dir())
	}
}

// closeKubernetes stops every cluster's Kubernetes API, keeping their
// state unless it lives in a temporary directory, which goes.
func (s *GServer) closeKubernetes() {
	e := s.kube
	if e == nil {
		return
	}
	s.mu.Lock()
	var ks []*kubeCluster
	for _, c := range s.clusters {
		if c.kube != nil {
			ks = append(ks, c.kube)
		}
	}
	s.mu.Unlock()
	for _, k := range ks {
		k.close(false)
	}
	e.closing.Do(func() { close(e.done) })
	e.wg.Wait()
	e.auth.close()
	if e.tempDir {
		_ = os.RemoveAll(e.dir)
	}
}

func (k *kubeCluster) track(c net.Conn) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	k.conns[c] = struct{}{}
	return true
}

func (k *kubeCluster) untrack(c net.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.conns, c)
}

// use counts a client's request starting (1) or ending (-1): while one
// is under way the server is in use, and its end is its last use.
func (k *kubeCluster) use(n int) {
	k.mu.Lock()
	k.active += n
	k.lastUsed = time.Now()
	free := k.active == 0 && k.run != nil
	k.mu.Unlock()
	if free {
		k.env.wake()
	}
}

// touch makes now the server's last use.
func (k *kubeCluster) touch() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastUsed = time.Now()
}

var errKubeClosed = errors.New("the cluster's Kubernetes API is closed")

// ensure returns the running API server, starting it (once, whoever asks
// at the same time) if it is not, within the bound of running servers.
func (k *kubeCluster) ensure() (*serverRun, error) {
	for {
		k.mu.Lock()
		switch {
		case k.closed:
			k.mu.Unlock()
			return nil, errKubeClosed
		case k.run != nil:
			run := k.run
			k.mu.Unlock()
			return run, nil
		case k.busy != nil:
			ch := k.busy
			k.mu.Unlock()
			select {
			case <-ch:
			case <-k.ctx.Done():
				return nil, errKubeClosed
			}
			continue
		case !k.failedAt.IsZero() && time.Since(k.failedAt) < startRetry:
			err := k.lastErr
			k.mu.Unlock()
			return nil, err
		}
		ch := make(chan struct{})
		k.busy = ch
		k.mu.Unlock()

		var api *kubesim.APIServer
		var sy *syncer
		var run *serverRun
		err := k.env.acquire(k)
		began := time.Now()
		if err == nil {
			if api, sy, err = k.start(); err != nil {
				k.env.release()
			}
		}
		if err == nil {
			if run, err = k.newServerRun(api.Endpoint); err != nil {
				_ = api.Stop()
				k.env.release()
			}
		}

		k.mu.Lock()
		if err == nil && k.closed {
			// close waits for ch: stop the server before it removes the
			// directory.
			k.mu.Unlock()
			_ = api.Stop()
			k.env.release()
			k.mu.Lock()
			api, err = nil, errKubeClosed
		}
		k.busy = nil
		close(ch)
		if err != nil {
			k.lastErr, k.failedAt = err, time.Now()
			k.mu.Unlock()
			return nil, err
		}
		runCtx, cancel := context.WithCancel(k.ctx)
		run.api, run.cancel = api, cancel
		k.api, k.run, k.failedAt, k.lastUsed = api, run, time.Time{}, time.Now()
		k.startedAt, k.startTook = k.lastUsed, k.lastUsed.Sub(began)
		k.env.wg.Add(1)
		go k.syncLoop(runCtx, sy, run.loopDone)
		k.mu.Unlock()
		return run, nil
	}
}

// stopUnused stops the running API server if no request holds it and
// it was last used before cutoff, and gives back its slot; why says what
// stops it, for the log. It reports whether it stopped one.
func (k *kubeCluster) stopUnused(cutoff time.Time, why string) bool {
	k.mu.Lock()
	if k.closed || k.run == nil || k.busy != nil || k.active > 0 || !k.lastUsed.Before(cutoff) {
		k.mu.Unlock()
		return false
	}
	run, unused := k.run, time.Since(k.lastUsed)
	k.api, k.run = nil, nil
	ch := make(chan struct{})
	k.busy = ch
	k.mu.Unlock()

	run.cancel()
	<-run.loopDone
	if err := run.api.Stop(); err != nil {
		k.log.Warn("Kubernetes API server had failed", "error", err)
	}
	run.transport.CloseIdleConnections()
	k.log.Info("Stopped the cluster's Kubernetes API server; its state is kept and the next request starts it again",
		"why", why, "unusedFor", unused.Round(time.Second))

	k.mu.Lock()
	k.busy = nil
	close(ch)
	k.mu.Unlock()
	k.env.release()
	return true
}

// reap stops, every little while, the servers unused for
// cfg.IdleTimeout, until the simulator closes.
func (e *kubeEnv) reap() {
	defer e.wg.Done()
	every := time.Second
	if e.cfg.IdleTimeout > 0 {
		every = min(max(e.cfg.IdleTimeout/4, 100*time.Millisecond), 5*time.Second)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
		}
		e.mu.Lock()
		ks := make([]*kubeCluster, 0, len(e.all))
		for k := range e.all {
			ks = append(ks, k)
		}
		e.mu.Unlock()
		cutoff := time.Now().Add(-e.cfg.IdleTimeout)
		for _, k := range ks {
			if e.cfg.IdleTimeout > 0 {
				k.stopUnused(cutoff, fmt.Sprintf("no request for %v (Kubernetes.IdleTimeout)", e.cfg.IdleTimeout))
			}
		}
		e.reaps.Add(1)
	}
}

// start gets the binary, starts the API server in the cluster's
// directory and registers its Nodes.
func (k *kubeCluster) start() (*kubesim.APIServer, *syncer, error) {
	k.log.Info("Starting the cluster's Kubernetes API server", "dir", k.dir())
	bin, err := k.env.cfg.Binary(k.ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the API server binary: %w", err)
	}
	wh, err := k.webhook(k.c.key.project)
	if err != nil {
		return nil, nil, err
	}
	api, err := kubesim.StartAPIServer(k.ctx, bin, kubesim.Options{
		Dir:        k.dir(),
		Tokens:     k.env.cfg.Tokens,
		CA:         &k.ca,
		AdminToken: k.adminToken,
		Log:        k.log,
		Webhook:    wh,
	})
	if err != nil {
		return nil, nil, err
	}
	sy, err := newSyncer(api, k.st)
	if err != nil {
		_ = api.Stop()
		return nil, nil, err
	}
	k.syncFirst(sy)
	return api, sy, nil
}

// crashed forgets an API server that exited on its own, so that the next
// request starts another.
func (k *kubeCluster) crashed(api *kubesim.APIServer) {
	k.mu.Lock()
	current, run := k.api == api, k.run
	if current {
		k.api, k.run = nil, nil
	}
	k.mu.Unlock()
	if current {
		k.env.release()
	}
	err := api.Stop()
	if current {
		run.transport.CloseIdleConnections()
	}
	k.log.Warn("Kubernetes API server exited; the next request starts it again", "error", err)
}

// restoreKubernetes opens the endpoints of the restored clusters that had
// a Kubernetes API, on their old ports when free, keyed by cluster. Their
// API servers start on demand, on the state kept in Kubernetes.Dir.
func (s *GServer) restoreKubernetes(r *restored) (map[clusterKey]*kubeCluster, error) {
	out := map[clusterKey]*kubeCluster{}
	if len(r.kube) == 0 {
		return out, nil
	}
	if s.kube == nil {
		s.log.Warn("The snapshot's clusters had a Kubernetes API, but this simulator runs without WithKubernetes: their endpoints answer nothing", "clusters", len(r.kube))
		return out, nil
	}
	for key, sk := range r.kube {
		kc, err := s.kube.newKubeCluster(s, sk.Port, kubesim.CA{CertPEM: []byte(sk.CACert), KeyPEM: []byte(sk.CAKey)}, sk.AdminToken)
		if err != nil {
			for _, k := range out {
				k.close(false)
			}
			return nil, fmt.Errorf("cluster %s: %w", key, err)
		}
		kc.up = sk.Up
		if c := r.clusters[key]; kc.up && c.pb.Endpoint != kc.endpoint() {
			c.pb.Endpoint = kc.endpoint()
		}
		out[key] = kc
	}
	return out, nil
}
