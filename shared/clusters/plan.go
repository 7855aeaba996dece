// Package reconcile converges the provider (GKE) to what tenants asked for,
// one cluster per run.
//
// Plan is pure: from the stored desired state, what the provider reports
// and the outcome of the operation in flight, it decides the one next
// provider call and the new states and events. Reconciler acts on it: it
// takes the cluster's lease, observes, plans, calls the provider, records
// the operation, writes the outcome, and schedules the next run.
package reconcile

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
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
	NodeCount   int                   // the initial size per zone
}

// ObservedCluster is a cluster as the provider reports it.
type ObservedCluster struct {
	ID       string
	Status   string
	Message  string
	Version  string
	Endpoint string
	Pools    map[string]ObservedPool // by name
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
	Cluster  store.ClusterDoc
	Pools    []store.NodePoolDoc // the pools that are not deleted, by creation
	Observed *ObservedCluster    // nil when the provider has no such cluster
	Op       *OpOutcome          // outcome of the recorded operation, if any
}

// Decision is a run's plan: the next call, the documents as they should
// be, the events to publish, and whether the cluster is converging (next
// run soon) or steady.
type Decision struct {
	Action     *Action
	Cluster    store.ClusterDoc
	Pools      []store.NodePoolDoc
	Events     []outbox.Event
	Converging bool
	// Deleted is true when the cluster is now deleted: no further run.
	Deleted bool
}

// Plan decides the next step for a cluster. It never mutates in.
func Plan(in Input, now time.Time) Decision {
	p := &planner{now: now.UTC().Truncate(time.Microsecond), obs: in.Observed, failed: -1}
	p.d.Cluster = cloneCluster(in.Cluster)
	for _, np := range in.Pools {
		p.d.Pools = append(p.d.Pools, clonePool(np))
	}
	p.applyOp(in.Op)
	p.plan()
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
}

// inFlight reports whether an operation is recorded, or about to be.
func inFlight(op string, intent *store.Intent) bool { return op != "" || intent != nil }

// applyOp folds the outcome of the recorded operation into the documents.
// The operation is on the cluster or on at most one pool: one at a time.
// A failure never takes a pool or cluster out of deleting: the tenant's
// delete stands and is retried.
func (p *planner) applyOp(op *OpOutcome) {
	c := &p.d.Cluster
	busy := inFlight(c.Provider.Operation, c.Provider.Intent)
	for i := range p.d.Pools {
		busy = busy || inFlight(p.d.Pools[i].Provider.Operation, p.d.Pools[i].Provider.Intent)
	}
	if op == nil || (!op.Done && !op.Lost) {
		p.busy = busy
		return
	}
	if c.Provider.Operation != "" {
		kind := c.Provider.OperationKind
		c.Provider.Operation, c.Provider.OperationKind, c.Provider.Intent = "", "", nil
		if op.Err != nil && !op.Err.Transient && kind == CreateCluster && c.State != resource.StateDeleting {
			p.clusterError("the provider refused the cluster: " + op.Err.Message)
		}
		return
	}
	for i := range p.d.Pools {
		np := &p.d.Pools[i]
		if np.Provider.Operation == "" {
			continue
		}
		kind, intent := np.Provider.OperationKind, np.Provider.Intent
		np.Provider.Operation, np.Provider.OperationKind, np.Provider.Intent = "", "", nil
		switch {
		case op.Err != nil && !op.Err.Transient:
			if np.State != resource.StateDeleting {
				p.failed = i
				p.poolError(np, op.Err.Message)
			}
		case op.Err != nil || op.Lost:
			// Retried from what the provider shows.
		case kind == SetSize && intent != nil:
			np.Provider.NodeCount = intent.NodeCount
		case kind == SetAutoscaling:
			// The autoscaler owns the size until autoscaling is off.
			np.Provider.NodeCount = -1
		}
		return
	}
}

