package devstack_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/tasks"
	"github.com/better-compute/kubernetes/shared/wait"
)

// Bounds of TestInstancesUnderKills: it kills an instance every
// killEvery (give or take half) while the load runs, at most maxKills
// times, and wants minKills at least, so that the checks are about a
// fleet that lost instances.
const (
	killEvery = 700 * time.Millisecond
	maxKills  = 10
	minKills  = 3
)

// TestInstancesUnderKills' instances and kills: -instances-kill.n=1 runs
// the same load in the stack's own process, with no kills, for
// comparison; -instances-kill.kills bounds the kills (0: none).
var (
	instancesKillN = flag.Int("instances-kill.n", 3, "TestInstancesUnderKills: the instances serving the functions (1: the stack's own process, no kills)")
	instancesKills = flag.Int("instances-kill.kills", maxKills, "TestInstancesUnderKills: the most kills (0: none)")
)

// TestInstancesUnderKills runs the functions in three processes and kills
// them with SIGKILL at random (INSTANCES_KILL_SEED repeats a run) while
// clients on several clusters mix creates, resizes and deletes of
// clusters and node pools, some sent twice at once under one idempotency
// key, some racing for one name, one a burst past the pool quota. A
// request cut by a kill is answered UNAVAILABLE, and the client asks
// again (the same idempotency key for a create, after reading whether it
// took for a resize). Then, with no more kills: names are unique, the
// quota let exactly 10 pools in, each idempotency key made one pool or
// cluster, the GKE simulator never ran two operations at once on a
// cluster and made each object and change once, every accepted change
// converged, every chain is alive (one waiting task of its token), and
// the events of every cluster, put in order by ce-sequence, are numbered
// 1 to N without a gap and are exactly its changes', pool by pool.
func TestInstancesUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	rng := seededRand(t, "INSTANCES_KILL_SEED")
	begin := time.Now()

	n, most := *instancesKillN, *instancesKills
	cfg := instancesConfig(n)
	// Operations and runs long enough that kills land in the middle of
	// them.
	cfg.GKEOperationTime = 150 * time.Millisecond
	cfg.ConvergingInterval = 100 * time.Millisecond
	e := startEnv(t, cfg)
	l := &load{e: e, api: &client{url: e.URL, token: e.api.token, hc: &http.Client{Timeout: 30 * time.Second}}}

	// The killer: SIGKILL to a random live instance every killEvery or
	// so, until the load is done.
	done := make(chan struct{})
	killerDone := make(chan struct{})
	var kills []string
	go func() {
		defer close(killerDone)
		for len(kills) < most {
			select {
			case <-done:
				return
			case <-time.After(killEvery/2 + time.Duration(rng.Int64N(int64(killEvery)))):
			}
			ins := e.Instances()
			if len(ins) == 0 || n <= 1 {
				continue
			}
			v := ins[rng.IntN(len(ins))]
			if err := syscall.Kill(v.PID, syscall.SIGKILL); err == nil {
				kills = append(kills, fmt.Sprintf("%.1fs instance %d (pid %d, %d requests)", time.Since(begin).Seconds(), v.Index, v.PID, v.Requests))
			}
		}
	}()

	names := []string{"c0", "c1", "c2"}
	t.Run("load", func(t *testing.T) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				l.clusterLoad(t, name, name == "c0", name == "c2")
			})
		}
	})
	close(done)
	<-killerDone
	t.Logf("%.1fs load done; %d kills: %s; %d answers UNAVAILABLE asked again", time.Since(begin).Seconds(), len(kills), strings.Join(kills, ", "), l.retried.Load())
	if t.Failed() {
		return
	}
	if len(kills) < min(minKills, most) && n > 1 {
		t.Fatalf("%d kills during the load, want %d at least: the load was too short to test anything", len(kills), minKills)
	}

	l.checkUnique(t)
	l.checkConverged(t)
	l.checkProvider(t)
	l.checkChains(t)
	l.checkEvents(t)
	ins := e.Instances()
	t.Logf("%.1fs done; instances now: %s", time.Since(begin).Seconds(), describe(ins))
}

// load is what the clients asked, cluster by cluster, and what the
// stack accepted.
type load struct {
	e       *env
	api     *client
	retried atomicCount

	mu       sync.Mutex
	clusters []*loadCluster
}

