package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"

	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// The chaos suite's shape: how long the load runs, how many clients
// send it, and the seeds .ci/run runs (CHAOS_SEEDS=1,2,3 or
// CHAOS_SEED=N run others; scripts/chaos.sh runs many).
const (
	chaosLoad    = 20 * time.Second
	chaosClients = 12
	// chaosKills bounds the instances killed (CHAOS_KILLS sets another
	// bound; 0 kills none).
	chaosKills = 12
)

var chaosDefaultSeeds = []uint64{1, 2}

// chaosFault is a kind of fault the schedule draws from: a method of a
// service, what happens to its calls, and the codes a lost or failed
// call may get (as the real services answer such calls).
type chaosFault struct {
	service, method, action string
	codes                   []string
}

// chaosFaults covers the six services the functions call: lost answers
// of every mutating call the product makes, failures before the service
// sees a call, and latency.
var chaosFaults = []chaosFault{
	{"firestore", "Commit", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"firestore", "Commit", "fail", []string{"UNAVAILABLE"}},
	{"firestore", "BatchGetDocuments", "fail", []string{"UNAVAILABLE"}},
	{"firestore", "*", "latency", nil},
	{"gke", "CreateCluster", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"gke", "CreateNodePool", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"gke", "SetNodePoolSize", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"gke", "SetNodePoolAutoscaling", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"gke", "DeleteNodePool", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"gke", "*", "fail", []string{"UNAVAILABLE"}},
	{"gke", "*", "latency", nil},
	{"compute", "*", "fail", []string{"UNAVAILABLE"}},
	{"compute", "*", "latency", nil},
	{"pubsub", "Publish", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"pubsub", "Publish", "fail", []string{"UNAVAILABLE"}},
	{"tasks", "CreateTask", "lose", []string{"UNAVAILABLE", "DEADLINE_EXCEEDED"}},
	{"tasks", "CreateTask", "fail", []string{"UNAVAILABLE"}},
	{"iam", "GenerateAccessToken", "fail", []string{"UNAVAILABLE"}},
	{"iam", "*", "latency", nil},
}

// TestChaos runs a mixed workload of many clients, with and without
// idempotency keys, on the devstack in Cloud Run's shape (three
// instances, killed at random), while a randomized schedule of faults
// loses answers, fails calls and adds latency on all six services
// through POST /dev/faults, and an operator changes pools at GKE behind
// the control plane's back. Then, with the faults cleared, it checks
// every invariant: no 500; every 2xx stored and every 4xx not (each
// pool's version counts exactly its accepted updates, and the API holds
// exactly the pools the clients were told they made); the final states
// the last accepted requests imply, within a bound; GKE equal to the API
// (pools, sizes per zone, autoscaling); unique names and the quota;
// keyed replays answering the one result; gapless ce-sequence; every
// chain alive. A seed fixes every draw (the interleaving still depends on
// the machine): CHAOS_SEED=N repeats one.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes under faults")
	}
	seeds := chaosDefaultSeeds
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		v = strings.ReplaceAll(v, ",", " ")
		seeds = nil
		for _, f := range strings.Fields(v) {
			s, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatalf("CHAOS_SEED=%q: %v", v, err)
			}
			seeds = append(seeds, s)
		}
	}
	load := chaosLoad
	if v, err := time.ParseDuration(os.Getenv("CHAOS_LOAD")); err == nil {
		load = v
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runChaos(t, seed, load)
		})
	}
}

// chaos is one run: the stack, what the clients were told, and counts.
type chaos struct {
	e    *env
	seed uint64
	api  *client

	mu       sync.Mutex
	clusters []*chaosCluster
	codes    map[string]int // answers by HTTP status and code
	faults   map[string]int // faults posted, by service/action
	hits     int            // calls the faults hit, read before each was removed
	drifts   map[string]int // the operator's changes at GKE that took
	unknown  atomic.Int64   // answers whose outcome the client had to read back
}

type chaosCluster struct {
	name, id, project, provider string
	keyed                       bool
	create                      map[string]any // its create, when keyed
	pools                       []*chaosPool
}

// chaosPool is a pool as its one client was told it is.
type chaosPool struct {
	name, id    string
	key         string // its create's idempotency key; "" without
	create      map[string]any
	nodeCount   int
	autoscaling *resource.Autoscaling
	version     int64
	deleted     bool
}

