package clusters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/callctx"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
)

// Compute is the part of the Compute Engine API the reconciler reads; the
// official InstanceGroupManagersClient has it.
type Compute interface {
	AggregatedList(ctx context.Context, req *computepb.AggregatedListInstanceGroupManagersRequest, opts ...gax.CallOption) *compute.InstanceGroupManagersScopedListPairIterator
}

// NodeCounts is how the reconciler reads the nodes the provider runs for
// each pool (currentNodeCount): the instance groups GKE reports for the
// pool (instanceGroupUrls), read through Compute Engine's
// instanceGroupManagers, as Terraform derives a pool's size. It needs no
// access to the cluster's Kubernetes API, so it works for private clusters
// too.
type NodeCounts struct {
	// Compute acts as the reconciler's own identity.
	Compute Compute
	// Tenants carries no identity of its own: each call carries the
	// impersonated account's token (Impersonation.Identity) in its
	// authorization header. Nil: pools in tenants' projects show no count.
	Tenants Compute
	// TTL is how long one aggregated list of a project answers every run
	// of the clusters there.
	TTL time.Duration
}

// WithNodeCounts makes every run that looks at a cluster read its pools'
// nodes through nc: one aggregated list of instance groups per project
// (and identity), shared for nc.TTL by the clusters there and charged to
// the project's budget. Without it, pools show no currentNodeCount.
func WithNodeCounts(nc NodeCounts) Option {
	return func(r *Reconciler) {
		r.groups = &groupListings{compute: nc.Compute, tenants: nc.Tenants, ttl: nc.TTL}
	}
}

// WithRetryEvery says how often a pool the provider cannot fully provision
// (a stockout) is looked at again: the steady interval, which its message
// names.
func WithRetryEvery(d time.Duration) Option { return func(r *Reconciler) { r.retryEvery = d } }

// groupListings share the aggregated lists of instance groups of each
// project between the runs of its clusters.
type groupListings struct {
	compute, tenants Compute
	ttl              time.Duration
	budget           *Budget
	now              func() time.Time

	// wholeAnswers: Compute Engine refused groupFields once; listings
	// ask for whole groups.
	wholeAnswers atomic.Bool

	mu      sync.Mutex
	byScope map[string]*groupListing // by identity and project
}

// groupListing is one aggregated list, shared while it is fresh.
type groupListing struct {
	at     time.Time
	done   chan struct{}
	groups map[groupKey]group
	err    error
}

// groupKey names an instance group: its zone and name.
type groupKey struct{ zone, name string }

// group is what one instance group holds.
type group struct {
	target  int // targetSize: the instances it should have
	running int // currentActions.none: instances with nothing pending
}

// start returns the fresh listing of project's instance groups made as
// identity ("" for the reconciler's own) with token (its access token;
// nil for the reconciler's own), starting one if there is none: it does
// not wait for the answer (wait).
func (l *groupListings) start(ctx context.Context, identity string, token *oauth2.Token, project string) (*groupListing, error) {
	c := l.compute
	if identity != "" {
		c = l.tenants
	}
	if c == nil {
		return nil, errors.New("no Compute Engine client for this identity")
	}
	scope := identity + " " + project
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.byScope[scope]
	now := l.now()
	if e != nil && now.Sub(e.at) < l.ttl && !(isDone(e.done) && e.err != nil) {
		return e, nil
	}
	e = &groupListing{at: now, done: make(chan struct{})}
	if l.byScope == nil {
		l.byScope = map[string]*groupListing{}
	}
	l.byScope[scope] = e
	// As a cluster listing, it outlives the run that asked for it.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	go func() {
		defer cancel()
		defer close(e.done)
		if e.err = l.budget.take(lctx, project); e.err != nil {
			return
		}
		if token != nil {
			lctx = impersonate.WithToken(lctx, token)
		}
		e.groups, e.err = l.listGroups(lctx, c, project, "")
	}()
	return e, nil
}

// wait returns the listing's groups once it has them.
func (e *groupListing) wait(ctx context.Context) (map[groupKey]group, error) {
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.groups, e.err
}