type atomicCount struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCount) Add(n int) { c.mu.Lock(); c.n += n; c.mu.Unlock() }
func (c *atomicCount) Load() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

type loadCluster struct {
	name, id string
	provider string // its ProviderName
	deleted  bool
	pools    []*loadPool // in the order they were made
}

type loadPool struct {
	name, id    string
	withCluster bool
	counts      []int // the node counts asked, in order
	deleted     bool
}

func (p *loadPool) count() int { return p.counts[len(p.counts)-1] }

// try calls method until it answers something else than UNAVAILABLE or
// a broken connection: what a kill of the instance serving it answers.
func (l *load) try(method string, body, out any) error {
	var err error
	wait.Poll(wait.Timeout, 50*time.Millisecond, func() bool {
		err = l.api.call(method, body, out)
		var ae *apiError
		if err == nil || errors.As(err, &ae) && ae.Code != "UNAVAILABLE" {
			return true
		}
		l.retried.Add(1)
		return false
	})
	return err
}

// poolID is the ID of the pool named name of a cluster, listed as every
// other call of the load is made: asked again while a kill answers it
// UNAVAILABLE.
func (l *load) poolID(t *testing.T, clusterID, name string) string {
	t.Helper()
	var out struct {
		NodePools []resource.NodePool `json:"nodePools"`
	}
	if err := l.try("kubernetesNodePools/list", map[string]any{"tenantId": "acme", "clusterId": clusterID}, &out); err != nil {
		t.Fatalf("list node pools of %s: %v", clusterID, err)
	}
	for _, p := range out.NodePools {
		if p.Name == name {
			return p.ID
		}
	}
	t.Fatalf("node pool %s not in the list of %s", name, clusterID)
	return ""
}

// twice sends body to method twice at once, as a client retrying too
// early does, and returns both answers.
func (l *load) twice(method string, body map[string]any, out1, out2 any) (error, error) {
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Add(2)
	go func() { defer wg.Done(); err1 = l.try(method, body, out1) }()
	go func() { defer wg.Done(); err2 = l.try(method, body, out2) }()
	wg.Wait()
	return err1, err2
}

// clusterLoad takes one cluster through its changes; quota bursts pools
// past the quota, and del deletes the cluster at the end.
func (l *load) clusterLoad(t *testing.T, name string, quota, del bool) {
	c := &loadCluster{name: "inst-" + name}
	l.mu.Lock()
	l.clusters = append(l.clusters, c)
	l.mu.Unlock()

	// Create, twice at once under one key: one cluster.
	body := map[string]any{"tenantId": "acme", "poolId": "pool-dev", "name": c.name, "mode": "standard", "region": "us-central1",
		"nodePools": []map[string]any{poolSpec("a", 1)}, "idempotencyKey": "create-" + name}
	var cl1, cl2 resource.Cluster
	err1, err2 := l.twice("kubernetesClusters/create", body, &cl1, &cl2)
	if err1 != nil || err2 != nil || cl1.ID != cl2.ID || cl1.ID == "" {
		t.Fatalf("create %s twice under one key = %s, %v and %s, %v; want one cluster", c.name, cl1.ID, err1, cl2.ID, err2)
	}
	c.id, c.provider = cl1.ID, cl1.ProviderName
	c.pools = append(c.pools, &loadPool{name: "a", id: l.poolID(t, c.id, "a"), withCluster: true, counts: []int{1}})
	// The name is taken, for any other key.
	other := map[string]any{}
	for k, v := range body {
		other[k] = v
	}
	other["idempotencyKey"] = "create-other-" + name
	var ae *apiError
	if err := l.try("kubernetesClusters/create", other, nil); !errors.As(err, &ae) || ae.Code != "CONFLICT" {
		t.Errorf("create %s again under another key = %v, want CONFLICT", c.name, err)
	}
	l.waitPools(t, c)

	b := l.createRacing(t, c, "b")
	l.waitPools(t, c)
	l.resize(t, c, c.pools[0], 2)
	l.resize(t, c, b, 2)
	l.waitPools(t, c)
	l.deletePool(t, c, b)
	p := l.createPool(t, c, "c", "create-c-"+name)
	l.waitPools(t, c)
	l.resize(t, c, p, 3)
	l.waitPools(t, c)

	if quota {
		// The cluster has 2 pools that are not deleted (a, c): of 10
		// creates at once, 8 are let in.
		var wg sync.WaitGroup
		results := make([]error, 10)
		made := make([]resource.NodePool, 10)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := map[string]any{"tenantId": "acme", "clusterId": c.id, "idempotencyKey": fmt.Sprintf("q%d-%s", i, name)}
				for k, v := range poolSpec(fmt.Sprintf("q%d", i), 1) {
					body[k] = v
				}
				results[i] = l.try("kubernetesNodePools/create", body, &made[i])
			}()
		}
		wg.Wait()
		accepted, refused := 0, 0
		for i, err := range results {
			switch {
			case err == nil:
				accepted++
				c.pools = append(c.pools, &loadPool{name: made[i].Name, id: made[i].ID, counts: []int{1}})
			case errors.As(err, &ae) && ae.Code == "QUOTA_EXCEEDED":
				refused++
			default:
				t.Errorf("create q%d: %v", i, err)
			}
		}
		if accepted != 8 || refused != 2 {
			t.Errorf("of 10 pool creates at once with 2 pools = %d accepted, %d QUOTA_EXCEEDED; want 8 and 2", accepted, refused)
		}
		l.waitPools(t, c)
	}
	if del {
		var got resource.Cluster
		if err := l.try("kubernetesClusters/delete", map[string]any{"tenantId": "acme", "clusterId": c.id}, &got); err != nil {
			t.Fatalf("delete cluster %s: %v", c.name, err)
		}
		c.deleted = true
		wait.For(t, "cluster "+c.name+" gone", func() (bool, string) {
			_, err := l.api.getCluster(c.id)
			return errors.As(err, &ae) && ae.Code == "NOT_FOUND", fmt.Sprintf("get = %v", err)
		})
	}
}

