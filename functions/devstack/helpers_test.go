package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// waitTime bounds every wait for a state, as wait.For does: generous,
// because a cold, loaded 2-core machine with the race detector slows
// everything down, while a healthy run converges in well under a second.
const waitTime = wait.Timeout

// fastConfig is a stack with timings fit for tests: provider operations of
// 30 ms, converging runs every 60 ms, and a steady refresh slower than the
// lease so that a no-op refresh writes nothing.
func fastConfig() devstack.Config {
	cfg := devstack.Config{
		Seed:               seed(),
		GKEOperationTime:   30 * time.Millisecond,
		ConvergingInterval: 60 * time.Millisecond,
		SteadyInterval:     2 * time.Second,
		LeaseTTL:           time.Second,
		WatchdogInterval:   300 * time.Millisecond,
		WatchdogGrace:      time.Second,
		Log:                testLogger(),
	}
	if n := suiteInstances(); n > 1 {
		withInstances(&cfg, n)
	}
	return cfg
}

// instancesConfig is fastConfig with the functions served by n
// processes of the deployed server: this test binary, run with
// devstack.InstanceArg (TestMain). DEVSTACK_LOG shows their logs too.
func instancesConfig(n int) devstack.Config {
	cfg := fastConfig()
	withInstances(&cfg, n)
	return cfg
}

// withInstances makes cfg's functions served by n processes.
func withInstances(cfg *devstack.Config, n int) {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cfg.Instances, cfg.InstanceCommand = n, []string{self, devstack.InstanceArg}
	if os.Getenv("DEVSTACK_LOG") != "" {
		cfg.InstanceOutput = os.Stderr
	}
	// DEVSTACK_INSTANCES_LOG=FILE keeps the instances' logs alone.
	if name := os.Getenv("DEVSTACK_INSTANCES_LOG"); name != "" {
		f, err := os.Create(name)
		if err != nil {
			panic(err)
		}
		cfg.InstanceOutput = f
	}
}

// suiteInstances is DEVSTACK_INSTANCES: with a count above 1, the shared
// stack and those of fastConfig serve the functions from that many
// processes, so that the suite runs in Cloud Run's shape. Tests that
// reach into the functions' own parts (their reconciler, their handler)
// still do so in the test's process; those that read the functions'
// telemetry see none of the instances' (TestTelemetry and
// TestSubstrateCreateMode fail so).
func suiteInstances() int {
	n, _ := strconv.Atoi(os.Getenv("DEVSTACK_INSTANCES"))
	return n
}

func seed() *store.Seed {
	b, err := os.ReadFile("../../emulators/seed/devstack.json")
	if err != nil {
		panic(err)
	}
	s, err := store.ParseSeed(b, lifecycle.Rules{})
	if err != nil {
		panic(err)
	}
	return s
}

// testLogger discards the stack's logs unless DEVSTACK_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("DEVSTACK_LOG") != "" {
		return logging.New(os.Stderr, slog.LevelInfo)
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// env is a running stack with a client for alice and the events it
// published, collected from subscriptions made when it started.
type env struct {
	*devstack.Stack
	api    *client
	events *collector
}

func startEnv(t testing.TB, cfg devstack.Config) *env {
	t.Helper()
	// Instances, when cfg has them, start as processes of their own.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := devstack.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	e := &env{Stack: s}
	// Stopping the collector first keeps its receivers from outliving the
	// Pub/Sub server.
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	e.events = collect(t, s)
	tok, err := s.Token("alice")
	if err != nil {
		t.Fatalf("Token(alice): %v", err)
	}
	e.api = &client{url: s.URL, token: tok}
	return e
}

// shared is the stack the independent end-to-end tests share.
var (
	sharedOnce sync.Once
	sharedEnv  *env
	sharedErr  error
	sharedStop func()
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == devstack.InstanceArg {
		// An instance of a stack started with instances.
		os.Exit(cloudrun.Main())
	}
	if os.Getenv(childEnv) != "" {
		// A devstack process of TestKillAndRestart.
		os.Exit(devstackChild())
	}
	// Parts of the stack log through the default logger.
	slog.SetDefault(testLogger())
	code := m.Run()
	if sharedStop != nil {
		sharedStop()
	}
	os.Exit(code)
}

