package substrates

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// Joiner serves kubernetesSubstrates.join: a node, through bcd, presents
// its substrate's join token and its name; it joins when it really is a
// Node of one of the substrate's node pools in the cluster's Kubernetes
// API.
type Joiner struct {
	fs      *firestore.Client
	store   *store.Store
	kube    Connector
	events  EventSender
	now     func() time.Time
	metrics JoinMetrics
}

// NewJoiner returns the join method's logic. now is the clock (nil:
// time.Now).
func NewJoiner(s *store.Store, kube Connector, events EventSender, now func() time.Time, opts ...JoinerOption) (*Joiner, error) {
	if s == nil || kube == nil || events == nil {
		return nil, errors.New("substrates: NewJoiner needs a store, a Kubernetes connector and an event sender")
	}
	if now == nil {
		now = time.Now
	}
	j := &Joiner{fs: s.Client(), store: s, kube: kube, events: events, now: now}
	for _, o := range opts {
		o(j)
	}
	return j, nil
}

// joinPrincipal prefixes the principal of a verified join token: its hash.
const joinPrincipal = "join:"

// Verify checks a join token (httpapi.Authenticator): the principal is
// the token's hash. An unknown or revoked token is UNAUTHENTICATED, as is
// a user's JWT.
func (j *Joiner) Verify(ctx context.Context, authorization string) (string, error) {
	principal, err := j.verify(ctx, authorization)
	if err != nil {
		// A call refused here never reaches Join: count it now.
		j.count(ctx, err)
	}
	return principal, err
}

func (j *Joiner) verify(ctx context.Context, authorization string) (string, error) {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || !strings.HasPrefix(token, "bcj_") || len(token) > 128 {
		return "", errs.E(errs.Unauthenticated, "a join token is required: Authorization: Bearer bcj_...")
	}
	hash := HashToken(token)
	snap, err := tokenRef(j.fs, hash).Get(ctx)
	if err != nil && !isNotFound(err) {
		return "", errs.Wrap(errs.Unavailable, err, "read join token")
	}
	if snap == nil || !snap.Exists() {
		return "", errs.E(errs.Unauthenticated, "the join token is unknown or revoked")
	}
	return joinPrincipal + hash, nil
}

// JoinResult is the answer of kubernetesSubstrates.join.
type JoinResult struct {
	SubstrateID string `json:"substrateId"`
	PoolID      string `json:"poolId"`
	NodeName    string `json:"nodeName"`
	Flavor      string `json:"flavor"`
}

// Join records the node as joined, once (kubernetes.substrate.node.joined).
func (j *Joiner) Join(ctx context.Context, principal string, in *input.Join) (JoinResult, error) {
	res, err := j.join(ctx, principal, in)
	j.count(ctx, err)
	return res, err
}

func (j *Joiner) join(ctx context.Context, principal string, in *input.Join) (JoinResult, error) {
	hash, ok := strings.CutPrefix(principal, joinPrincipal)
	if !ok {
		return JoinResult{}, errs.E(errs.Unauthenticated, "a join token is required")
	}
	grant, err := j.grant(ctx, hash)
	if err != nil {
		return JoinResult{}, err
	}
	ctx = logging.With(ctx, "tenantId", grant.TenantID, "substrateId", grant.SubstrateID, "node", in.NodeName)
	sub, err := j.substrate(ctx, grant)
	if err != nil {
		return JoinResult{}, err
	}
	c, err := j.cluster(ctx, sub)
	if err != nil {
		return JoinResult{}, err
	}
	node, flavor, err := j.node(ctx, sub, c, in)
	if err != nil {
		return JoinResult{}, err
	}
	res := JoinResult{SubstrateID: sub.ID, PoolID: sub.PoolID, NodeName: node.Name, Flavor: flavor}
	var events []outbox.Event
	nodeRef := nodesRef(j.fs, sub.TenantID, sub.ID).Doc(node.Name)
	subRef := substrateRef(j.fs, sub.TenantID, sub.ID)
	err = j.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		events = nil
		snaps, err := tx.GetAll([]*firestore.DocumentRef{tokenRef(j.fs, hash), subRef, nodeRef})
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if !snaps[0].Exists() {
			return errs.E(errs.Unauthenticated, "the join token is unknown or revoked")
		}
		if snaps[2].Exists() {
			return nil // joined already: idempotent
		}
		var cur Substrate
		if err := snaps[1].DataTo(&cur); err != nil {
			return fmt.Errorf("decode substrate: %w", err)
		}
		now := j.now()
		n := resource.SubstrateNode{Name: node.Name, Flavor: flavor, Zone: node.Zone, ProviderID: in.ProviderID, JoinedAt: now.UTC()}
		if err := tx.Create(nodeRef, n); err != nil {
			return err
		}
		if err := tx.Update(subRef, []firestore.Update{{Path: "joined", Value: firestore.Increment(1)}}); err != nil {
			return err
		}
		view := cur.View()
		view.JoinedNodes++
		e := outbox.SubstrateNodeEvent(outbox.SubstrateNodeJoined, view, n, now)
		events = append(events, e)
		return tx.Create(outbox.Ref(j.fs, e), e)
	})
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			return JoinResult{}, err
		}
		return JoinResult{}, errs.Wrap(errs.Unavailable, err, "record the join")
	}
	if len(events) > 0 {
		logging.FromContext(ctx).Info("Node joined the substrate", "flavor", flavor)
		j.events.Send(events)
	}
	return res, nil
}

