// Package substrates is the kubernetes.substrates reconciler (API.md §9):
// pool substrates recorded from the pools module's events (what an event
// asks is Desired; functions/poolevents records it), converged by a chain
// of runs per substrate that makes (or adopts) a cluster through the
// clusters machinery, gives it one node pool per flavor, server-side
// applies bcd into its Kubernetes API with a join token, and follows the
// nodes that join (shared/join).
//
// The store keeps every substrate document; the substrate and the rules of
// what it manages are lifecycle's. Plan is pure: from what a run read, it
// decides the one next action and the substrate as it should be.
// Reconciler is the chain's Subject: a run reads, plans, acts and plans
// again, and the store saves what it leaves.
//
// Files: pool.go (what a pool event asks, and the preview of
// kubernetesSubstrates.plan), plan.go (the decision and its states),
// plan_cluster.go (the cluster to make or adopt), plan_pools.go (one node
// pool per flavor), plan_objects.go (bcd's objects in the cluster's
// Kubernetes API), plan_nodes.go (the nodes that join and leave),
// plan_teardown.go (undoing what the substrate made), effect.go (what
// each action leaves for the next plan: one model for runs and previews),
// reconciler.go (the run), plan_preview.go (kubernetesSubstrates.plan: the
// runs on an imagined world), failures.go (how a run's failures show),
// kube.go (what a run asks of a cluster's Kubernetes API), names.go (the
// names of what a substrate makes), telemetry.go (the reconcile lag).
package substrates

