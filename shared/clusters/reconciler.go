package clusters

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// GKE is the part of the GKE API the reconciler calls; the official
// container client has these methods.
type GKE interface {
	GetCluster(ctx context.Context, req *containerpb.GetClusterRequest, opts ...gax.CallOption) (*containerpb.Cluster, error)
	CreateCluster(ctx context.Context, req *containerpb.CreateClusterRequest, opts ...gax.CallOption) (*containerpb.Operation, error)
	DeleteCluster(ctx context.Context, req *containerpb.DeleteClusterRequest, opts ...gax.CallOption) (*containerpb.Operation, error)
	CreateNodePool(ctx context.Context, req *containerpb.CreateNodePoolRequest, opts ...gax.CallOption) (*containerpb.Operation, error)
	DeleteNodePool(ctx context.Context, req *containerpb.DeleteNodePoolRequest, opts ...gax.CallOption) (*containerpb.Operation, error)
	SetNodePoolSize(ctx context.Context, req *containerpb.SetNodePoolSizeRequest, opts ...gax.CallOption) (*containerpb.Operation, error)
	SetNodePoolAutoscaling(ctx context.Context, req *containerpb.SetNodePoolAutoscalingRequest, opts ...gax.CallOption) (*containerpb.Operation, error)
	GetOperation(ctx context.Context, req *containerpb.GetOperationRequest, opts ...gax.CallOption) (*containerpb.Operation, error)
	ListOperations(ctx context.Context, req *containerpb.ListOperationsRequest, opts ...gax.CallOption) (*containerpb.ListOperationsResponse, error)
	ListClusters(ctx context.Context, req *containerpb.ListClustersRequest, opts ...gax.CallOption) (*containerpb.ListClustersResponse, error)
}

// Store is what a cluster's run reads and writes (store.Store): its pools
// with its document, the intent of a provider call under its lease, and
// the statuses it leaves.
type Store interface {
	BeginClusterPools(r *chain.Reader, tenantID, clusterID string) func() ([]model.NodePool, error)
	RecordIntent(ctx context.Context, lease *chain.Lease, c *model.Cluster, nodePoolID string, in *model.Intent) error
	SaveClusterRun(tx chain.Tx, now chain.Doc, before, after store.ClusterRun, events []event.Event) ([]event.Event, []chain.Kick, error)
}

// Reconciler is the clusters' chain.Subject: a run of one cluster observes
// it at the provider, plans, makes at most one provider call and saves the
// statuses.
type Reconciler struct {
	store  Store
	gke    GKE
	now    func() time.Time
	budget *Budget
	lists  *listings // nil: every refresh observes with GetCluster
	nodeSA string    // the nodes' service account; empty: GKE's default
	imp    *Impersonation
	// groups reads the pools' nodes (WithNodeCounts); nil: not read.
	groups *groupListings
	// retryEvery is WithRetryEvery's.
	retryEvery time.Duration
}

var _ chain.Subject = (*Reconciler)(nil)

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithClock sets the runs' clock; nil (the default) means the real one.
func WithClock(c clock.PassiveClock) Option {
	return func(r *Reconciler) {
		if c != nil {
			r.now = c.Now
		}
	}
}

// WithBudget makes the runs spend each provider project's request quota
// within b.
func WithBudget(b *Budget) Option { return func(r *Reconciler) { r.budget = b } }

// WithListing makes steady refreshes observe their clusters through one
// ListClusters per project and location, shared for ttl (listings).
func WithListing(ttl time.Duration) Option {
	return func(r *Reconciler) { r.lists = &listings{ttl: ttl} }
}

// WithNodeServiceAccount makes every cluster and node pool the reconciler
// creates run its nodes as the service account email, instead of the
// project's Compute Engine default account (which GKE uses when none is
// given). The reconciler's own identity needs iam.serviceAccounts.actAs
// on it.
func WithNodeServiceAccount(email string) Option {
	return func(r *Reconciler) { r.nodeSA = email }
}