// groupFields is the partial response a listing of instance groups asks
// for (Compute Engine's standard fields parameter, which the client sends
// as the X-Goog-FieldMask header): what a pool's nodes are counted from,
// not each group's whole configuration, nor the warnings an aggregated
// list gives for every one of the project's scopes (zones and regions)
// that has no group. It is the form clients use on instances'
// aggregatedList ("items/*/instances(name,zone,status),nextPageToken").
const groupFields = "items/*/instanceGroupManagers(name,zone,targetSize,currentActions/none),nextPageToken"

// listGroups reads the instance group managers of project that filter
// keeps ("": all), in all its zones: one call per page of 500, for the
// fields the counts need (groupFields). Should Compute Engine refuse the
// selection (400), the listing is made again without it, and the
// process asks for whole answers from then on: counts cost more but stay
// right.
func (l *groupListings) listGroups(ctx context.Context, c Compute, project, filter string) (map[groupKey]group, error) {
	if l.wholeAnswers.Load() {
		return listGroups(ctx, c, project, filter)
	}
	out, err := listGroups(callctx.SetHeaders(ctx, "X-Goog-FieldMask", groupFields), c, project, filter)
	if ge, ok := errors.AsType[*googleapi.Error](err); ok && ge.Code == http.StatusBadRequest {
		logging.FromContext(ctx).Warn("Compute Engine refused the instance groups' field selection; listing whole groups from now on", "error", err)
		l.wholeAnswers.Store(true)
		return listGroups(ctx, c, project, filter)
	}
	return out, err
}

func listGroups(ctx context.Context, c Compute, project, filter string) (map[groupKey]group, error) {
	out := map[groupKey]group{}
	req := &computepb.AggregatedListInstanceGroupManagersRequest{Project: project}
	if filter != "" {
		req.Filter = &filter
	}
	it := c.AggregatedList(ctx, req)
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list instance groups of project %s: %w", project, err)
		}
		for _, m := range pair.Value.GetInstanceGroupManagers() {
			out[groupKey{lastSegment(m.GetZone()), m.GetName()}] = group{target: int(m.GetTargetSize()), running: int(m.GetCurrentActions().GetNone())}
		}
	}
}

func lastSegment(u string) string { return u[strings.LastIndex(u, "/")+1:] }

// groupOfURL is the instance group an instanceGroupUrl names
// (.../zones/Z/instanceGroupManagers/NAME).
func groupOfURL(u string) (groupKey, bool) {
	parts := strings.Split(u, "/")
	n := len(parts)
	if n < 4 || parts[n-4] != "zones" || (parts[n-2] != "instanceGroupManagers" && parts[n-2] != "instanceGroups") {
		return groupKey{}, false
	}
	return groupKey{parts[n-3], parts[n-1]}, true
}

// PoolNodes are the nodes of a pool's instance groups.
type PoolNodes struct {
	// Running is the instances with nothing pending, in all zones.
	Running int
	// Target is the instances the groups should have.
	Target int
	// Short are the zones whose groups lack some (still creating them),
	// sorted.
	Short []string
	// Sizes are the instances the groups should have in each zone (their
	// targetSize): the size per zone asked of the provider, which a resize
	// sets (GKE's initialNodeCount stays the size the pool was created
	// with) and a stockout does not lower. Nil: not read.
	Sizes map[string]int
}

// startNodes starts the listing of the instance groups of the cluster's
// project, as its account, if the run has none yet: a steady refresh
// starts it with its GetCluster, so that the two overlap.
func (u *run) startNodes(ctx context.Context) (*groupListing, error) {
	if u.nodes != nil || u.nodesErr != nil {
		return u.nodes, u.nodesErr
	}
	c := &u.read.Cluster
	token, err := u.computeToken(ctx)
	if err != nil {
		u.nodesErr = err
		return nil, err
	}
	u.nodes, u.nodesErr = u.r.groups.start(ctx, c.Spec.Impersonate, token, c.Spec.Project)
	return u.nodes, u.nodesErr
}