// sharedStack returns the stack shared by the tests that inject no
// faults (they can run in parallel: each works on its own cluster).
func sharedStack(t *testing.T) *env {
	t.Helper()
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		s, err := devstack.Start(ctx, fastConfig())
		if err != nil {
			sharedErr = err
			return
		}
		e := &env{Stack: s}
		tok, err := s.Token("alice")
		if err != nil {
			sharedErr = err
			s.Close()
			return
		}
		e.api = &client{url: s.URL, token: tok}
		c, stop, err := startCollector(s)
		if err != nil {
			sharedErr = err
			s.Close()
			return
		}
		e.events = c
		sharedEnv = e
		sharedStop = func() { stop(); s.Close() }
	})
	if sharedErr != nil {
		t.Fatalf("start the shared stack: %v", sharedErr)
	}
	return sharedEnv
}

// client calls the API over HTTP as one principal, with hc or else
// http.DefaultClient.
type client struct {
	url, token string
	hc         *http.Client
}

type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// call posts body to /api/compute/{method} and decodes the answer into
// out; an answer other than 200 is an *apiError.
func (c *client) call(method string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, c.url+"/api/compute/"+method, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	hc := c.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		var env struct {
			Error apiError `json:"error"`
		}
		_ = json.Unmarshal(data, &env)
		env.Error.Status = resp.StatusCode
		return &env.Error
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode %s: %w", method, data, err)
	}
	return nil
}

func poolSpec(name string, nodeCount int) map[string]any {
	return map[string]any{"name": name, "machineType": "e2-standard-4", "nodeCount": nodeCount}
}

// clusterSeq makes cluster names unique on a stack shared by tests run
// more than once (-count).
var clusterSeq atomic.Int64

// createCluster creates a standard cluster named name-N (N unique in the
// process) with the pools.
func (c *client) createCluster(t testing.TB, name string, pools ...map[string]any) resource.Cluster {
	t.Helper()
	return c.createClusterNamed(t, fmt.Sprintf("%s-%d", name, clusterSeq.Add(1)), pools...)
}

func (c *client) createClusterNamed(t testing.TB, name string, pools ...map[string]any) resource.Cluster {
	t.Helper()
	body := map[string]any{"tenantId": "acme", "poolId": "pool-dev", "name": name, "mode": "standard", "region": "us-central1", "nodePools": pools}
	var cl resource.Cluster
	if err := c.call("kubernetesClusters/create", body, &cl); err != nil {
		t.Fatalf("create cluster %s: %v", name, err)
	}
	if cl.State != resource.StatePending {
		t.Fatalf("create cluster %s: state %q, want pending", name, cl.State)
	}
	return cl
}

func (c *client) getCluster(id string) (resource.Cluster, error) {
	var cl resource.Cluster
	err := c.call("kubernetesClusters/get", map[string]any{"tenantId": "acme", "clusterId": id}, &cl)
	return cl, err
}

func (c *client) deleteCluster(t testing.TB, id string) resource.Cluster {
	t.Helper()
	var cl resource.Cluster
	if err := c.call("kubernetesClusters/delete", map[string]any{"tenantId": "acme", "clusterId": id}, &cl); err != nil {
		t.Fatalf("delete cluster %s: %v", id, err)
	}
	return cl
}

func (c *client) listPools(clusterID string) ([]resource.NodePool, error) {
	var out struct {
		NodePools []resource.NodePool `json:"nodePools"`
	}
	err := c.call("kubernetesNodePools/list", map[string]any{"tenantId": "acme", "clusterId": clusterID}, &out)
	return out.NodePools, err
}

func (c *client) createPool(t testing.TB, clusterID string, spec map[string]any) resource.NodePool {
	t.Helper()
	body := map[string]any{"tenantId": "acme", "clusterId": clusterID}
	for k, v := range spec {
		body[k] = v
	}
	var p resource.NodePool
	if err := c.call("kubernetesNodePools/create", body, &p); err != nil {
		t.Fatalf("create node pool %v: %v", spec["name"], err)
	}
	return p
}

