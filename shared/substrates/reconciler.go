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
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// EventSender takes committed events for publishing (outbox.Relay): the
// one event sender, of the runs, the join and the API's handlers.
type EventSender interface {
	Send(events []event.Event)
}

// Config is what the substrates' runs put in their clusters.
type Config struct {
	// Image is bcd's container image.
	Image string
	// JoinURL is where bcd calls kubernetesSubstrates.join.
	JoinURL string
}

// Store is what a substrate's run reads and writes (store.Store): its
// documents, the clusters and pools it makes as the API's callers do, its
// nodes and join token, and what it leaves.
type Store interface {
	LoadSubstrate(rd *chain.Reader, snap chain.Doc) (store.SubstrateRead, error)
	SaveSubstrateRun(tx chain.Tx, now chain.Doc, read store.SubstrateRead, l store.SubstrateLeave) ([]event.Event, []chain.Kick, error)
	JoinedNodes(ctx context.Context, tenantID, substrateID, after string, limit int) ([]resource.SubstrateNode, error)
	RecordJoinToken(ctx context.Context, lease *chain.Lease, sub *model.Substrate, t model.JoinToken) error
	CreateCluster(ctx context.Context, c auth.Principal, req store.CreateClusterRequest) (store.ClusterResult, error)
	AdoptCluster(ctx context.Context, c auth.Principal, clusterID, accountID string) (resource.Cluster, error)
	ReleaseCluster(ctx context.Context, c auth.Principal, clusterID string) error
	DeleteCluster(ctx context.Context, c auth.Principal, clusterID string) (store.ClusterResult, error)
	CreateNodePool(ctx context.Context, c auth.Principal, req store.CreateNodePoolRequest) (store.NodePoolResult, error)
	UpdateNodePool(ctx context.Context, c auth.Principal, clusterID, nodePoolID string, resize model.Resize) (store.NodePoolResult, error)
	DeleteNodePool(ctx context.Context, c auth.Principal, clusterID, nodePoolID string) (store.NodePoolResult, error)
}

// Reconciler is the substrates' chain.Subject: a run reads its
// documents through the store (store.LoadSubstrate), plans (Plan),
// carries out the plan's actions, and saves what it leaves through the
// store (store.SaveSubstrateRun).
type Reconciler struct {
	store  Store
	kube   Connector
	events EventSender
	kick   chain.Kicker
	cfg    Config
	now    func() time.Time
	// trace, when set, is told each action a run carried out, with the
	// input it was planned on (the tests' record of a run's trajectory).
	trace func(Action, Input)
}

var _ chain.Subject = (*Reconciler)(nil)

// Option configures a Reconciler or a Previewer.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock sets the clock; nil (the default) means the real one.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) {
		if c != nil {
			o.now = c.Now
		}
	}
}

// clockOf returns the clock opts set.
func clockOf(opts []Option) func() time.Time {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o.now
}

// New returns the substrates' reconciler. The clusters and pools it makes
// go through s, as the API's do; events and kicks of those changes go to
// events and kick.
func New(s Store, kube Connector, events EventSender, kick chain.Kicker, cfg Config, opts ...Option) (*Reconciler, error) {
	if s == nil || kube == nil || events == nil || kick == nil {
		return nil, errors.New("substrates: New needs a store, a Kubernetes connector, an event sender and a kicker")
	}
	if cfg.Image == "" || cfg.JoinURL == "" {
		return nil, errors.New("substrates: New needs bcd's image and the join URL")
	}
	now := clockOf(opts)
	return &Reconciler{store: s, kube: kube, events: events, kick: kick, cfg: cfg, now: now}, nil
}

// Kind is the chain kind of substrates.
func (r *Reconciler) Kind() string { return Kind }

// Load reads the substrate's cluster and pools, and its previous
// substrate while it waits for it.
func (r *Reconciler) Load(rd *chain.Reader, snap chain.Doc) (chain.Run, error) {
	read, err := r.store.LoadSubstrate(rd, snap)
	if err != nil {
		return nil, err
	}
	in := Input{Substrate: read.Substrate, PreviousGone: read.PreviousGone, Cluster: read.Cluster, Adopted: read.Adopted, Pools: read.Pools}
	return &run{r: r, read: read, in: in}, nil
}

