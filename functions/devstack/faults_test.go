package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/emulators/faults"
	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
	"github.com/better-compute/kubernetes/shared/wait"
)

// newRunner is a reconcile runner of the stack's clusters of its own: its
// GKE client, scheduler and timing are the caller's.
func newRunner(e *env, gke clusters.GKE, sched chain.Scheduler, cfg chain.Config) (*chain.Runner, error) {
	cr, err := clusters.New(e.Store, gke, clusters.WithClock(cfg.Clock))
	if err != nil {
		return nil, err
	}
	return chain.NewRunner(e.Store, sched, e.Relay, cfg, cr)
}

// storedCluster is a cluster's document: the object and its chain.
type storedCluster struct {
	model.Cluster
	Reconcile chain.State `firestore:"reconcile"`
}

// clusterDoc reads a cluster's stored document.
func (e *env) clusterDoc(t testing.TB, id string) storedCluster {
	t.Helper()
	snap, err := e.Store.ClusterRef("acme", id).Get(context.Background())
	if err != nil {
		t.Fatalf("read cluster %s: %v", id, err)
	}
	var c storedCluster
	if err := snap.DataTo(&c); err != nil {
		t.Fatalf("decode cluster %s: %v", id, err)
	}
	return c
}

func (e *env) poolDoc(t testing.TB, clusterID, poolID string) model.NodePool {
	t.Helper()
	snap, err := e.Store.NodePoolRef("acme", clusterID, poolID).Get(context.Background())
	if err != nil {
		t.Fatalf("read node pool %s: %v", poolID, err)
	}
	var p model.NodePool
	if err := snap.DataTo(&p); err != nil {
		t.Fatalf("decode node pool %s: %v", poolID, err)
	}
	return p
}

// waitNeverError waits like waitCluster, and fails if the cluster or any
// pool shows error meanwhile.
func (c *client) waitNeverError(t *testing.T, id string) {
	t.Helper()
	wait.For(t, fmt.Sprintf("cluster %s ready, never in error", id), func() (bool, string) {
		cl, err := c.getCluster(id)
		if err != nil {
			return false, err.Error()
		}
		ps, err := c.listPools(id)
		if err != nil {
			return false, err.Error()
		}
		done := cl.State == resource.StateReady
		for _, p := range ps {
			if p.State == resource.StateError {
				t.Fatalf("node pool %s shows error %q, want the provider's failure retried unseen", p.Name, p.Message)
			}
			done = done && p.State == resource.StateReady
		}
		if cl.State == resource.StateError {
			t.Fatalf("cluster shows error %q, want the provider's failure retried unseen", cl.Message)
		}
		return done, c.clusterState(id)
	})
}

// TestProviderErrors fails provider calls with codes that are not the
// tenant's: the reconciler retries them, never shows an error, and makes
// each object once.
func TestProviderErrors(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	cl := c.createCluster(t, "flaky", poolSpec("a", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	a := poolByName(t, c, cl.ID, "a")
	size := 1
	for _, code := range []codes.Code{codes.Unavailable, codes.FailedPrecondition, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			name := fmt.Sprintf("p%d", code)
			e.GKE.FailNext("CreateNodePool", 2, code, "injected "+code.String())
			before := e.GKE.Calls("CreateNodePool")
			p := c.createPool(t, cl.ID, poolSpec(name, 1))
			c.waitNeverError(t, cl.ID)
			if got := e.GKE.Calls("CreateNodePool") - before; got != 3 {
				t.Errorf("CreateNodePool calls = %d, want 3 (two failed, one made the pool)", got)
			}
			if n := e.ops(cl, containerpb.Operation_CREATE_NODE_POOL, name); n != 1 {
				t.Errorf("CREATE_NODE_POOL operations of %s = %d, want 1", name, n)
			}

			size++
			e.GKE.FailNext("SetNodePoolSize", 2, code, "injected "+code.String())
			c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": size})
			c.waitNeverError(t, cl.ID)
			counts, err := e.GKE.NodeCounts(providerName(cl) + "/nodePools/a")
			if err != nil {
				t.Fatal(err)
			}
			for zone, n := range counts {
				if int(n) != size {
					t.Errorf("node count of a in %s = %d, want %d", zone, n, size)
				}
			}
			if n := e.events.count(cl.ID, event.NodePoolError, p.ID) + e.events.count(cl.ID, event.ClusterError, ""); n != 0 {
				t.Errorf("error events = %d, want none", n)
			}
		})
	}
}

