package devstack_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// The replacement of a substrate's node pool without lost capacity, and
// kubernetesSubstrates.plan, from the outside (API.md §9).

// machine is flavor cpu of nodeCount 1 (one node in each of the policy's
// two zones) on machine type mt.
func machine(mt string) map[string]any {
	return map[string]any{"name": "cpu", "machineType": mt, "nodeCount": 1}
}

// zonesAC is createPolicy in zones us-central1-a and -c, which no other
// test of its stack uses: a stockout there is this test's alone.
func zonesAC(id string, version int, flavors ...map[string]any) map[string]any {
	p := createPolicy(id, version, flavors...)
	p["policy"].(map[string]any)["substrate"].(map[string]any)["cluster"].(map[string]any)["create"].(map[string]any)["zones"] = []string{"us-central1-a", "us-central1-c"}
	return p
}

// sampler lists a pool's substrate every few milliseconds, from start to
// stop, and keeps what each answer showed.
type sampler struct {
	mu      sync.Mutex
	samples []resource.Substrate
	errs    int
	stop    chan struct{}
	done    chan struct{}
}

func sample(c *client, poolID string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			list, err := c.substrates(poolID)
			s.mu.Lock()
			if err != nil || len(list) != 1 {
				s.errs++
			} else {
				s.samples = append(s.samples, list[0])
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return s
}

// end stops the sampler and returns its samples.
func (s *sampler) end() []resource.Substrate {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// minJoined is the fewest joined nodes the samples showed, and a sample
// that showed it.
func minJoined(samples []resource.Substrate) (int64, resource.Substrate) {
	low, at := int64(-1), resource.Substrate{}
	for _, s := range samples {
		if low < 0 || s.JoinedNodes < low {
			low, at = s.JoinedNodes, s
		}
	}
	return low, at
}

func poolNames(s resource.Substrate) []string {
	var out []string
	for _, np := range s.NodePools {
		out = append(out, np.Name)
	}
	return out
}

// sawListed reports whether a sample listed exactly the node pools names,
// in that order.
func sawListed(samples []resource.Substrate, names ...string) bool {
	return slices.ContainsFunc(samples, func(s resource.Substrate) bool { return slices.Equal(poolNames(s), names) })
}

// slowWait bounds a wait that starts Kubernetes API servers and makes
// node pools on a machine other builds load (wait.Timeout is too short
// for that there).
const slowWait = 5 * time.Minute

// waitLong is client.waitSubstrate within slowWait.
func waitLong(t *testing.T, e *env, poolID, what string, ok func(resource.Substrate) bool) resource.Substrate {
	t.Helper()
	var got resource.Substrate
	wait.Within(t, slowWait, fmt.Sprintf("substrate of %s %s", poolID, what), func() (bool, string) {
		list, err := e.api.substrates(poolID)
		if err != nil {
			return false, err.Error()
		}
		if len(list) != 1 {
			return false, fmt.Sprintf("%d substrates: %s", len(list), jsonOf(list))
		}
		got = list[0]
		return ok(got), jsonOf(got)
	})
	return got
}

// readyOn waits until the substrate is ready at version v with exactly
// the node pool name and joined nodes.
func readyOn(t *testing.T, e *env, poolID string, v int64, name string, joined int64) resource.Substrate {
	t.Helper()
	return waitLong(t, e, poolID, fmt.Sprintf("ready at version %d on %s with %d nodes", v, name, joined), func(s resource.Substrate) bool {
		return s.PoolVersion == v && s.State == resource.StateReady && s.JoinedNodes == joined && slices.Equal(poolNames(s), []string{name})
	})
}

// clusterPools are the names of the cluster's node pools that are not
// deleted.
func clusterPools(t *testing.T, e *env, clusterID string) []string {
	t.Helper()
	pools, err := e.api.listPools(clusterID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pools {
		out = append(out, p.Name)
	}
	return out
}

// TestSubstrateReplacement changes the machine type of a substrate's
// flavor, again during the replacement, then into a stockout, and tears
// a substrate down during a replacement. The substrate's joined nodes,
// sampled all along, never drop below the two nodes either pool holds.
func TestSubstrateReplacement(t *testing.T) {
	t.Parallel()
	e := kubeEnv(t, nil)
	t.Run("replacements", func(t *testing.T) {
		t.Parallel()
		pool := fmt.Sprintf("pool-r%d", poolSeq.Add(1))
		name := func(n int) string {
			if n == 1 {
				return "bc-" + pool + "-cpu"
			}
			return fmt.Sprintf("bc-%s-cpu-%d", pool, n)
		}
		putPool(t, e, zonesAC(pool, 1, machine("e2-standard-4")))
		s := readyOn(t, e, pool, 1, name(1), 2)
		smp := sample(e.api, pool)

		// One change: the new pool first, the old one deleted once the
		// new one's nodes joined.
		putPool(t, e, zonesAC(pool, 2, machine("n2-standard-4")))
		readyOn(t, e, pool, 2, name(2), 2)
		if got := clusterPools(t, e, s.ClusterID); !slices.Equal(got, []string{name(2)}) {
			t.Errorf("the cluster's node pools after the replacement = %v, want %s alone", got, name(2))
		}
		if p := poolByName(t, e.api, s.ClusterID, name(2)); p.MachineType != "n2-standard-4" {
			t.Errorf("%s is %s, want n2-standard-4", p.Name, p.MachineType)
		}

		// A change during the replacement replaces the newest.
		putPool(t, e, zonesAC(pool, 3, machine("n2-standard-8")))
		waitLong(t, e, pool, "replacing "+name(2)+" with "+name(3), func(s resource.Substrate) bool {
			return s.PoolVersion == 3 && slices.Contains(poolNames(s), name(3))
		})
		putPool(t, e, zonesAC(pool, 4, machine("n2d-standard-4")))
		readyOn(t, e, pool, 4, name(4), 2)
		if got := clusterPools(t, e, s.ClusterID); !slices.Equal(got, []string{name(4)}) {
			t.Errorf("the cluster's node pools after the chained replacement = %v, want %s alone", got, name(4))
		}

		// A stockout of the new pool: the substrate shows its error, and
		// the old pool stays with its nodes. A further change replaces the
		// pool that got no nodes.
		if code, body := postDev(t, e, devstack.GKEStockoutPath, map[string]any{"zone": "us-central1-c", "count": 1000}); code != http.StatusAccepted {
			t.Fatalf("stockout = %d %s", code, body)
		}
		putPool(t, e, zonesAC(pool, 5, machine("e2-standard-8")))
		failed := waitLong(t, e, pool, "in error for the stockout of "+name(5), func(s resource.Substrate) bool {
			return s.PoolVersion == 5 && s.State == resource.StateError && strings.Contains(s.Message, name(5)) &&
				strings.Contains(s.Message, "GCE_STOCKOUT")
		})
		if got := poolNames(failed); !slices.Equal(got, []string{name(5), name(4)}) {
			t.Errorf("node pools during the stockout = %v, want the new one, then the old one", got)
		}
		if got := clusterPools(t, e, s.ClusterID); !slices.Contains(got, name(4)) {
			t.Errorf("the old pool %s is gone during the stockout of its replacement: %v", name(4), got)
		}
		e.waitEvents(t, s.ClusterID, map[string]int{"kubernetes.substrate.error": 1})
		putPool(t, e, zonesAC(pool, 6, machine("n1-standard-4")))
		readyOn(t, e, pool, 6, name(6), 2)

		samples := smp.end()
		if len(samples) < 20 {
			t.Fatalf("%d samples of the substrate (%d failed): too few to tell", len(samples), smp.errs)
		}
		low, at := minJoined(samples)
		if low < 2 {
			t.Errorf("joined nodes dropped to %d during the replacements (%s): the pools held 2 each", low, jsonOf(at))
		}
		if !sawListed(samples, name(2), name(1)) {
			t.Errorf("no sample listed the new pool and the old one, the old one last")
		}
		if got := clusterPools(t, e, s.ClusterID); !slices.Equal(got, []string{name(6)}) {
			t.Errorf("the cluster's node pools at the end = %v, want %s alone", got, name(6))
		}
		t.Logf("%d samples; the fewest joined nodes seen: %d", len(samples), low)
	})
	t.Run("teardown during a replacement", func(t *testing.T) {
		t.Parallel()
		pool := fmt.Sprintf("pool-r%d", poolSeq.Add(1))
		putPool(t, e, createPolicy(pool, 1, machine("e2-standard-4")))
		s := readyOn(t, e, pool, 1, "bc-"+pool+"-cpu", 2)
		putPool(t, e, createPolicy(pool, 2, machine("n2-standard-4")))
		waitLong(t, e, pool, "replacing its node pool", func(s resource.Substrate) bool { return len(s.NodePools) == 2 })
		archivePool(t, e, pool, 3)
		wait.Within(t, slowWait, "substrate deleted", func() (bool, string) {
			list, err := e.api.substrates(pool)
			return err == nil && len(list) == 0, jsonOf(list)
		})
		if _, err := e.api.getCluster(s.ClusterID); err == nil {
			t.Errorf("the substrate's cluster outlived its teardown")
		}
		e.waitEvents(t, s.ClusterID, map[string]int{"kubernetes.substrate.deleted": 1})
	})
}

// planError is an error answer with its details.
type planError struct {
	Error struct {
		Code    string `json:"code"`
		Details []struct {
			Field string `json:"field"`
		} `json:"details"`
	} `json:"error"`
}

// plan calls kubernetesSubstrates.plan with body; the answer's status and
// body.
func (c *client) plan(t *testing.T, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, c.url+"/api/compute/kubernetesSubstrates/plan", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// planOf plans pool and returns the answer's actions' kinds and the plan.
func planOf(t *testing.T, c *client, pool map[string]any) ([]string, resource.SubstratePlan) {
	t.Helper()
	code, body := c.plan(t, map[string]any{"tenantId": "acme", "pool": pool})
	var p resource.SubstratePlan
	if err := json.Unmarshal(body, &p); code != http.StatusOK || err != nil {
		t.Fatalf("plan = %d %s (%v)", code, body, err)
	}
	var kinds []string
	for _, a := range p.Actions {
		kinds = append(kinds, a.Action)
	}
	return kinds, p
}

// TestSubstratePlan asks kubernetesSubstrates.plan for every kind of
// action, from a pool's first event to its teardown, and checks that it
// changes nothing; a malformed pool is refused naming every broken field.
func TestSubstratePlan(t *testing.T) {
	t.Parallel()
	e := kubeEnv(t, nil)
	c := e.api
	pool := fmt.Sprintf("pool-p%d", poolSeq.Add(1))

	kinds, p := planOf(t, c, createPolicy(pool, 1, flavor("cpu", 1)))
	if want := []string{resource.PlanCreateCluster, resource.PlanApplyObjects}; !slices.Equal(kinds, want) {
		t.Errorf("plan of a new pool = %v, want %v", kinds, want)
	}
	if p.Substrate == nil || p.Substrate.ID != "" || p.Substrate.JoinedNodes != 2 || p.Substrate.State != resource.StateReady {
		t.Errorf("planned substrate = %s, want no id, ready with 2 nodes", jsonOf(p.Substrate))
	}
	if list, err := c.substrates(pool); err != nil || len(list) != 0 {
		t.Fatalf("plan made a substrate: %s %v", jsonOf(list), err)
	}

	putPool(t, e, createPolicy(pool, 1, flavor("cpu", 1)))
	s := waitLong(t, e, pool, "ready with 2 nodes", readyWith(2))
	before, err := c.listPools(s.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	cpu := "bc-" + pool + "-cpu"
	for _, tt := range []struct {
		name   string
		pool   map[string]any
		want   []string
		reason string // a part of the first action's reason
	}{
		// The policy the substrate has, as the pool's next version: a
		// run changes nothing, and the plan says so.
		{"the policy it has", createPolicy(pool, 2, flavor("cpu", 1)), []string{resource.PlanNone}, "the substrate is as the pool asks"},
		// bcd's objects select the same pool: nothing to apply.
		{"resize", createPolicy(pool, 2, flavor("cpu", 3)), []string{resource.PlanResizeNodePool}, "resized in place"},
		{"replace", createPolicy(pool, 2, machine("n2-standard-4")),
			[]string{resource.PlanReplaceNodePool, resource.PlanApplyObjects, resource.PlanApplyObjects}, "machineType cannot change in place"},
		{"a flavor for another", createPolicy(pool, 2, flavor("mem", 1)),
			[]string{resource.PlanCreateNodePool, resource.PlanDeleteNodePool, resource.PlanApplyObjects}, "flavor mem has no node pool"},
		{"archive", map[string]any{"id": pool, "tenantId": "acme", "version": 2}, []string{resource.PlanTeardown}, "deletes cluster bc-" + pool},
		{"an account without managed Kubernetes", func() map[string]any {
			p := createPolicy(pool, 2, flavor("cpu", 1))
			p["policy"].(map[string]any)["substrate"].(map[string]any)["account"] = "acc-metal"
			return p
		}(), []string{resource.PlanTeardown, resource.PlanNone}, "the pool no longer asks for this substrate"},
		{"adopt a cluster", adoptPolicy(pool, 2, s.ClusterID, flavor("cpu", 1)),
			[]string{resource.PlanTeardown, resource.PlanNone}, ""},
	} {
		kinds, p := planOf(t, c, tt.pool)
		if !slices.Equal(kinds, tt.want) {
			t.Errorf("%s: actions %v, want %v: %s", tt.name, kinds, tt.want, jsonOf(p.Actions))
			continue
		}
		if !strings.Contains(p.Actions[0].Reason, tt.reason) {
			t.Errorf("%s: reason %q, want it to hold %q", tt.name, p.Actions[0].Reason, tt.reason)
		}
		if tt.name == "resize" && (p.Actions[0].NodePool != cpu || p.Actions[0].To["nodeCount"] != float64(3)) {
			t.Errorf("resize: %s", jsonOf(p.Actions[0]))
		}
		if tt.name == "replace" && (p.Actions[0].To["nodePool"] != cpu+"-2" || p.Substrate.NodePools[0].Name != cpu+"-2") {
			t.Errorf("replace: %s", jsonOf(p))
		}
	}

	// Adopting a tenant's own cluster: its node pool, bcd's objects.
	own := c.createCluster(t, "plan-own", poolSpec("a", 1))
	wait.Within(t, slowWait, "cluster plan-own ready", func() (bool, string) {
		cl, err := c.getCluster(own.ID)
		return err == nil && cl.State == resource.StateReady, fmt.Sprint(cl.State, err)
	})
	other := fmt.Sprintf("pool-p%d", poolSeq.Add(1))
	kinds, _ = planOf(t, c, adoptPolicy(other, 1, own.ID, flavor("cpu", 1)))
	if want := []string{resource.PlanAdoptCluster, resource.PlanCreateNodePool, resource.PlanApplyObjects}; !slices.Equal(kinds, want) {
		t.Errorf("plan of an adoption = %v, want %v", kinds, want)
	}
	// A pool that asks for nothing and has nothing.
	if kinds, p := planOf(t, c, map[string]any{"id": other, "tenantId": "acme", "version": 1}); !slices.Equal(kinds, []string{resource.PlanNone}) || p.Substrate != nil {
		t.Errorf("plan of a pool asking for nothing = %v %s", kinds, jsonOf(p))
	}

	// Malformed: every broken field named, under pool.
	bad := createPolicy(pool, 0, map[string]any{"name": "CPU", "machineType": "e2-standard-4", "nodeCount": 1},
		map[string]any{"name": "mem", "machineType": "e2-standard-4", "nodeCount": 9, "autoscaling": map[string]any{"minNodes": 0, "maxNodes": 2}})
	bad["policy"].(map[string]any)["substrate"].(map[string]any)["cluster"] = map[string]any{}
	code, body := c.plan(t, map[string]any{"tenantId": "acme", "pool": bad})
	var pe planError
	_ = json.Unmarshal(body, &pe)
	var fields []string
	for _, d := range pe.Error.Details {
		fields = append(fields, d.Field)
	}
	slices.Sort(fields)
	want := []string{"pool.flavors[0].name", "pool.flavors[1].nodeCount", "pool.policy.substrate.cluster", "pool.version"}
	if code != http.StatusBadRequest || pe.Error.Code != "INVALID_INPUT" || !slices.Equal(fields, want) {
		t.Errorf("plan of a malformed pool = %d %s, want 400 INVALID_INPUT naming %v", code, body, want)
	}

	// Nothing the plans asked for was made.
	after, err := c.listPools(s.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	if jsonOf(after) != jsonOf(before) {
		t.Errorf("plans changed the substrate's node pools: %s, then %s", jsonOf(before), jsonOf(after))
	}
	if got, err := c.substrates(pool); err != nil || len(got) != 1 || got[0].PoolVersion != 1 || got[0].ID != s.ID {
		t.Errorf("plans changed the substrate: %s %v", jsonOf(got), err)
	}
	if got, err := c.substrates(other); err != nil || len(got) != 0 {
		t.Errorf("a plan made a substrate: %s %v", jsonOf(got), err)
	}
}