// run is one run of a substrate.
type run struct {
	r    *Reconciler
	read store.SubstrateRead // as read; never changed
	// leave is what the run leaves, for its Save.
	leave store.SubstrateLeave
	// woken are the kicks of the substrates the last Save woke.
	woken []chain.Kick
	in    Input // as read, with what the run saw and the effects of what it did
	// acted: the run made an action (the store or the cluster changed).
	acted bool
	// minted is the join token the run recorded, if any: the store holds
	// it from then on, whatever becomes of the apply it was minted for.
	minted model.JoinToken
}

// maxActions bounds the actions of one run: one per node pool of the
// most flavors a pool may have, and a few more.
const maxActions = 32

// Plan plans, reads what the plan needs and plans again, without the
// lease: a plan that acts, or tears down, asks for it (Act).
func (u *run) Plan(ctx context.Context) (chain.Plan, error) {
	out, err := u.step(ctx, nil)
	if errors.Is(err, errNeedsLease) {
		return chain.Plan{Act: true}, nil
	}
	return chain.Plan{Outcome: out}, err
}

// Act carries out the plan under the lease: its actions one at a time,
// each followed by a plan of what it left (Effect), until the plan has
// none for this run. It plans again from what Plan observed, which it
// keeps.
func (u *run) Act(ctx context.Context, lease *chain.Lease) (chain.Outcome, error) {
	return u.step(ctx, lease)
}

// errNeedsLease: the plan acts, and the run holds no lease.
var errNeedsLease = errors.New("the plan needs the lease")

// step plans, observes, and acts (under lease only) until the plan has
// nothing more for this run.
func (u *run) step(ctx context.Context, lease *chain.Lease) (chain.Outcome, error) {
	ctx = logging.With(ctx, "substrateId", u.in.Substrate.ID, "poolId", u.in.Substrate.PoolID)
	var d Decision
	for i := range maxActions + 1 {
		if i == maxActions {
			// What is left is done by the next run, soon.
			d.Converging = true
			break
		}
		d = Plan(u.in, u.r.now())
		if d.Observe {
			refused, err := u.look(ctx, &d)
			if err != nil {
				return u.failed(ctx, err)
			}
			if refused {
				break
			}
			continue
		}
		if d.Lease && lease == nil {
			return chain.Outcome{}, errNeedsLease
		}
		if d.Action == nil {
			break
		}
		o, done, err := u.act(ctx, lease, &d)
		if err != nil {
			return u.failed(ctx, err)
		}
		u.acted = true
		if done {
			break
		}
		if u.r.trace != nil {
			u.r.trace(*d.Action, u.in)
		}
		next, err := Effect(u.in, &d, o)
		if err != nil {
			// The store accepted what the run's read no longer shows:
			// the next run reads it afresh.
			logging.FromContext(ctx).Warn("The store changed under the run; the next run reads it", "error", err)
			d.Converging = true
			break
		}
		u.in = next
	}
	return u.leaveWith(&d), nil
}

// look observes what the decision d asks to see (observe) into the run's
// input. refused: what it saw is the tenant's to change, and d says so.
func (u *run) look(ctx context.Context, d *Decision) (refused bool, err error) {
	seen, err := u.observe(ctx, d)
	// A grant is the tenant's to make: the substrate shows it, and a run
	// at the steady pace looks again. Objects the spec asks for that
	// cannot be applied never will be: only a new event of the pool
	// changes them.
	msg := accessRefused(u.in.Cluster, err)
	if msg == "" {
		msg = invalidObjects(err)
	}
	if msg != "" {
		Refused(d, msg)
		d.Observe = false
		return true, nil
	}
	if err != nil {
		return false, err
	}
	u.in.Seen = seen
	return false, nil
}

// leaveWith is the outcome of a run that leaves the substrate as d
// does, which it keeps for its Save.
func (u *run) leaveWith(d *Decision) chain.Outcome {
	before := &u.read.Substrate
	u.leave = store.SubstrateLeave{Substrate: d.Substrate, Left: d.Left, Revoked: d.Revoked, Events: d.Events}
	out := chain.Outcome{
		Changed: u.acted || !reflect.DeepEqual(d.Substrate.Status, before.Status) || d.Substrate.Active != before.Active ||
			len(d.Events) > 0 || len(d.Left) > 0 || len(d.Revoked) > 0,
		Converged: converged(before, &d.Substrate),
	}
	switch {
	case d.Done:
		out.Next = chain.Done
	case d.Converging:
		out.Next = chain.Converging
	}
	return out
}

