package console

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/store"
)

// watcher keeps every cluster, node pool and substrate in memory, from
// the store's listeners (store.ListenClusters and the others): the
// fleet's page reads no document, and its streams hear of each change.
// It starts with the first view of the fleet, so that a stack nobody
// looks at pays nothing.
type watcher struct {
	store *store.Store
	once  sync.Once
	mu    sync.Mutex
	// By document path.
	clusters   map[string]model.Cluster
	pools      map[string]model.NodePool
	substrates map[string]model.Substrate
	// runs are the reconcile runs seen of each cluster (tenant/id), the
	// latest maxRuns: a run takes the cluster's lease and gives it back.
	runs    map[string][]Run
	leases  map[string]lease // the cluster's lease, as last seen
	hist    *history         // the states seen, for the timelines
	started time.Time
	// version counts the changes seen: a page rendered at a version
	// tells its stream whether the fleet changed since.
	version uint64
	synced  int           // listeners whose first snapshot came
	ready   chan struct{} // closed once all kinds' came
	changed chan struct{} // closed, and replaced, at each change
	// waiters wait for a change of one cluster (clusterKey: the cluster,
	// its pools, its substrate) or substrate (substrateKey), each closed
	// at the first change of any key it waits on (changedOf).
	waiters map[string][]*waiter
}

// waiter is a channel closed at a change; done once closed, or once
// nobody waits on it.
type waiter struct {
	ch   chan struct{}
	done bool
}

// substrateKey is a substrate's key of changedOf.
func substrateKey(tenant, id string) string { return "substrate:" + tenant + "/" + id }

func newWatcher(st *store.Store) *watcher {
	return &watcher{store: st, clusters: map[string]model.Cluster{}, pools: map[string]model.NodePool{},
		substrates: map[string]model.Substrate{}, ready: make(chan struct{}), changed: make(chan struct{}),
		runs: map[string][]Run{}, leases: map[string]lease{}, hist: newHistory(), waiters: map[string][]*waiter{}}
}

// start listens until ctx ends (once).
func (w *watcher) start(ctx context.Context, wg *sync.WaitGroup) {
	w.once.Do(func() {
		w.mu.Lock()
		w.started = time.Now()
		w.mu.Unlock()
		wg.Add(3)
		go func() {
			defer wg.Done()
			listen(ctx, w, kindClusters, w.store.ListenClusters, w.applyCluster)
		}()
		go func() {
			defer wg.Done()
			listen(ctx, w, kindPools, w.store.ListenNodePools, w.applyPool)
		}()
		go func() {
			defer wg.Done()
			listen(ctx, w, kindSubstrates, w.store.ListenSubstrates, w.applySubstrate)
		}()
	})
}

// docKind is the kind of the documents a listener holds.
type docKind int

const (
	kindClusters docKind = iota
	kindPools
	kindSubstrates
	kinds // how many
)

// listen keeps the watcher's documents of kind from the store's listener
// open, applying each change with apply, and listens again a second after
// it breaks, until ctx ends.
func listen[T any](ctx context.Context, w *watcher, kind docKind, open func(context.Context) *store.Listener[T], apply func(store.Change[T])) {
	first := true
	for ctx.Err() == nil {
		l := open(ctx)
		reset := true
		for {
			changes, err := l.Next()
			if err != nil {
				break
			}
			w.mu.Lock()
			if reset {
				w.clear(kind)
				w.touchAll()
				reset = false
			}
			for _, ch := range changes {
				// Who waits on the document, as it was and as it is.
				w.touchDoc(kind, ch.Key)
				apply(ch)
				w.touchDoc(kind, ch.Key)
			}
			if first {
				first = false
				if w.synced++; w.synced == int(kinds) {
					close(w.ready)
				}
			}
			w.version++
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
		}
		l.Stop()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (w *watcher) clear(kind docKind) {
	switch kind {
	case kindClusters:
		clear(w.clusters)
	case kindPools:
		clear(w.pools)
	default:
		clear(w.substrates)
	}
}

// applyCluster, applyPool and applySubstrate keep a change of a document,
// by its key (its path). Called with w.mu held.
func (w *watcher) applyCluster(ch store.Change[store.WatchedCluster]) {
	v := ch.Value.Cluster
	if ch.Gone || v.ID == "" || v.TenantID == "" {
		delete(w.clusters, ch.Key)
		return
	}
	w.clusters[ch.Key] = v
	w.hist.cluster(&v, ch.UpdateTime)
	w.run(v, ch.Value.Reconcile.LeaseOwner, ch.Value.Reconcile.NextAt, ch.UpdateTime)
}

func (w *watcher) applyPool(ch store.Change[model.NodePool]) {
	v := ch.Value
	if ch.Gone || v.ClusterID == "" {
		delete(w.pools, ch.Key)
		return
	}
	w.pools[ch.Key] = v
	w.hist.pool(&v, ch.UpdateTime)
}

func (w *watcher) applySubstrate(ch store.Change[model.Substrate]) {
	v := ch.Value
	if ch.Gone || v.ID == "" {
		delete(w.substrates, ch.Key)
		return
	}
	w.substrates[ch.Key] = v
}

// wait waits for the first snapshots.
func (w *watcher) wait(ctx context.Context) error {
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		return errors.New("the fleet is still being read: " + ctx.Err().Error())
	}
}

// isReady reports whether the first snapshots came.
func (w *watcher) isReady() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// fleet is the fleet now, a channel closed at its next change, and its
// version.
func (w *watcher) fleet() (*Fleet, <-chan struct{}, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cls := make([]model.Cluster, 0, len(w.clusters))
	for _, c := range w.clusters {
		cls = append(cls, c)
	}
	pools := make([]model.NodePool, 0, len(w.pools))
	for _, p := range w.pools {
		pools = append(pools, p)
	}
	subs := make([]model.Substrate, 0, len(w.substrates))
	for _, s := range w.substrates {
		subs = append(subs, s)
	}
	return buildFleet(cls, pools, subs), w.changed, w.version
}

// Run is a reconcile run of a cluster as the console saw it: from the
// write that took the cluster's lease to the one that gave it back, and
// what the cluster's status said then (what the run decided, or why it
// waits).
type Run struct {
	Start, End time.Time
	// StartSeen says the console saw the lease taken: a run that began
	// and ended between two of its snapshots has no known duration.
	StartSeen         bool
	State, Message    string
	Operation, OpKind string
}

const maxRuns = 200

// lease is what the console last saw of a cluster's chain.
type lease struct {
	owner  string
	nextAt time.Time
}

// run notes a change of the cluster's chain: a run begun (the lease
// taken) or ended (given back, with the next run's time). A run begun and
// ended between two snapshots is seen at its end only.
func (w *watcher) run(cl model.Cluster, owner string, nextAt, at time.Time) {
	k := clusterKey(cl.TenantID, cl.ID)
	prev, seen := w.leases[k]
	w.leases[k] = lease{owner, nextAt}
	if !seen || (prev.owner == owner && (owner != "" || prev.nextAt.Equal(nextAt))) {
		return
	}
	l := w.runs[k]
	open := len(l) > 0 && l[len(l)-1].End.IsZero()
	if owner == "" || prev.owner != "" {
		// A run ended: the open one, or one whose start was not seen.
		if !open {
			l = append(l, Run{Start: at})
		}
		r := &l[len(l)-1]
		st, msg := model.ClusterState(&cl)
		r.End, r.State, r.Message = at, string(st), msg
		r.Operation, r.OpKind = cl.Status.Provider.Operation, cl.Status.Provider.OperationKind
	}
	if owner != "" {
		l = append(l, Run{Start: at, StartSeen: true})
	}
	if len(l) > maxRuns {
		l = l[len(l)-maxRuns:]
	}
	w.runs[k] = l
}

// runsOf are the runs seen of a cluster, and since when the console
// watches.
func (w *watcher) runsOf(tenant, id string) ([]Run, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Run(nil), w.runs[clusterKey(tenant, id)]...), w.started
}

