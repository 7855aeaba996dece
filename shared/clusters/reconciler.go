package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// Scheduler schedules a run of a cluster's chain at a time (Cloud Tasks).
// after names the task scheduling it, so that a redelivered task schedules
// the same successor (deduplicated) rather than a second one.
type Scheduler interface {
	Schedule(ctx context.Context, k store.Kick, at time.Time, after string) error
}

// Deliverer publishes committed events and clears them from the outbox
// (outbox.Relay).
type Deliverer interface {
	Deliver(ctx context.Context, events []outbox.Event) (int, error)
}

// Config sets the reconciler's timing.
type Config struct {
	// ConvergingInterval is the time between runs while anything
	// converges (30 s).
	ConvergingInterval time.Duration
	// SteadyInterval is the time between runs of a ready or failed
	// cluster (5 min).
	SteadyInterval time.Duration
	// LeaseTTL bounds a run; a run killed half way holds the cluster no
	// longer than this.
	LeaseTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Reconciler runs clusters.
type Reconciler struct {
	store  *store.Store
	gke    GKE
	sched  Scheduler
	events Deliverer
	cfg    Config
}

// New returns a reconciler.
func New(s *store.Store, gke GKE, sched Scheduler, events Deliverer, cfg Config) (*Reconciler, error) {
	if s == nil || gke == nil || sched == nil || events == nil {
		return nil, errors.New("reconcile: New needs a store, a GKE client, a scheduler and a deliverer")
	}
	if cfg.ConvergingInterval <= 0 || cfg.SteadyInterval <= 0 || cfg.LeaseTTL <= 0 {
		return nil, errors.New("reconcile: intervals and lease TTL must be positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Reconciler{store: s, gke: gke, sched: sched, events: events, cfg: cfg}, nil
}

// ErrBusy is returned when another run holds the cluster: the task should
// be retried later.
var ErrBusy = store.ErrBusy

// Run runs the cluster once for the chain token: observe, plan, make at
// most one provider call, write the outcome, publish its events and
// schedule the chain's next run. A stale token ends the chain quietly.
// An error asks for the task to be retried.
//
// task names the task that asked for the run (its successor's name derives
// from it).
func (r *Reconciler) Run(ctx context.Context, k store.Kick, task string) error {
	ctx = logging.With(ctx, "tenantId", k.TenantID, "clusterId", k.ClusterID)
	log := logging.FromContext(ctx)
	now := r.cfg.Now()
	owner := newOwner()
	// The watchdog restarts the chain if nothing runs it by this deadline.
	deadline := now.Add(r.cfg.SteadyInterval + r.cfg.LeaseTTL)
	l, err := r.store.TakeLease(ctx, k.TenantID, k.ClusterID, k.Token, owner, r.cfg.LeaseTTL, deadline)
	switch {
	case errors.Is(err, store.ErrStale):
		log.Info("Stale reconcile task; a newer chain runs the cluster")
		return nil
	case errors.Is(err, store.ErrBusy):
		log.Warn("Cluster is being reconciled by another run; retrying later")
		return err
	case err != nil:
		return fmt.Errorf("take lease: %w", err)
	}
	ctx, cancel := context.WithDeadline(ctx, l.Expiry)
	defer cancel()
	if task == "" {
		// Without the task's name the successor's would be the kick's,
		// and deduplicated away: name it after this run instead.
		task = "run-" + owner
	}

	d, failures, err := r.step(ctx, l)
	if errors.Is(err, store.ErrLeaseLost) {
		// The run outlived its lease. The task is retried rather than
		// ended: if no other run holds the cluster now, nothing else
		// would schedule its next run before the watchdog. A retry finds
		// the cluster busy, stale, or free, and its successor has the
		// same name as ours would have had.
		log.Warn("Lost the cluster's lease mid-run; retrying the task", "error", err)
		return err
	}
	if err != nil {
		// A transient provider or storage failure: back off, keep the chain.
		failures = l.Cluster.Reconcile.Failures + 1
		next := r.backoff(failures)
		log.Warn("Reconcile run failed; retrying with backoff", "error", err, "retryIn", next.String(), "failures", failures)
		if rerr := r.store.ReleaseLease(ctx, l, now.Add(next+r.cfg.LeaseTTL), failures); rerr != nil {
			return errors.Join(err, rerr)
		}
		return r.schedule(ctx, k, now.Add(next), task)
	}

	interval := r.cfg.SteadyInterval
	if d.Converging {
		interval = r.cfg.ConvergingInterval
	}
	if failures > 0 {
		interval = r.backoff(failures)
	}
	next := now.Add(interval)
	current := true
	var events []outbox.Event
	if r.changed(l, d, failures) || interval <= r.cfg.LeaseTTL {
		events, current, err = r.store.FinishRun(ctx, l, store.Finish{
			Cluster: d.Cluster, Pools: d.Pools, Events: d.Events,
			NextAt: next.Add(r.cfg.LeaseTTL), Failures: failures,
		})
		if err != nil {
			return fmt.Errorf("record run: %w", err)
		}
	} else if err := r.store.DropLease(ctx, l); err != nil {
		// Harmless: the lease expires on its own.
		log.Warn("Could not drop the lease; it expires on its own", "error", err)
	}
	if len(events) > 0 {
		if _, err := r.events.Deliver(ctx, events); err != nil {
			log.Warn("Events wait in the outbox for the watchdog's drain", "error", err)
		}
	}
	if d.Deleted {
		log.Info("Cluster deleted; its chain ends")
		return nil
	}
	if !current {
		log.Info("A newer chain took over the cluster during the run")
		return nil
	}
	return r.schedule(ctx, k, next, task)
}

func (r *Reconciler) schedule(ctx context.Context, k store.Kick, at time.Time, task string) error {
	if err := r.sched.Schedule(ctx, k, at, task); err != nil {
		return fmt.Errorf("schedule next run: %w", err)
	}
	return nil
}

// backoff doubles the converging interval with each consecutive failure,
// up to the steady interval.
func (r *Reconciler) backoff(failures int) time.Duration {
	d := r.cfg.ConvergingInterval
	for i := 1; i < failures && d < r.cfg.SteadyInterval; i++ {
		d *= 2
	}
	return min(d, r.cfg.SteadyInterval)
}

// changed reports whether the run has anything to write: a refresh that
// finds everything as it was writes nothing but its lease.
func (r *Reconciler) changed(l *store.Lease, d Decision, failures int) bool {
	return failures != l.Cluster.Reconcile.Failures || len(d.Events) > 0 ||
		!reflect.DeepEqual(l.Cluster, d.Cluster) || !reflect.DeepEqual(l.Pools, d.Pools)
}

// step observes, plans and makes the planned call. It returns the decision
// to record and the count of consecutive transient failures; an error is a
// transient failure of the whole run.
func (r *Reconciler) step(ctx context.Context, l *store.Lease) (Decision, int, error) {
	log := logging.FromContext(ctx)
	n := namesOf(&l.Cluster)
	// The lease keeps what was read; the run works on copies.
	in := Input{Cluster: l.Cluster, Pools: slices.Clone(l.Pools)}
	if err := r.resolveIntents(ctx, n, &in); err != nil {
		return Decision{}, 0, err
	}
	// At most one operation is in flight; the cluster's comes first, as
	// in Plan.
	opName := in.Cluster.Provider.Operation
	for _, p := range in.Pools {
		if opName == "" {
			opName = p.Provider.Operation
		}
	}
	if opName != "" {
		op, err := r.gke.GetOperation(ctx, &containerpb.GetOperationRequest{Name: n.operation(opName)})
		switch {
		case status.Code(err) == codes.NotFound:
			log.Warn("The provider lost an operation; planning from what it shows", "operation", opName)
			in.Op = &OpOutcome{Lost: true}
		case err != nil:
			return Decision{}, 0, fmt.Errorf("get operation %s: %w", opName, err)
		default:
			in.Op = outcome(op)
		}
	}
	pc, err := r.gke.GetCluster(ctx, &containerpb.GetClusterRequest{Name: n.cluster})
	switch {
	case status.Code(err) == codes.NotFound:
	case err != nil:
		return Decision{}, 0, fmt.Errorf("get cluster: %w", err)
	default:
		in.Observed = observe(pc)
	}
	d := Plan(in, r.cfg.Now())
	if d.Action == nil {
		return d, 0, nil
	}
	failures, err := r.act(ctx, l, n, &d)
	return d, failures, err
}

// act makes the decision's call: it records the intent first, so that a
// run killed after the call is followed by one that finds the operation
// rather than calling again.
func (r *Reconciler) act(ctx context.Context, l *store.Lease, n names, d *Decision) (int, error) {
	a := d.Action
	log := logging.FromContext(ctx)
	intent := &store.Intent{Kind: a.Kind, At: r.cfg.Now().UTC().Truncate(time.Microsecond)}
	poolID := ""
	if a.Pool >= 0 {
		p := &d.Pools[a.Pool]
		poolID = p.ID
		intent.NodeCount = p.NodeCount
		log = log.With("nodePoolId", p.ID, "nodePool", p.Name)
	}
	if err := r.store.RecordIntent(ctx, l, poolID, intent); err != nil {
		return 0, fmt.Errorf("record intent: %w", err)
	}
	log.Info("Calling the provider", "call", a.Kind)
	op, err := r.call(ctx, n, d)
	if err != nil {
		f := fault(err)
		if f.Transient || a.Kind == DeleteNodePool || a.Kind == DeleteCluster {
			// The call did not happen: the intent is dropped when the
			// run's outcome is written, and the call is made again after
			// a backoff. A refused delete is retried the same way: the
			// tenant's delete stands, and no error state would help.
			clearIntent(d)
			log.Warn("Provider call failed; retrying with backoff", "call", a.Kind, "error", err)
			return l.Cluster.Reconcile.Failures + 1, nil
		}
		log.Info("The provider refused the call", "call", a.Kind, "reason", f.Message)
		clearIntent(d)
		Refused(d, f.Message, r.cfg.Now())
		return 0, nil
	}
	opName := op.GetSelfLink()
	if i := strings.Index(opName, "projects/"); i >= 0 {
		opName = opName[i:]
	} else {
		opName = n.operation(op.GetName())
	}
	if a.Pool >= 0 {
		p := &d.Pools[a.Pool]
		p.Provider.Operation, p.Provider.OperationKind, p.Provider.Intent = opName, a.Kind, intent
	} else {
		d.Cluster.Provider.Operation, d.Cluster.Provider.OperationKind, d.Cluster.Provider.Intent = opName, a.Kind, intent
	}
	return 0, nil
}

func clearIntent(d *Decision) {
	if d.Action.Pool >= 0 {
		d.Pools[d.Action.Pool].Provider.Intent = nil
	} else {
		d.Cluster.Provider.Intent = nil
	}
}

func (r *Reconciler) call(ctx context.Context, n names, d *Decision) (*containerpb.Operation, error) {
	a := d.Action
	switch a.Kind {
	case CreateCluster:
		return r.gke.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: n.parent, Cluster: cluster(&d.Cluster, d.Pools)})
	case DeleteCluster:
		return r.gke.DeleteCluster(ctx, &containerpb.DeleteClusterRequest{Name: n.cluster})
	}
	p := &d.Pools[a.Pool]
	switch a.Kind {
	case CreateNodePool:
		return r.gke.CreateNodePool(ctx, &containerpb.CreateNodePoolRequest{Parent: n.cluster, NodePool: nodePool(p)})
	case DeleteNodePool:
		return r.gke.DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: n.pool(p.Name)})
	case SetSize:
		return r.gke.SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: n.pool(p.Name), NodeCount: int32(p.NodeCount)})
	case SetAutoscaling:
		return r.gke.SetNodePoolAutoscaling(ctx, &containerpb.SetNodePoolAutoscalingRequest{Name: n.pool(p.Name), Autoscaling: autoscaling(p.Autoscaling)})
	}
	return nil, fmt.Errorf("unknown call %q", a.Kind)
}