import (
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Kinds of actions.
const (
	CreateCluster  = "createCluster"
	AdoptCluster   = "adoptCluster"
	CreateNodePool = "createNodePool"
	// ReplaceNodePool makes the node pool that replaces one of another
	// shape; the old one is deleted (DeleteNodePool) once the new one is
	// ready and its nodes joined.
	ReplaceNodePool = "replaceNodePool"
	ResizeNodePool  = "resizeNodePool"
	DeleteNodePool  = "deleteNodePool"
	ApplyObjects    = "applyObjects"
	DeleteCluster   = "deleteCluster"
	RemoveObjects   = "removeObjects"
	ReleaseCluster  = "releaseCluster"
)

// Action is the one change a run makes next, through the store or in the
// cluster's Kubernetes API.
type Action struct {
	Kind string
	// Flavor is the index in the spec's flavors of the node pool to
	// create, replace or resize; Pool the index in Input.Pools of the pool
	// to resize, delete or replace (-1 for a create).
	Flavor int
	Pool   int
	// Name is the node pool to create (CreateNodePool, ReplaceNodePool),
	// or the one that replaces the pool to delete (DeleteNodePool with
	// Retire, once it is made).
	Name string
	// Retire: the pool deleted is one that a replacement retires.
	Retire bool
	// Mint: a new join token is minted before the objects are applied
	// (ApplyObjects).
	Mint bool
}

// Seen is what a run read besides the documents.
type Seen struct {
	// Joined are the substrate's joined nodes.
	Joined []resource.SubstrateNode
	// Held: the cluster's Kubernetes API holds bcd's objects as the spec
	// asks, its Secret with a token (not read in a teardown).
	Held bool
	// Nodes are the Nodes of the substrate's node pools.
	Nodes []kubeapply.Node
}

// Input is what a run knows when it plans.
type Input struct {
	Substrate model.Substrate
	// PreviousGone: the substrate waits for no previous one, or it is
	// deleted.
	PreviousGone bool
	// Cluster is the substrate's cluster; nil while it has none, or gone.
	Cluster *model.Cluster
	// Adopted: the cluster records the substrate's adoption.
	Adopted bool
	// Pools are the cluster's node pools that are not deleted, by
	// creation.
	Pools []model.NodePool
	// Seen is nil until the run read it (Decision.Observe).
	Seen *Seen
	// Acted: the run changed the node pools already; they are looked at
	// again by the next run before anything else.
	Acted bool
	// Removed: a RemoveObjects of this run found bcd's objects gone;
	// Tried: it was made.
	Removed, Tried bool
}

// Decision is a plan: the next action, or that the run must read Seen
// first, with the substrate as it should be and what to save with it.
type Decision struct {
	Action *Action
	// Observe: the run reads Seen and plans again.
	Observe   bool
	Substrate model.Substrate
	Events    []event.Event
	// Left names the joined nodes that left; Revoked the hashes of the
	// join tokens revoked.
	Left    []string
	Revoked []string
	// Lease: only a run holding the substrate's lease may carry the
	// decision out (it acts, or tears the substrate down).
	Lease bool
	// Converging: the next run comes at the converging pace.
	Converging bool
	// Done: the substrate is deleted; its chain ends.
	Done bool
	now  time.Time
}

// Plan decides the next step of a substrate. It never mutates in.
func Plan(in Input, now time.Time) Decision {
	p := &planner{in: &in, d: Decision{Substrate: in.Substrate.Clone(), now: now}}
	// A run that plans did not fail (Reconciler's failed records failures).
	p.d.Substrate.Status.Retrying = nil
	if in.Substrate.Spec.Deleting {
		p.planTeardown()
	} else {
		p.planCluster()
	}
	if p.d.Action != nil {
		p.d.Lease = true
	}
	return p.d
}

type planner struct {
	in *Input
	d  Decision
	// flavors are each flavor's node pools, once planPools found them;
	// serials the flavors' serials as they are now.
	flavors []flavorPools
	serials map[string]int
}

// act chooses the next action.
func (p *planner) act(a Action) {
	p.d.Action = &a
}

// Refused is the decision once the store or the cluster refused its
// action with msg: the substrate is in error with it.
func Refused(d *Decision, msg string) {
	d.Action = nil
	d.fail(msg)
}

// progress shows the substrate on its way, converging.
func (d *Decision) progress() {
	d.wait("")
}

// wait shows the substrate on its way: provisioning the first time,
// updating after it was ready once; pending with msg while it waits for
// its previous substrate.
func (d *Decision) wait(msg string) {
	st := resource.StateProvisioning
	switch {
	case msg != "":
		st = resource.StatePending
	case d.Substrate.Status.EverReady:
		st = resource.StateUpdating
	}
	d.setState(st, msg)
	d.Substrate.Status.ObservedGeneration = d.Substrate.Spec.Generation
	d.Converging = true
}

// fail puts the substrate in error with msg; kubernetes.substrate.error
// follows when it enters that error. The next run comes at the steady
// pace: only a new event of the pool, or the tenant, changes the outcome.
func (d *Decision) fail(msg string) {
	s := &d.Substrate
	s.Status.ObservedGeneration = s.Spec.Generation
	d.Converging = false
	if s.Status.State == resource.StateError && s.Status.Message == msg {
		return
	}
	d.setState(resource.StateError, msg)
	if s.Status.Announced != msg {
		s.Status.Announced = msg
		d.Events = append(d.Events, event.ForSubstrate(event.SubstrateError, s.View(), d.now))
	}
}

// ready: kubernetes.substrate.ready the first time, updated when ready
// again after a change.
func (d *Decision) ready() {
	s := &d.Substrate
	s.Status.ObservedGeneration = s.Spec.Generation
	if s.Status.State == resource.StateReady {
		return
	}
	d.setState(resource.StateReady, "")
	s.Status.Announced = ""
	typ := event.SubstrateUpdated
	if !s.Status.EverReady {
		typ = event.SubstrateReady
		s.Status.EverReady = true
	}
	d.Events = append(d.Events, event.ForSubstrate(typ, s.View(), d.now))
}

func (d *Decision) setState(st resource.State, msg string) {
	s := &d.Substrate.Status
	if s.State == st && s.Message == msg {
		return
	}
	s.State, s.Message, s.UpdatedAt = st, msg, d.now
}