func (p *planner) plan() {
	c := &p.d.Cluster
	if c.State == resource.StateDeleting {
		p.planDelete()
		return
	}
	obs := p.obs
	switch {
	case obs == nil && c.Provider.ID == "":
		if !p.busy {
			p.act(CreateCluster, -1)
		}
		// A cluster the provider refused stays in error while it is
		// retried, so that its error is announced once.
		if c.State != resource.StateError {
			p.setClusterState(resource.StateProvisioning, "")
		}
		p.d.Converging = true
		return
	case obs == nil:
		p.clusterError(fmt.Sprintf("the provider no longer has cluster %s", c.ProviderName))
		return
	case c.Provider.ID != "" && obs.ID != c.Provider.ID:
		p.clusterError(fmt.Sprintf("provider cluster %s was replaced by another cluster of the same name; it is left alone", c.ProviderName))
		return
	}
	if c.Provider.ID == "" {
		c.Provider.ID = obs.ID
	}
	if obs.Version != "" && c.KubernetesVersion != "" && obs.Version != c.KubernetesVersion {
		// A release-channel upgrade: announced as an update once the
		// cluster is ready, even if it is busy or failed right now.
		c.Changed = true
	}
	if obs.Version != "" {
		c.KubernetesVersion = obs.Version
	}
	if obs.Endpoint != "" {
		c.Endpoint = obs.Endpoint
	}
	switch obs.Status {
	case StatusProvisioning:
		p.setClusterState(resource.StateProvisioning, "")
		p.d.Converging = true
		return
	case StatusError, StatusDegraded:
		p.clusterError(fmt.Sprintf("the provider reports the cluster %s: %s", strings.ToLower(obs.Status), obs.Message))
		return
	case StatusStopping:
		p.clusterError("the provider is deleting the cluster")
		return
	}

	for i := range p.d.Pools {
		np := &p.d.Pools[i]
		if np.State == resource.StateDeleting {
			p.planPoolDelete(i)
		}
	}
	// Pools in error are retried last, so that a pool the provider keeps
	// refusing never holds back the others' calls.
	for _, failed := range []bool{false, true} {
		for i := range p.d.Pools {
			np := &p.d.Pools[i]
			if np.State != resource.StateDeleting && np.State != resource.StateDeleted && (np.State == resource.StateError) == failed {
				p.planPool(i)
			}
		}
	}
	p.settleCluster()
}

// planPool converges one pool that should exist.
func (p *planner) planPool(i int) {
	np := &p.d.Pools[i]
	if inFlight(np.Provider.Operation, np.Provider.Intent) {
		p.d.Converging = true
		return
	}
	op, ok := p.obs.Pools[np.Name]
	if !ok {
		if i == p.failed {
			return
		}
		// Not at the provider: create it (again, if it vanished).
		if p.act(CreateNodePool, i) {
			// What the provider makes is read afresh once it exists.
			np.Provider.Created = false
			p.converge(np)
		} else if np.State != resource.StateError {
			p.d.Converging = true
		}
		return
	}
	if !np.Provider.Created {
		np.Provider.Created = true
		np.Provider.NodeCount = op.NodeCount
		if op.Autoscaling != nil {
			np.Provider.NodeCount = -1
		}
	}
	if op.Status == StatusProvisioning || op.Status == StatusReconciling || op.Status == StatusStopping {
		p.d.Converging = true
		return
	}
	var change string
	switch {
	case !sameAutoscaling(np.Autoscaling, op.Autoscaling):
		change = SetAutoscaling
	case np.Autoscaling == nil && np.Provider.NodeCount != np.NodeCount:
		change = SetSize
	}
	failing := op.Status == StatusError || op.Status == StatusRunningWithError
	switch {
	case change != "" && i != p.failed:
		// A pool the provider shows in error is tried again with the
		// change it still lacks: a change by the tenant, or a retry of
		// one the provider failed (a stockout), at the steady pace.
		if p.act(change, i) {
			p.converge(np)
		} else if failing && np.State == resource.StateError {
			p.poolError(np, op.Message)
			return
		}
		p.d.Converging = true
	case failing:
		p.poolError(np, op.Message)
	case change != "":
		// The operation that failed just now shows its error until the
		// next run retries it.
	default:
		p.poolReady(np)
	}
}

// planPoolDelete deletes a pool at the provider, and marks it deleted once
// the provider no longer has it.
func (p *planner) planPoolDelete(i int) {
	np := &p.d.Pools[i]
	if inFlight(np.Provider.Operation, np.Provider.Intent) {
		p.d.Converging = true
		return
	}
	var op ObservedPool
	ok := false
	if p.obs != nil {
		op, ok = p.obs.Pools[np.Name]
	}
	if !ok {
		p.poolDeleted(np)
		return
	}
	p.d.Converging = true
	if op.Status != StatusStopping {
		p.act(DeleteNodePool, i)
	}
}