// resolveIntents finds the operation of a call recorded as intended but
// whose operation was never recorded (the run died in between): if the
// provider has such an operation, it is adopted; if not, the call never
// happened and the intent is dropped.
func (r *Reconciler) resolveIntents(ctx context.Context, n names, in *Input) error {
	type pending struct {
		intent *store.Intent
		target string
		set    func(op string)
	}
	var todo []pending
	if c := &in.Cluster.Provider; c.Intent != nil && c.Operation == "" {
		todo = append(todo, pending{c.Intent, n.cluster, func(op string) {
			if op == "" {
				c.Intent = nil
				return
			}
			c.Operation, c.OperationKind = op, c.Intent.Kind
		}})
	}
	for i := range in.Pools {
		p := &in.Pools[i].Provider
		if p.Intent != nil && p.Operation == "" {
			todo = append(todo, pending{p.Intent, n.pool(in.Pools[i].Name), func(op string) {
				if op == "" {
					p.Intent = nil
					return
				}
				p.Operation, p.OperationKind = op, p.Intent.Kind
			}})
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// The pools are copies of the lease's: give them their own slice so
	// the lease keeps what was read.
	resp, err := r.gke.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: n.parent})
	if err != nil {
		return fmt.Errorf("list operations: %w", err)
	}
	for _, t := range todo {
		found := ""
		for _, op := range resp.GetOperations() {
			start, _ := time.Parse(time.RFC3339Nano, op.GetStartTime())
			if slices.Contains(opTypes[t.intent.Kind], op.GetOperationType()) && strings.HasSuffix(op.GetTargetLink(), t.target) && !start.Before(t.intent.At.Add(-time.Second)) {
				found = n.operation(op.GetName())
			}
		}
		logging.FromContext(ctx).Info("Resolved a call recorded before a run died", "target", t.target, "call", t.intent.Kind, "operation", found)
		t.set(found)
	}
	return nil
}

func newOwner() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
