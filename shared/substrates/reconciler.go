package substrates

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// EventSender takes committed events for publishing (outbox.Relay).
type EventSender interface {
	Send(events []outbox.Event)
}

// Config is what the substrates' runs put in their clusters.
type Config struct {
	// Image is bcd's container image.
	Image string
	// JoinURL is where bcd calls kubernetesSubstrates.join.
	JoinURL string
}

// Reconciler is the substrates' chain.Subject: the store reads a run's
// documents and saves its outcome (store.SubstrateSubject); the run steps.
type Reconciler struct {
	store.SubstrateSubject
	store  *store.Store
	kube   Connector
	events EventSender
	kick   Kicker
	cfg    Config
	now    func() time.Time
}

var _ chain.Subject = (*Reconciler)(nil)

// New returns the substrates' reconciler. The clusters and pools it makes
// go through s, as the API's do; events and kicks of those changes go to
// events and kick. now is the clock (nil: time.Now).
func New(s *store.Store, kube Connector, events EventSender, kick Kicker, cfg Config, now func() time.Time) (*Reconciler, error) {
	if s == nil || kube == nil || events == nil || kick == nil {
		return nil, errors.New("substrates: New needs a store, a Kubernetes connector, an event sender and a kicker")
	}
	if cfg.Image == "" || cfg.JoinURL == "" {
		return nil, errors.New("substrates: New needs bcd's image and the join URL")
	}
	if now == nil {
		now = time.Now
	}
	r := &Reconciler{store: s, kube: kube, events: events, kick: kick, cfg: cfg, now: now}
	r.SubstrateSubject = store.SubstrateSubject{Store: s, NewRun: r.newRun}
	return r, nil
}

// Kind is the chain kind of substrates.
func (r *Reconciler) Kind() string { return Kind }

func (r *Reconciler) newRun(sr *store.SubstrateRun) chain.Run {
	rd := &sr.Read
	return &run{SubstrateRun: sr, r: r, before: rd.Substrate, prevGone: rd.PreviousGone, cluster: rd.Cluster, adopted: rd.Adopted, pools: rd.Pools}
}

// run is one run of a substrate.
type run struct {
	*store.SubstrateRun
	r        *Reconciler
	before   lifecycle.Substrate
	prevGone bool
	cluster  *lifecycle.Cluster // nil: none yet, or gone
	adopted  bool               // the cluster records the substrate's adoption
	pools    []lifecycle.NodePool

	// What the step leaves, for Save.
	s       lifecycle.Substrate
	events  []outbox.Event
	left    []string // nodes that left
	revoked []string // hashes of revoked tokens
}

// Step moves the substrate one step towards its spec. Every step that
// changes anything (a cluster or pool through the store, objects in the
// cluster, a token) holds the lease; so does every run once the cluster
// and its pools are ready, since it checks and applies the objects.
func (u *run) Step(ctx context.Context, lease *chain.Lease) (chain.Outcome, error) {
	u.s = u.before
	u.s.Status.NodePools = slices.Clone(u.before.Status.NodePools)
	u.events, u.left, u.revoked = nil, nil, nil
	ctx = logging.With(ctx, "substrateId", u.s.ID, "poolId", u.s.PoolID)
	var out chain.Outcome
	var err error
	if u.s.Spec.Deleting {
		out, err = u.teardown(ctx, lease)
	} else {
		out, err = u.converge(ctx, lease)
	}
	if err != nil || out.NeedsLease {
		return out, err
	}
	u.Leave = store.SubstrateLeave{Substrate: u.s, Left: u.left, Revoked: u.revoked, Events: u.events}
	out.Changed = out.Changed || !reflect.DeepEqual(u.s.Status, u.before.Status) || u.s.Active != u.before.Active ||
		len(u.events) > 0 || len(u.left) > 0 || len(u.revoked) > 0
	out.Converged = u.converged()
	return out, nil
}

var needLease = chain.Outcome{NeedsLease: true}