// New returns the clusters' reconciler; gke calls the provider as the
// reconciler's own identity (platform accounts; WithImpersonation for
// tenants').
func New(s Store, gke GKE, opts ...Option) (*Reconciler, error) {
	if s == nil || gke == nil {
		return nil, errors.New("clusters: New needs a store and a GKE client")
	}
	r := &Reconciler{store: s, gke: gke, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	if r.lists != nil {
		r.lists.budget, r.lists.now = r.budget, r.now
	}
	if r.groups != nil {
		r.groups.budget, r.groups.now = r.budget, r.now
	}
	if r.imp != nil && (r.imp.GKE == nil || r.imp.Identity.Tokens == nil) {
		return nil, errors.New("clusters: WithImpersonation needs a GKE client and tokens")
	}
	return r, nil
}

// Kind is the chain kind of clusters.
func (r *Reconciler) Kind() string { return store.ClustersKind }

// Load reads the cluster's pools. A steady cluster read outside the
// lease's transaction (a refresh that will most likely find nothing to do)
// is observed at the provider meanwhile, so that the refresh costs about
// the time of its reads.
func (r *Reconciler) Load(rd *chain.Reader, snap chain.Doc) (chain.Run, error) {
	u := &run{r: r}
	if err := u.decode(snap); err != nil {
		return nil, err
	}
	if !rd.InTransaction() && u.steady {
		u.observe(rd.Context())
		if u.putOff > 0 {
			return u, nil
		}
	}
	c := &u.read.Cluster
	return u.loadPools(rd.Context(), u.r.store.BeginClusterPools(rd, c.TenantID, c.ID))
}

var _ chain.Prefetcher = (*Reconciler)(nil)

// Prefetch starts a run's reads with its cluster's document rather than
// after it: the pools, and, when the kick's Hint names a steady cluster's
// provider coordinates (a steady run's successor), its provider reads.
// Those are used only if the document shows the cluster steady at the
// same coordinates; otherwise the run observes as Load does, and what
// the hint started is wasted (one GKE read), which only a cluster that
// changed since its last run can cost.
func (r *Reconciler) Prefetch(rd *chain.Reader, k chain.Kick) func(*chain.Reader, chain.Doc) (chain.Run, error) {
	pools := r.store.BeginClusterPools(rd, k.TenantID, k.ID)
	var early *run
	if spec, ok := parseHint(k.Hint); ok {
		early = &run{r: r, steady: true}
		early.read.Cluster.Spec = spec
		early.observe(rd.Context())
	}
	return func(rd *chain.Reader, snap chain.Doc) (chain.Run, error) {
		u := &run{r: r}
		if err := u.decode(snap); err != nil {
			return nil, err
		}
		if early != nil && u.steady && hintOf(&u.read.Cluster) == k.Hint {
			early.read.Cluster = u.read.Cluster
			u = early
		} else if u.steady {
			u.observe(rd.Context())
		}
		if u.putOff > 0 {
			return u, nil
		}
		return u.loadPools(rd.Context(), pools)
	}
}

// decode reads the cluster's document into the run.
func (u *run) decode(snap chain.Doc) error {
	c, err := store.DecodeCluster(snap)
	if err != nil {
		return err
	}
	u.read.Cluster = c
	u.steady = steady(&u.read.Cluster)
	return nil
}

// observe starts a steady run's provider reads, which Plan waits for:
// the cluster (GetCluster, or the project's shared listing) and, with
// node counts, the listing of the project's instance groups, all at once.
// It reads only the cluster's spec. A spent budget puts the run off
// (putOff) instead; a run whose account's identity cannot be had starts
// nothing and shows why when it plans.
func (u *run) observe(ctx context.Context) {
	r, c := u.r, &u.read.Cluster
	ctx = withTenant(ctx, c.TenantID)
	// A steady refresh put off, for whatever reason, writes nothing.
	if ok, wait, _ := r.budget.allow(c.Spec.Project, c.TenantID, true); !ok {
		u.putOff = wait
		return
	}
	u.allowed = true
	g, err := u.provider(ctx)
	if err != nil {
		return
	}
	u.prefetch = make(chan fetched, 1)
	if r.groups != nil {
		_, _ = u.startNodes(ctx)
	}
	n := namesOf(c)
	spec := c.Spec
	u.listed = r.lists != nil
	go func() {
		if r.lists != nil {
			pc, err := r.lists.get(ctx, g, spec.Impersonate, spec.Project, n.parent, spec.ProviderName)
			if err == nil && pc == nil {
				err = errNotListed
			}
			u.prefetch <- fetched{pc, err}
			return
		}
		if err := r.budget.take(ctx, spec.Project); err != nil {
			u.prefetch <- fetched{nil, err}
			return
		}
		pc, err := g.GetCluster(ctx, &containerpb.GetClusterRequest{Name: n.cluster})
		u.prefetch <- fetched{pc, err}
	}()
}

// hintOf is the Kick.Hint of a steady cluster's next run: the provider
// coordinates its provider reads need (observe), which the next run
// starts before its document arrives (Prefetch). They are joined by /,
// which none of them holds, and not by white space, which a header
// (tasks.HintHeader) loses at its ends.
func hintOf(c *model.Cluster) string {
	return strings.Join([]string{c.Spec.Project, c.Spec.Region, c.Spec.ProviderName, c.Spec.Impersonate}, "/")
}

// parseHint reads a hint that hintOf made; ok is false for any other.
func parseHint(h string) (model.ClusterSpec, bool) {
	f := strings.Split(h, "/")
	if len(f) != 4 || f[0] == "" || f[1] == "" || f[2] == "" {
		return model.ClusterSpec{}, false
	}
	return model.ClusterSpec{Project: f[0], Region: f[1], ProviderName: f[2], Impersonate: f[3]}, true
}

// loadPools waits for the cluster's pools (store.BeginNodePools) and
// keeps them in the run.
func (u *run) loadPools(ctx context.Context, wait func() ([]model.NodePool, error)) (chain.Run, error) {
	pools, err := wait()
	if err != nil {
		if u.prefetch != nil {
			<-u.prefetch
		}
		return nil, err
	}
	u.read.Pools = pools
	return u, nil
}

// steady reports whether a cluster is ready with nothing in flight at the
// cluster level: its next run will most likely only read GetCluster.
func steady(c *model.Cluster) bool {
	st, _ := model.ClusterState(c)
	pr := &c.Status.Provider
	return st == resource.StateReady && pr.Operation == "" && pr.Intent == nil
}

// fetched is a GetCluster's answer.
type fetched struct {
	cluster *containerpb.Cluster
	err     error
}

// run is one run of a cluster.
type run struct {
	r     *Reconciler
	read  store.ClusterRun // as read; never changed
	d     Decision
	retry bool // the call failed and is retried after a backoff
	// prefetch, when not nil, answers the GetCluster started by Load.
	prefetch chan fetched
	// steady: the cluster was ready with nothing in flight; allowed: the
	// budget let the run call the provider; putOff: it did not, and the
	// run is put off this long.
	steady  bool
	allowed bool
	putOff  time.Duration
	// listed: the prefetch is from a listing, which can only confirm.
	listed bool
	// gke acts in the cluster's project as its account, once provider
	// found it; gkeErr is why it could not.
	gke    GKE
	gkeErr error
	// nodes is the listing of the project's instance groups the run
	// started (startNodes); nodesErr is why it could not.
	nodes    *groupListing
	nodesErr error
	// nodesFresh: the nodes the run planned with are the pools' own
	// groups read afresh, not the project's shared listing.
	nodesFresh bool
	// woken are the kicks of the substrates the save woke.
	woken []chain.Kick
}

var _ chain.Waking = (*run)(nil)

// provider returns the run's GKE client for the cluster's account
// (Reconciler.provider), found once per run.
func (u *run) provider(ctx context.Context) (GKE, error) {
	if u.gke == nil && u.gkeErr == nil {
		u.gke, u.gkeErr = u.r.provider(ctx, &u.read.Cluster)
	}
	return u.gke, u.gkeErr
}

// errNotListed: a listing lacks the cluster; it is looked at with
// GetCluster.
var errNotListed = errors.New("not in the listing")

// Plan observes and plans, without the lease: a run whose decision calls
// the provider asks for the lease (Act).
func (u *run) Plan(ctx context.Context) (chain.Plan, error) {
	ctx = withTenant(ctx, u.read.Cluster.TenantID)
	if u.putOff > 0 {
		return chain.Plan{Outcome: chain.Outcome{Next: chain.Deferred, After: u.putOff, Hint: hintOf(&u.read.Cluster)}}, nil
	}
	if !u.allowed {
		if ok, wait, share := u.r.budget.allow(u.read.Cluster.Spec.Project, u.read.Cluster.TenantID, u.steady); !ok {
			if share && !u.steady {
				return chain.Plan{Outcome: u.waitShare(ctx, wait)}, nil
			}
			logging.FromContext(ctx).Info("The provider project's request budget is spent; putting the run off", "project", u.read.Cluster.Spec.Project, "after", wait.String())
			return chain.Plan{Outcome: chain.Outcome{Next: chain.Deferred, After: wait}}, nil
		}
		u.allowed = true
	}
	if err := u.plan(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			return chain.Plan{}, err
		}
		return chain.Plan{Outcome: u.failed(ctx, err)}, nil
	}
	if u.d.Action != nil {
		return chain.Plan{Act: true}, nil
	}
	return chain.Plan{Outcome: u.outcome()}, nil
}

