// Package clusters is the kubernetes.clusters reconciler: it converges GKE
// to what tenants asked of their clusters and node pools, one cluster per
// run, on the shared reconcile chain (package chain).
//
// Plan is pure: from the stored cluster and pools, what the provider
// reports and the outcome of the operation in flight, it decides the one
// next provider call; the states and events that follow are lifecycle's
// rules. Reconciler is the chain's Subject: it observes, plans, records its
// intent, makes the call and saves the statuses.
//
// It is level-triggered: every run compares each pool's spec with what
// the provider reports now (its existence and autoscaling from GKE, its
// size per zone from its instance groups' target size, the fields that
// cannot change in place), never with what a run last asked or recorded,
// so a pool changed by anyone else, or by a call of its own whose answer
// was lost, is brought back (drift.go). An intent recorded before a call
// survives a transient error, and the next run finds out whether the call
// was made (resolveIntents) before it calls anything.
//
// Files: plan.go (the decision and its entry), plan_operation.go (the
// outcome of the operation in flight), plan_cluster.go (the cluster's
// phases: create, observe, delete), plan_pools.go (each pool's phases),
// drift.go (what is compared with the provider, and how a difference is
// said), refused.go (a call the provider refused), gke.go (the provider's shapes),
// reconciler.go (the run), intents.go (calls a killed run left behind),
// identity.go (whom the calls act as: the reconciler, or a tenant's
// service account it impersonates), listing.go and budget.go (steady
// refreshes and the provider's request quota).
package clusters