// changedOf is a channel closed at the next change of any of keys
// (clusterKey, substrateKey): what a page's stream waits on, so that
// it reads its subject again only when that changed. Its stop is called
// once the caller no longer waits, so that nothing is kept for it.
func (w *watcher) changedOf(keys ...string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt := &waiter{ch: make(chan struct{})}
	for _, k := range keys {
		l := w.waiters[k]
		kept := l[:0]
		for _, o := range l {
			if !o.done {
				kept = append(kept, o)
			}
		}
		clear(l[len(kept):])
		w.waiters[k] = append(kept, wt)
	}
	return wt.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		wt.done = true // dropped at the key's next change or wait
	}
}

// touchDoc wakes the waiters of the document of kind at path, as the
// watcher holds it. Called with w.mu held.
func (w *watcher) touchDoc(kind docKind, path string) {
	switch kind {
	case kindClusters:
		if v, ok := w.clusters[path]; ok {
			w.touch(clusterKey(v.TenantID, v.ID))
		}
	case kindPools:
		if v, ok := w.pools[path]; ok {
			w.touch(clusterKey(v.TenantID, v.ClusterID))
		}
	default:
		if v, ok := w.substrates[path]; ok {
			w.touch(substrateKey(v.TenantID, v.ID))
			if id := v.ClusterID(); id != "" {
				w.touch(clusterKey(v.TenantID, id))
			}
		}
	}
}

// touch wakes the waiters of key. Called with w.mu held.
func (w *watcher) touch(key string) {
	for _, wt := range w.waiters[key] {
		if !wt.done {
			wt.done = true
			close(wt.ch)
		}
	}
	delete(w.waiters, key)
}

// touchLogged wakes the waiters of a resource the log has a new line of
// (LogTap.OnNote): a cluster (kind "cluster") or a substrate, and the
// substrate's cluster, whose page shows it too. A line that names no
// tenant wakes the resource of that ID in any tenant.
func (w *watcher) touchLogged(kind, tenant, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waiters) == 0 {
		return // no stream waits
	}
	if kind == "cluster" {
		if tenant != "" {
			w.touch(clusterKey(tenant, id))
			return
		}
		for k := range w.waiters {
			if !strings.HasPrefix(k, "substrate:") && strings.HasSuffix(k, "/"+id) {
				w.touch(k)
			}
		}
		return
	}
	if tenant != "" {
		w.touch(substrateKey(tenant, id))
	} else {
		for k := range w.waiters {
			if strings.HasPrefix(k, "substrate:") && strings.HasSuffix(k, "/"+id) {
				w.touch(k)
			}
		}
	}
	for _, v := range w.substrates {
		if v.ID == id && (tenant == "" || v.TenantID == tenant) {
			if cid := v.ClusterID(); cid != "" {
				w.touch(clusterKey(v.TenantID, cid))
			}
		}
	}
}

// touchAll wakes every waiter (a listener starts again from a new
// snapshot). Called with w.mu held.
func (w *watcher) touchAll() {
	for k := range w.waiters {
		w.touch(k)
	}
}
