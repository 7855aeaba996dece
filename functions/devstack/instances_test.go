package devstack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// listInstances asks the stack for GET /dev/instances.
func listInstances(t testing.TB, url string) []devstack.Instance {
	t.Helper()
	resp, err := http.Get(url + devstack.InstancesPath)
	if err != nil {
		t.Fatalf("GET %s: %v", devstack.InstancesPath, err)
	}
	defer resp.Body.Close()
	var out struct {
		Instances []devstack.Instance `json:"instances"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %s: %v", devstack.InstancesPath, resp.Status, err)
	}
	return out.Instances
}

func describe(ins []devstack.Instance) string {
	var out []string
	for _, in := range ins {
		out = append(out, fmt.Sprintf("%d: pid %d %s, %d requests", in.Index, in.PID, in.Addr, in.Requests))
	}
	return strings.Join(out, "; ")
}

// TestInstancesOne: with one instance the stack's own process serves the
// functions, and lists itself.
func TestInstancesOne(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	if suiteInstances() > 1 {
		t.Skip("the shared stack runs instances (DEVSTACK_INSTANCES)")
	}
	if _, err := e.api.getCluster("kcl_00000000000000000000000000"); err == nil {
		t.Fatal("get of a cluster that does not exist succeeded")
	}
	ins := listInstances(t, e.URL)
	if len(ins) != 1 || ins[0].PID != os.Getpid() || ins[0].Index != 0 || ins[0].Requests < 1 || ins[0].StartedAt.IsZero() {
		t.Errorf("instances = %s, want this process alone, with the requests it served", describe(ins))
	}
}

// TestInstances runs the functions in three processes: each serves its
// share of the requests, a cluster converges through them, and an
// instance killed with SIGKILL is replaced by another process at its
// index about a second later while the others serve.
func TestInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	e := startEnv(t, instancesConfig(3))
	ins := listInstances(t, e.URL)
	pids := map[int]bool{}
	for i, in := range ins {
		if in.Index != i || in.PID == 0 || in.PID == os.Getpid() || in.Addr == "" || pids[in.PID] {
			t.Fatalf("instances = %s, want three processes of their own, by index", describe(ins))
		}
		pids[in.PID] = true
	}
	if len(ins) != 3 {
		t.Fatalf("instances = %s, want 3", describe(ins))
	}

	cl := e.api.createCluster(t, "instances", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	for range 6 {
		if _, err := e.api.getCluster(cl.ID); err != nil {
			t.Fatalf("get cluster: %v", err)
		}
	}
	ins = listInstances(t, e.URL)
	for _, in := range ins {
		// Round robin: the calls above and the reconcile runs.
		if in.Requests < 2 {
			t.Errorf("instance %d served %d requests, want its share: %s", in.Index, in.Requests, describe(ins))
		}
	}

	victim := ins[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The others serve meanwhile. A request that reached the process as
	// it died is answered UNAVAILABLE, which a client retries, as on
	// Cloud Run.
	for range 6 {
		var got resource.Cluster
		if err := callRetrying(e.api, "kubernetesClusters/get", map[string]any{"tenantId": "acme", "clusterId": cl.ID}, &got); err != nil {
			t.Errorf("get cluster after a kill: %v", err)
		}
	}
	if d := time.Since(killed); d > time.Second {
		t.Logf("the calls after the kill took %v", d)
	}
	var back devstack.Instance
	wait.For(t, "another process at index 1", func() (bool, string) {
		for _, in := range listInstances(t, e.URL) {
			if in.Index == 1 && in.PID != victim.PID {
				back = in
				return true, ""
			}
		}
		return false, describe(listInstances(t, e.URL))
	})
	if d := back.StartedAt.Sub(killed); d < 500*time.Millisecond {
		t.Errorf("instance 1 started again %v after the kill, want about a second", d)
	}
	wait.For(t, "the new instance serving", func() (bool, string) {
		_, _ = e.api.getCluster(cl.ID)
		for _, in := range listInstances(t, e.URL) {
			if in.Index == 1 && in.PID == back.PID && in.Requests > 0 {
				return true, ""
			}
		}
		return false, describe(listInstances(t, e.URL))
	})
	// Work goes on through the new set.
	a := poolByName(t, e.api, cl.ID, "a")
	e.api.updatePool(t, cl.ID, a.ID, map[string]any{"nodeCount": 2})
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	e.checkEvents(t, cl, map[string]int{event.ClusterReady: 1, event.NodePoolReady + "/" + a.ID: 2})
}