// converge makes the cluster and pools, then the objects.
func (u *run) converge(ctx context.Context, lease *chain.Lease) (chain.Outcome, error) {
	s := &u.s
	if s.Spec.Problem != "" {
		return u.fail(s.Spec.Problem), nil
	}
	if s.Spec.After != "" && !u.prevGone {
		return u.wait(fmt.Sprintf("waiting for the pool's previous substrate %s to be deleted", s.Spec.After)), nil
	}
	caller := u.caller()
	switch s.Spec.Mode {
	case resource.SubstrateCreate:
		if s.Status.ClusterID == "" {
			if lease == nil {
				return needLease, nil
			}
			id, err := u.createCluster(ctx, caller)
			if err != nil {
				return u.refused(err)
			}
			s.Status.ClusterID = id
			return u.progress(), nil
		}
		if u.cluster == nil || !u.cluster.Active {
			return u.fail(fmt.Sprintf("the substrate's cluster %s is gone", s.Status.ClusterID)), nil
		}
	case resource.SubstrateAdopt:
		if u.cluster == nil || !u.cluster.Active {
			return u.fail(fmt.Sprintf("cluster %s to adopt does not exist", s.Spec.AdoptClusterID)), nil
		}
		if !u.adopted {
			if lease == nil {
				return needLease, nil
			}
			if _, err := u.r.store.AdoptCluster(ctx, caller, s.Spec.AdoptClusterID, s.Spec.AccountID); err != nil {
				return u.refused(err)
			}
			s.Status.ClusterID = s.Spec.AdoptClusterID
			return u.progress(), nil
		}
		s.Status.ClusterID = s.Spec.AdoptClusterID
	}
	c := u.cluster
	switch st, msg := lifecycle.ClusterState(c); st {
	case resource.StateError:
		return u.fail(fmt.Sprintf("cluster %s: %s", c.Spec.Name, msg)), nil
	case resource.StateDeleting, resource.StateDeleted:
		return u.fail(fmt.Sprintf("cluster %s is being deleted", c.Spec.Name)), nil
	}

	acted, out, err := u.nodePools(ctx, lease)
	if err != nil || out != nil {
		if out != nil {
			return *out, err
		}
		return chain.Outcome{}, err
	}
	if acted {
		return u.progress(), nil
	}
	if st, _ := lifecycle.ClusterState(c); st != resource.StateReady {
		return u.wait(""), nil
	}
	for _, p := range s.Status.NodePools {
		if p.State != resource.StateReady {
			return u.wait(""), nil
		}
	}
	if lease == nil {
		// A ready substrate whose objects are as applied and whose
		// joined nodes are all there is confirmed by reading only: the
		// run writes nothing. Anything else, or a failed read, is looked
		// at under the lease.
		if ok, err := u.unchanged(ctx); err != nil || !ok {
			return needLease, nil
		}
		return chain.Outcome{}, nil
	}
	return u.applyObjects(ctx, lease)
}