// Act makes the planned call under the lease.
func (u *run) Act(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
	ctx = withTenant(ctx, u.read.Cluster.TenantID)
	var err error
	if u.retry, err = u.r.act(ctx, l, u.gke, namesOf(&u.read.Cluster), &u.d); err != nil {
		return chain.Outcome{}, err
	}
	if u.retry {
		lifecycle.RunFailed(&u.d.Cluster, u.d.Pools, u.failures(), u.d.failure, u.r.now().UTC().Truncate(time.Microsecond))
	}
	return u.outcome(), nil
}

// outcome is the run's outcome once it planned, and acted if it had to.
func (u *run) outcome() chain.Outcome {
	out := chain.Outcome{
		// A recorded intent is cleared or completed by the save.
		Changed:   u.d.Action != nil || len(u.d.Events) > 0 || u.changed(),
		Converged: converged(&u.read.Cluster, &u.d.Cluster),
		Hint:      u.hint(),
	}
	switch {
	case u.d.Deleted:
		out.Next = chain.Done
	case u.retry:
		out.Next = chain.Retry
	case u.d.Converging:
		out.Next, out.After = chain.Converging, opPoll(&u.d, u.r.now())
	}
	return out
}

// changed reports whether the run's decision leaves statuses other than
// those it read.
func (u *run) changed() bool {
	return !reflect.DeepEqual(u.read, store.ClusterRun{Cluster: u.d.Cluster, Pools: u.d.Pools})
}