// planDelete deletes the cluster's pools, then the cluster.
func (p *planner) planDelete() {
	c := &p.d.Cluster
	if c.Provider.ID != "" && p.obs != nil && p.obs.ID != c.Provider.ID {
		// Someone else's cluster now has the name: ours is gone.
		p.obs = nil
	}
	if p.obs != nil {
		for i := range p.d.Pools {
			p.planPoolDelete(i)
		}
	}
	if p.obs == nil {
		// The provider has no such cluster, so none of its pools either.
		for i := range p.d.Pools {
			p.poolDeleted(&p.d.Pools[i])
		}
		p.clusterDeleted()
		return
	}
	p.d.Converging = true
	if len(p.obs.Pools) > 0 && anyOurs(p.obs.Pools, p.d.Pools) {
		return
	}
	if p.obs.Status != StatusStopping {
		p.act(DeleteCluster, -1)
	}
}

func anyOurs(observed map[string]ObservedPool, pools []store.NodePoolDoc) bool {
	for _, np := range pools {
		if _, ok := observed[np.Name]; ok {
			return true
		}
	}
	return false
}

// act chooses a call if none is chosen yet and none is in flight.
func (p *planner) act(kind string, pool int) bool {
	if p.busy || p.d.Action != nil {
		return false
	}
	p.d.Action = &Action{Kind: kind, Pool: pool}
	p.d.Converging = true
	return true
}

// converge shows a pool the provider is about to change: a pending pool
// stays pending, and one in error stays in error until the provider
// accepts it; a ready one goes updating.
func (p *planner) converge(np *store.NodePoolDoc) {
	if np.State == resource.StateReady {
		p.setPoolState(np, resource.StateUpdating, "")
	}
}

func (p *planner) poolReady(np *store.NodePoolDoc) {
	if np.State == resource.StateReady {
		return
	}
	p.setPoolState(np, resource.StateReady, "")
	p.d.Events = append(p.d.Events, outbox.NodePoolEvent(outbox.NodePoolReady, np.NodePool, p.now))
}

func (p *planner) poolError(np *store.NodePoolDoc, msg string) {
	if msg == "" {
		msg = "the provider reports an error"
	}
	if np.State == resource.StateError && np.Message == msg {
		return
	}
	entering := np.State != resource.StateError
	p.setPoolState(np, resource.StateError, msg)
	if entering {
		p.d.Events = append(p.d.Events, outbox.NodePoolEvent(outbox.NodePoolError, np.NodePool, p.now))
	}
}

func (p *planner) poolDeleted(np *store.NodePoolDoc) {
	if np.State == resource.StateDeleted {
		return
	}
	p.setPoolState(np, resource.StateDeleted, "")
	np.Active = false
	expire := p.now.Add(store.DeletedTTL)
	np.ExpireAt = &expire
	p.d.Cluster.ActivePoolCount--
	p.d.Events = append(p.d.Events, outbox.NodePoolEvent(outbox.NodePoolDeleted, np.NodePool, p.now))
}

func (p *planner) setPoolState(np *store.NodePoolDoc, st resource.State, msg string) {
	np.State = st
	np.Message = msg
	np.UpdatedAt = p.now
}

// settleCluster derives the cluster's state from its pools: error if any
// is, ready when the control plane and every pool are, else converging.
// A pool still converging keeps the runs coming soon even while another
// pool's error is shown.
func (p *planner) settleCluster() {
	c := &p.d.Cluster
	var failed []string
	converging := p.d.Converging || p.busy
	for _, np := range p.d.Pools {
		switch np.State {
		case resource.StateError:
			failed = append(failed, poolMessage(np.Name, np.Message))
		case resource.StateReady, resource.StateDeleted:
		default:
			converging = true
		}
	}
	p.d.Converging = converging
	switch {
	case len(failed) > 0:
		p.clusterError(strings.Join(failed, "; "))
	case converging:
		if c.Provider.EverReady {
			p.setClusterState(resource.StateUpdating, "")
		} else {
			p.setClusterState(resource.StateProvisioning, "")
		}
	default:
		wasReady := c.State == resource.StateReady
		p.setClusterState(resource.StateReady, "")
		switch {
		case !c.Provider.EverReady:
			c.Provider.EverReady = true
			c.Changed = false
			p.d.Events = append(p.d.Events, outbox.ClusterEvent(outbox.ClusterReady, c.Cluster, p.now))
		case !wasReady || c.Changed:
			c.Changed = false
			p.d.Events = append(p.d.Events, outbox.ClusterEvent(outbox.ClusterUpdated, c.Cluster, p.now))
		}
	}
}