// nodePools makes, resizes and deletes the substrate's node pools so that
// there is one per flavor, and records them in the status. acted: a change
// was made (the run converges); out: the step ends here.
func (u *run) nodePools(ctx context.Context, lease *chain.Lease) (acted bool, out *chain.Outcome, err error) {
	s := &u.s
	c := u.cluster
	byName := map[string]*lifecycle.NodePool{}
	for i := range u.pools {
		byName[u.pools[i].Spec.Name] = &u.pools[i]
	}
	ask := func() (bool, *chain.Outcome, error) { o := needLease; return false, &o, nil }
	caller := u.caller()
	s.Status.NodePools = nil
	wanted := map[string]bool{}
	for _, f := range s.Spec.Flavors {
		name := f.NodePool.Name
		wanted[name] = true
		ref := resource.SubstrateNodePool{Flavor: f.Name, Name: name, State: resource.StatePending}
		p := byName[name]
		switch {
		case p == nil:
			if lease == nil {
				return ask()
			}
			spec := toResource(f.NodePool)
			req := store.CreateNodePoolRequest{ClusterID: c.ID, Spec: spec,
				IdempotencyKey: fmt.Sprintf("%s-%s-%d", s.ID, f.Name, s.Spec.Generation),
				RequestHash:    store.RequestHash(mustJSON(spec)),
				CheckZones:     func(string, []string) error { return nil }}
			res, err := u.r.store.CreateNodePool(ctx, caller, req)
			if err != nil {
				o, err := u.refused(err)
				return false, &o, err
			}
			u.afterCommit(ctx, res.Events, res.Kick)
			ref.NodePoolID = res.NodePool.ID
			acted = true
		case p.Spec.ManagedBy != s.ID:
			o := u.fail(fmt.Sprintf("node pool %s of cluster %s exists and was not made by the substrate", name, c.Spec.Name))
			return false, &o, nil
		default:
			ref.NodePoolID = p.ID
			ref.State, _ = lifecycle.NodePoolState(p)
			if p.Spec.Deleting {
				break // replaced: made again once it is deleted
			}
			if !sameShape(p.Spec, f.NodePool) {
				if lease == nil {
					return ask()
				}
				if err := u.deletePool(ctx, caller, p); err != nil {
					o, err := u.refused(err)
					return false, &o, err
				}
				ref.State, acted = resource.StateDeleting, true
				break
			}
			if p.Spec.NodeCount != f.NodePool.NodeCount || !reflect.DeepEqual(p.Spec.Autoscaling, f.NodePool.Autoscaling) {
				if lease == nil {
					return ask()
				}
				want := f.NodePool
				res, err := u.r.store.UpdateNodePool(ctx, caller, c.ID, p.ID, func(np resource.NodePool) (resource.NodePool, error) {
					np.NodeCount, np.Autoscaling = want.NodeCount, want.Autoscaling
					return np, nil
				})
				if err != nil {
					o, err := u.refused(err)
					return false, &o, err
				}
				u.afterCommit(ctx, res.Events, res.Kick)
				ref.State, acted = res.NodePool.State, true
			}
		}
		if ref.State == resource.StateError {
			msg := ""
			if p != nil {
				_, msg = lifecycle.NodePoolState(p)
			}
			s.Status.NodePools = append(s.Status.NodePools, ref)
			o := u.fail(fmt.Sprintf("node pool %s: %s", name, msg))
			return false, &o, nil
		}
		s.Status.NodePools = append(s.Status.NodePools, ref)
	}
	for i := range u.pools {
		p := &u.pools[i]
		if p.Spec.ManagedBy != s.ID || wanted[p.Spec.Name] || p.Spec.Deleting {
			continue
		}
		if lease == nil {
			return ask()
		}
		if err := u.deletePool(ctx, caller, p); err != nil {
			o, err := u.refused(err)
			return false, &o, err
		}
		acted = true
	}
	return acted, nil, nil
}

// applyObjects applies bcd's objects with a token (minted when there is
// none, or when its Secret went missing), then follows the nodes.
func (u *run) applyObjects(ctx context.Context, lease *chain.Lease) (chain.Outcome, error) {
	s := &u.s
	api, err := u.connect()
	if err != nil {
		return chain.Outcome{}, err
	}
	// Reading the Nodes first makes sure the API answers before a token
	// is minted that an unreachable API would leave unused.
	nodes, err := u.nodes(ctx, api)
	if err != nil {
		return chain.Outcome{}, err
	}
	objs := u.objects()
	if s.Status.Token.Hash == "" {
		if objs.Token, err = u.mint(ctx, lease); err != nil {
			return chain.Outcome{}, err
		}
	}
	_, err = api.Apply(ctx, objs)
	if errors.Is(err, kubeapply.ErrJoinSecretMissing) {
		logging.FromContext(ctx).Warn("The join token's Secret is missing or emptied; minting a new token")
		if objs.Token, err = u.mint(ctx, lease); err != nil {
			return chain.Outcome{}, err
		}
		_, err = api.Apply(ctx, objs)
	}
	switch {
	case isForeign(err):
		// Every foreign object is named, on one line.
		return u.fail("an object of the same name is not the substrate's: " + strings.ReplaceAll(err.Error(), "\n", "; ")), nil
	case err != nil:
		return chain.Outcome{}, fmt.Errorf("apply bcd's objects: %w", err)
	}
	s.Status.Applied = s.Spec.Generation
	if err := u.followNodes(ctx, nodes); err != nil {
		return chain.Outcome{}, err
	}
	u.ready()
	return chain.Outcome{}, nil
}