// ShareWait is what a cluster's message says once its runs have been put
// off for their tenant's share of the provider's request quota for more
// than lifecycle.RetryShownAfter (API.md §10).
const ShareWait = "waiting for this tenant's share of the provider's request quota"

// waitShare is the outcome of a run put off for its tenant's share of the
// budget: put off by wait, with the wait's start recorded as a retry
// (written once, when it starts: a run short of budget may write) and
// said in the message once it has lasted a minute.
func (u *run) waitShare(ctx context.Context, wait time.Duration) chain.Outcome {
	logging.FromContext(ctx).Info("The tenant's share of the provider project's request budget is spent; putting the run off", "project", u.read.Cluster.Spec.Project, "after", wait.String())
	now := u.r.now().UTC().Truncate(time.Microsecond)
	d := Decision{Cluster: lifecycle.BeginRun(u.read.Cluster)}
	for _, p := range u.read.Pools {
		d.Pools = append(d.Pools, lifecycle.BeginNodePoolRun(p))
	}
	r := model.Retry{Since: now, Reason: ShareWait}
	if prev := u.read.Cluster.Status.Retrying; prev != nil && prev.Reason == ShareWait {
		r.Since = prev.Since
	}
	d.Cluster.Status.Retrying = &r
	if now.Sub(r.Since) > lifecycle.RetryShownAfter {
		lifecycle.ClusterWaiting(&d.Cluster, ShareWait, now)
		for i := range d.Pools {
			switch d.Pools[i].Status.State {
			case resource.StatePending, resource.StateUpdating, resource.StateDeleting:
				lifecycle.NodePoolWaiting(&d.Pools[i], ShareWait, now)
			}
		}
	}
	u.d = d
	return chain.Outcome{Next: chain.Deferred, Changed: u.changed(), After: wait}
}

// failures is the record of the failures before the run's: none when the
// runs before were put off for their tenant's share, which is a wait,
// not a failure, and whose start a failure must not take for its own.
func (u *run) failures() *model.Retry {
	if r := u.read.Cluster.Status.Retrying; r != nil && r.Reason != ShareWait {
		return r
	}
	return nil
}