// createPool creates a pool under key, asking again what a kill cut.
func (l *load) createPool(t *testing.T, c *loadCluster, name, key string) *loadPool {
	t.Helper()
	body := map[string]any{"tenantId": "acme", "clusterId": c.id, "idempotencyKey": key}
	for k, v := range poolSpec(name, 1) {
		body[k] = v
	}
	var np resource.NodePool
	if err := l.try("kubernetesNodePools/create", body, &np); err != nil {
		t.Fatalf("create pool %s of %s: %v", name, c.name, err)
	}
	p := &loadPool{name: name, id: np.ID, counts: []int{1}}
	c.pools = append(c.pools, p)
	return p
}

// createRacing creates pool name twice at once under one key, and once
// under another key, all at the same moment: one pool comes of it, the
// key that won answers it to both its calls, and the other CONFLICT.
func (l *load) createRacing(t *testing.T, c *loadCluster, name string) *loadPool {
	t.Helper()
	spec := func(key string) map[string]any {
		body := map[string]any{"tenantId": "acme", "clusterId": c.id, "idempotencyKey": key}
		for k, v := range poolSpec(name, 1) {
			body[k] = v
		}
		return body
	}
	var wg sync.WaitGroup
	var got [3]resource.NodePool
	var errs [3]error
	for i, key := range []string{"k1", "k1", "k2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.try("kubernetesNodePools/create", spec(key+"-"+c.id), &got[i])
		}()
	}
	wg.Wait()
	var ae *apiError
	conflict := func(err error) bool { return errors.As(err, &ae) && ae.Code == "CONFLICT" }
	var id string
	switch {
	case errs[0] == nil && errs[1] == nil && got[0].ID == got[1].ID && conflict(errs[2]):
		id = got[0].ID
	case conflict(errs[0]) && conflict(errs[1]) && errs[2] == nil:
		id = got[2].ID
	default:
		t.Fatalf("pool %s of %s created twice under k1 and once under k2 at once = %s %v, %s %v, %s %v; want one pool, the other key CONFLICT",
			name, c.name, got[0].ID, errs[0], got[1].ID, errs[1], got[2].ID, errs[2])
	}
	p := &loadPool{name: name, id: id, counts: []int{1}}
	c.pools = append(c.pools, p)
	return p
}