// unchanged reports whether the ready substrate's cluster holds its objects
// as applied for its spec, with its token's Secret, and every joined node
// is still a Node of its pools.
func (u *run) unchanged(ctx context.Context) (bool, error) {
	s := &u.s
	if s.Status.State != resource.StateReady || s.Status.Token.Hash == "" || s.Status.Applied != s.Spec.Generation {
		return false, nil
	}
	api, err := u.connect()
	if err != nil {
		return false, err
	}
	if ok, err := api.Check(ctx, u.objects()); err != nil || !ok {
		return false, err
	}
	nodes, err := u.nodes(ctx, api)
	if err != nil {
		return false, err
	}
	present := map[string]bool{}
	for _, n := range nodes {
		present[n.Name] = true
	}
	joined, err := u.joined(ctx)
	if err != nil {
		return false, err
	}
	for _, n := range joined {
		if !present[n.Name] {
			return false, nil
		}
	}
	return true, nil
}

// nodes lists the Nodes of the substrate's pools.
func (u *run) nodes(ctx context.Context, api KubeAPI) ([]kubeapply.Node, error) {
	names := make([]string, len(u.s.Spec.Flavors))
	for i, f := range u.s.Spec.Flavors {
		names[i] = f.NodePool.Name
	}
	nodes, err := api.Nodes(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("list the cluster's nodes: %w", err)
	}
	return nodes, nil
}

// followNodes notes the joined nodes that are no longer among the Nodes
// of the substrate's pools: they leave.
func (u *run) followNodes(ctx context.Context, nodes []kubeapply.Node) error {
	present := map[string]bool{}
	for _, n := range nodes {
		present[n.Name] = true
	}
	joined, err := u.joined(ctx)
	if err != nil {
		return err
	}
	for _, n := range joined {
		if !present[n.Name] {
			u.leave(n)
		}
	}
	return nil
}

func (u *run) joined(ctx context.Context) ([]resource.SubstrateNode, error) {
	return u.r.store.JoinedNodes(ctx, u.s.TenantID, u.s.ID, "", 0)
}

func (u *run) leave(n resource.SubstrateNode) {
	u.left = append(u.left, n.Name)
	view := u.s.View()
	view.JoinedNodes -= int64(len(u.left))
	u.events = append(u.events, outbox.SubstrateNodeEvent(outbox.SubstrateNodeLeft, view, n, u.r.now()))
}

// mint makes a new join token and records its hash (revoking the old
// one) before the token is put in the Secret: a run killed in between
// leaves a token that nobody holds, and the next run finds the Secret
// missing and mints again.
func (u *run) mint(ctx context.Context, lease *chain.Lease) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := "bcj_" + base64.RawURLEncoding.EncodeToString(b)
	s := &u.s
	t := lifecycle.JoinToken{Hash: HashToken(token), MintedAt: u.r.now()}
	old := s.Status.Token.Hash
	if err := u.r.store.RecordJoinToken(ctx, lease, s, t); err != nil {
		return "", err
	}
	logging.FromContext(ctx).Info("Minted a join token", "revokedOld", old != "")
	s.Status.Token = t
	u.before.Status.Token = t // written already
	return token, nil
}

// teardown undoes what the substrate made, then deletes it.
func (u *run) teardown(ctx context.Context, lease *chain.Lease) (chain.Outcome, error) {
	s := &u.s
	s.Status.Message = ""
	if s.Status.State != resource.StateDeleting {
		u.setState(resource.StateDeleting, "")
	}
	if lease == nil {
		return needLease, nil
	}
	// Nodes leave and the token is revoked first: nothing joins a
	// substrate on its way out.
	joined, err := u.joined(ctx)
	if err != nil {
		return chain.Outcome{}, err
	}
	for _, n := range joined {
		u.leave(n)
	}
	if h := s.Status.Token.Hash; h != "" {
		u.revoked = append(u.revoked, h)
		s.Status.Token = lifecycle.JoinToken{}
	}
	caller := u.caller()
	c := u.cluster
	gone := c == nil || !c.Active
	switch {
	case s.Status.ClusterID == "" || gone:
	case s.Spec.Mode == resource.SubstrateCreate:
		if !c.Spec.Deleting {
			res, err := u.r.store.DeleteCluster(ctx, caller, c.ID)
			if err != nil {
				return u.refused(err)
			}
			u.afterCommit(ctx, res.Events, res.Kick)
		}
		return u.tearing(), nil
	default:
		if st, _ := lifecycle.ClusterState(c); st == resource.StateReady || st == resource.StateUpdating {
			api, err := u.connect()
			if err != nil {
				return chain.Outcome{}, err
			}
			removed, err := api.Remove(ctx, s.PoolID)
			if err != nil {
				return chain.Outcome{}, fmt.Errorf("remove bcd's objects: %w", err)
			}
			if !removed {
				return u.tearing(), nil
			}
		}
		busy := false
		for i := range u.pools {
			p := &u.pools[i]
			if p.Spec.ManagedBy != s.ID {
				continue
			}
			busy = true
			if !p.Spec.Deleting {
				if err := u.deletePool(ctx, caller, p); err != nil {
					return u.refused(err)
				}
			}
		}
		if busy {
			return u.tearing(), nil
		}
		if u.adopted {
			if err := u.r.store.ReleaseCluster(ctx, s.TenantID, c.ID, s.ID); err != nil {
				return chain.Outcome{}, err
			}
		}
	}
	now := u.r.now()
	s.Status.NodePools = nil
	u.setState(resource.StateDeleted, "")
	s.Active = false
	expire := now.Add(lifecycle.DeletedTTL)
	s.ExpireAt = &expire
	u.events = append(u.events, outbox.SubstrateEvent(outbox.SubstrateDeleted, u.s.View(), now))
	return chain.Outcome{Done: true}, nil
}