func runChaos(t *testing.T, seed uint64, loadFor time.Duration) {
	begin := time.Now()
	t.Logf("seed %d: CHAOS_SEED=%d repeats its draws", seed, seed)
	cfg := instancesConfig(3)
	cfg.GKEOperationTime = 100 * time.Millisecond
	cfg.ConvergingInterval = 100 * time.Millisecond
	e := startEnv(t, cfg)
	c := &chaos{
		e: e, seed: seed,
		api:    &client{url: e.URL, token: e.api.token, hc: &http.Client{Timeout: 30 * time.Second}},
		codes:  map[string]int{},
		faults: map[string]int{},
		drifts: map[string]int{},
	}
	defer c.clearFaults(t)

	stop := make(chan struct{})
	var bg sync.WaitGroup
	var kills atomic.Int64
	bg.Add(2)
	go func() { defer bg.Done(); c.schedule(t, rand.New(rand.NewPCG(seed, 1)), stop) }()
	most := chaosKills
	if v, err := strconv.Atoi(os.Getenv("CHAOS_KILLS")); err == nil {
		most = v
	}
	go func() { defer bg.Done(); kills.Store(int64(c.kill(rand.New(rand.NewPCG(seed, 2)), most, stop))) }()

	// Four clusters, made under the faults: two under keys, two without
	// (one of them in the tenant's own project, reached through IAM).
	for j := range 4 {
		cl := &chaosCluster{name: fmt.Sprintf("chaos-%d-%d", seed, j), keyed: j < 2, project: "bc-dev"}
		pool := "pool-dev"
		if j == 3 {
			pool, cl.project = "pool-acme", "acme-prod"
		}
		c.createCluster(t, cl, pool)
		c.clusters = append(c.clusters, cl)
	}
	if t.Failed() {
		close(stop)
		bg.Wait()
		return
	}

	bg.Add(1)
	go func() { defer bg.Done(); c.operate(t, rand.New(rand.NewPCG(seed, 3)), stop) }()
	deadline := time.Now().Add(loadFor)
	var clients sync.WaitGroup
	for i := range chaosClients {
		clients.Add(1)
		go func() {
			defer clients.Done()
			w := &chaosWorker{c: c, t: t, id: i, cl: c.clusters[i%len(c.clusters)], keyed: i%2 == 0,
				rng: rand.New(rand.NewPCG(seed, uint64(100+i)))}
			w.run(deadline)
		}()
	}
	clients.Wait()
	close(stop)
	bg.Wait()
	c.clearFaults(t)
	loadDone := time.Now()
	t.Logf("%.1fs load done: %d kills; faults posted %v, hitting %d calls; operator's changes at GKE %v; %d answers read back; answers %v",
		time.Since(begin).Seconds(), kills.Load(), c.faults, c.hits, c.drifts, c.unknown.Load(), c.codes)
	if n := c.codes["500 INTERNAL"]; n > 0 {
		t.Errorf("%d answers 500 INTERNAL", n)
	}
	if t.Failed() {
		return
	}

	c.waitConverged(t)
	t.Logf("converged %.1fs after the faults stopped", time.Since(loadDone).Seconds())
	c.checkAPI(t)
	c.checkProvider(t)
	c.checkReplays(t)
	l := &load{e: e}
	for _, cl := range c.clusters {
		l.clusters = append(l.clusters, &loadCluster{name: cl.name, id: cl.id})
		e.checkSequence(t, "cluster/"+cl.id, e.Store.ClusterRef("acme", cl.id))
	}
	l.checkChains(t)
	t.Logf("%.1fs done", time.Since(begin).Seconds())
}