// resize asks for count nodes; after an answer a kill cut, it reads
// whether the change took before it asks again, so that it is asked once.
func (l *load) resize(t *testing.T, c *loadCluster, p *loadPool, count int) {
	t.Helper()
	body := map[string]any{"tenantId": "acme", "clusterId": c.id, "nodePoolId": p.id, "nodeCount": count}
	wait.For(t, fmt.Sprintf("pool %s of %s resized to %d", p.name, c.name, count), func() (bool, string) {
		err := l.api.call("kubernetesNodePools/update", body, nil)
		var ae *apiError
		if err == nil {
			return true, ""
		}
		if errors.As(err, &ae) && ae.Code != "UNAVAILABLE" {
			t.Fatalf("resize pool %s of %s to %d: %v", p.name, c.name, count, err)
		}
		l.retried.Add(1)
		// The API has no get of one pool: it is read from the list.
		var out struct {
			NodePools []resource.NodePool `json:"nodePools"`
		}
		if err := l.try("kubernetesNodePools/list", map[string]any{"tenantId": "acme", "clusterId": c.id}, &out); err == nil {
			for _, np := range out.NodePools {
				if np.ID == p.id && np.NodeCount == count {
					return true, ""
				}
			}
		}
		return false, "update: " + err.Error()
	})
	p.counts = append(p.counts, count)
}

func (l *load) deletePool(t *testing.T, c *loadCluster, p *loadPool) {
	t.Helper()
	err := l.try("kubernetesNodePools/delete", map[string]any{"tenantId": "acme", "clusterId": c.id, "nodePoolId": p.id}, nil)
	var ae *apiError
	// NOT_FOUND: a first delete that a kill's answer hid, done since.
	if err != nil && !(errors.As(err, &ae) && ae.Code == "NOT_FOUND") {
		t.Fatalf("delete pool %s of %s: %v", p.name, c.name, err)
	}
	p.deleted = true
}

// waitPools waits until the cluster is ready with the pools asked, each
// ready with its count.
func (l *load) waitPools(t *testing.T, c *loadCluster) {
	t.Helper()
	wait.For(t, "cluster "+c.name+" ready as asked", func() (bool, string) {
		got, want := l.state(c)
		return got == want, fmt.Sprintf("%s, want %s", got, want)
	})
}

// state is what the API shows of the cluster, and what was asked of it.
func (l *load) state(c *loadCluster) (got, want string) {
	cl, err := l.api.getCluster(c.id)
	if err != nil {
		return err.Error(), ""
	}
	ps, err := l.api.listPools(c.id)
	if err != nil {
		return err.Error(), ""
	}
	var g, w []string
	for _, np := range ps {
		g = append(g, fmt.Sprintf("%s %s %s %d", np.Name, np.ID, np.State, np.NodeCount))
	}
	for _, p := range c.pools {
		if !p.deleted {
			w = append(w, fmt.Sprintf("%s %s %s %d", p.name, p.id, resource.StateReady, p.count()))
		}
	}
	slices.Sort(g)
	slices.Sort(w)
	return fmt.Sprintf("cluster %s; pools %v", cl.State, g), fmt.Sprintf("cluster %s; pools %v", resource.StateReady, w)
}

// checkUnique: each cluster name once in the tenant, each pool name once
// in its cluster, and the quota's 10 pools on the cluster that hit it.
func (l *load) checkUnique(t *testing.T) {
	var out struct {
		Clusters []resource.Cluster `json:"clusters"`
	}
	if err := l.try("kubernetesClusters/list", map[string]any{"tenantId": "acme", "pageSize": 100}, &out); err != nil {
		t.Fatalf("list clusters: %v", err)
	}
	seen := map[string]string{}
	for _, cl := range out.Clusters {
		if had, ok := seen[cl.Name]; ok {
			t.Errorf("cluster name %s held by %s and %s", cl.Name, had, cl.ID)
		}
		seen[cl.Name] = cl.ID
	}
	for _, c := range l.clusters {
		if id, ok := seen[c.name]; ok == c.deleted || ok && id != c.id {
			t.Errorf("cluster %s in the list = %s %v; want %s unless deleted (%v)", c.name, id, ok, c.id, c.deleted)
		}
		if c.deleted {
			continue
		}
		ps, err := l.api.listPools(c.id)
		if err != nil {
			t.Fatalf("list pools of %s: %v", c.name, err)
		}
		names := map[string]int{}
		for _, np := range ps {
			names[np.Name]++
			if names[np.Name] > 1 {
				t.Errorf("pool name %s held twice in %s", np.Name, c.name)
			}
		}
		if c.name == "inst-c0" && len(ps) != 10 {
			t.Errorf("%s has %d pools, want the quota's 10", c.name, len(ps))
		}
	}
}