// hint is the Kick.Hint of the run's successor: the cluster's provider
// coordinates when the run leaves it steady, so that the next run (most
// likely a refresh) reads the provider with its documents; else none.
func (u *run) hint() string {
	if u.d.Deleted || !steady(&u.d.Cluster) {
		return ""
	}
	return hintOf(&u.d.Cluster)
}

// failed is the outcome of a run that could not observe the cluster (the
// provider or the identity it acts as failing, the request budget spent):
// retried with backoff, with nothing changed but the record of the
// failures (lifecycle.RunFailed), so that failures that last are said on
// the cluster and its changing pools while their states stay. The status
// is written when that record or a message changes, not at every retry.
func (u *run) failed(ctx context.Context, err error) chain.Outcome {
	logging.FromContext(ctx).Warn("Reconcile run failed; retrying with backoff", "error", err)
	d := Decision{Cluster: lifecycle.BeginRun(u.read.Cluster)}
	for _, p := range u.read.Pools {
		d.Pools = append(d.Pools, lifecycle.BeginNodePoolRun(p))
	}
	lifecycle.RunFailed(&d.Cluster, d.Pools, u.failures(), reason(err), u.r.now().UTC().Truncate(time.Microsecond))
	u.d, u.retry = d, true
	return chain.Outcome{Next: chain.Retry, Changed: u.changed()}
}

// reason is a failure as the cluster's message says it: the error, with
// the provider's status put plainly ("get cluster: Unavailable: ...").
func reason(err error) string {
	msg := err.Error()
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		st := se.GRPCStatus()
		msg = strings.Replace(msg, fmt.Sprintf("rpc error: code = %s desc = ", st.Code()), st.Code().String()+": ", 1)
	}
	return msg
}

// plan observes the cluster at the provider and plans. A plan made on a
// listing that would change anything is made again on the cluster itself:
// a listing only confirms.
func (u *run) plan(ctx context.Context) error {
	o, err := u.observeAndPlan(ctx)
	if err != nil || o == nil {
		return err
	}
	if u.listed && (u.d.Action != nil || len(u.d.Events) > 0 || u.changed()) {
		u.listed = false
		if o, err = u.observeAndPlan(ctx); err != nil || o == nil {
			return err
		}
	}
	u.refine(ctx, o)
	return nil
}

// observation is what a run observed at the provider, and planned on.
type observation struct {
	g      GKE
	n      names
	in     Input
	pc     *containerpb.Cluster // nil when the provider has none
	opName string               // the operation in flight, if any
}

// observeAndPlan observes the cluster once (its intents, its operation in
// flight, the cluster) and plans on it. A run that cannot act in the
// cluster's project plans on that (planDenied) and returns no
// observation.
func (u *run) observeAndPlan(ctx context.Context) (*observation, error) {
	o := &observation{n: namesOf(&u.read.Cluster), in: u.input()}
	var err error
	if o.g, err = u.provider(ctx); err != nil {
		return nil, u.planDenied(ctx, o.in, err)
	}
	resolved, err := u.r.resolveIntents(ctx, o.g, o.n, &o.in)
	if err != nil {
		return nil, u.planDenied(ctx, o.in, err)
	}
	if denied, err := u.observeOperation(ctx, o); denied || err != nil {
		return nil, err
	}
	pc, readErr, err := u.readCluster(ctx, o, o.opName != "" || resolved)
	switch {
	case err != nil:
		return nil, err
	case status.Code(readErr) == codes.NotFound:
	case readErr != nil:
		return nil, u.planDenied(ctx, o.in, fmt.Errorf("get cluster: %w", readErr))
	default:
		o.pc, o.in.Observed = pc, observe(pc)
		u.readNodes(ctx, pc, o.in.Observed, o.in.Op != nil && (o.in.Op.Done || o.in.Op.Lost))
		// Only a change can wait: a steady refresh of a busy cluster
		// lists nothing.
		if o.opName == "" && !steady(&u.read.Cluster) && providerBusy(pc) {
			o.in.Observed.Operations = u.r.providerOperations(ctx, o.g, o.n, &u.read.Cluster)
		}
	}
	u.d = Plan(o.in, u.r.now())
	return o, nil
}