// TestProviderQuotas tells the provider's quotas apart: a resource quota
// of the tenant's project (out of CPUs in the region) fails the pool's
// operation and is the pool's error, with the provider's message, announced
// once; the provider's rate limit refuses calls and is retried unseen.
func TestProviderQuotas(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	cl := c.createCluster(t, "quotas", poolSpec("a", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)

	t.Run("rate limit", func(t *testing.T) {
		const msg = "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of service 'container.googleapis.com' for consumer 'project:bc-dev'."
		e.GKE.FailNext("GetCluster", 3, codes.ResourceExhausted, msg)
		e.GKE.FailNext("CreateNodePool", 2, codes.ResourceExhausted, msg)
		p := c.createPool(t, cl.ID, poolSpec("limited", 1))
		c.waitNeverError(t, cl.ID)
		if n := e.ops(cl, containerpb.Operation_CREATE_NODE_POOL, "limited"); n != 1 {
			t.Errorf("CREATE_NODE_POOL operations = %d, want 1", n)
		}
		if n := e.events.count(cl.ID, event.NodePoolError, p.ID) + e.events.count(cl.ID, event.ClusterError, ""); n != 0 {
			t.Errorf("error events = %d, want none", n)
		}
	})

	t.Run("resource quota", func(t *testing.T) {
		const msg = `Insufficient regional quota to satisfy request: resource "CPUS": request requires '8.0' and is short '4.0'. project has a quota of '24.0' with '4.0' available.`
		e.GKE.FailNextOperation("CreateNodePool", codes.ResourceExhausted, msg)
		p := c.createPool(t, cl.ID, poolSpec("big", 1))
		got := c.waitCluster(t, cl.ID, resource.StateError, map[string]resource.State{"big": resource.StateError})
		if !strings.Contains(got.Message, "Insufficient regional quota") || !strings.Contains(got.Message, `"big"`) {
			t.Errorf("cluster message = %q, want the pool named with the provider's message", got.Message)
		}
		if pool := poolByName(t, c, cl.ID, "big"); pool.Message != msg {
			t.Errorf("pool message = %q, want the provider's %q", pool.Message, msg)
		}
		e.waitEvents(t, cl.ID, map[string]int{event.NodePoolError + "/" + p.ID: 1})
		c.deletePool(t, cl.ID, p.ID)
		c.waitCluster(t, cl.ID, resource.StateReady, nil)
		if n := e.events.count(cl.ID, event.NodePoolError, p.ID); n != 1 {
			t.Errorf("nodepool.error events of big = %d, want 1", n)
		}
	})
}

// TestDuplicateDeliveries delivers the reconcile task of a cluster many
// times at once, and stale tasks of older chains, through the reconcile
// function and the reconciler: every provider object is made once.
func TestDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	saToken, err := e.Issuer.ServiceAccountToken(e.FunctionsConfig().TasksServiceAccount, e.URL, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(k chain.Kick, task string) {
		body, _ := json.Marshal(tasks.Payload{Kind: k.Kind, TenantID: k.TenantID, ID: k.ID, Token: k.Token})
		req := httptest.NewRequest(http.MethodPost, "/internal/reconcile", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+saToken)
		req.Header.Set("X-CloudTasks-TaskName", task)
		rec := httptest.NewRecorder()
		e.ReconcileHandler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusServiceUnavailable {
			t.Errorf("reconcile handler = %d %s, want 200, or 503 when busy", rec.Code, rec.Body)
		}
	}
	// storm delivers, until the cluster is ready, bursts of the current
	// chain's task (by the function and by the reconciler directly) and of
	// the chains before it.
	storm := func(id string) {
		var stale []string
		for {
			cl, err := c.getCluster(id)
			if err != nil {
				t.Fatalf("get cluster: %v", err)
			}
			ps, _ := c.listPools(id)
			done := cl.State == resource.StateReady
			for _, p := range ps {
				done = done && p.State == resource.StateReady
			}
			if done {
				return
			}
			tok := e.clusterDoc(t, id).Reconcile.Token
			if len(stale) == 0 || stale[len(stale)-1] != tok {
				stale = append(stale, tok)
			}
			k := chain.Kick{Kind: store.ClustersKind, TenantID: "acme", ID: id, Token: tok}
			// A duplicate is the chain's own task delivered again, under
			// its name.
			task := ""
			for _, tk := range e.pendingTasks() {
				if bytes.Contains(tk.GetHttpRequest().GetBody(), []byte(tok)) {
					task = path.Base(tk.GetName())
				}
			}
			if task == "" {
				continue
			}
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// The tokens of the chains before the current one, or
					// one that never was.
					old := k
					old.Token = "0123456789abcdef01234567"
					if len(stale) > 1 {
						old.Token = stale[i%(len(stale)-1)]
					}
					switch i % 3 {
					case 0:
						deliver(k, task)
					case 1:
						if err := e.Reconciler.Run(context.Background(), k, task); err != nil && !errors.Is(err, chain.ErrBusy) {
							t.Errorf("Run = %v, want nil or ErrBusy", err)
						}
					case 2:
						deliver(old, tasks.TaskID(old, "stale"))
					}
				}()
			}
			wg.Wait()
		}
	}

	cl := c.createCluster(t, "storm", poolSpec("a", 1), poolSpec("b", 1))
	storm(cl.ID)
	p := c.createPool(t, cl.ID, poolSpec("c", 1))
	storm(cl.ID)
	a := poolByName(t, c, cl.ID, "a")
	c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 2})
	storm(cl.ID)

	if n := e.GKE.Calls("CreateCluster"); n != 1 {
		t.Errorf("CreateCluster calls = %d, want 1", n)
	}
	if n := e.GKE.Calls("CreateNodePool"); n != 1 {
		t.Errorf("CreateNodePool calls = %d, want 1", n)
	}
	if n := e.GKE.Calls("SetNodePoolSize"); n != 1 {
		t.Errorf("SetNodePoolSize calls = %d, want 1", n)
	}
	e.checkEvents(t, cl, map[string]int{
		event.ClusterReady: 1, event.ClusterUpdated: 2, event.NodePoolReady + "/" + p.ID: 1,
		event.NodePoolReady + "/" + a.ID: 2, event.ClusterError: 0, event.NodePoolError: 0,
	})
	// The chain goes on as one: one task is waiting for the cluster, the
	// steady refresh.
	wait.For(t, "one pending task for the cluster", func() (bool, string) {
		var names []string
		for _, tk := range e.pendingTasks() {
			if bytes.Contains(tk.GetHttpRequest().GetBody(), []byte(cl.ID)) {
				names = append(names, path.Base(tk.GetName()))
			}
		}
		return len(names) == 1, fmt.Sprintf("tasks %v", names)
	})
}