import (
	"fmt"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Provider statuses of clusters and node pools, as GKE reports them.
const (
	StatusProvisioning     = "PROVISIONING"
	StatusRunning          = "RUNNING"
	StatusReconciling      = "RECONCILING"
	StatusStopping         = "STOPPING"
	StatusError            = "ERROR"
	StatusDegraded         = "DEGRADED"
	StatusRunningWithError = "RUNNING_WITH_ERROR"
)

// ObservedPool is a node pool as the provider reports it.
type ObservedPool struct {
	Status      string
	Message     string
	Autoscaling *resource.Autoscaling // nil when autoscaling is off
	// Shape is what the provider reports of the fields no call changes
	// in place (machine type, disks, spot, accelerators, zones, labels,
	// taints), in the spec's form; nil: not compared.
	Shape *model.NodePoolSpec
	// Nodes are the nodes of its instance groups, and the size per zone
	// asked of them (Sizes); nil when they could not be read.
	Nodes *PoolNodes
}

// sizes is the pool's size per zone as asked of the provider (its
// instance groups' target sizes); nil when not read.
func (o ObservedPool) sizes() map[string]int {
	if o.Nodes == nil || len(o.Nodes.Sizes) == 0 {
		return nil
	}
	return o.Nodes.Sizes
}

// ObservedCluster is a cluster as the provider reports it.
type ObservedCluster struct {
	ID       string
	Status   string
	Message  string
	Version  string
	Endpoint string
	// CA is the PEM of the cluster's certificate authority, as GKE's
	// masterAuth.clusterCaCertificate gives it (base64).
	CA    string
	Pools map[string]ObservedPool // by name
	// Operations are the provider's running operations on the cluster
	// that no run started (a release-channel upgrade, a repair), oldest
	// first: the run's calls would be refused until they end.
	Operations []ObservedOperation
}

// ObservedOperation is an operation the provider started itself.
type ObservedOperation struct {
	ID   string // operation-...
	Type string // UPGRADE_MASTER, REPAIR_CLUSTER, ...
	// Pool is the node pool it is on; "" for the cluster, which holds
	// every pool.
	Pool string
}

// OpOutcome is what became of the recorded operation.
type OpOutcome struct {
	Done bool
	Lost bool   // the provider no longer knows it
	Err  *Fault // the operation failed
}

// Fault is an error the provider reported. Transient ones are retried and
// never shown; the others are the tenant's and become the pool's (or the
// cluster's) error.
type Fault struct {
	Transient bool
	Message   string
}

// Kinds of provider calls.
const (
	CreateCluster  = "createCluster"
	DeleteCluster  = "deleteCluster"
	CreateNodePool = "createNodePool"
	DeleteNodePool = "deleteNodePool"
	SetSize        = "setSize"
	SetAutoscaling = "setAutoscaling"
)

// Action is the one provider call a run makes. Pool is the index in
// Decision.Pools of the pool it is about (-1 for cluster calls).
type Action struct {
	Kind string
	Pool int
}

// Input is what a run knows when it plans.
type Input struct {
	Cluster  model.Cluster
	Pools    []model.NodePool // the pools that are not deleted, by creation
	Observed *ObservedCluster // nil when the provider has no such cluster
	Op       *OpOutcome       // outcome of the recorded operation, if any
	// Access, when not empty, says that the run cannot act in the
	// cluster's project as its account, and what the project's owner must
	// grant: nothing was observed, and the cluster shows it as its error.
	Access string
	// RetryEvery is how often a pool the provider could not fully
	// provision is looked at again (the steady interval), as its message
	// says; zero says nothing of it.
	RetryEvery time.Duration
}

// Decision is a run's plan: the next call, the objects as they should be,
// the events to publish, and whether the cluster is converging (next run
// soon) or steady.
type Decision struct {
	Action     *Action
	Cluster    model.Cluster
	Pools      []model.NodePool
	Events     []event.Event
	Converging bool
	// Deleted is true when the cluster is now deleted: no further run.
	Deleted bool
	// failure is why the call failed, when it is retried.
	failure string
	// sizeDrift: a pool that was ready shows the provider's size per
	// zone differing from its spec. The run confirms it with its own
	// read of the pool's instance groups before acting on a listing
	// shared with other runs, which may predate its last resize.
	sizeDrift bool
}

// Plan decides the next step for a cluster. It never mutates in.
func Plan(in Input, now time.Time) Decision {
	p := &planner{now: now.UTC().Truncate(time.Microsecond), obs: in.Observed, failed: -1, waiting: map[int]bool{}, retryEvery: in.RetryEvery}
	p.d.Cluster = lifecycle.BeginRun(in.Cluster)
	for _, np := range in.Pools {
		p.d.Pools = append(p.d.Pools, lifecycle.BeginNodePoolRun(np))
	}
	// A run that plans has observed the provider, or learnt that it
	// cannot: its transient failures, if any, are over.
	p.d.Cluster.Status.Retrying = nil
	if in.Access != "" {
		p.planDenied(in.Access)
	} else {
		p.applyOp(in.Op)
		p.planCluster()
	}
	// Nothing is in the way of the pools that do not wait.
	for i := range p.d.Pools {
		if !p.waiting[i] {
			lifecycle.NodePoolWaiting(&p.d.Pools[i], "", p.now)
		}
	}
	return p.d
}

type planner struct {
	now time.Time
	obs *ObservedCluster
	d   Decision
	// busy is true while an operation is in flight: no other call may be
	// made (one provider operation at a time per cluster).
	busy bool
	// failed is the index of the pool whose operation has just failed, or
	// -1: it shows its error until the next run rather than being retried
	// at once, so that a refusal is retried at the steady pace.
	failed int
	// waiting marks the pools whose change waits for an operation the
	// provider started itself; waitMsg is the first one's message, which
	// the cluster shows.
	waiting map[int]bool
	waitMsg string
	// retryEvery is Input.RetryEvery.
	retryEvery time.Duration
}

// held reports what holds pool i's change: an operation the provider
// started itself on the cluster or on the pool. It notes the wait in the
// pool's message, and reports false when nothing holds it.
func (p *planner) held(i int) bool {
	if p.busy || p.obs == nil {
		return false
	}
	np := &p.d.Pools[i]
	for _, o := range p.obs.Operations {
		if o.Pool == "" || o.Pool == np.Spec.Name {
			msg := fmt.Sprintf("waiting for the provider's operation %s (%s) to finish", o.ID, o.Type)
			lifecycle.NodePoolWaiting(np, msg, p.now)
			p.waiting[i] = true
			if p.waitMsg == "" {
				p.waitMsg = msg
			}
			p.d.Converging = true
			return true
		}
	}
	return false
}

// inFlight reports whether an operation is recorded, or about to be.
func inFlight(op string, intent *model.Intent) bool { return op != "" || intent != nil }

// act chooses a call if none is chosen yet and none is in flight.
func (p *planner) act(kind string, pool int) bool {
	if p.busy || p.d.Action != nil {
		return false
	}
	p.d.Action = &Action{Kind: kind, Pool: pool}
	p.d.Converging = true
	return true
}

func (p *planner) emit(events []event.Event) {
	p.d.Events = append(p.d.Events, events...)
}

// settle derives the cluster's state from its pools (lifecycle.SettleCluster).
func (p *planner) settle() {
	events, converging := lifecycle.SettleClusterWaiting(&p.d.Cluster, p.d.Pools, p.d.Converging || p.busy, p.waitMsg, p.now)
	p.emit(events)
	p.d.Converging = converging
}

// planDenied is a run that cannot act in the cluster's project (deny).
func (p *planner) planDenied(msg string) { deny(&p.d, msg, p.now) }

// deny is a decision that cannot be carried out in the cluster's project
// as its account: the cluster is in error with msg, what to grant
// (announced once); its pools and what is in flight are left as they are
// for the run that can act again, but for their currentNodeCount, which
// cannot be read either and so is absent; and the next run comes at the steady
// pace, not sooner: only the project's owner can change the outcome. A
// cluster being deleted shows deleting whatever its status says, so its
// delete waits unseen, as a refused delete does.
func deny(d *Decision, msg string, now time.Time) {
	if !d.Cluster.Spec.Deleting {
		d.Events = append(d.Events, lifecycle.ClusterError(&d.Cluster, msg, now)...)
	}
	for i := range d.Pools {
		lifecycle.NodePoolNodes(&d.Pools[i], nil)
	}
	d.Converging = false
}