var _ chain.Waking = (*run)(nil)

// Save writes the run's status, removes the nodes that left and the
// revoked tokens, and wakes the pool's next substrate when the run
// deletes the one it waits for.
func (u *run) Save(tx chain.Tx, now chain.Doc) ([]event.Event, error) {
	events, woken, err := u.r.store.SaveSubstrateRun(tx, now, u.read, u.leave)
	u.woken = woken
	return events, err
}

// Woken are the chains the last Save woke (chain.Waking).
func (u *run) Woken() []chain.Kick { return u.woken }

// observe reads the substrate's joined nodes, and unless it is torn down,
// what its cluster's Kubernetes API holds: whether bcd's objects are as
// applied, and the Nodes of its pools (read before any token is minted,
// so that an unreachable API leaves no token unused).
func (u *run) observe(ctx context.Context, d *Decision) (*Seen, error) {
	s := &u.in.Substrate
	joined, err := u.r.store.JoinedNodes(ctx, s.TenantID, s.ID, "", 0)
	if err != nil {
		return nil, fmt.Errorf("read joined nodes: %w", err)
	}
	seen := &Seen{Joined: joined}
	if s.Spec.Deleting {
		return seen, nil
	}
	objs := u.objects(d)
	if err := kubeapply.Validate(objs); err != nil {
		return nil, &objectsError{err}
	}
	api, err := u.connect()
	if err != nil {
		return nil, err
	}
	if seen.Nodes, err = api.Nodes(ctx, objs.NodePools); err != nil {
		return nil, fmt.Errorf("list the cluster's nodes: %w", err)
	}
	if s.Status.Token.Hash != "" {
		if seen.Held, err = api.Check(ctx, objs); err != nil {
			return nil, fmt.Errorf("check bcd's objects: %w", err)
		}
	}
	return seen, nil
}

// act carries out the decision's action under the lease, and returns what
// the store or the cluster answered that the action's Effect needs. done:
// the action ended the run, d being its outcome (the store or the cluster
// refused it, and the substrate is in error; or it waits). Any other
// failure is returned, and the run is retried.
func (u *run) act(ctx context.Context, lease *chain.Lease, d *Decision) (o Outcome, done bool, err error) {
	switch d.Action.Kind {
	case ApplyObjects:
		return u.applyObjects(ctx, lease, d)
	case RemoveObjects:
		return u.removeObjects(ctx, d)
	case ReleaseCluster:
		s := &u.in.Substrate
		if err := u.r.store.ReleaseCluster(ctx, auth.Substrate(s.TenantID, s.ID, s.PoolID), u.in.Cluster.ID); err != nil {
			return Outcome{}, true, err
		}
		return Outcome{}, false, nil
	}
	o, c, err := u.change(ctx, d)
	if err != nil {
		return Outcome{}, true, u.refused(d, err)
	}
	u.afterCommit(ctx, c.events, c.kick)
	return o, false, nil
}

// committed is what a change the store committed leaves to send: its
// events, and the kick of the chain it restarted.
type committed struct {
	events []event.Event
	kick   *chain.Kick
}

