package poolevents

import (
	"context"
	"errors"
	"slices"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// Store is what the consumer needs of the store: the two transactions of
// a pool event, which read what lifecycle's rules decide on and write
// what they decide.
type Store interface {
	ApplyPoolEvent(ctx context.Context, ev model.PoolEvent) (store.PoolEventResult, error)
	RefusePoolEvent(ctx context.Context, tenantID, poolID string, version int64, problem string) (*chain.Kick, error)
}

// Consumer records the substrates that the pools' events ask for.
type Consumer struct {
	store Store
	kick  chain.Kicker
}

// NewConsumer returns the consumer of pool events.
func NewConsumer(s Store, kick chain.Kicker) (*Consumer, error) {
	if s == nil || kick == nil {
		return nil, errors.New("poolevents: NewConsumer needs a store and a kicker")
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
	ev := model.PoolEvent{TenantID: head.TenantID, PoolID: head.ID, Version: head.Version, Archived: updated == nil}
	if updated != nil {
		ev.Want = updated.Want()
	}
	res, err := c.store.ApplyPoolEvent(ctx, substrates.Named(ev))
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
