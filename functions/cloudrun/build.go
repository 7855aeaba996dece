package cloudrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/firestore"
	credentials "cloud.google.com/go/iam/credentials/apiv1"
	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/functions/poolevents"
	"github.com/better-compute/kubernetes/functions/reconcile"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/join"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
	"github.com/better-compute/kubernetes/shared/tasks"
	"github.com/better-compute/kubernetes/shared/telemetry"
)

// Parts are what the functions of one App share: the clients, the store,
// the outbox relay, the reconcile queue, the reconciler and the watchdog,
// each made once. A process running the functions in-process (the
// devstack) reaches them through App.Build; the functions never see this
// struct.
type Parts struct {
	Firestore  *firestore.Client
	PubSub     *pubsub.Client
	GKE        *container.ClusterManagerClient
	Store      *store.Store
	Relay      *outbox.Relay
	Queue      *tasks.Queue
	Reconciler *chain.Runner
	Watchdog   *chain.Watchdog
}

// cloud builds the functions over Google Cloud clients. Parts shared by
// several functions (the core clients, the verifiers, the reconciler) are
// built once per process and each retried on its own until it succeeds.
type cloud struct {
	cfg  Config
	log  *slog.Logger
	tel  *telemetry.Telemetry
	fsOp []option.ClientOption // added to the Firestore client's options

	core       *lazy[*core]
	gke        *lazy[*container.ClusterManagerClient]
	tenants    *lazy[*auth.Verifier] // tenant tokens, for the API
	internal   *lazy[*auth.Verifier] // Cloud Tasks' and Cloud Scheduler's tokens
	pushes     *lazy[*auth.Verifier] // the push subscriptions' tokens
	apiRoutes  *lazy[map[string]http.Handler]
	reconciler *lazy[*chain.Runner]
	kube       *lazy[*kubeConnector]
	// tokens mints tenants' service accounts' tokens, for the clusters'
	// GKE calls and the substrates' Kubernetes calls alike; nil when the
	// deployment impersonates no one.
	tokens     *lazy[*impersonate.Tokens]
	poolEvents *lazy[*poolevents.Handler]
	watchdog   *lazy[*chain.Watchdog]

	mu      sync.Mutex // guards closers
	closers []func() error

	closeOnce sync.Once
	closeErr  error
}

// core is what every function needs: Firestore, the outbox relay over
// Pub/Sub, and the reconcile queue.
type core struct {
	fs    *firestore.Client
	ps    *pubsub.Client
	pub   *outbox.PubSub
	relay *outbox.Relay
	store *store.Store
	tasks *cloudtasks.Client
	queue *tasks.Queue
}

// newCloudBuilder returns the constructor of the production builder, its
// Firestore client made with fsOpts added.
func newCloudBuilder(fsOpts []option.ClientOption) func(Config, *slog.Logger, *telemetry.Telemetry) builder {
	return func(cfg Config, log *slog.Logger, tel *telemetry.Telemetry) builder {
		return newCloud(cfg, log, tel, fsOpts)
	}
}

