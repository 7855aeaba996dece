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
	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/functions/reconcile"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// cloud builds the functions over Google Cloud clients. Parts shared by
// several functions (the core clients, the verifiers) are built once per
// process and each retried on its own until it succeeds.
type cloud struct {
	cfg Config
	log *slog.Logger

	core      *lazy[*core]
	gke       *lazy[*container.ClusterManagerClient]
	tenants   *lazy[*auth.Verifier] // tenant tokens, for the API
	internal  *lazy[*auth.Verifier] // Cloud Tasks and Cloud Scheduler tokens
	apiRoutes *lazy[map[string]http.Handler]

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

func newCloud(cfg Config, log *slog.Logger) builder {
	c := &cloud{cfg: cfg, log: log}
	c.core = newLazy(c.buildCore)
	c.gke = newLazy(func(ctx context.Context) (*container.ClusterManagerClient, error) {
		g, err := container.NewClusterManagerClient(context.Background(), emulator(cfg.GKEEmulatorHost)...)
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
	c.apiRoutes = newLazy(c.buildAPI)
	return c
}

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
	if k.fs, err = firestore.NewClientWithDatabase(bg, c.cfg.Project, c.cfg.FirestoreDatabase, emulator(c.cfg.FirestoreEmulatorHost)...); err != nil {
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
	if k.store, err = store.New(k.fs); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if k.queue, err = tasks.New(k.tasks, tasks.Config{
		Queue:          c.cfg.TasksQueue,
		URL:            c.cfg.ReconcileURL,
		ServiceAccount: c.cfg.TasksServiceAccount,
		Audience:       c.cfg.TasksAudience,
	}); err != nil {
		return nil, fmt.Errorf("reconcile queue: %w", err)
	}
	k.pub = outbox.NewPubSub(k.ps)
	if k.relay, err = outbox.NewRelay(k.fs, k.pub, c.log); err != nil {
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
	routes, err := api.Routes(api.Deps{Auth: v, Store: k.store, Events: k.relay, Kicker: k.queue})
	if err != nil {
		return nil, err
	}
	m := make(map[string]http.Handler, len(routes))
	for _, r := range routes {
		m[r.Function] = r.Handler
	}
	return m, nil
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
		k, err := c.core.get(ctx)
		if err != nil {
			return nil, err
		}
		g, err := c.gke.get(ctx)
		if err != nil {
			return nil, err
		}
		v, err := c.internal.get(ctx)
		if err != nil {
			return nil, fmt.Errorf("internal token verifier: %w", err)
		}
		rec, err := clusters.New(k.store, g, nil)
		if err != nil {
			return nil, err
		}
		runner, err := chain.NewRunner(k.fs, k.queue, k.relay, chain.Config{
			ConvergingInterval: c.cfg.ConvergingInterval,
			SteadyInterval:     c.cfg.SteadyInterval,
			LeaseTTL:           c.cfg.LeaseTTL,
		}, rec)
		if err != nil {
			return nil, err
		}
		return reconcile.Handler(v, runner)
	case kindWatchdog:
		k, err := c.core.get(ctx)
		if err != nil {
			return nil, err
		}
		v, err := c.internal.get(ctx)
		if err != nil {
			return nil, fmt.Errorf("internal token verifier: %w", err)
		}
		w := &chain.Watchdog{FS: k.fs, Kinds: []string{store.ClustersKind}, Kicker: k.queue, Events: k.relay, Grace: c.cfg.WatchdogGrace, DrainAge: c.cfg.WatchdogGrace}
		return reconcile.WatchdogHandler(v, w)
	}
	return nil, fmt.Errorf("function %q has no builder", name)
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