func (e *env) cfgQueue() string { return devstack.Config{Project: "bc-dev"}.Queue() }

// pendingTasks are the tasks of both reconcile queues.
func (e *env) pendingTasks() []*cloudtaskspb.Task {
	return append(e.Tasks.Tasks(e.cfgQueue()), e.Tasks.Tasks(devstack.Config{Project: "bc-dev"}.SteadyQueue())...)
}

// crashAfter is a GKE client whose CreateNodePool is made at the provider
// and then never answered, as when the run's process dies right after
// the call.
type crashAfter struct {
	clusters.GKE
	called chan struct{}
}

func (g *crashAfter) CreateNodePool(ctx context.Context, req *containerpb.CreateNodePoolRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	if _, err := g.GKE.CreateNodePool(ctx, req, opts...); err != nil {
		return nil, err
	}
	close(g.called)
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// TestKilledRun kills runs half way: one whose call outlives its lease,
// and one that dies after the provider accepted its call but before it
// recorded the operation. Another run finishes the work, and the pool is
// made once.
func TestKilledRun(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	e := startEnv(t, cfg)
	c := e.api
	cl := c.createCluster(t, "killed", poolSpec("a", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)

	t.Run("call outlives the lease", func(t *testing.T) {
		e.GKE.SetLatency("CreateNodePool", cfg.LeaseTTL*3/2)
		before := e.GKE.Calls("CreateNodePool")
		c.createPool(t, cl.ID, poolSpec("slow", 1))
		wait.For(t, "the slow call made", func() (bool, string) {
			return e.GKE.Calls("CreateNodePool") > before, "no call yet"
		})
		e.GKE.SetLatency("CreateNodePool", 0)
		c.waitNeverError(t, cl.ID)
		if n := e.ops(cl, containerpb.Operation_CREATE_NODE_POOL, "slow"); n != 1 {
			t.Errorf("CREATE_NODE_POOL operations of slow = %d, want 1", n)
		}
	})

	t.Run("run dies after the call", func(t *testing.T) {
		ctx := context.Background()
		tc, err := cloudtasks.NewClient(ctx, e.Tasks.ClientOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		// Nothing but the doomed run may run the cluster until it died.
		if _, err := tc.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: e.cfgQueue()}); err != nil {
			t.Fatal(err)
		}
		gke := &crashAfter{GKE: e.GKEClient, called: make(chan struct{})}
		doomed, err := newRunner(e, gke, e.Queue, chain.Config{
			ConvergingInterval: cfg.ConvergingInterval, SteadyInterval: cfg.SteadyInterval, LeaseTTL: cfg.LeaseTTL,
		})
		if err != nil {
			t.Fatal(err)
		}
		before := e.GKE.Calls("CreateNodePool")
		p := c.createPool(t, cl.ID, poolSpec("orphan", 1))
		k := chain.Kick{Kind: store.ClustersKind, TenantID: "acme", ID: cl.ID, Token: e.clusterDoc(t, cl.ID).Reconcile.Token}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- doomed.Run(runCtx, k, "doomed") }()
		select {
		case <-gke.called:
		case <-time.After(waitTime):
			t.Fatalf("the doomed run never called CreateNodePool")
		}
		cancel()
		if err := <-done; err == nil {
			t.Errorf("doomed Run = nil, want an error")
		}
		pd := e.poolDoc(t, cl.ID, p.ID).Status.Provider
		if pd.Intent == nil || pd.Operation != "" {
			t.Fatalf("node pool provider = %+v, want the intent recorded and no operation", pd)
		}
		if _, err := tc.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: e.cfgQueue()}); err != nil {
			t.Fatal(err)
		}
		c.waitNeverError(t, cl.ID)
		if got := e.GKE.Calls("CreateNodePool") - before; got != 1 {
			t.Errorf("CreateNodePool calls = %d, want 1", got)
		}
		if n := e.ops(cl, containerpb.Operation_CREATE_NODE_POOL, "orphan"); n != 1 {
			t.Errorf("CREATE_NODE_POOL operations of orphan = %d, want 1", n)
		}
		e.waitEvents(t, cl.ID, map[string]int{event.NodePoolReady + "/" + p.ID: 1})
	})
}