// checkConverged: every accepted change is what the API shows.
func (l *load) checkConverged(t *testing.T) {
	for _, c := range l.clusters {
		if c.deleted {
			continue
		}
		got, want := l.state(c)
		if got != want {
			t.Errorf("%s: %s, want %s", c.name, got, want)
		}
	}
}

// checkProvider: at the GKE simulator, the pools asked with their node
// counts; each object created once, each resize and delete made once;
// no operation running; and on no cluster two operations at once.
func (l *load) checkProvider(t *testing.T) {
	e := l.e
	wait.For(t, "no provider operation running", func() (bool, string) {
		for _, op := range e.GKE.Operations() {
			if op.GetStatus() != containerpb.Operation_DONE {
				return false, fmt.Sprintf("%v on %s %v", op.GetOperationType(), op.GetTargetLink(), op.GetStatus())
			}
		}
		return true, ""
	})
	for _, c := range l.clusters {
		cl := resource.Cluster{ID: c.id, Region: "us-central1", ProviderName: c.provider}
		name := providerName(cl)
		_, gerr := e.GKE.Cluster(name)
		if c.deleted != (gerr != nil) {
			t.Errorf("%s at the GKE simulator: %v; want it there unless deleted (%v)", c.name, gerr, c.deleted)
		}
		count := func(pool string, typ containerpb.Operation_Type) int {
			return e.ops(cl, typ, pool)
		}
		if n := count("", containerpb.Operation_CREATE_CLUSTER); n != 1 {
			t.Errorf("%s: %d CREATE_CLUSTER operations, want 1", c.name, n)
		}
		if n, want := count("", containerpb.Operation_DELETE_CLUSTER), map[bool]int{true: 1}[c.deleted]; n != want {
			t.Errorf("%s: %d DELETE_CLUSTER operations, want %d", c.name, n, want)
		}
		for _, p := range c.pools {
			want := map[containerpb.Operation_Type]int{
				containerpb.Operation_CREATE_NODE_POOL:   map[bool]int{false: 1}[p.withCluster],
				containerpb.Operation_SET_NODE_POOL_SIZE: len(p.counts) - 1,
				// A cluster's delete deletes its pools first.
				containerpb.Operation_DELETE_NODE_POOL: map[bool]int{true: 1}[p.deleted || c.deleted],
			}
			for typ, n := range want {
				if got := count(p.name, typ); got != n {
					t.Errorf("%s pool %s: %d %v operations, want %d (one per change)", c.name, p.name, got, typ, n)
				}
			}
			if c.deleted || p.deleted {
				continue
			}
			zones, err := e.GKE.NodeCounts(name + "/nodePools/" + p.name)
			if err != nil {
				t.Errorf("%s pool %s at the GKE simulator: %v", c.name, p.name, err)
				continue
			}
			for z, n := range zones {
				if int(n) != p.count() {
					t.Errorf("%s pool %s has %d nodes in %s at the GKE simulator, want %d", c.name, p.name, n, z, p.count())
				}
			}
		}
	}
	// One operation at a time per cluster: sorted by start, each starts
	// once the one before it ended.
	byCluster := map[string][]*containerpb.Operation{}
	for _, op := range e.GKE.Operations() {
		link := op.GetTargetLink()
		if i := strings.Index(link, "/nodePools/"); i >= 0 {
			link = link[:i]
		}
		byCluster[link] = append(byCluster[link], op)
	}
	total, overlaps := 0, 0
	for link, ops := range byCluster {
		at := func(s string) time.Time {
			v, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatalf("operation time %q: %v", s, err)
			}
			return v
		}
		sort.Slice(ops, func(i, j int) bool { return at(ops[i].GetStartTime()).Before(at(ops[j].GetStartTime())) })
		for i := 1; i < len(ops); i++ {
			prev, op := ops[i-1], ops[i]
			if at(op.GetStartTime()).Before(at(prev.GetEndTime())) {
				overlaps++
				t.Errorf("%s: %v on %s started at %s, while %v on %s ran until %s", path.Base(link),
					op.GetOperationType(), path.Base(op.GetTargetLink()), op.GetStartTime(), prev.GetOperationType(), path.Base(prev.GetTargetLink()), prev.GetEndTime())
			}
		}
		total += len(ops)
	}
	t.Logf("%d provider operations on %d clusters, %d started while another ran", total, len(byCluster), overlaps)
}