func (p *planner) setClusterState(st resource.State, msg string) {
	c := &p.d.Cluster
	if c.State == st && c.Message == msg {
		return
	}
	c.State = st
	c.Message = msg
	c.UpdatedAt = p.now
}

func (p *planner) clusterError(msg string) {
	c := &p.d.Cluster
	entering := c.State != resource.StateError
	p.setClusterState(resource.StateError, msg)
	if entering {
		p.d.Events = append(p.d.Events, outbox.ClusterEvent(outbox.ClusterError, c.Cluster, p.now))
	}
}

// Refused records that the provider refused the decision's call for a
// reason that is the tenant's (a machine type it does not have, an
// accelerator the machine cannot take): the pool's error, or the
// cluster's for a cluster call, with the provider's message. A refused
// cluster create whose message names some of the cluster's pools (as the
// provider's does: Node pool "gpu": ...) blames those pools, so that the
// next run creates the cluster without them and the cluster's error names
// them.
func Refused(d *Decision, msg string, now time.Time) {
	p := &planner{now: now.UTC().Truncate(time.Microsecond), d: *d, failed: -1}
	p.d.Converging = false
	if d.Action.Pool >= 0 {
		p.poolError(&p.d.Pools[d.Action.Pool], msg)
	} else {
		blamed := false
		for i := range p.d.Pools {
			np := &p.d.Pools[i]
			if np.State != resource.StateDeleting && strings.Contains(msg, strconv.Quote(np.Name)) {
				p.poolError(np, msg)
				blamed = true
			}
		}
		if !blamed {
			p.clusterError("the provider refused the cluster: " + msg)
			*d = p.d
			return
		}
	}
	p.settleCluster()
	*d = p.d
}

func (p *planner) clusterDeleted() {
	c := &p.d.Cluster
	p.setClusterState(resource.StateDeleted, "")
	c.Active = false
	expire := p.now.Add(store.DeletedTTL)
	c.ExpireAt = &expire
	p.d.Deleted = true
	p.d.Converging = false
	p.d.Events = append(p.d.Events, outbox.ClusterEvent(outbox.ClusterDeleted, c.Cluster, p.now))
}

// poolMessage is a failed pool's part of its cluster's message: the
// provider's message, named after the pool unless the provider's already
// names it (`Node pool "gpu": ...`).
func poolMessage(name, msg string) string {
	prefix := fmt.Sprintf("node pool %q: ", name)
	if len(msg) >= len(prefix) && strings.EqualFold(msg[:len(prefix)], prefix) {
		return msg
	}
	return prefix + msg
}

func sameAutoscaling(want, got *resource.Autoscaling) bool {
	if want == nil || got == nil {
		return want == nil && got == nil
	}
	return *want == *got
}

func cloneCluster(c store.ClusterDoc) store.ClusterDoc {
	c.Zones = slices.Clone(c.Zones)
	if c.Provider.Intent != nil {
		in := *c.Provider.Intent
		c.Provider.Intent = &in
	}
	return c
}

func clonePool(p store.NodePoolDoc) store.NodePoolDoc {
	p.Zones = slices.Clone(p.Zones)
	p.Taints = slices.Clone(p.Taints)
	labels := make(map[string]string, len(p.Labels))
	for k, v := range p.Labels {
		labels[k] = v
	}
	p.Labels = labels
	if p.Autoscaling != nil {
		a := *p.Autoscaling
		p.Autoscaling = &a
	}
	if p.Accelerators != nil {
		a := *p.Accelerators
		p.Accelerators = &a
	}
	if p.Provider.Intent != nil {
		in := *p.Provider.Intent
		p.Provider.Intent = &in
	}
	return p
}
