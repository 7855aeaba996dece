package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/tasks"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestDuplicateDeliveryAndLostCreates runs the product under Cloud Tasks
// as it delivers: half the attempts delivered twice at the same moment,
// and a third of the CreateTask calls answered DEADLINE_EXCEEDED or
// UNAVAILABLE after the task was created. The watchdog never runs, so a
// chain that died would never converge. Every chain converges, each
// provider change is made once, each event is published for one change,
// and each chain goes on as one.
func TestDuplicateDeliveryAndLostCreates(t *testing.T) {
	cfg := fastConfig()
	cfg.TasksDuplicateRate = 0.5
	cfg.WatchdogInterval = time.Hour
	e := startEnv(t, cfg)
	e.Tasks.LoseShare("CreateTask", 0.2, codes.DeadlineExceeded, "context deadline exceeded")
	e.Tasks.LoseShare("CreateTask", 0.15, codes.Unavailable, "connection reset")
	c := e.api

	const n = 3
	var ids []string
	for i := range n {
		cl := c.createCluster(t, fmt.Sprintf("dup-%d", i), poolSpec("a", 1), poolSpec("b", 1))
		ids = append(ids, cl.ID)
	}
	for _, id := range ids {
		c.waitNeverError(t, id)
	}
	added := map[string]string{}
	for _, id := range ids {
		added[id] = c.createPool(t, id, poolSpec("c", 1)).ID
	}
	for _, id := range ids {
		c.waitNeverError(t, id)
	}
	resized := map[string]string{}
	for _, id := range ids {
		a := poolByName(t, c, id, "a")
		c.updatePool(t, id, a.ID, map[string]any{"nodeCount": 2})
		resized[id] = a.ID
	}
	for _, id := range ids {
		c.waitNeverError(t, id)
	}
	gone := ids[n-1]
	c.deleteCluster(t, gone)
	wait.For(t, "the deleted cluster gone", func() (bool, string) {
		_, err := c.getCluster(gone)
		return err != nil, fmt.Sprintf("still there (%v)", err)
	})
	// Steady chains meet the same deliveries for a few refreshes: each
	// live cluster's chain schedules three more runs.
	live := ids[:n-1]
	runs := newRunsSeen(e, live)
	wait.For(t, "three more runs of each live cluster's chain under the faults", runs.atLeast(3))

	stats := e.Tasks.Stats()
	lost := e.Tasks.Lost("CreateTask")
	t.Logf("Cloud Tasks: %+v; %d of %d CreateTask answers lost", stats, lost, e.Tasks.Calls("CreateTask"))
	if stats.Duplicated == 0 || lost == 0 {
		t.Fatalf("duplicated %d attempts, lost %d create answers; want both faults to have happened", stats.Duplicated, lost)
	}
	e.Tasks.SetDuplicateRate(0)
	e.Tasks.RemoveFaults()

	for rpc, want := range map[string]int{
		"CreateCluster": n, "CreateNodePool": n, "SetNodePoolSize": n, "DeleteCluster": 1,
	} {
		if got := e.GKE.Calls(rpc); got != want {
			t.Errorf("GKE %s calls = %d, want %d (one per change)", rpc, got, want)
		}
	}
	for _, id := range ids[:n-1] {
		cl, err := c.getCluster(id)
		if err != nil || cl.State != resource.StateReady {
			t.Errorf("cluster %s = %v, %v; want ready", id, cl.State, err)
		}
		e.checkEvents(t, cl, map[string]int{
			event.ClusterReady: 1, event.ClusterUpdated: 2, event.NodePoolReady + "/" + added[id]: 1,
			event.NodePoolReady + "/" + resized[id]: 2, event.ClusterError: 0, event.NodePoolError: 0,
		})
	}

	// One chain per live cluster, none for the deleted one: once the
	// retries the faults caused are over, each live cluster has one
	// waiting task of its current token, and no second one appears over
	// two steady refreshes (a forked chain would keep two).
	current := func(id string) (waiting, other []string) {
		tok := e.clusterDoc(t, id).Reconcile.Token
		now := time.Now()
		for _, tk := range e.pendingTasks() {
			var p tasks.Payload
			if err := json.Unmarshal(tk.GetHttpRequest().GetBody(), &p); err != nil || p.ID != id {
				continue
			}
			// A task due is being dispatched; its successor may exist
			// already.
			if p.Token == tok && tk.GetScheduleTime().AsTime().After(now) {
				waiting = append(waiting, path.Base(tk.GetName()))
			} else {
				other = append(other, path.Base(tk.GetName()))
			}
		}
		return waiting, other
	}
	for _, id := range ids[:n-1] {
		wait.For(t, "one waiting task of cluster "+id, func() (bool, string) {
			w, o := current(id)
			return len(w) == 1 && len(o) == 0, fmt.Sprintf("waiting %v, other %v", w, o)
		})
	}
	wait.For(t, "no task of the deleted cluster", func() (bool, string) {
		var names []string
		for _, tk := range e.pendingTasks() {
			if bytes.Contains(tk.GetHttpRequest().GetBody(), []byte(gone)) {
				names = append(names, path.Base(tk.GetName()))
			}
		}
		return len(names) == 0, fmt.Sprintf("tasks %v", names)
	})
	// Over two more steady runs of each, looked at as often as a wait
	// looks, no cluster ever has two.
	runs = newRunsSeen(e, live)
	wait.For(t, "two more runs of each live cluster's chain, none forked", func() (bool, string) {
		for _, id := range live {
			if w, _ := current(id); len(w) > 1 {
				t.Fatalf("cluster %s has %d waiting tasks of its chain (%v), want one: the chain forked", id, len(w), w)
			}
		}
		return runs.atLeast(2)()
	})
}