// devFaults calls /dev/faults.
func (c *chaos) devFaults(method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.e.URL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s = %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// listedFault is a fault as GET /dev/faults lists it.
type listedFault struct {
	ID   string `json:"id"`
	Hits int    `json:"hits"`
}

// schedule posts a random fault every 100 to 400 ms and removes each
// after 0.3 to 1.5 s, until stop.
func (c *chaos) schedule(t *testing.T, rng *rand.Rand, stop <-chan struct{}) {
	type posted struct {
		id    string
		until time.Time
	}
	var live []posted
	remove := func(p posted) {
		var list struct {
			Faults []listedFault `json:"faults"`
		}
		if err := c.devFaults(http.MethodGet, "/dev/faults", nil, &list); err == nil {
			for _, f := range list.Faults {
				if f.ID == p.id {
					c.mu.Lock()
					c.hits += f.Hits
					c.mu.Unlock()
				}
			}
		}
		// A fault of a count is gone once it has hit its calls.
		if err := c.devFaults(http.MethodDelete, "/dev/faults/"+p.id, nil, nil); err != nil && !strings.Contains(err.Error(), "404") {
			t.Errorf("remove fault %s: %v", p.id, err)
		}
	}
	for {
		select {
		case <-stop:
			for _, p := range live {
				remove(p)
			}
			return
		case <-time.After(100*time.Millisecond + time.Duration(rng.Int64N(int64(300*time.Millisecond)))):
		}
		now := time.Now()
		kept := live[:0]
		for _, p := range live {
			if now.After(p.until) {
				remove(p)
			} else {
				kept = append(kept, p)
			}
		}
		live = kept
		k := chaosFaults[rng.IntN(len(chaosFaults))]
		body := map[string]any{"service": k.service, "method": k.method, "action": k.action}
		if k.action == "latency" {
			body["latency"] = (time.Duration(5+rng.IntN(30)) * time.Millisecond).String()
		} else {
			body["code"] = k.codes[rng.IntN(len(k.codes))]
			if rng.IntN(3) == 0 {
				body["share"] = 0.1 + 0.2*rng.Float64()
				body["seed"] = rng.Int64N(1 << 40)
			} else {
				body["count"] = 1 + rng.IntN(3)
			}
		}
		var out struct {
			ID string `json:"id"`
		}
		if err := c.devFaults(http.MethodPost, "/dev/faults", body, &out); err != nil {
			t.Errorf("post fault %v: %v", body, err)
			return
		}
		c.mu.Lock()
		c.faults[k.service+"/"+k.action]++
		c.mu.Unlock()
		live = append(live, posted{out.ID, now.Add(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))})
	}
}

// clearFaults removes every fault, so that the checks and the stack's
// close see none.
func (c *chaos) clearFaults(t *testing.T) {
	if err := c.devFaults(http.MethodDelete, "/dev/faults", nil, nil); err != nil {
		t.Errorf("clear faults: %v", err)
	}
}

// kill sends SIGKILL to a random instance every 1 to 2 s, at most most
// times, until stop, and returns how many it killed.
func (c *chaos) kill(rng *rand.Rand, most int, stop <-chan struct{}) int {
	n := 0
	for n < most {
		select {
		case <-stop:
			return n
		case <-time.After(time.Second + time.Duration(rng.Int64N(int64(time.Second)))):
		}
		ins := c.e.Instances()
		if len(ins) == 0 {
			continue
		}
		if syscall.Kill(ins[rng.IntN(len(ins))].PID, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// operate changes pools at GKE behind the control plane's back, as an
// operator with gcloud would, on the clusters of the platform's project:
// a fixed pool resized, or given autoscaling, until stop.
func (c *chaos) operate(t *testing.T, rng *rand.Rand, stop <-chan struct{}) {
	gke := platformClient(t, c.e.Stack)
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		case <-time.After(300*time.Millisecond + time.Duration(rng.Int64N(int64(700*time.Millisecond)))):
		}
		cl := c.clusters[rng.IntN(len(c.clusters))]
		if cl.project != "bc-dev" {
			continue
		}
		got, err := c.e.GKE.Cluster(cl.providerPath())
		if err != nil || len(got.GetNodePools()) == 0 {
			continue
		}
		np := got.GetNodePools()[rng.IntN(len(got.GetNodePools()))]
		if np.GetAutoscaling().GetEnabled() || np.GetStatus() != containerpb.NodePool_RUNNING {
			continue
		}
		name := cl.providerPath() + "/nodePools/" + np.GetName()
		what := "resize"
		if rng.IntN(4) == 0 {
			what = "autoscaling"
			_, err = gke.SetNodePoolAutoscaling(ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: name,
				Autoscaling: &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: 1, MaxNodeCount: 4}})
		} else {
			_, err = gke.SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: name, NodeCount: int32(1 + rng.IntN(4))})
		}
		if err == nil {
			c.mu.Lock()
			c.drifts[what]++
			c.mu.Unlock()
		}
	}
}