// input is the planner's input as the run read it, before it observes.
func (u *run) input() Input {
	in := Input{Cluster: u.read.Cluster.Clone(), Pools: make([]model.NodePool, len(u.read.Pools)), RetryEvery: u.r.retryEvery}
	for i, p := range u.read.Pools {
		in.Pools[i] = p.Clone()
	}
	return in
}

// observeOperation reads the operation in flight, if any (at most one
// is; the cluster's comes first, as in Plan), into o. denied: the read
// was refused in the cluster's project, and the run planned on that
// (planDenied).
func (u *run) observeOperation(ctx context.Context, o *observation) (denied bool, err error) {
	o.opName = o.in.Cluster.Status.Provider.Operation
	for _, p := range o.in.Pools {
		if o.opName == "" {
			o.opName = p.Status.Provider.Operation
		}
	}
	if o.opName == "" {
		return false, nil
	}
	if err := u.r.budget.take(ctx, u.read.Cluster.Spec.Project); err != nil {
		return false, err
	}
	op, err := o.g.GetOperation(ctx, &containerpb.GetOperationRequest{Name: o.n.operation(o.opName)})
	switch {
	case status.Code(err) == codes.NotFound:
		logging.FromContext(ctx).Warn("The provider lost an operation; planning from what it shows", "operation", o.opName)
		o.in.Op = &OpOutcome{Lost: true}
	case err != nil:
		err = u.planDenied(ctx, o.in, fmt.Errorf("get operation %s: %w", o.opName, err))
		return err == nil, err
	default:
		o.in.Op = outcome(op)
	}
	return false, nil
}

// readCluster reads the cluster at the provider: the answer the run
// prefetched, unless it must read again (reread: the cluster was read
// before its operation or an intent), or the listing it came from
// failed or lacks the cluster, which says nothing. readErr is the
// provider's answer; err the run's failure (its budget).
func (u *run) readCluster(ctx context.Context, o *observation, reread bool) (pc *containerpb.Cluster, readErr, err error) {
	if u.prefetch != nil {
		f := <-u.prefetch
		u.prefetch = nil
		if u.listed && f.err != nil {
			u.listed, reread = false, true
		}
		if !reread {
			return f.cluster, f.err, nil
		}
	}
	if err := u.r.budget.take(ctx, u.read.Cluster.Spec.Project); err != nil {
		return nil, nil, err
	}
	pc, readErr = o.g.GetCluster(ctx, &containerpb.GetClusterRequest{Name: o.n.cluster})
	return pc, readErr, nil
}

// refine plans again on what the first plan asks to look at more
// closely: the pools' own instance groups before a resize, and the
// provider's own operations before a change to a cluster it shows busy.
func (u *run) refine(ctx context.Context, o *observation) {
	in := &o.in
	if u.d.sizeDrift && !u.nodesFresh && in.Observed != nil {
		// So does the project's shared listing of instance groups,
		// which may predate the pool's last resize: read the pools'
		// own groups before resizing one back (one aggregatedList,
		// made only when a ready pool's size seems to differ). Should
		// it fail, the sizes are unknown, not the listing's.
		for name, op := range in.Observed.Pools {
			op.Nodes = nil
			in.Observed.Pools[name] = op
		}
		u.readNodes(ctx, o.pc, in.Observed, true)
		u.d = Plan(*in, u.r.now())
	}
	if u.d.Action != nil && in.Observed != nil && in.Observed.Operations == nil && o.opName == "" && steady(&u.read.Cluster) && providerBusy(o.pc) {
		// A cluster recorded steady lists no operation of the
		// provider's, but one changed at the provider meanwhile has a
		// change to make: it waits for them, as any change does,
		// rather than have its call refused.
		in.Observed.Operations = u.r.providerOperations(ctx, o.g, o.n, &u.read.Cluster)
		u.d = Plan(*in, u.r.now())
	}
}

// providerBusy reports whether the provider shows the cluster or one of
// its pools changing while no operation of ours is in flight: an
// operation it started itself may hold the run's calls.
func providerBusy(pc *containerpb.Cluster) bool {
	if pc.GetStatus() == containerpb.Cluster_RECONCILING {
		return true
	}
	for _, np := range pc.GetNodePools() {
		switch np.GetStatus() {
		case containerpb.NodePool_PROVISIONING, containerpb.NodePool_RECONCILING, containerpb.NodePool_STOPPING:
			return true
		}
	}
	return false
}