func newCloud(cfg Config, log *slog.Logger, tel *telemetry.Telemetry, fsOpts []option.ClientOption) *cloud {
	c := &cloud{cfg: cfg, log: log, tel: tel, fsOp: fsOpts}
	c.core = newLazy(c.buildCore)
	c.gke = newLazy(func(ctx context.Context) (*container.ClusterManagerClient, error) {
		// Every GKE call is counted and traced (provider.calls).
		opts := append(emulatorAs(cfg.GKEEmulatorHost, cfg.EmulatorAccessToken), c.providerCalls())
		g, err := container.NewClusterManagerClient(context.Background(), opts...)
		if err != nil {
			return nil, fmt.Errorf("GKE client: %w", err)
		}
		c.onClose(g.Close)
		return g, nil
	})
	c.tenants = newLazy(func(ctx context.Context) (*auth.Verifier, error) {
		return auth.NewVerifier(ctx, auth.Config{IssuerURL: cfg.AuthIssuerURL, Audience: cfg.AuthAudience})
	})
	c.internal = newLazy(func(ctx context.Context) (*auth.Verifier, error) {
		return auth.NewVerifier(ctx, auth.Config{IssuerURL: cfg.ReconcileIssuerURL, Audience: cfg.ReconcileAudience})
	})
	c.pushes = newLazy(func(ctx context.Context) (*auth.Verifier, error) {
		return auth.NewVerifier(ctx, auth.Config{IssuerURL: cfg.ReconcileIssuerURL, Audience: cfg.PushAudience})
	})
	c.apiRoutes = newLazy(c.buildAPI)
	c.reconciler = newLazy(c.newReconciler)
	c.tokens = newLazy(c.buildTokens)
	c.kube = newLazy(func(ctx context.Context) (*kubeConnector, error) {
		tokens, err := c.tokens.get(ctx)
		if err != nil {
			return nil, err
		}
		return newKubeConnector(cfg, tokens), nil
	})
	c.poolEvents = newLazy(func(ctx context.Context) (*poolevents.Handler, error) {
		k, err := c.core.get(ctx)
		if err != nil {
			return nil, err
		}
		cons, err := poolevents.NewConsumer(k.store, k.queue)
		if err != nil {
			return nil, err
		}
		v, err := c.pushes.get(ctx)
		if err != nil {
			return nil, fmt.Errorf("push token verifier: %w", err)
		}
		// Only the push subscriptions' account.
		caller, err := auth.NewServiceAccount(v, cfg.PushServiceAccount)
		if err != nil {
			return nil, fmt.Errorf("PUSH_SERVICE_ACCOUNT: %w", err)
		}
		return poolevents.New(cons, caller)
	})
	c.watchdog = newLazy(c.newWatchdog)
	return c
}

// emulatorAs is emulator, with token presented as the caller's identity
// on every call when the emulator checks callers (its IAM is on).
func emulatorAs(host, token string) []option.ClientOption {
	opts := emulator(host)
	if host != "" && token != "" {
		opts = append(opts, option.WithGRPCDialOption(grpc.WithPerRPCCredentials(emulatorToken(token))))
	}
	return opts
}

// emulatorToken is an access token sent with every call to an emulator,
// over its connection without TLS.
type emulatorToken string

