// Package join serves kubernetesSubstrates.join (API.md §9): bcd, on a
// node, presents its substrate's join token and the node's name, and the
// node joins when it really is a Node of one of the substrate's node
// pools in the cluster's Kubernetes API, which the join reads as the
// substrate's runs do (substrates.Connector).
package join

import (
	"context"
	"errors"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// Store is what a join reads and writes of the store: the grant of a join
// token, the substrate and cluster it joins, and the join's record.
type Store interface {
	JoinGrant(ctx context.Context, hash string) (*store.JoinGrant, error)
	Substrate(ctx context.Context, tenantID, id string) (*model.Substrate, error)
	Cluster(ctx context.Context, tenantID, id string) (*model.Cluster, error)
	RecordJoin(ctx context.Context, hash string, g store.JoinGrant, n resource.SubstrateNode) ([]event.Event, *chain.Kick, error)
}

// Joiner serves kubernetesSubstrates.join: a node, through bcd, presents
// its substrate's join token and its name; it joins when it really is a
// Node of one of the substrate's node pools in the cluster's Kubernetes
// API.
type Joiner struct {
	store   Store
	kube    substrates.Connector
	events  substrates.EventSender
	now     func() time.Time
	metrics Metrics
	kick    chain.Kicker // WithKicks
}

// New returns the join method's logic.
func New(s Store, kube substrates.Connector, events substrates.EventSender, opts ...Option) (*Joiner, error) {
	if s == nil || kube == nil || events == nil {
		return nil, errors.New("join: New needs a store, a Kubernetes connector and an event sender")
	}
	j := &Joiner{store: s, kube: kube, events: events, now: time.Now}
	for _, o := range opts {
		o(j)
	}
	return j, nil
}

// WithClock sets the joiner's clock; nil (the default) means the real
// one.
func WithClock(c clock.PassiveClock) Option {
	return func(j *Joiner) {
		if c != nil {
			j.now = c.Now
		}
	}
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
	hash := substrates.HashToken(token)
	g, err := j.store.JoinGrant(ctx, hash)
	if err != nil {
		return "", err
	}
	if g == nil {
		return "", errUnknownToken
	}
	return joinPrincipal + hash, nil
}

// Join records the node named nodeName, with the provider ID bcd read
// on it, as joined, once (kubernetes.substrate.node.joined). principal is
// what Verify returned for the call's join token.
func (j *Joiner) Join(ctx context.Context, principal, nodeName, providerID string) (resource.JoinResult, error) {
	res, err := j.join(ctx, principal, nodeName, providerID)
	j.count(ctx, err)
	return res, err
}

func (j *Joiner) join(ctx context.Context, principal, nodeName, providerID string) (resource.JoinResult, error) {
	hash, ok := strings.CutPrefix(principal, joinPrincipal)
	if !ok {
		return resource.JoinResult{}, errs.E(errs.Unauthenticated, "a join token is required")
	}
	grant, err := j.grant(ctx, hash)
	if err != nil {
		return resource.JoinResult{}, err
	}
	ctx = logging.With(ctx, "tenantId", grant.TenantID, "substrateId", grant.SubstrateID, "node", nodeName)
	sub, err := j.substrate(ctx, grant)
	if err != nil {
		return resource.JoinResult{}, err
	}
	c, err := j.cluster(ctx, sub)
	if err != nil {
		return resource.JoinResult{}, err
	}
	node, flavor, err := j.node(ctx, sub, c, nodeName, providerID)
	if err != nil {
		return resource.JoinResult{}, err
	}
	res := resource.JoinResult{SubstrateID: sub.ID, PoolID: sub.PoolID, NodeName: node.Name, Flavor: flavor}
	n := resource.SubstrateNode{Name: node.Name, Flavor: flavor, Zone: node.Zone, ProviderID: providerID, JoinedAt: j.now().UTC()}
	events, kick, err := j.store.RecordJoin(ctx, hash, *grant, n)
	if err != nil {
		return resource.JoinResult{}, err
	}
	j.wake(ctx, kick)
	if len(events) > 0 {
		logging.FromContext(ctx).Info("Node joined the substrate", "flavor", flavor)
		j.events.Send(events)
	}
	return res, nil
}

// errUnknownToken refuses a join token that no substrate holds (now).
var errUnknownToken = errs.E(errs.Unauthenticated, "the join token is unknown or revoked")

func (j *Joiner) grant(ctx context.Context, hash string) (*store.JoinGrant, error) {
	g, err := j.store.JoinGrant(ctx, hash)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, errUnknownToken
	}
	return g, nil
}

func (j *Joiner) substrate(ctx context.Context, g *store.JoinGrant) (*model.Substrate, error) {
	s, err := j.store.Substrate(ctx, g.TenantID, g.SubstrateID)
	if err != nil {
		return nil, err
	}
	if s == nil || !s.Active || s.Spec.Deleting {
		return nil, errUnknownToken
	}
	return s, nil
}

func (j *Joiner) cluster(ctx context.Context, s *model.Substrate) (*model.Cluster, error) {
	if s.Status.ClusterID == "" {
		return nil, errs.E(errs.InvalidState, "substrate %s has no cluster yet", s.ID)
	}
	c, err := j.store.Cluster(ctx, s.TenantID, s.Status.ClusterID)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errs.E(errs.InvalidState, "substrate %s has no cluster", s.ID)
	}
	return c, nil
}

// node checks, in the cluster's Kubernetes API, that the node is a Node of
// one of the substrate's node pools, and returns it with its flavor.
func (j *Joiner) node(ctx context.Context, s *model.Substrate, c *model.Cluster, name, providerID string) (kubeapply.Node, string, error) {
	t, err := substrates.TargetOf(c)
	if err != nil {
		return kubeapply.Node{}, "", errs.E(errs.Unavailable, "the Kubernetes API of cluster %s cannot be reached yet", c.ID)
	}
	// As the cluster's account, as the substrate's runs: the tenant's
	// impersonated service account in a tenant's project.
	api, err := j.kube.Connect(t)
	if err != nil {
		return kubeapply.Node{}, "", errs.Wrap(errs.Unavailable, err, "reach the cluster's Kubernetes API")
	}
	n, err := api.Node(ctx, name)
	if errors.Is(err, kubeapply.ErrNodeNotFound) {
		return kubeapply.Node{}, "", notOurs(name)
	}
	if err != nil {
		return kubeapply.Node{}, "", errs.Wrap(errs.Unavailable, err, "read the Node from the cluster's Kubernetes API")
	}
	if n.ProviderID != "" && n.ProviderID != providerID {
		return kubeapply.Node{}, "", notOurs(name)
	}
	if flavor, ok := substrates.FlavorOf(s, n.NodePool); ok {
		return n, flavor, nil
	}
	return kubeapply.Node{}, "", notOurs(name)
}

// notOurs refuses a node that is not one of the substrate's: the answer
// says nothing of the cluster, its other node pools or the node's provider
// ID, which the token's holder need not know.
func notOurs(node string) error {
	return errs.E(errs.PermissionDenied, "node %s is not one of the substrate's nodes", node)
}