func (u *run) tearing() chain.Outcome {
	return chain.Outcome{Converging: true}
}

// States and their events.

func (u *run) progress() chain.Outcome {
	u.wait("")
	return chain.Outcome{Converging: true}
}

// wait shows the substrate on its way: provisioning the first time,
// updating after it was ready once; pending while it waits for its
// previous substrate.
func (u *run) wait(msg string) chain.Outcome {
	st := resource.StateProvisioning
	switch {
	case msg != "":
		st = resource.StatePending
	case u.s.Status.EverReady:
		st = resource.StateUpdating
	}
	u.setState(st, msg)
	u.s.Status.ObservedGeneration = u.s.Spec.Generation
	return chain.Outcome{Converging: true}
}

// fail puts the substrate in error with msg; kubernetes.substrate.error
// follows when it enters that error.
func (u *run) fail(msg string) chain.Outcome {
	s := &u.s
	s.Status.ObservedGeneration = s.Spec.Generation
	if s.Status.State == resource.StateError && s.Status.Message == msg {
		return chain.Outcome{}
	}
	u.setState(resource.StateError, msg)
	if s.Status.Announced != msg {
		s.Status.Announced = msg
		u.events = append(u.events, outbox.SubstrateEvent(outbox.SubstrateError, s.View(), u.r.now()))
	}
	return chain.Outcome{}
}

// ready: kubernetes.substrate.ready the first time, updated when ready
// again after a change.
func (u *run) ready() {
	s := &u.s
	s.Status.ObservedGeneration = s.Spec.Generation
	if s.Status.State == resource.StateReady {
		return
	}
	u.setState(resource.StateReady, "")
	s.Status.Announced = ""
	typ := outbox.SubstrateUpdated
	if !s.Status.EverReady {
		typ = outbox.SubstrateReady
		s.Status.EverReady = true
	}
	u.events = append(u.events, outbox.SubstrateEvent(typ, s.View(), u.r.now()))
}

func (u *run) setState(st resource.State, msg string) {
	s := &u.s.Status
	if s.State == st && s.Message == msg {
		return
	}
	s.State, s.Message, s.UpdatedAt = st, msg, u.r.now()
}

// refused turns what the store refused into the substrate's error; any
// other failure is transient.
func (u *run) refused(err error) (chain.Outcome, error) {
	switch errs.KindOf(err) {
	case errs.Invalid, errs.InvalidState, errs.Conflict, errs.NotFound, errs.Unsupported, errs.Quota:
		return u.fail(err.Error()), nil
	}
	return chain.Outcome{}, err
}

func (u *run) caller() store.Caller {
	return store.Caller{TenantID: u.s.TenantID, Principal: "substrate:" + u.s.ID, Substrate: u.s.ID, Pool: u.s.PoolID}
}

// afterCommit hands a store change's events to the relay and kicks the
// cluster's chain, as the API does.
func (u *run) afterCommit(ctx context.Context, events []outbox.Event, kick *chain.Kick) {
	u.r.events.Send(events)
	if kick != nil {
		if err := u.r.kick.Kick(ctx, *kick); err != nil {
			logging.FromContext(ctx).Warn("Cluster kick failed; the watchdog will restart its chain", "error", err)
		}
	}
}

