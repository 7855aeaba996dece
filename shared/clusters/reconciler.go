package clusters

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/firestore"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
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
}

// Reconciler is the clusters' chain.Subject: a run of one cluster observes
// it at the provider, plans, makes at most one provider call and saves the
// statuses.
type Reconciler struct {
	store  *store.Store
	gke    GKE
	now    func() time.Time
	nodeSA string // the nodes' service account; empty: GKE's default
}

var _ chain.Subject = (*Reconciler)(nil)

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithNodeServiceAccount makes every cluster and node pool the reconciler
// creates run its nodes as the service account email, instead of the
// project's Compute Engine default account (which GKE uses when none is
// given). The reconciler's own identity needs iam.serviceAccounts.actAs
// on it.
func WithNodeServiceAccount(email string) Option {
	return func(r *Reconciler) { r.nodeSA = email }
}

// New returns the clusters' reconciler. now is the clock (nil: time.Now).
func New(s *store.Store, gke GKE, now func() time.Time, opts ...Option) (*Reconciler, error) {
	if s == nil || gke == nil {
		return nil, errors.New("clusters: New needs a store and a GKE client")
	}
	if now == nil {
		now = time.Now
	}
	r := &Reconciler{store: s, gke: gke, now: now}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Kind is the chain kind of clusters.
func (r *Reconciler) Kind() string { return store.ClustersKind }

// Ref is the document of the kick's cluster.
func (r *Reconciler) Ref(k chain.Kick) *firestore.DocumentRef {
	return r.store.ClusterRef(k.TenantID, k.ID)
}

// Load reads the cluster's pools in the lease's transaction.
func (r *Reconciler) Load(tx *firestore.Transaction, snap *firestore.DocumentSnapshot) (chain.Run, error) {
	in, err := r.store.LoadClusterRun(tx, snap)
	if err != nil {
		return nil, err
	}
	return &run{r: r, read: in}, nil
}

// run is one run of a cluster.
type run struct {
	r    *Reconciler
	read store.ClusterRun // as the lease read it; never changed
	d    Decision
}

// Step observes, plans and makes the planned call.
func (u *run) Step(ctx context.Context, l *chain.Lease) (chain.Outcome, error) {
	log := logging.FromContext(ctx)
	n := namesOf(&u.read.Cluster)
	in := Input{Cluster: u.read.Cluster.Clone(), Pools: make([]lifecycle.NodePool, len(u.read.Pools))}
	for i, p := range u.read.Pools {
		in.Pools[i] = p.Clone()
	}
	if err := u.r.resolveIntents(ctx, n, &in); err != nil {
		return chain.Outcome{}, err
	}
	// At most one operation is in flight; the cluster's comes first, as
	// in Plan.
	opName := in.Cluster.Status.Provider.Operation
	for _, p := range in.Pools {
		if opName == "" {
			opName = p.Status.Provider.Operation
		}
	}
	if opName != "" {
		op, err := u.r.gke.GetOperation(ctx, &containerpb.GetOperationRequest{Name: n.operation(opName)})
		switch {
		case status.Code(err) == codes.NotFound:
			log.Warn("The provider lost an operation; planning from what it shows", "operation", opName)
			in.Op = &OpOutcome{Lost: true}
		case err != nil:
			return chain.Outcome{}, fmt.Errorf("get operation %s: %w", opName, err)
		default:
			in.Op = outcome(op)
		}
	}
	pc, err := u.r.gke.GetCluster(ctx, &containerpb.GetClusterRequest{Name: n.cluster})
	switch {
	case status.Code(err) == codes.NotFound:
	case err != nil:
		return chain.Outcome{}, fmt.Errorf("get cluster: %w", err)
	default:
		in.Observed = observe(pc)
	}
	u.d = Plan(in, u.r.now())
	retry := false
	if u.d.Action != nil {
		if retry, err = u.r.act(ctx, l, n, &u.d); err != nil {
			return chain.Outcome{}, err
		}
	}
	return chain.Outcome{
		// A recorded intent is cleared or completed by the save.
		Changed:    u.d.Action != nil || len(u.d.Events) > 0 || !reflect.DeepEqual(u.read, store.ClusterRun{Cluster: u.d.Cluster, Pools: u.d.Pools}),
		Converging: u.d.Converging,
		Retry:      retry,
		Done:       u.d.Deleted,
	}, nil
}

// Save writes the statuses the run leaves.
func (u *run) Save(tx *firestore.Transaction, now *firestore.DocumentSnapshot) ([]outbox.Event, error) {
	return u.r.store.SaveClusterRun(tx, now, u.read, store.ClusterRun{Cluster: u.d.Cluster, Pools: u.d.Pools}, u.d.Events)
}

// act makes the decision's call: it records the intent first, so that a
// run killed after the call is followed by one that finds the operation
// rather than calling again. retry is true when the call failed for a
// reason worth retrying after a backoff.
func (r *Reconciler) act(ctx context.Context, l *chain.Lease, n names, d *Decision) (retry bool, err error) {
	a := d.Action
	log := logging.FromContext(ctx)
	intent := &lifecycle.Intent{Kind: a.Kind, At: r.now().UTC().Truncate(time.Microsecond)}
	poolID := ""
	if a.Pool >= 0 {
		p := &d.Pools[a.Pool]
		poolID = p.ID
		intent.NodeCount = p.Spec.NodeCount
		log = log.With("nodePoolId", p.ID, "nodePool", p.Spec.Name)
	}
	err = l.Write(ctx, func(tx *firestore.Transaction) error {
		return r.store.RecordIntent(tx, &d.Cluster, poolID, intent)
	})
	if err != nil {
		return false, fmt.Errorf("record intent: %w", err)
	}
	log.Info("Calling the provider", "call", a.Kind)
	op, err := r.call(ctx, n, d)
	if err != nil {
		// The call did not happen: the intent is dropped when the run's
		// statuses are saved (the decision has none).
		f := fault(err)
		if f.Transient || a.Kind == DeleteNodePool || a.Kind == DeleteCluster {
			// Made again after a backoff. A refused delete is retried
			// the same way: the tenant's delete stands, and no error
			// state would help.
			log.Warn("Provider call failed; retrying with backoff", "call", a.Kind, "error", err)
			return true, nil
		}
		log.Info("The provider refused the call", "call", a.Kind, "reason", f.Message)
		Refused(d, f.Message, r.now())
		return false, nil
	}
	opName := op.GetSelfLink()
	if i := strings.Index(opName, "projects/"); i >= 0 {
		opName = opName[i:]
	} else {
		opName = n.operation(op.GetName())
	}
	pr := &d.Cluster.Status.Provider
	if a.Pool >= 0 {
		p := &d.Pools[a.Pool].Status.Provider
		p.Operation, p.OperationKind, p.Intent = opName, a.Kind, intent
		return false, nil
	}
	pr.Operation, pr.OperationKind, pr.Intent = opName, a.Kind, intent
	return false, nil
}

func (r *Reconciler) call(ctx context.Context, n names, d *Decision) (*containerpb.Operation, error) {
	a := d.Action
	switch a.Kind {
	case CreateCluster:
		pc := cluster(&d.Cluster, d.Pools)
		setNodeServiceAccount(r.nodeSA, pc, pc.GetNodePools()...)
		return r.gke.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: n.parent, Cluster: pc})
	case DeleteCluster:
		return r.gke.DeleteCluster(ctx, &containerpb.DeleteClusterRequest{Name: n.cluster})
	}
	p := &d.Pools[a.Pool]
	switch a.Kind {
	case CreateNodePool:
		np := nodePool(p)
		setNodeServiceAccount(r.nodeSA, nil, np)
		return r.gke.CreateNodePool(ctx, &containerpb.CreateNodePoolRequest{Parent: n.cluster, NodePool: np})
	case DeleteNodePool:
		return r.gke.DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: n.pool(p.Spec.Name)})
	case SetSize:
		return r.gke.SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: n.pool(p.Spec.Name), NodeCount: int32(p.Spec.NodeCount)})
	case SetAutoscaling:
		return r.gke.SetNodePoolAutoscaling(ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: n.pool(p.Spec.Name), Autoscaling: autoscaling(p.Spec.Autoscaling)})
	}
	return nil, fmt.Errorf("unknown call %q", a.Kind)
}