// change makes the decision's change to the substrate's cluster or pools
// through the store, as the API's handlers do.
func (u *run) change(ctx context.Context, d *Decision) (Outcome, committed, error) {
	a := d.Action
	s := &u.in.Substrate
	caller := auth.Substrate(s.TenantID, s.ID, s.PoolID)
	log := logging.FromContext(ctx)
	switch a.Kind {
	case CreateCluster:
		spec, pools := clusterRequest(s)
		req := store.CreateClusterRequest{PoolID: s.PoolID, Spec: spec, NodePools: pools,
			IdempotencyKey: s.ID + "-cluster", RequestHash: store.RequestHash(mustJSON([]any{spec, pools}))}
		res, err := u.r.store.CreateCluster(ctx, caller, req)
		if err != nil {
			return Outcome{}, committed{}, err
		}
		log.Info("Created the substrate's cluster", "clusterId", res.Cluster.ID)
		o := Outcome{ClusterID: res.Cluster.ID, Zones: res.Zones}
		for _, np := range res.NodePools {
			o.PoolIDs = append(o.PoolIDs, np.ID)
		}
		return o, committed{res.Events, res.Kick}, nil
	case AdoptCluster:
		_, err := u.r.store.AdoptCluster(ctx, caller, s.Spec.AdoptClusterID, s.Spec.AccountID)
		return Outcome{}, committed{}, err
	case CreateNodePool, ReplaceNodePool:
		return u.createPool(ctx, caller, d)
	case ResizeNodePool:
		p := &u.in.Pools[a.Pool]
		res, err := u.r.store.UpdateNodePool(ctx, caller, p.ClusterID, p.ID, resizeTo(s.Spec.Flavors[a.Flavor].NodePool))
		if err != nil {
			return Outcome{}, committed{}, err
		}
		log.Info("Resized a substrate node pool", "nodePool", p.Spec.Name)
		return Outcome{}, committed{res.Events, res.Kick}, nil
	case DeleteNodePool:
		p := &u.in.Pools[a.Pool]
		res, err := u.r.store.DeleteNodePool(ctx, caller, p.ClusterID, p.ID)
		if err != nil {
			return Outcome{}, committed{}, err
		}
		log.Info("Deleting a substrate node pool", "nodePool", p.Spec.Name)
		return Outcome{}, committed{res.Events, res.Kick}, nil
	case DeleteCluster:
		res, err := u.r.store.DeleteCluster(ctx, caller, u.in.Cluster.ID)
		if err != nil {
			return Outcome{}, committed{}, err
		}
		return Outcome{}, committed{res.Events, res.Kick}, nil
	}
	return Outcome{}, committed{}, fmt.Errorf("unknown action %q", a.Kind)
}

// createPool creates a node pool of the substrate's, new or replacing
// one.
func (u *run) createPool(ctx context.Context, caller auth.Principal, d *Decision) (Outcome, committed, error) {
	a := d.Action
	s := &u.in.Substrate
	spec := poolSpec(s, a)
	req := store.CreateNodePoolRequest{ClusterID: u.in.Cluster.ID, Spec: spec,
		IdempotencyKey: fmt.Sprintf("%s-%s-%d", s.ID, spec.Name, s.Spec.Generation),
		RequestHash:    store.RequestHash(mustJSON(spec))}
	res, err := u.r.store.CreateNodePool(ctx, caller, req)
	if err != nil {
		return Outcome{}, committed{}, err
	}
	log := logging.FromContext(ctx)
	if a.Kind == ReplaceNodePool {
		log.Info("Created a substrate node pool to replace one", "nodePool", spec.Name, "replaces", u.in.Pools[a.Pool].Spec.Name)
	} else {
		log.Info("Created a substrate node pool", "nodePool", spec.Name)
	}
	return Outcome{PoolIDs: []string{res.NodePool.ID}}, committed{res.Events, res.Kick}, nil
}

// applyObjects applies bcd's objects to the cluster (apply), and says
// what it refused or waits for on the substrate.
func (u *run) applyObjects(ctx context.Context, lease *chain.Lease, d *Decision) (Outcome, bool, error) {
	foreign, err := u.apply(ctx, lease, d)
	if u.minted.Hash != "" {
		// Whatever the apply did, the store holds the token now.
		d.Substrate.Status.Token = u.minted
	}
	if msg := invalidObjects(err); msg != "" {
		Refused(d, msg)
		return Outcome{}, true, nil
	}
	if msg := accessRefused(u.in.Cluster, err); msg != "" {
		Refused(d, msg)
		return Outcome{}, true, nil
	}
	if errors.Is(err, kubeapply.ErrTerminating) {
		// An earlier teardown's objects are still going: a wait,
		// not a failure.
		logging.FromContext(ctx).Info("Waiting for bcd's objects of an earlier teardown to be deleted", "error", err)
		d.Action = nil
		d.progress()
		d.setState(d.Substrate.Status.State, "waiting for bcd's objects of an earlier teardown to be deleted")
		return Outcome{}, true, nil
	}
	if err != nil {
		return Outcome{}, true, err
	}
	if foreign != "" {
		Refused(d, foreign)
		return Outcome{}, true, nil
	}
	return Outcome{Token: u.minted}, false, nil
}