func (t emulatorToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (emulatorToken) RequireTransportSecurity() bool { return false }

// emulator returns the client options pointing a Google client at a local
// emulator, or none for the real service.
func emulator(host string) []option.ClientOption {
	if host == "" {
		return nil
	}
	return []option.ClientOption{
		option.WithEndpoint(host),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

func (c *cloud) onClose(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closers = append(c.closers, f)
}

// buildCore makes the clients. They are made with a background context:
// Google's clients may keep the context they were made with (token
// refresh), and they live as long as the process.
func (c *cloud) buildCore(ctx context.Context) (_ *core, err error) {
	bg := context.Background()
	k := &core{}
	var undo []func() error
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				_ = undo[i]()
			}
		}
	}()
	c.log.InfoContext(ctx, "Connecting to Firestore, Pub/Sub and Cloud Tasks", "project", c.cfg.Project, "database", c.cfg.FirestoreDatabase)
	fsOpts := append(emulator(c.cfg.FirestoreEmulatorHost), option.WithGRPCDialOption(store.DialOption()))
	fsOpts = append(fsOpts, c.fsOp...)
	if k.fs, err = firestore.NewClientWithDatabase(bg, c.cfg.Project, c.cfg.FirestoreDatabase, fsOpts...); err != nil {
		return nil, fmt.Errorf("firestore client: %w", err)
	}
	undo = append(undo, k.fs.Close)
	if k.ps, err = pubsub.NewClient(bg, c.cfg.Project, emulator(c.cfg.PubSubEmulatorHost)...); err != nil {
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	undo = append(undo, k.ps.Close)
	if k.tasks, err = cloudtasks.NewClient(bg, emulator(c.cfg.TasksEmulatorHost)...); err != nil {
		return nil, fmt.Errorf("cloud tasks client: %w", err)
	}
	undo = append(undo, k.tasks.Close)
	if k.store, err = store.New(k.fs, lifecycle.Rules{}); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	changes := append(c.cfg.ChangeQueues(), "")
	if k.queue, err = tasks.New(k.tasks, tasks.Config{
		Queue:          changes[0],
		TenantQueues:   changes[:len(changes)-1],
		SteadyQueues:   c.cfg.SteadyQueues(),
		URL:            c.cfg.ReconcileURL,
		ServiceAccount: c.cfg.TasksServiceAccount,
		Audience:       c.cfg.TasksAudience,
	}); err != nil {
		return nil, fmt.Errorf("reconcile queue: %w", err)
	}
	k.pub = outbox.NewPubSub(k.ps)
	if k.relay, err = outbox.NewRelay(k.store, k.pub, c.log, outbox.WithMetrics(c.tel.Metrics())); err != nil {
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	k.relay.Start()
	return k, nil
}

func (c *cloud) buildAPI(ctx context.Context) (map[string]http.Handler, error) {
	k, err := c.core.get(ctx)
	if err != nil {
		return nil, err
	}
	v, err := c.tenants.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("tenant token verifier: %w", err)
	}
	kube, err := c.kube.get(ctx)
	if err != nil {
		return nil, err
	}
	joiner, err := join.New(k.store, kube, k.relay, join.WithMetrics(c.tel.Metrics()), join.WithKicks(k.queue))
	if err != nil {
		return nil, err
	}
	previewer, err := substrates.NewPreviewer(k.store)
	if err != nil {
		return nil, err
	}
	routes, err := api.Routes(api.Deps{Auth: v, Store: k.store, Events: k.relay, Kicker: k.queue,
		Previewer: previewer, Joiner: joiner})
	if err != nil {
		return nil, err
	}
	m := make(map[string]http.Handler, len(routes))
	for _, r := range routes {
		m[r.Function] = r.Handler
	}
	return m, nil
}

// newReconciler builds the runner of the reconcile chains over the core
// clients, with the clusters' reconciler over GKE.
func (c *cloud) newReconciler(ctx context.Context) (*chain.Runner, error) {
	k, err := c.core.get(ctx)
	if err != nil {
		return nil, err
	}
	g, err := c.gke.get(ctx)
	if err != nil {
		return nil, err
	}
	// The share is the fleet's, kept in Firestore, and divided between
	// the tenants that want it (API.md §10). A lease is at most a tenth
	// of the minute over the most instances, so that tokens held by
	// instances, and lost when the minute ends, stay within a tenth.
	share := float64(c.cfg.ProviderQuota) * c.cfg.ProviderQuotaShare
	budget := &clusters.Budget{
		PerMinute: share,
		Reserve:   0.3,
		Stretch:   c.cfg.SteadyInterval / 2,
		Ledger:    k.store,
		Batch:     min(20, max(1, int(share)/(10*c.cfg.ReconcileInstances))),
		Fair:      true,
		Metrics:   c.tel.Metrics(),
	}
	// Steady refreshes share one ListClusters per project and location
	// for a tenth of their interval.
	opts := []clusters.Option{clusters.WithBudget(budget), clusters.WithListing(c.cfg.SteadyInterval / 10),
		clusters.WithNodeServiceAccount(c.cfg.NodeServiceAccount)}
	imp, err := c.impersonation(ctx)
	if err != nil {
		return nil, err
	}
	if imp != nil {
		opts = append(opts, clusters.WithImpersonation(*imp))
	}
	nc, err := c.nodeCounts(imp != nil)
	if err != nil {
		return nil, err
	}
	if nc != nil {
		opts = append(opts, clusters.WithNodeCounts(*nc))
	}
	opts = append(opts, clusters.WithRetryEvery(c.cfg.SteadyInterval))
	cr, err := clusters.New(k.store, g, opts...)
	if err != nil {
		return nil, err
	}
	kube, err := c.kube.get(ctx)
	if err != nil {
		return nil, err
	}
	sr, err := substrates.New(k.store, kube, k.relay, k.queue, substrates.Config{Image: c.cfg.BcdImage, JoinURL: c.cfg.JoinURL})
	if err != nil {
		return nil, err
	}
	return chain.NewRunner(k.store, k.queue, k.relay, chain.Config{
		ConvergingInterval: c.cfg.ConvergingInterval,
		SteadyInterval:     c.cfg.SteadyInterval,
		LeaseTTL:           c.cfg.LeaseTTL,
		Jitter:             0.1,
		Tracer:             c.tel.Tracer(),
		Metrics:            c.tel.Metrics(),
	}, cr, sr)
}

// providerCalls counts and traces every call of a GKE client
// (provider.calls).
func (c *cloud) providerCalls() option.ClientOption {
	return option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(c.tel.ProviderCalls()))
}

