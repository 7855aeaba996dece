package clusters

import (
	"context"
	"sync"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
)

// listings observe steady clusters in batches: one ListClusters per
// provider project and location answers the steady refreshes of every
// cluster there for TTL, instead of one GetCluster each. A listing can only
// confirm: a run whose plan from it would change anything observes its
// cluster again with GetCluster before it decides (run.plan), so a stale
// listing never makes a run act; at worst it delays noticing a change made
// at the provider behind the reconciler's back by TTL.
type listings struct {
	budget *Budget
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	byScope map[string]*listing // by identity and projects/P/locations/L
}

// listing is one ListClusters, shared by the refreshes that ask for it
// while it is fresh.
type listing struct {
	at       time.Time
	done     chan struct{}
	clusters map[string]*containerpb.Cluster // by name
	err      error
}

// get returns the provider's cluster name in parent (projects/P/locations/L)
// from a fresh listing, nil when the listing does not have it, or an error.
// A listing is made with g, which acts as identity (the impersonated
// service account; "" for the reconciler's own): it is shared only by
// clusters whose account acts as the same identity, so that a project
// never lists with another account's rights.
func (l *listings) get(ctx context.Context, g GKE, identity, project, parent, name string) (*containerpb.Cluster, error) {
	scope := identity + " " + parent
	l.mu.Lock()
	e := l.byScope[scope]
	now := l.now()
	if e == nil || now.Sub(e.at) >= l.ttl || (isDone(e.done) && e.err != nil) {
		e = &listing{at: now, done: make(chan struct{})}
		if l.byScope == nil {
			l.byScope = map[string]*listing{}
		}
		l.byScope[scope] = e
		l.mu.Unlock()
		// The listing outlives the run that asked for it: the others
		// waiting on it must not lose it when that run ends.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		go func() {
			defer cancel()
			defer close(e.done)
			if e.err = l.budget.take(lctx, project); e.err != nil {
				return
			}
			resp, err := g.ListClusters(lctx, &containerpb.ListClustersRequest{Parent: parent})
			if err != nil {
				e.err = err
				return
			}
			e.clusters = make(map[string]*containerpb.Cluster, len(resp.GetClusters()))
			for _, c := range resp.GetClusters() {
				e.clusters[c.GetName()] = c
			}
		}()
	} else {
		l.mu.Unlock()
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.clusters[name], nil
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