// runsSeen counts the runs of clusters' chains that have been scheduled
// since it began: the distinct tasks of each seen waiting, the first look's
// aside.
type runsSeen struct {
	e     *env
	ids   []string
	first map[string]bool
	seen  map[string]map[string]bool
}

func newRunsSeen(e *env, ids []string) *runsSeen {
	r := &runsSeen{e: e, ids: ids, first: map[string]bool{}, seen: map[string]map[string]bool{}}
	for _, id := range ids {
		r.seen[id] = map[string]bool{}
	}
	for _, tk := range e.pendingTasks() {
		r.first[tk.GetName()] = true
	}
	return r
}

// atLeast is a wait's condition: k new tasks of each cluster's seen.
func (r *runsSeen) atLeast(k int) func() (bool, string) {
	return func() (bool, string) {
		for _, tk := range r.e.pendingTasks() {
			var p tasks.Payload
			if r.first[tk.GetName()] || json.Unmarshal(tk.GetHttpRequest().GetBody(), &p) != nil {
				continue
			}
			if seen, ok := r.seen[p.ID]; ok {
				seen[tk.GetName()] = true
			}
		}
		var counts []string
		done := true
		for _, id := range r.ids {
			counts = append(counts, fmt.Sprintf("%s: %d", id, len(r.seen[id])))
			done = done && len(r.seen[id]) >= k
		}
		return done, fmt.Sprintf("new tasks seen %s, want %d each", strings.Join(counts, ", "), k)
	}
}

// A duplicate rate that is not a share is refused before anything starts.
func TestTasksDuplicateRateFlag(t *testing.T) {
	for _, v := range []string{"-0.1", "1.5", "NaN", "x"} {
		var stderr bytes.Buffer
		err := devstack.Command(context.Background(), []string{"-tasks-duplicate-rate", v}, io.Discard, &stderr)
		if err == nil || !strings.Contains(stderr.String(), "tasks-duplicate-rate") {
			t.Errorf("-tasks-duplicate-rate %s: %v (stderr %q), want it refused", v, err, stderr.String())
		}
	}
}