// TestPubSubDown converges a cluster while Pub/Sub fails every publish:
// the events wait in the outbox and arrive after it recovers, none lost.
// Refused publishes (FAILED_PRECONDITION) arrive exactly once. Unreachable
// Pub/Sub (UNAVAILABLE) may deliver an event twice under its one ce-id,
// as at-least-once allows: the client keeps retrying a publish in the
// background after the caller gave up on it, and the outbox publishes it
// again.
func TestPubSubDown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code      codes.Code
		exactOnce bool
	}{{codes.FailedPrecondition, true}, {codes.Unavailable, false}} {
		t.Run(tt.code.String(), func(t *testing.T) {
			t.Parallel()
			o := faults.NewOutage(tt.code, "injected outage")
			cfg := fastConfig()
			cfg.PubSubReactors = []psemu.Option{psemu.WithReactor("Publish", o)}
			e := startEnv(t, cfg)
			c := e.api
			o.Set(true)
			cl := c.createCluster(t, "no-pubsub", poolSpec("a", 1))
			c.waitCluster(t, cl.ID, resource.StateReady, nil)
			a := poolByName(t, c, cl.ID, "a")
			c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 2})
			c.waitCluster(t, cl.ID, resource.StateReady, nil)
			if got := e.events.of(cl.ID); len(got) != 0 {
				t.Fatalf("events during the outage = %s, want none", e.events.summary(cl.ID))
			}
			o.Set(false)
			e.checkEvents(t, cl, map[string]int{
				event.ClusterCreated: 1, event.ClusterReady: 1, event.ClusterUpdated: 1, event.NodePoolReady + "/" + a.ID: 2,
			})
			if _, dups := e.events.distinct(cl.ID); tt.exactOnce && dups != 0 {
				t.Errorf("redelivered events = %d, want none (all: %s)", dups, e.events.summary(cl.ID))
			}
			wait.For(t, "the outbox empty", func() (bool, string) {
				docs, err := e.FirestoreClient.CollectionGroup(outbox.Collection).Documents(context.Background()).GetAll()
				return err == nil && len(docs) == 0, fmt.Sprintf("%d documents, %v", len(docs), err)
			})
		})
	}
}