// impersonation is how the reconciler acts in tenants' own projects: as
// their service accounts, with tokens minted by the IAM Credentials API,
// on a GKE client of its own that carries no credentials but theirs. None
// when the reconciler runs on the GKE emulator without the IAM
// Credentials one.
func (c *cloud) impersonation(ctx context.Context) (*clusters.Impersonation, error) {
	tokens, err := c.tokens.get(ctx)
	if err != nil || tokens == nil {
		return nil, err
	}
	gkeEmu := c.cfg.GKEEmulatorHost
	bg := context.Background()
	// The tenants' client has no identity of its own (TLS only, toward
	// the real service): every call carries the tenant's account's token.
	opts := emulator(gkeEmu)
	if gkeEmu == "" {
		opts = []option.ClientOption{option.WithoutAuthentication()}
	}
	tg, err := container.NewClusterManagerClient(bg, append(opts, c.providerCalls())...)
	if err != nil {
		return nil, fmt.Errorf("GKE client for tenants' projects: %w", err)
	}
	c.onClose(tg.Close)
	c.log.Info("Acting in tenants' projects as their service accounts", "reconciler", c.cfg.ReconcilerServiceAccount, "tokenLifetime", c.cfg.ImpersonationTokenLifetime.String())
	id := impersonate.Identity{Tokens: tokens, Caller: c.cfg.ReconcilerServiceAccount}
	return &clusters.Impersonation{GKE: tg, Identity: id, Insecure: gkeEmu != ""}, nil
}

// buildTokens mints tenants' service accounts' tokens through the IAM
// Credentials API, as the reconciler's own identity; nil when the
// reconciler runs on the GKE emulator without the IAM Credentials one.
func (c *cloud) buildTokens(context.Context) (*impersonate.Tokens, error) {
	gkeEmu, iamEmu := c.cfg.GKEEmulatorHost, c.cfg.IAMCredentialsEmulatorHost
	if gkeEmu != "" && iamEmu == "" {
		return nil, nil
	}
	ic, err := credentials.NewIamCredentialsClient(context.Background(), emulatorAs(iamEmu, c.cfg.EmulatorAccessToken)...)
	if err != nil {
		return nil, fmt.Errorf("IAM Credentials client: %w", err)
	}
	c.onClose(ic.Close)
	life := c.cfg.ImpersonationTokenLifetime
	return impersonate.New(ic, impersonate.WithLifetime(life, min(impersonate.DefaultMargin, life/2)))
}

// newWatchdog builds the watchdog over the core clients.
func (c *cloud) newWatchdog(ctx context.Context) (*chain.Watchdog, error) {
	k, err := c.core.get(ctx)
	if err != nil {
		return nil, err
	}
	return &chain.Watchdog{Store: k.store, Kinds: []string{store.ClustersKind, substrates.Kind}, Kicker: k.queue, Events: k.relay,
		Grace: c.cfg.WatchdogGrace, DrainAge: c.cfg.WatchdogGrace, Metrics: c.tel.Metrics()}, nil
}

