package console

import (
	"slices"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
)

// stateChange is a state a cluster's or a node pool's document took, at
// the document's update time, with the reason it gave.
type stateChange struct {
	At             time.Time
	State, Message string
}

// maxChanges is how many state changes the console keeps of a cluster or
// a node pool: the newest.
const maxChanges = 200

// history is the states the console saw the clusters and node pools take,
// from their documents' changes (not from their events, which say
// nothing of updating or deleting), by clusterKey, and each pool's by its
// ID. The watcher writes it under its lock.
type history struct {
	clusters map[string][]stateChange
	pools    map[string]map[string][]stateChange
	names    map[string]map[string]string // the pools' names
}

func newHistory() *history {
	return &history{clusters: map[string][]stateChange{}, pools: map[string]map[string][]stateChange{},
		names: map[string]map[string]string{}}
}

// note appends the state a document holds at its update time to l, unless
// it is the state last recorded or older than it (a snapshot again after
// a reconnection).
func note(l []stateChange, at time.Time, state, msg string) []stateChange {
	if n := len(l); n > 0 && (l[n-1].State == state && l[n-1].Message == msg || at.Before(l[n-1].At)) {
		return l
	}
	l = append(l, stateChange{At: at, State: state, Message: msg})
	if len(l) > maxChanges {
		l = l[len(l)-maxChanges:]
	}
	return l
}

// cluster notes a cluster document's state.
func (h *history) cluster(c *model.Cluster, at time.Time) {
	st, msg := model.ClusterState(c)
	k := clusterKey(c.TenantID, c.ID)
	h.clusters[k] = note(h.clusters[k], at, string(st), msg)
}

// pool notes a node pool document's state.
func (h *history) pool(p *model.NodePool, at time.Time) {
	st, msg := model.NodePoolState(p)
	k := clusterKey(p.TenantID, p.ClusterID)
	if h.pools[k] == nil {
		h.pools[k], h.names[k] = map[string][]stateChange{}, map[string]string{}
	}
	h.pools[k][p.ID] = note(h.pools[k][p.ID], at, string(st), msg)
	h.names[k][p.ID] = p.Spec.Name
}

// laneHistory is what the history holds of a cluster and its pools: the
// cluster's changes under "", each pool's under its ID, and the pools'
// names.
type laneHistory struct {
	Changes map[string][]stateChange
	Names   map[string]string
}

// of copies what the history holds of a cluster.
func (h *history) of(tenant, id string) laneHistory {
	out := laneHistory{Changes: map[string][]stateChange{}, Names: map[string]string{}}
	k := clusterKey(tenant, id)
	if l := h.clusters[k]; len(l) > 0 {
		out.Changes[""] = slices.Clone(l)
	}
	for pool, l := range h.pools[k] {
		out.Changes[pool] = slices.Clone(l)
		out.Names[pool] = h.names[k][pool]
	}
	return out
}

// historyOf is what the watcher saw of a cluster's and its pools' states.
func (w *watcher) historyOf(tenant, id string) laneHistory {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hist.of(tenant, id)
}