// checkChains: each live cluster has one chain, one task waiting with its
// current token; the deleted one none.
func (l *load) checkChains(t *testing.T) {
	e := l.e
	for _, c := range l.clusters {
		wait.For(t, "the chain of "+c.name+" alone and alive", func() (bool, string) {
			tok := e.clusterDoc(t, c.id).Reconcile.Token
			now := time.Now()
			var waiting, other []string
			for _, tk := range e.pendingTasks() {
				var p tasks.Payload
				if err := json.Unmarshal(tk.GetHttpRequest().GetBody(), &p); err != nil || p.ID != c.id {
					continue
				}
				if p.Token == tok && tk.GetScheduleTime().AsTime().After(now) {
					waiting = append(waiting, path.Base(tk.GetName()))
				} else {
					other = append(other, path.Base(tk.GetName()))
				}
			}
			if c.deleted {
				return len(waiting)+len(other) == 0, fmt.Sprintf("tasks %v %v", waiting, other)
			}
			return len(waiting) == 1 && len(other) == 0, fmt.Sprintf("waiting %v, other %v", waiting, other)
		})
	}
}

// checkEvents: the events of each cluster, in ce-sequence order, are
// numbered 1 to N with no gap (checkSequence), and are its changes':
// cluster created first, ready once, deleted last if deleted; each pool's
// own events exactly created (when added), ready for each count asked in
// turn, deleted (when it or its cluster was).
func (l *load) checkEvents(t *testing.T) {
	e := l.e
	for _, c := range l.clusters {
		events := e.checkSequence(t, "cluster/"+c.id, e.Store.ClusterRef("acme", c.id))
		if len(events) == 0 {
			t.Errorf("%s: no events", c.name)
			continue
		}
		if events[0].Type != event.ClusterCreated {
			t.Errorf("%s: first event %s, want %s", c.name, events[0].Type, event.ClusterCreated)
		}
		if last := events[len(events)-1]; c.deleted && last.Type != event.ClusterDeleted {
			t.Errorf("%s: last event %s, want %s", c.name, last.Type, event.ClusterDeleted)
		}
		readies := 0
		for _, ev := range events {
			if ev.Type == event.ClusterReady {
				readies++
			}
			if ev.Type == event.ClusterError || ev.Type == event.NodePoolError {
				t.Errorf("%s: %s %s", c.name, ev.Type, ev.Data)
			}
		}
		if readies != 1 {
			t.Errorf("%s: %d cluster.ready events, want 1", c.name, readies)
		}
		for _, p := range c.pools {
			var want []string
			if !p.withCluster {
				want = append(want, "created")
			}
			for _, n := range p.counts {
				want = append(want, fmt.Sprintf("ready %d", n))
			}
			if p.deleted || c.deleted {
				want = append(want, "deleted")
			}
			var got []string
			for _, ev := range events {
				if ev.Attrs["nodePoolId"] != p.id {
					continue
				}
				s := strings.TrimPrefix(ev.Type, "kubernetes.nodepool.")
				if ev.Type == event.NodePoolReady {
					var np resource.NodePool
					_ = json.Unmarshal(ev.Data, &np)
					s += fmt.Sprintf(" %d", np.NodeCount)
				}
				got = append(got, s)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s pool %s: events in ce-sequence order %v, want %v", c.name, p.name, got, want)
			}
		}
		t.Logf("%s: %d events in sequence", c.name, len(events))
	}
}