func (c *client) updatePool(t testing.TB, clusterID, poolID string, change map[string]any) resource.NodePool {
	t.Helper()
	body := map[string]any{"tenantId": "acme", "clusterId": clusterID, "nodePoolId": poolID}
	for k, v := range change {
		body[k] = v
	}
	var p resource.NodePool
	if err := c.call("kubernetesNodePools/update", body, &p); err != nil {
		t.Fatalf("update node pool %s with %v: %v", poolID, change, err)
	}
	return p
}

func (c *client) deletePool(t testing.TB, clusterID, poolID string) resource.NodePool {
	t.Helper()
	var p resource.NodePool
	if err := c.call("kubernetesNodePools/delete", map[string]any{"tenantId": "acme", "clusterId": clusterID, "nodePoolId": poolID}, &p); err != nil {
		t.Fatalf("delete node pool %s: %v", poolID, err)
	}
	return p
}

// clusterState describes a cluster and its pools, for failure messages.
func (c *client) clusterState(id string) string {
	cl, err := c.getCluster(id)
	if err != nil {
		return err.Error()
	}
	pools, _ := c.listPools(id)
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s (%q)", cl.State, cl.Message)
	for _, p := range pools {
		fmt.Fprintf(&b, "; pool %s %s (%q)", p.Name, p.State, p.Message)
	}
	return b.String()
}

// waitCluster waits until the cluster is in state st and each of its
// pools in the state given by name in pools (pools not named: ready).
func (c *client) waitCluster(t testing.TB, id string, st resource.State, pools map[string]resource.State) resource.Cluster {
	t.Helper()
	var cl resource.Cluster
	wait.For(t, fmt.Sprintf("cluster %s %s with pools %v", id, st, pools), func() (bool, string) {
		var err error
		cl, err = c.getCluster(id)
		if err != nil || cl.State != st {
			return false, c.clusterState(id)
		}
		ps, err := c.listPools(id)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			want, ok := pools[p.Name]
			if !ok {
				want = resource.StateReady
			}
			if p.State != want {
				return false, c.clusterState(id)
			}
		}
		return true, ""
	})
	return cl
}

func poolByName(t testing.TB, c *client, clusterID, name string) resource.NodePool {
	t.Helper()
	ps, err := c.listPools(clusterID)
	if err != nil {
		t.Fatalf("list node pools of %s: %v", clusterID, err)
	}
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("node pool %s not in the list of %s", name, clusterID)
	return resource.NodePool{}
}

// providerName is the GKE name of a cluster of the stack's seed.
func providerName(cl resource.Cluster) string {
	return fmt.Sprintf("projects/bc-dev/locations/%s/clusters/%s", cl.Region, cl.ProviderName)
}

// ops counts the provider operations of type typ on the cluster, or on
// its pool named pool when pool is not empty.
func (e *env) ops(cl resource.Cluster, typ containerpb.Operation_Type, pool string) int {
	target := "/clusters/" + cl.ProviderName
	if pool != "" {
		target += "/nodePools/" + pool
	}
	n := 0
	for _, op := range e.GKE.Operations() {
		if op.GetOperationType() == typ && strings.HasSuffix(op.GetTargetLink(), target) {
			n++
		}
	}
	return n
}

// received is a message received from an event topic.
type received struct {
	Type, ID, Subject string
	Attrs             map[string]string
	Data              []byte
}

// collector keeps the messages of every event topic, by subject.
type collector struct {
	mu        sync.Mutex
	bySubject map[string][]received
}

func collect(t testing.TB, s *devstack.Stack) *collector {
	t.Helper()
	c, stop, err := startCollector(s)
	if err != nil {
		t.Fatalf("subscribe to the events: %v", err)
	}
	t.Cleanup(stop)
	return c
}

// startCollector subscribes to every event topic and collects what
// arrives until stop.
func startCollector(s *devstack.Stack) (*collector, func(), error) {
	c := &collector{bySubject: map[string][]received{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, typ := range event.Types {
		name := fmt.Sprintf("projects/bc-dev/subscriptions/test-%s", typ)
		_, err := s.PubSubClient.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: name, Topic: "projects/bc-dev/topics/" + typ, AckDeadlineSeconds: 10,
		})
		if err != nil {
			cancel()
			return nil, nil, fmt.Errorf("create subscription %s: %w", name, err)
		}
		sub := s.PubSubClient.Subscriber(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sub.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
				e := received{Type: m.Attributes["ce-type"], ID: m.Attributes["ce-id"], Subject: m.Attributes["ce-subject"], Attrs: m.Attributes, Data: m.Data}
				c.mu.Lock()
				c.bySubject[e.Subject] = append(c.bySubject[e.Subject], e)
				c.mu.Unlock()
				m.Ack()
			})
		}()
	}
	return c, func() { cancel(); wg.Wait() }, nil
}