func (cl *chaosCluster) providerPath() string {
	return fmt.Sprintf("projects/%s/locations/us-central1/clusters/%s", cl.project, cl.provider)
}

// tally counts an answer.
func (c *chaos) tally(err error) {
	k := "200"
	var ae *apiError
	switch {
	case err == nil:
	case errors.As(err, &ae):
		k = fmt.Sprintf("%d %s", ae.Status, ae.Code)
	default:
		k = "transport"
	}
	c.mu.Lock()
	c.codes[k]++
	c.mu.Unlock()
}

// call is one request, counted; a 500 fails the test at once.
func (c *chaos) call(t *testing.T, method string, body, out any) error {
	err := c.api.call(method, body, out)
	c.tally(err)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusInternalServerError {
		t.Errorf("%s %v = %v", method, body, err)
	}
	return err
}

// unsure is an answer that does not say whether the request took: a 503
// or a broken connection (a killed instance).
func unsure(err error) bool {
	var ae *apiError
	return err != nil && (!errors.As(err, &ae) || ae.Status == http.StatusServiceUnavailable)
}

// definite sends a request until its answer is definite (200 or a 4xx).
// After an unsure answer, took (when not nil) reads back whether the
// request took, as a careful client without a key must: then it is not
// sent again. A key makes sending it again safe, so keyed requests pass
// no took.
func (c *chaos) definite(t *testing.T, method string, body, out any, took func() bool) error {
	var err error
	wait.Poll(wait.Timeout, 20*time.Millisecond, func() bool {
		if err = c.call(t, method, body, out); !unsure(err) {
			return true
		}
		c.unknown.Add(1)
		if took != nil && took() {
			err = nil
			return true
		}
		return false
	})
	return err
}

// read calls a reading method until it answers something definite.
func (c *chaos) read(t *testing.T, method string, body, out any) error {
	var err error
	wait.Poll(wait.Timeout, 20*time.Millisecond, func() bool {
		err = c.call(t, method, body, out)
		return !unsure(err)
	})
	return err
}

func (c *chaos) createCluster(t *testing.T, cl *chaosCluster, pool string) {
	body := map[string]any{"tenantId": "acme", "poolId": pool, "name": cl.name, "mode": "standard", "region": "us-central1",
		"nodePools": []map[string]any{poolSpec("base", 1)}}
	var took func() bool
	var got resource.Cluster
	if cl.keyed {
		body["idempotencyKey"] = "chaos-" + cl.name
		cl.create = body
	} else {
		took = func() bool {
			var out struct {
				Clusters []resource.Cluster `json:"clusters"`
			}
			if c.read(t, "kubernetesClusters/list", map[string]any{"tenantId": "acme", "pageSize": 100}, &out) != nil {
				return false
			}
			for _, x := range out.Clusters {
				if x.Name == cl.name {
					got = x
					return true
				}
			}
			return false
		}
	}
	if err := c.definite(t, "kubernetesClusters/create", body, &got, took); err != nil {
		t.Errorf("create cluster %s: %v", cl.name, err)
		return
	}
	cl.id, cl.provider = got.ID, got.ProviderName
	var pools struct {
		NodePools []resource.NodePool `json:"nodePools"`
	}
	if err := c.read(t, "kubernetesNodePools/list", map[string]any{"tenantId": "acme", "clusterId": cl.id}, &pools); err != nil || len(pools.NodePools) != 1 {
		t.Errorf("pools of the new cluster %s: %v %v", cl.name, pools.NodePools, err)
		return
	}
	base := pools.NodePools[0]
	cl.pools = append(cl.pools, &chaosPool{name: base.Name, id: base.ID, nodeCount: 1, version: base.Version})
}

// chaosWorker is one client: it owns the pools it makes on its cluster,
// so that what each pool should end as follows from its answers alone.
type chaosWorker struct {
	c     *chaos
	t     *testing.T
	id    int
	cl    *chaosCluster
	keyed bool
	rng   *rand.Rand
	made  int
	own   []*chaosPool
}

const chaosPoolsEach = 4 // three clients a cluster: 12 with its base, past the quota of 10