func (u *run) createCluster(ctx context.Context, caller store.Caller) (string, error) {
	s := &u.s
	spec := resource.Cluster{Name: ClusterName(s.PoolID), Mode: resource.ModeStandard, Region: s.Spec.Region,
		ReleaseChannel: s.Spec.ReleaseChannel, Labels: map[string]string{}}
	pools := make([]resource.NodePool, len(s.Spec.Flavors))
	for i, f := range s.Spec.Flavors {
		pools[i] = toResource(f.NodePool)
	}
	req := store.CreateClusterRequest{PoolID: s.PoolID, Spec: spec, NodePools: pools, Zones: s.Spec.Zones,
		IdempotencyKey: s.ID + "-cluster", RequestHash: store.RequestHash(mustJSON([]any{spec, pools, s.Spec.Zones})),
		CheckPlacement: func(map[string][]string) error { return nil }}
	res, err := u.r.store.CreateCluster(ctx, caller, req)
	if err != nil {
		return "", err
	}
	u.afterCommit(ctx, res.Events, res.Kick)
	logging.FromContext(ctx).Info("Created the substrate's cluster", "clusterId", res.Cluster.ID)
	return res.Cluster.ID, nil
}

func (u *run) deletePool(ctx context.Context, caller store.Caller, p *lifecycle.NodePool) error {
	res, err := u.r.store.DeleteNodePool(ctx, caller, p.ClusterID, p.ID)
	if err != nil {
		return err
	}
	u.afterCommit(ctx, res.Events, res.Kick)
	logging.FromContext(ctx).Info("Deleting a substrate node pool", "nodePool", p.Spec.Name)
	return nil
}

func (u *run) connect() (KubeAPI, error) {
	c := u.cluster
	ca, err := base64.StdEncoding.DecodeString(c.Status.CACertificate)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: its CA certificate is not base64: %w", c.ID, err)
	}
	if c.Status.Endpoint == "" || len(ca) == 0 {
		return nil, fmt.Errorf("cluster %s has no endpoint or CA yet", c.ID)
	}
	return u.r.kube.Connect(c.Status.Endpoint, ca)
}

func (u *run) objects() kubeapply.Desired {
	o := kubeapply.Desired{PoolID: u.s.PoolID, Image: u.r.cfg.Image, JoinURL: u.r.cfg.JoinURL}
	seen := map[resource.Taint]bool{}
	for _, f := range u.s.Spec.Flavors {
		o.NodePools = append(o.NodePools, f.NodePool.Name)
		taints := f.NodePool.Taints
		if f.NodePool.Accelerators != nil {
			// GKE taints the nodes of GPU pools itself.
			taints = append(slices.Clone(taints), gpuTaint)
		}
		for _, t := range taints {
			if !seen[t] {
				seen[t] = true
				o.Tolerations = append(o.Tolerations, t)
			}
		}
	}
	return o
}

// gpuTaint is the taint GKE puts on every node with GPUs.
var gpuTaint = resource.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}

// sameShape reports whether a pool's spec has the flavor's fields that a
// pool cannot change in place (all but its size).
func sameShape(a, b lifecycle.NodePoolSpec) bool {
	shape := func(s lifecycle.NodePoolSpec) resource.NodePool {
		p := toResource(s)
		p.NodeCount, p.Autoscaling, p.Name, p.ManagedBy = 0, nil, "", ""
		p.Normalize()
		return p
	}
	return reflect.DeepEqual(shape(a), shape(b))
}

func toResource(s lifecycle.NodePoolSpec) resource.NodePool {
	p := resource.NodePool{Name: s.Name, MachineType: s.MachineType, NodeCount: s.NodeCount, Autoscaling: s.Autoscaling,
		DiskGiB: s.DiskGiB, DiskType: s.DiskType, Spot: s.Spot, Accelerators: s.Accelerators,
		Zones: slices.Clone(s.Zones), Labels: s.Labels, Taints: slices.Clone(s.Taints)}
	p.Normalize()
	return p
}

// HashToken is the hex SHA-256 of a join token: its record's ID.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// isForeign reports whether err holds a *kubeapply.ForeignError.
func isForeign(err error) bool {
	_, ok := errors.AsType[*kubeapply.ForeignError](err)
	return ok
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs always marshal
	}
	return b
}