// TestEnqueueFailing fails creating Cloud Tasks: the API's kick is lost and
// runs cannot schedule their successors, and the watchdog restarts the
// chain until the cluster converges.
func TestEnqueueFailing(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	e.Tasks.FailNext("CreateTask", 3, codes.Unavailable, "The service is currently unavailable.")
	cl := c.createCluster(t, "no-tasks", poolSpec("a", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	if n := e.ops(cl, containerpb.Operation_CREATE_CLUSTER, ""); n != 1 {
		t.Errorf("CREATE_CLUSTER operations = %d, want 1", n)
	}
	// And once more mid-way, while the pool resizes.
	a := poolByName(t, c, cl.ID, "a")
	e.Tasks.FailNext("CreateTask", 2, codes.Unavailable, "The service is currently unavailable.")
	c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 3})
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	if n := e.ops(cl, containerpb.Operation_SET_NODE_POOL_SIZE, "a"); n != 1 {
		t.Errorf("SET_NODE_POOL_SIZE operations = %d, want 1", n)
	}
	e.checkEvents(t, cl, map[string]int{event.ClusterReady: 1, event.ClusterUpdated: 1, event.NodePoolReady + "/" + a.ID: 2})
}

// TestClusterLostAtProvider deletes a cluster at the provider behind the
// reconciler's back. The cluster stays in error until the tenant deletes it
// (it is not made again: it may have been deleted on purpose), with a
// message that says what to do, announced once whatever the tenant changes
// meanwhile; a pool being deleted is deleted, its name free; and deleting
// the cluster works and frees its name.
func TestClusterLostAtProvider(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	c := e.api
	name := fmt.Sprintf("lost-%d", clusterSeq.Add(1))
	cl := c.createClusterNamed(t, name, poolSpec("a", 1), poolSpec("b", 1))
	c.waitCluster(t, cl.ID, resource.StateReady, nil)
	b := poolByName(t, c, cl.ID, "b")
	a := poolByName(t, c, cl.ID, "a")

	// Out of band: the GKE cluster is deleted; meanwhile the tenant
	// deletes a pool.
	e.GKE.SetLatency("DeleteNodePool", 0)
	op, err := e.GKEClient.DeleteCluster(context.Background(), &containerpb.DeleteClusterRequest{Name: providerName(cl)})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the provider's delete done", func() (bool, string) {
		_, err := e.GKE.Cluster(providerName(cl))
		return err != nil, "still there: " + op.GetName()
	})
	c.deletePool(t, cl.ID, b.ID)
	lost := map[string]resource.State{"a": resource.StateError}
	got := c.waitCluster(t, cl.ID, resource.StateError, lost)
	if !strings.Contains(got.Message, "no longer has cluster") || !strings.Contains(got.Message, "delete this cluster") {
		t.Errorf("cluster message = %q, want it to say the provider lost it and what to do", got.Message)
	}
	wait.For(t, "the deleting pool deleted", func() (bool, string) {
		pools, err := c.listPools(cl.ID)
		return err == nil && len(pools) == 1 && pools[0].ID == a.ID, fmt.Sprintf("%+v %v", pools, err)
	})
	// The error's announcement is relayed after its commit: it comes.
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterError: 1})
	// Tenant changes while in error do not announce the error again.
	for i := 2; i <= 4; i++ {
		c.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": i})
		c.waitCluster(t, cl.ID, resource.StateError, lost)
	}
	e.waitEvents(t, cl.ID, map[string]int{event.NodePoolDeleted + "/" + b.ID: 1})
	if n := e.events.count(cl.ID, event.ClusterError, ""); n != 1 {
		t.Errorf("kubernetes.cluster.error events = %d, want 1", n)
	}

	c.deleteCluster(t, cl.ID)
	wait.For(t, "the cluster deleted", func() (bool, string) {
		_, err := c.getCluster(cl.ID)
		return err != nil && strings.Contains(err.Error(), "404"), fmt.Sprint(err)
	})
	again := c.createClusterNamed(t, name, poolSpec("a", 1))
	c.waitCluster(t, again.ID, resource.StateReady, nil)
}
