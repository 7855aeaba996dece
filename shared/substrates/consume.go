package substrates

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// Consumer records the substrates that the pools' events ask for.
type Consumer struct {
	store *store.Store
	kick  chain.Kicker
}

// NewConsumer returns the consumer of pool events.
func NewConsumer(s *store.Store, kick chain.Kicker) (*Consumer, error) {
	if s == nil || kick == nil {
		return nil, errors.New("substrates: NewConsumer needs a store and a kicker")
	}
	return &Consumer{store: s, kick: kick}, nil
}

// Handle applies one pool event. It returns an error only for a failure
// worth delivering the event again (storage unavailable): anything else
// is logged with its reason and acknowledged (nil), since a redelivery
// would fail the same way. A malformed event whose pool, tenant and
// version can be read puts its pool's substrate, when known, in error with
// the reason; one whose head cannot be read changes nothing.
func (c *Consumer) Handle(ctx context.Context, typ string, data []byte) error {
	log := logging.FromContext(ctx)
	var head *input.PoolArchived
	var updated *input.PoolUpdated // nil: archived
	var err error
	switch typ {
	case event.PoolUpdated:
		updated, err = input.DecodePoolUpdated(data)
		head = &updated.PoolArchived
	case event.PoolArchived:
		head, err = input.DecodePoolArchived(data)
	default:
		log.Error("Pool event of an unknown type dropped", "type", typ)
		return nil
	}
	log = log.With("poolId", head.ID, "tenantId", head.TenantID, "poolVersion", head.Version)
	ctx = logging.NewContext(ctx, log)
	switch {
	case err != nil && !headRead(head, err):
		log.Error("Malformed pool event dropped; its pool, tenant or version cannot be read, so it changes nothing", "type", typ, "reason", err.Error())
		return nil
	case err != nil:
		log.Error("Malformed pool event dropped", "type", typ, "reason", err.Error())
		kick, err := c.store.RefusePoolEvent(ctx, head.TenantID, head.ID, head.Version, "the pool's last event was refused: "+errs.Public(err, "it cannot be read"))
		if err != nil {
			return c.unstored(ctx, err)
		}
		c.kickAll(ctx, kick)
		return nil
	}
	ev, err := c.event(ctx, head, updated)
	if err != nil {
		return c.unstored(ctx, err)
	}
	res, err := c.store.ApplyPoolEvent(ctx, ev)
	if err != nil {
		return c.unstored(ctx, err)
	}
	if res.Owner != "" {
		log.Error("Pool event names another tenant's pool: nothing of that tenant's changed", "conflict", "pool ID owned by another tenant", "ownerTenantId", res.Owner)
	}
	log.Info("Pool event applied", "outcome", res.Outcome)
	for _, k := range res.Kicks {
		c.kickAll(ctx, &k)
	}
	return nil
}

// headRead reports whether a malformed event's pool, tenant and version
// were read: err names none of them.
func headRead(head *input.PoolArchived, err error) bool {
	if head.ID == "" || head.TenantID == "" || head.Version <= 0 {
		return false
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		return false
	}
	return !slices.ContainsFunc(e.Fields, func(f errs.FieldError) bool {
		return f.Field == "id" || f.Field == "tenantId" || f.Field == "version"
	})
}

// unstored answers an event that could not be stored: an error, for a
// redelivery, while storage is unavailable; otherwise it is logged with
// its reason and acknowledged, since delivering it again would fail
// again (Pub/Sub redelivers about ten times a second).
func (c *Consumer) unstored(ctx context.Context, err error) error {
	if errs.Is(err, errs.Unavailable) {
		return err
	}
	logging.FromContext(ctx).Error("Pool event that cannot be stored dropped", "reason", err.Error())
	return nil
}

// event is what a well-formed event asks of the pool's substrate, with the
// reason it cannot be served, if any, as its Problem.
func (c *Consumer) event(ctx context.Context, head *input.PoolArchived, p *input.PoolUpdated) (store.PoolEvent, error) {
	ev, _, err := desired(ctx, c.store, head, p)
	return ev, err
}

// desired is what a well-formed event asks of the pool's substrate, with
// the reason it cannot be served, if any, as its Problem, and the
// account it names (nil when there is none). The consumer records it;
// kubernetesSubstrates.plan previews it.
func desired(ctx context.Context, st *store.Store, head *input.PoolArchived, p *input.PoolUpdated) (store.PoolEvent, *store.Account, error) {
	ev := store.PoolEvent{TenantID: head.TenantID, PoolID: head.ID, Version: head.Version, Archived: p == nil}
	if p == nil || p.Substrate == nil {
		return ev, nil, nil
	}
	pol := p.Substrate
	s := &lifecycle.SubstrateSpec{PoolVersion: p.Version, AccountID: pol.Account}
	for _, f := range p.Flavors {
		f.NodePool.Name = NodePoolName(p.ID, f.Name)
		s.Flavors = append(s.Flavors, f)
	}
	if pol.Create != nil {
		s.Mode = resource.SubstrateCreate
		s.Region, s.Zones, s.ReleaseChannel = pol.Create.Region, pol.Create.Zones, pol.Create.ReleaseChannel
	} else {
		s.Mode = resource.SubstrateAdopt
		s.AdoptClusterID = pol.Adopt.ClusterID
	}
	ev.Want = s
	acc, err := st.Account(ctx, pol.Account)
	switch {
	case err != nil:
		return ev, nil, err
	case acc == nil || !acc.UsableBy(head.TenantID):
		// The same words for both, so that a tenant learns nothing of
		// the accounts of others.
		s.Problem = store.Unusable(pol.Account, head.TenantID)
		acc = nil
	case !acc.ManagedKubernetes():
		s.Problem = fmt.Sprintf("the provider %q of account %s has no managed Kubernetes", acc.Provider, acc.ID)
	default:
		if s.Mode == resource.SubstrateCreate {
			s.Problem = placement(s, acc.Regions)
		}
		ev.AccountID = acc.ID
	}
	return ev, acc, nil
}

// placement is why the region and zones of a cluster to create, and its
// flavors' zones, are not the account's ("" when they are).
func placement(s *lifecycle.SubstrateSpec, regions map[string][]string) string {
	allowed, ok := regions[s.Region]
	if !ok {
		return fmt.Sprintf("region %s is not enabled on account %s", s.Region, s.AccountID)
	}
	if fe := lifecycle.CheckZones("policy.substrate.cluster.create.zones", s.Zones, s.Region, allowed); len(fe) > 0 {
		return fe[0].Field + " " + fe[0].Reason
	}
	zones := allowed
	if len(s.Zones) > 0 {
		zones = s.Zones
	}
	for i, f := range s.Flavors {
		if fe := lifecycle.CheckZones(fmt.Sprintf("flavors[%d].zones", i), f.NodePool.Zones, s.Region, zones); len(fe) > 0 {
			return fe[0].Field + " " + fe[0].Reason
		}
	}
	return ""
}

func (c *Consumer) kickAll(ctx context.Context, kicks ...*chain.Kick) {
	for _, k := range kicks {
		if k == nil {
			continue
		}
		if err := c.kick.Kick(ctx, *k); err != nil {
			logging.FromContext(ctx).Warn("Substrate kick failed; the watchdog will restart its chain", "error", err, "substrateId", k.ID)
		}
	}
}