// removeObjects removes bcd's objects from the cluster.
func (u *run) removeObjects(ctx context.Context, d *Decision) (Outcome, bool, error) {
	api, err := u.connect()
	if err != nil {
		return Outcome{}, true, err
	}
	gone, err := api.Remove(ctx, u.in.Substrate.PoolID)
	if msg := accessRefused(u.in.Cluster, err); msg != "" {
		Refused(d, msg)
		return Outcome{}, true, nil
	}
	if err != nil {
		return Outcome{}, true, fmt.Errorf("remove bcd's objects: %w", err)
	}
	return Outcome{Gone: gone}, false, nil
}

// refused turns what the store refused into the substrate's error; any
// other failure is transient, and returned.
func (u *run) refused(d *Decision, err error) error {
	switch errs.KindOf(err) {
	case errs.Invalid, errs.InvalidState, errs.Conflict, errs.NotFound, errs.Unsupported, errs.Quota:
		Refused(d, errs.Public(err, internalReason))
		return nil
	}
	return err
}

// apply applies bcd's objects with a token: a new one when mint is set,
// or when its Secret went missing. foreign, when set, is why an object of
// the same name is not the substrate's (nothing was written).
func (u *run) apply(ctx context.Context, lease *chain.Lease, d *Decision) (foreign string, err error) {
	api, err := u.connect()
	if err != nil {
		return "", err
	}
	objs := u.objects(d)
	if err := kubeapply.Validate(objs); err != nil {
		return "", &objectsError{err}
	}
	if d.Action.Mint {
		if objs.Token, err = u.mint(ctx, lease); err != nil {
			return "", err
		}
	}
	_, err = api.Apply(ctx, objs)
	if errors.Is(err, kubeapply.ErrJoinSecretMissing) {
		logging.FromContext(ctx).Warn("The join token's Secret is missing or emptied; minting a new token")
		if objs.Token, err = u.mint(ctx, lease); err != nil {
			return "", err
		}
		_, err = api.Apply(ctx, objs)
	}
	if _, ok := errors.AsType[*kubeapply.ForeignError](err); ok {
		// Every foreign object is named, on one line.
		return foreignPrefix + ": " + strings.ReplaceAll(err.Error(), "\n", "; "), nil
	}
	if err != nil {
		return "", fmt.Errorf("apply bcd's objects: %w", err)
	}
	return "", nil
}

// mint makes a new join token and records its hash (revoking the old
// one, the last this run minted if any) before the token is put in the
// Secret (store.RecordJoinToken). The run's input keeps the token it read
// until the apply's Effect: u.minted is the store's record meanwhile.
func (u *run) mint(ctx context.Context, lease *chain.Lease) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := "bcj_" + base64.RawURLEncoding.EncodeToString(b)
	s := u.in.Substrate
	if u.minted.Hash != "" {
		s.Status.Token = u.minted
	}
	t := model.JoinToken{Hash: HashToken(token), MintedAt: u.r.now()}
	old := s.Status.Token.Hash
	if err := u.r.store.RecordJoinToken(ctx, lease, &s, t); err != nil {
		return "", err
	}
	logging.FromContext(ctx).Info("Minted a join token", "revokedOld", old != "")
	u.minted = t
	return token, nil
}

// afterCommit hands a store change's events to the relay and kicks the
// cluster's chain, as the API does.
func (u *run) afterCommit(ctx context.Context, events []event.Event, kick *chain.Kick) {
	u.r.events.Send(events)
	if kick != nil {
		if err := u.r.kick.Kick(ctx, *kick); err != nil {
			logging.FromContext(ctx).Warn("Cluster kick failed; the watchdog will restart its chain", "error", err)
		}
	}
}

// connect reaches the cluster's Kubernetes API as its account: the
// tenant's impersonated service account in a tenant's project.
func (u *run) connect() (KubeAPI, error) {
	t, err := TargetOf(u.in.Cluster)
	if err != nil {
		return nil, err
	}
	return u.r.kube.Connect(t)
}

// objects are bcd's objects as the substrate's spec asks for them, on the
// node pools the decision lists (desiredObjects).
func (u *run) objects(d *Decision) kubeapply.Desired {
	return desiredObjects(d, u.in.Pools, u.r.cfg)
}

// gpuTaint is the taint GKE puts on every node with GPUs.
var gpuTaint = resource.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}

// HashToken is the hex SHA-256 of a join token: its record's ID.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs always marshal
	}
	return b
}