// internalCaller is the authenticator of an internal function whose one
// caller is account: its OIDC tokens for ReconcileAudience.
func (c *cloud) internalCaller(ctx context.Context, account string) (auth.ServiceAccount, error) {
	v, err := c.internal.get(ctx)
	if err != nil {
		return auth.ServiceAccount{}, fmt.Errorf("internal token verifier: %w", err)
	}
	return auth.NewServiceAccount(v, account)
}

// Handler builds the named function's handler.
func (c *cloud) Handler(ctx context.Context, name string) (http.Handler, error) {
	f, ok := functionByName[name]
	if !ok {
		return nil, fmt.Errorf("unknown function %q", name)
	}
	switch f.kind {
	case kindAPI:
		routes, err := c.apiRoutes.get(ctx)
		if err != nil {
			return nil, err
		}
		h, ok := routes[name]
		if !ok {
			return nil, fmt.Errorf("the API has no method %q", name)
		}
		return h, nil
	case kindReconcile:
		rec, err := c.reconciler.get(ctx)
		if err != nil {
			return nil, err
		}
		// Only Cloud Tasks, as the tasks' account.
		caller, err := c.internalCaller(ctx, c.cfg.TasksServiceAccount)
		if err != nil {
			return nil, err
		}
		return reconcile.Handler(caller, rec)
	case kindWatchdog:
		w, err := c.watchdog.get(ctx)
		if err != nil {
			return nil, err
		}
		// Only Cloud Scheduler, as the scheduler's account.
		caller, err := c.internalCaller(ctx, c.cfg.SchedulerServiceAccount)
		if err != nil {
			return nil, err
		}
		h, err := reconcile.WatchdogHandler(caller, w)
		if err != nil {
			return nil, err
		}
		return flushing(h, c.tel), nil
	case kindConsumer:
		return c.poolEvents.get(ctx)
	}
	return nil, fmt.Errorf("function %q has no builder", name)
}

// Parts builds what the functions share, if not built yet, waits until
// both token verifiers have discovered their issuers, and returns them.
func (c *cloud) Parts(ctx context.Context) (Parts, error) {
	k, err := c.core.get(ctx)
	if err != nil {
		return Parts{}, err
	}
	var p Parts
	if p.GKE, err = c.gke.get(ctx); err != nil {
		return Parts{}, err
	}
	if p.Reconciler, err = c.reconciler.get(ctx); err != nil {
		return Parts{}, err
	}
	if p.Watchdog, err = c.watchdog.get(ctx); err != nil {
		return Parts{}, err
	}
	for _, v := range []*lazy[*auth.Verifier]{c.tenants, c.internal} {
		vv, err := v.get(ctx)
		if err != nil {
			return Parts{}, err
		}
		if err := vv.Ready(ctx); err != nil {
			return Parts{}, fmt.Errorf("token verifier: %w", err)
		}
	}
	p.Firestore, p.PubSub, p.Store, p.Relay, p.Queue = k.fs, k.ps, k.store, k.relay, k.queue
	return p, nil
}

// Close publishes what the relay still holds, then closes every client.
// Later calls return the first one's result.
func (c *cloud) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { c.closeErr = c.close(ctx) })
	return c.closeErr
}

func (c *cloud) close(ctx context.Context) error {
	var errList []error
	if k, ok := c.core.peek(); ok {
		done := make(chan struct{})
		go func() {
			k.relay.Close()
			k.pub.Stop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			errList = append(errList, fmt.Errorf("outbox relay still publishing at shutdown; the watchdog drains the rest: %w", ctx.Err()))
		}
		for _, f := range []func() error{k.tasks.Close, k.ps.Close, k.fs.Close} {
			if err := f(); err != nil {
				errList = append(errList, err)
			}
		}
	}
	c.mu.Lock()
	closers := c.closers
	c.closers = nil
	c.mu.Unlock()
	for _, f := range closers {
		if err := f(); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}