// providerOperations lists the operations the provider runs on the
// cluster on its own (a release-channel upgrade, a repair), for the
// planner to say what its changes wait for. It costs one call, made only
// while a change is under way and the provider shows the cluster busy
// with none of ours in flight.
// A listing that fails says nothing: the changes wait unexplained, as
// they would without it.
func (r *Reconciler) providerOperations(ctx context.Context, g GKE, n names, c *model.Cluster) []ObservedOperation {
	log := logging.FromContext(ctx)
	if err := r.budget.take(ctx, c.Spec.Project); err != nil {
		log.Warn("Cannot list the provider's operations", "error", err)
		return nil
	}
	resp, err := g.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: n.parent})
	if err != nil {
		log.Warn("Cannot list the provider's operations", "error", err)
		return nil
	}
	var ops []ObservedOperation
	target := "/clusters/" + c.Spec.ProviderName
	for _, op := range resp.GetOperations() {
		if st := op.GetStatus(); st != containerpb.Operation_RUNNING && st != containerpb.Operation_PENDING {
			continue
		}
		link := op.GetTargetLink()
		i := strings.Index(link, target)
		if i < 0 {
			continue
		}
		rest := link[i+len(target):]
		o := ObservedOperation{ID: op.GetName(), Type: op.GetOperationType().String()}
		switch {
		case rest == "":
		case strings.HasPrefix(rest, "/nodePools/"):
			o.Pool = strings.TrimPrefix(rest, "/nodePools/")
		default:
			continue // another cluster whose name starts with ours
		}
		ops = append(ops, o)
	}
	return ops
}

// planDenied plans a run that failed to observe the cluster with err.
// When the run cannot act in the cluster's project as its account (an
// *impersonate.AccessError, or the provider refusing a read in a tenant's
// project),
// the cluster shows what to grant as its error, and the run ends steady:
// the chain keeps looking at the steady pace and the cluster recovers by
// itself once the grant is back. Any other error is returned, and the run
// retried with backoff.
func (u *run) planDenied(ctx context.Context, in Input, err error) error {
	ae, ok := errors.AsType[*impersonate.AccessError](err)
	if !ok {
		ae = refusedInProject(&u.read.Cluster, err)
	}
	if ae == nil {
		return err
	}
	if u.prefetch != nil {
		<-u.prefetch
		u.prefetch = nil
	}
	logging.FromContext(ctx).Warn("Cannot act in the account's project; the cluster shows what to grant, and is looked at again at the steady pace",
		"project", u.read.Cluster.Spec.Project, "serviceAccount", u.read.Cluster.Spec.Impersonate, "error", ae.Err)
	in.Access = ae.Guidance
	u.listed = false
	u.d = Plan(in, u.r.now())
	return nil
}

// Save writes the statuses the run leaves, and wakes the cluster's
// substrates when it changes what they read of it.
func (u *run) Save(tx chain.Tx, now chain.Doc) ([]event.Event, error) {
	events, woken, err := u.r.store.SaveClusterRun(tx, now, u.read, store.ClusterRun{Cluster: u.d.Cluster, Pools: u.d.Pools}, u.d.Events)
	u.woken = woken
	return events, err
}

// Woken are the substrates' chains the last Save woke (chain.Waking).
func (u *run) Woken() []chain.Kick { return u.woken }