func (w *chaosWorker) run(deadline time.Time) {
	for time.Now().Before(deadline) && !w.t.Failed() {
		var live []*chaosPool
		for _, p := range w.own {
			if !p.deleted {
				live = append(live, p)
			}
		}
		switch r := w.rng.IntN(10); {
		case len(live) < chaosPoolsEach && (r < 3 || len(live) == 0):
			w.create()
		case len(live) == 0:
		case r < 5:
			w.resize(live[w.rng.IntN(len(live))])
		case r < 7:
			w.autoscale(live[w.rng.IntN(len(live))])
		case r < 8:
			w.refused(live[w.rng.IntN(len(live))])
		default:
			w.delete(live[w.rng.IntN(len(live))])
		}
		time.Sleep(time.Duration(20+w.rng.IntN(150)) * time.Millisecond)
	}
}

func (w *chaosWorker) base() map[string]any {
	return map[string]any{"tenantId": "acme", "clusterId": w.cl.id}
}

// get reads a pool from its cluster's list (the API has no get of one
// pool); a pool the list lacks is NOT_FOUND.
func (w *chaosWorker) get(p *chaosPool) (resource.NodePool, error) {
	var out struct {
		NodePools []resource.NodePool `json:"nodePools"`
	}
	if err := w.c.read(w.t, "kubernetesNodePools/list", w.base(), &out); err != nil {
		return resource.NodePool{}, err
	}
	for _, np := range out.NodePools {
		if np.ID == p.id {
			return np, nil
		}
	}
	return resource.NodePool{}, &apiError{Status: http.StatusNotFound, Code: "NOT_FOUND"}
}

func (w *chaosWorker) create() {
	w.made++
	name := fmt.Sprintf("w%d-%d", w.id, w.made)
	body := w.base()
	for k, v := range poolSpec(name, 1+w.rng.IntN(3)) {
		body[k] = v
	}
	p := &chaosPool{name: name, create: body, nodeCount: body["nodeCount"].(int), version: 1}
	var took func() bool
	var np resource.NodePool
	if w.keyed {
		p.key = fmt.Sprintf("chaos-%d-%s", w.c.seed, name)
		body["idempotencyKey"] = p.key
	} else {
		took = func() bool {
			var out struct {
				NodePools []resource.NodePool `json:"nodePools"`
			}
			if w.c.read(w.t, "kubernetesNodePools/list", w.base(), &out) != nil {
				return false
			}
			for _, x := range out.NodePools {
				if x.Name == name {
					np = x
					return true
				}
			}
			return false
		}
	}
	err := w.c.definite(w.t, "kubernetesNodePools/create", body, &np, took)
	var ae *apiError
	switch {
	case err == nil:
		p.id = np.ID
		w.own = append(w.own, p)
		w.cl.add(w.c, p)
	case errors.As(err, &ae) && ae.Code == "QUOTA_EXCEEDED":
		// Not stored: checked at the end, as every name the API holds
		// must be one the clients were told they made.
	default:
		w.t.Errorf("create pool %s: %v", name, err)
	}
}

func (cl *chaosCluster) add(c *chaos, p *chaosPool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.pools = append(cl.pools, p)
}

// update sends one change of a pool and, once definite, records it.
func (w *chaosWorker) update(p *chaosPool, change map[string]any, count int, as *resource.Autoscaling) {
	body := w.base()
	body["nodePoolId"] = p.id
	for k, v := range change {
		body[k] = v
	}
	took := func() bool {
		np, err := w.get(p)
		return err == nil && np.Version == p.version+1
	}
	if err := w.c.definite(w.t, "kubernetesNodePools/update", body, nil, took); err != nil {
		w.t.Errorf("update pool %s with %v: %v", p.name, change, err)
		return
	}
	p.version++
	p.nodeCount, p.autoscaling = count, as
}

func (w *chaosWorker) resize(p *chaosPool) {
	if p.autoscaling != nil {
		return
	}
	n := 1 + w.rng.IntN(3)
	if n == p.nodeCount {
		n = n%3 + 1
	}
	w.update(p, map[string]any{"nodeCount": n}, n, nil)
}

func (w *chaosWorker) autoscale(p *chaosPool) {
	if p.autoscaling != nil {
		n := 1 + w.rng.IntN(3)
		w.update(p, map[string]any{"autoscaling": nil, "nodeCount": n}, n, nil)
		return
	}
	as := &resource.Autoscaling{MinNodes: 1, MaxNodes: 3}
	w.update(p, map[string]any{"autoscaling": map[string]any{"minNodes": 1, "maxNodes": 3}}, p.nodeCount, as)
}