// of returns the events received about a cluster so far, in arrival
// order.
func (c *collector) of(clusterID string) []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bySubject[clusterID])
}

// distinct returns the events of a cluster with each ce-id once, and how
// many were redeliveries of a ce-id already seen.
func (c *collector) distinct(clusterID string) ([]received, int) {
	var out []received
	seen := map[string]bool{}
	dups := 0
	for _, e := range c.of(clusterID) {
		if seen[e.ID] {
			dups++
			continue
		}
		seen[e.ID] = true
		out = append(out, e)
	}
	return out, dups
}

// count returns how many distinct events of typ the cluster has, for the
// pool poolID when it is not empty.
func (c *collector) count(clusterID, typ, poolID string) int {
	es, _ := c.distinct(clusterID)
	n := 0
	for _, e := range es {
		if e.Type == typ && (poolID == "" || e.Attrs["nodePoolId"] == poolID) {
			n++
		}
	}
	return n
}

// waitEvents waits until the cluster has at least the given count of
// distinct events of each type ("type" or "type/nodePoolId").
func (e *env) waitEvents(t testing.TB, clusterID string, want map[string]int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("events %v of %s", want, clusterID), func() (bool, string) {
		for k, n := range want {
			typ, pool, _ := strings.Cut(k, "/")
			if got := e.events.count(clusterID, typ, pool); got < n {
				return false, fmt.Sprintf("%d of %s, want %d; have %s", got, k, n, e.events.summary(clusterID))
			}
		}
		return true, ""
	})
}

// summary lists a cluster's event types in arrival order.
func (c *collector) summary(clusterID string) string {
	var types []string
	for _, e := range c.of(clusterID) {
		types = append(types, strings.TrimPrefix(e.Type, "kubernetes."))
	}
	return strings.Join(types, ", ")
}

// checkEvents checks the cluster's events once everything settled: the
// distinct count of each type ("type" or "type/nodePoolId") is exactly
// want's, every event carries the contract's attributes, and they are
// numbered without a gap (checkSequence).
func (e *env) checkEvents(t testing.TB, cl resource.Cluster, want map[string]int) {
	t.Helper()
	e.waitEvents(t, cl.ID, want)
	for k, n := range want {
		typ, pool, _ := strings.Cut(k, "/")
		if got := e.events.count(cl.ID, typ, pool); got != n {
			t.Errorf("events %s of cluster %s = %d, want %d (all: %s)", k, cl.ID, got, n, e.events.summary(cl.ID))
		}
	}
	for _, ev := range e.events.of(cl.ID) {
		a := ev.Attrs
		if a["ce-specversion"] != "1.0" || a["ce-source"] != outbox.Source("acme") || a["ce-subject"] != cl.ID ||
			a["clusterId"] != cl.ID || a["tenantId"] != "acme" || a["content-type"] != "application/json" || ev.ID == "" {
			t.Errorf("event %s attributes = %v, want the CloudEvents attributes of cluster %s", ev.Type, a, cl.ID)
		}
		if strings.HasPrefix(ev.Type, "kubernetes.nodepool.") != (a["nodePoolId"] != "") {
			t.Errorf("event %s nodePoolId = %q, want one exactly on node pool events", ev.Type, a["nodePoolId"])
		}
		if !json.Valid(ev.Data) {
			t.Errorf("event %s data = %q, want JSON", ev.Type, ev.Data)
		}
	}
	e.checkSequence(t, "cluster/"+cl.ID, e.Store.ClusterRef("acme", cl.ID))
}

// seededRand is a random source of a seed from the environment variable
// env, or of the clock when it is unset; the seed is logged, so that a
// failed run can be repeated with env set to it.
func seededRand(t *testing.T, env string) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(env); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", env, s, err)
		}
	}
	t.Logf("seed %d (%s=%d repeats this run)", seed, env, seed)
	return rand.New(rand.NewPCG(seed, seed))
}