// computeToken is the access token of the cluster's account for Compute
// Engine: nil for the reconciler's own, whose client carries it.
func (u *run) computeToken(ctx context.Context) (*oauth2.Token, error) {
	c := &u.read.Cluster
	if c.Spec.Impersonate == "" {
		return nil, nil
	}
	return u.r.identity().Token(ctx, c.Spec.Project, c.Spec.Impersonate)
}

// ownGroups reads the instance groups of the cluster's pools alone, now:
// one aggregated list filtered by their names, which the project's
// shared listing does not keep.
func (u *run) ownGroups(ctx context.Context, pc *containerpb.Cluster) (map[groupKey]group, error) {
	l := u.r.groups
	c := &u.read.Cluster
	client := l.compute
	if c.Spec.Impersonate != "" {
		client = l.tenants
	}
	if client == nil {
		return nil, errors.New("no Compute Engine client for this identity")
	}
	var names []string
	for _, np := range pc.GetNodePools() {
		for _, url := range np.GetInstanceGroupUrls() {
			if k, ok := groupOfURL(url); ok {
				names = append(names, regexp.QuoteMeta(k.name))
			}
		}
	}
	if len(names) == 0 {
		return map[groupKey]group{}, nil
	}
	token, err := u.computeToken(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.budget.take(ctx, c.Spec.Project); err != nil {
		return nil, err
	}
	if token != nil {
		ctx = impersonate.WithToken(ctx, token)
	}
	return l.listGroups(ctx, client, c.Spec.Project, fmt.Sprintf("name eq \"%s\"", strings.Join(names, "|")))
}

// readNodes reads the nodes of the observed cluster's pools into obs, as
// the cluster's account. A run that found its operation ended (anew)
// reads them afresh, so that a pool is not shown ready with the nodes it
// had before; the others share the project's listing. What cannot be
// read is left absent, and only logged: nothing else depends on it.
func (u *run) readNodes(ctx context.Context, pc *containerpb.Cluster, obs *ObservedCluster, anew bool) {
	if u.r.groups == nil {
		return
	}
	log := logging.FromContext(ctx)
	var groups map[groupKey]group
	var err error
	if anew {
		groups, err = u.ownGroups(ctx, pc)
	} else {
		var e *groupListing
		if e, err = u.startNodes(ctx); err == nil {
			groups, err = e.wait(ctx)
		}
	}
	// A run that plans again (a listing only confirms) reads afresh.
	u.nodes, u.nodesErr = nil, nil
	u.nodesFresh = anew && err == nil
	if err != nil {
		log.Warn("Cannot read the node pools' nodes", "project", u.read.Cluster.Spec.Project, "error", err)
		return
	}
	for _, np := range pc.GetNodePools() {
		op, ok := obs.Pools[np.GetName()]
		if !ok {
			continue
		}
		op.Nodes = poolNodes(np.GetInstanceGroupUrls(), groups)
		obs.Pools[np.GetName()] = op
	}
}

// poolNodes adds up the groups of a pool's instanceGroupUrls; nil when it
// has none yet or one is not in the listing.
func poolNodes(urls []string, groups map[groupKey]group) *PoolNodes {
	if len(urls) == 0 {
		return nil
	}
	n := &PoolNodes{Sizes: map[string]int{}}
	for _, u := range urls {
		k, ok := groupOfURL(u)
		if !ok {
			return nil
		}
		g, ok := groups[k]
		if !ok {
			return nil
		}
		n.Running += g.running
		n.Target += g.target
		n.Sizes[k.zone] += g.target
		if g.running < g.target && !slices.Contains(n.Short, k.zone) {
			n.Short = append(n.Short, k.zone)
		}
	}
	slices.Sort(n.Short)
	return n
}

// running is the pool's currentNodeCount: nil when unknown.
func (n *PoolNodes) running() *int {
	if n == nil {
		return nil
	}
	v := n.Running
	return &v
}

// setNodes records the observed nodes of pool np (lifecycle.NodePoolNodes).
func (p *planner) setNodes(np *model.NodePool) {
	var n *PoolNodes
	if p.obs != nil {
		n = p.obs.Pools[np.Spec.Name].Nodes
	}
	lifecycle.NodePoolNodes(np, n.running())
}