// refused sends a request the API must refuse with a 4xx that changes
// nothing, and checks that it changed nothing: a name taken, or a node
// count outside the pool's bounds.
func (w *chaosWorker) refused(p *chaosPool) {
	var err error
	want := "CONFLICT"
	if p.autoscaling != nil || w.rng.IntN(2) == 0 {
		body := w.base()
		for k, v := range poolSpec(p.name, 1) {
			body[k] = v
		}
		body["machineType"] = "e2-standard-8"
		if w.keyed {
			body["idempotencyKey"] = fmt.Sprintf("chaos-%d-taken-%s-%d", w.c.seed, p.name, w.rng.Int64())
		}
		err = w.c.definite(w.t, "kubernetesNodePools/create", body, nil, nil)
	} else {
		want = "INVALID_INPUT"
		body := w.base()
		body["nodePoolId"] = p.id
		body["autoscaling"] = map[string]any{"minNodes": 2, "maxNodes": 3}
		body["nodeCount"] = 1
		err = w.c.definite(w.t, "kubernetesNodePools/update", body, nil, nil)
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.Code != want {
		w.t.Errorf("refused request on pool %s = %v, want %s", p.name, err, want)
		return
	}
	np, err := w.get(p)
	if err != nil || np.Version != p.version || np.MachineType != "e2-standard-4" {
		w.t.Errorf("pool %s after a refused request: version %d, machine type %s (%v); want version %d unchanged",
			p.name, np.Version, np.MachineType, err, p.version)
	}
}

func (w *chaosWorker) delete(p *chaosPool) {
	body := w.base()
	body["nodePoolId"] = p.id
	took := func() bool {
		np, err := w.get(p)
		var ae *apiError
		return errors.As(err, &ae) && ae.Code == "NOT_FOUND" || err == nil && np.State == resource.StateDeleting
	}
	err := w.c.definite(w.t, "kubernetesNodePools/delete", body, nil, took)
	if err != nil {
		w.t.Errorf("delete pool %s: %v", p.name, err)
		return
	}
	p.deleted = true
}

// chaosState is what the API shows of a cluster's pools, and what the
// clients' answers say it should.
func (c *chaos) chaosState(cl *chaosCluster) (got, want string) {
	var g, w []string
	var cluster resource.Cluster
	if err := c.api.call("kubernetesClusters/get", map[string]any{"tenantId": "acme", "clusterId": cl.id}, &cluster); err != nil {
		return err.Error(), ""
	}
	ps, err := c.api.listPools(cl.id)
	if err != nil {
		return err.Error(), ""
	}
	desc := func(name, id string, st resource.State, n int, as *resource.Autoscaling, v int64) string {
		s := fmt.Sprintf("%s %s %s v%d", name, id, st, v)
		if as != nil {
			return s + fmt.Sprintf(" autoscaling %d-%d", as.MinNodes, as.MaxNodes)
		}
		return s + fmt.Sprintf(" %d nodes", n)
	}
	for _, np := range ps {
		g = append(g, desc(np.Name, np.ID, np.State, np.NodeCount, np.Autoscaling, np.Version))
	}
	for _, p := range cl.pools {
		if !p.deleted {
			w = append(w, desc(p.name, p.id, resource.StateReady, p.nodeCount, p.autoscaling, p.version))
		}
	}
	sort.Strings(g)
	sort.Strings(w)
	return fmt.Sprintf("%s; %s", cluster.State, strings.Join(g, ", ")), fmt.Sprintf("%s; %s", resource.StateReady, strings.Join(w, ", "))
}

// waitConverged waits until every cluster is ready with exactly the
// pools its clients were told they made, each ready as last accepted,
// and GKE holds the same.
func (c *chaos) waitConverged(t *testing.T) {
	for _, cl := range c.clusters {
		wait.For(t, "cluster "+cl.name+" converged as the answers imply", func() (bool, string) {
			got, want := c.chaosState(cl)
			if got != want {
				return false, fmt.Sprintf("%s\nwant %s", got, want)
			}
			if d := c.providerDiff(cl); d != "" {
				return false, d
			}
			return true, ""
		})
	}
}

// checkAPI: the names unique, the quota held, and the final states as
// the answers imply (waitConverged waited for them).
func (c *chaos) checkAPI(t *testing.T) {
	for _, cl := range c.clusters {
		got, want := c.chaosState(cl)
		if got != want {
			t.Errorf("%s: %s\nwant %s", cl.name, got, want)
		}
		ps, err := c.api.listPools(cl.id)
		if err != nil {
			t.Fatalf("list pools of %s: %v", cl.name, err)
		}
		if len(ps) > 10 {
			t.Errorf("%s holds %d pools, past the quota of 10", cl.name, len(ps))
		}
		seen := map[string]bool{}
		for _, np := range ps {
			if seen[np.Name] {
				t.Errorf("%s: pool name %s held twice", cl.name, np.Name)
			}
			seen[np.Name] = true
		}
	}
}

// providerDiff is how GKE differs from what the clients were told: the
// pools of the cluster, each fixed pool's nodes per zone, autoscaling.
func (c *chaos) providerDiff(cl *chaosCluster) string {
	got, err := c.e.GKE.Cluster(cl.providerPath())
	if err != nil {
		return err.Error()
	}
	at := map[string]*containerpb.NodePool{}
	for _, np := range got.GetNodePools() {
		at[np.GetName()] = np
	}
	var diffs []string
	want := 0
	for _, p := range cl.pools {
		if p.deleted {
			continue
		}
		want++
		np, ok := at[p.name]
		if !ok {
			diffs = append(diffs, p.name+" missing at GKE")
			continue
		}
		as := np.GetAutoscaling()
		if (p.autoscaling != nil) != as.GetEnabled() ||
			p.autoscaling != nil && (int(as.GetMinNodeCount()) != p.autoscaling.MinNodes || int(as.GetMaxNodeCount()) != p.autoscaling.MaxNodes) {
			diffs = append(diffs, fmt.Sprintf("%s autoscaling at GKE %v, want %v", p.name, as, p.autoscaling))
		}
		if p.autoscaling != nil {
			continue
		}
		zones, err := c.e.GKE.NodeCounts(cl.providerPath() + "/nodePools/" + p.name)
		if err != nil {
			diffs = append(diffs, err.Error())
			continue
		}
		for z, n := range zones {
			if int(n) != p.nodeCount {
				diffs = append(diffs, fmt.Sprintf("%s has %d nodes in %s at GKE, want %d", p.name, n, z, p.nodeCount))
			}
		}
	}
	if len(at) != want {
		var names []string
		for n := range at {
			names = append(names, n)
		}
		slices.Sort(names)
		diffs = append(diffs, fmt.Sprintf("GKE holds pools %v, want %d", names, want))
	}
	return strings.Join(diffs, "; ")
}

// checkProvider: GKE equal to the API, with no operation running.
func (c *chaos) checkProvider(t *testing.T) {
	for _, op := range c.e.GKE.Operations() {
		if op.GetStatus() != containerpb.Operation_DONE {
			t.Errorf("operation %v on %s still %v", op.GetOperationType(), op.GetTargetLink(), op.GetStatus())
		}
	}
	for _, cl := range c.clusters {
		if d := c.providerDiff(cl); d != "" {
			t.Errorf("%s at GKE: %s", cl.name, d)
		}
	}
}

// checkReplays: each keyed create sent again answers the one pool it
// made, and a keyed cluster create the one cluster.
func (c *chaos) checkReplays(t *testing.T) {
	n := 0
	for _, cl := range c.clusters {
		if cl.create != nil {
			var got resource.Cluster
			if err := c.read(t, "kubernetesClusters/create", cl.create, &got); err != nil || got.ID != cl.id {
				t.Errorf("replay of the create of cluster %s = %s, %v; want %s", cl.name, got.ID, err, cl.id)
			}
			n++
		}
		for _, p := range cl.pools {
			if p.key == "" {
				continue
			}
			var np resource.NodePool
			if err := c.read(t, "kubernetesNodePools/create", p.create, &np); err != nil || np.ID != p.id {
				t.Errorf("replay of the create of %s under %s = %s, %v; want %s", p.name, p.key, np.ID, err, p.id)
			}
			n++
		}
	}
	t.Logf("%d keyed creates replayed", n)
}