// act makes the decision's call: it records the intent first, so that a
// run killed after the call is followed by one that finds the operation
// rather than calling again. retry is true when the call failed for a
// reason worth retrying after a backoff.
func (r *Reconciler) act(ctx context.Context, l *chain.Lease, g GKE, n names, d *Decision) (retry bool, err error) {
	a := d.Action
	log := logging.FromContext(ctx)
	intent := &model.Intent{Kind: a.Kind, At: r.now().UTC().Truncate(time.Microsecond)}
	poolID := ""
	if a.Pool >= 0 {
		p := &d.Pools[a.Pool]
		poolID = p.ID
		intent.NodeCount = p.Spec.NodeCount
		log = log.With("nodePoolId", p.ID, "nodePool", p.Spec.Name)
	}
	if err := r.store.RecordIntent(ctx, l, &d.Cluster, poolID, intent); err != nil {
		return false, fmt.Errorf("record intent: %w", err)
	}
	log.Info("Calling the provider", "call", a.Kind)
	if err := r.budget.take(ctx, d.Cluster.Spec.Project); err != nil {
		// Nothing was called: the intent is dropped by the next run.
		return false, err
	}
	op, err := r.call(ctx, g, n, d)
	if err != nil {
		// A refused call did not happen: its intent is dropped when the
		// run's statuses are saved (the decision has none). A transient
		// error says nothing of whether it happened: its intent stays.
		if ae := refusedInProject(&d.Cluster, err); ae != nil {
			// The tenant's project no longer lets its account act: as
			// when a read is refused (planDenied), whatever the call.
			log.Warn("Cannot act in the account's project; the cluster shows what to grant, and is looked at again at the steady pace",
				"call", a.Kind, "project", d.Cluster.Spec.Project, "serviceAccount", d.Cluster.Spec.Impersonate, "error", err)
			deny(d, ae.Guidance, r.now().UTC().Truncate(time.Microsecond))
			return false, nil
		}
		f := fault(err)
		if f.Transient || a.Kind == DeleteNodePool || a.Kind == DeleteCluster {
			// Made again after a backoff. A refused delete is retried
			// the same way: the tenant's delete stands, and no error
			// state would help.
			log.Warn("Provider call failed; retrying with backoff", "call", a.Kind, "error", err)
			d.failure = a.Kind + ": " + reason(err)
			if f.Transient {
				// The provider may have done it and lost its answer,
				// and the client library's retry of a lost answer may
				// end in another error (a delete's retry meets the
				// operation the first made): the intent is saved with
				// the run, and the next run finds the operation, or
				// learns that there is none, before it calls anything
				// (resolveIntents).
				keepIntent(d, a, intent)
			}
			return true, nil
		}
		log.Info("The provider refused the call", "call", a.Kind, "reason", f.Message)
		Refused(d, f.Message, r.now())
		return false, nil
	}
	// The operation is named by the cluster's project and location, not
	// by its selfLink: GKE writes that with the project's number, and
	// zones/ for a zonal cluster, which GetOperation's name does not take.
	opName := n.operation(op.GetName())
	pr := &d.Cluster.Status.Provider
	if a.Pool >= 0 {
		p := &d.Pools[a.Pool].Status.Provider
		p.Operation, p.OperationKind, p.Intent = opName, a.Kind, intent
		return false, nil
	}
	pr.Operation, pr.OperationKind, pr.Intent = opName, a.Kind, intent
	return false, nil
}

// keepIntent records intent, without an operation, on the object of the
// decision's call.
func keepIntent(d *Decision, a *Action, intent *model.Intent) {
	if a.Pool >= 0 {
		d.Pools[a.Pool].Status.Provider.Intent = intent
		return
	}
	d.Cluster.Status.Provider.Intent = intent
}

func (r *Reconciler) call(ctx context.Context, g GKE, n names, d *Decision) (*containerpb.Operation, error) {
	a := d.Action
	switch a.Kind {
	case CreateCluster:
		pc := cluster(&d.Cluster, d.Pools)
		setNodeServiceAccount(r.nodeServiceAccount(&d.Cluster), pc, pc.GetNodePools()...)
		return g.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: n.parent, Cluster: pc})
	case DeleteCluster:
		return g.DeleteCluster(ctx, &containerpb.DeleteClusterRequest{Name: n.cluster})
	}
	p := &d.Pools[a.Pool]
	switch a.Kind {
	case CreateNodePool:
		np := nodePool(p)
		setNodeServiceAccount(r.nodeServiceAccount(&d.Cluster), nil, np)
		return g.CreateNodePool(ctx, &containerpb.CreateNodePoolRequest{Parent: n.cluster, NodePool: np})
	case DeleteNodePool:
		return g.DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: n.pool(p.Spec.Name)})
	case SetSize:
		return g.SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: n.pool(p.Spec.Name), NodeCount: int32(p.Spec.NodeCount)})
	case SetAutoscaling:
		return g.SetNodePoolAutoscaling(ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: n.pool(p.Spec.Name), Autoscaling: autoscaling(p.Spec.Autoscaling)})
	}
	return nil, fmt.Errorf("unknown call %q", a.Kind)
}