func (j *Joiner) grant(ctx context.Context, hash string) (tokenGrant, error) {
	var g tokenGrant
	snap, err := tokenRef(j.fs, hash).Get(ctx)
	if err != nil && !isNotFound(err) {
		return g, errs.Wrap(errs.Unavailable, err, "read join token")
	}
	if snap == nil || !snap.Exists() {
		return g, errs.E(errs.Unauthenticated, "the join token is unknown or revoked")
	}
	if err := snap.DataTo(&g); err != nil {
		return g, fmt.Errorf("decode join token: %w", err)
	}
	return g, nil
}

func (j *Joiner) substrate(ctx context.Context, g tokenGrant) (*Substrate, error) {
	snap, err := substrateRef(j.fs, g.TenantID, g.SubstrateID).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, errs.Wrap(errs.Unavailable, err, "read substrate")
	}
	var s Substrate
	if snap == nil || !snap.Exists() {
		return nil, errs.E(errs.Unauthenticated, "the join token is unknown or revoked")
	}
	if err := snap.DataTo(&s); err != nil {
		return nil, fmt.Errorf("decode substrate: %w", err)
	}
	if !s.Active || s.Spec.Deleting {
		return nil, errs.E(errs.Unauthenticated, "the join token is unknown or revoked")
	}
	return &s, nil
}

func (j *Joiner) cluster(ctx context.Context, s *Substrate) (*lifecycle.Cluster, error) {
	if s.Status.ClusterID == "" {
		return nil, errs.E(errs.InvalidState, "substrate %s has no cluster yet", s.ID)
	}
	snap, err := j.store.ClusterRef(s.TenantID, s.Status.ClusterID).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, errs.Wrap(errs.Unavailable, err, "read cluster")
	}
	var c lifecycle.Cluster
	if snap == nil || !snap.Exists() {
		return nil, errs.E(errs.InvalidState, "substrate %s has no cluster", s.ID)
	}
	if err := snap.DataTo(&c); err != nil {
		return nil, fmt.Errorf("decode cluster: %w", err)
	}
	return &c, nil
}

// node checks, in the cluster's Kubernetes API, that the node is a Node of
// one of the substrate's node pools, and returns it with its flavor.
func (j *Joiner) node(ctx context.Context, s *Substrate, c *lifecycle.Cluster, in *input.Join) (Node, string, error) {
	ca, err := base64.StdEncoding.DecodeString(c.Status.CACertificate)
	if err != nil || c.Status.Endpoint == "" || len(ca) == 0 {
		return Node{}, "", errs.E(errs.Unavailable, "the Kubernetes API of cluster %s cannot be reached yet", c.ID)
	}
	api, err := j.kube.Connect(c.Status.Endpoint, ca)
	if err != nil {
		return Node{}, "", errs.Wrap(errs.Unavailable, err, "reach the cluster's Kubernetes API")
	}
	n, err := api.Node(ctx, in.NodeName)
	if errors.Is(err, ErrNoNode) {
		return Node{}, "", errs.E(errs.PermissionDenied, "node %s is not a Node of cluster %s", in.NodeName, c.Spec.Name)
	}
	if err != nil {
		return Node{}, "", errs.Wrap(errs.Unavailable, err, "read the Node from the cluster's Kubernetes API")
	}
	if n.ProviderID != "" && n.ProviderID != in.ProviderID {
		return Node{}, "", errs.E(errs.PermissionDenied, "node %s has provider ID %s, not %s", in.NodeName, n.ProviderID, in.ProviderID)
	}
	for _, f := range s.Spec.Flavors {
		if f.NodePool.Name == n.NodePool {
			return n, f.Name, nil
		}
	}
	return Node{}, "", errs.E(errs.PermissionDenied, "node %s is not in a node pool of substrate %s (its node pool is %q)", in.NodeName, s.ID, n.NodePool)
}
