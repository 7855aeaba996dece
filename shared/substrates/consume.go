package substrates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// The types of the pools module's events that this project consumes.
const (
	PoolUpdated  = "compute.pool.updated"
	PoolArchived = "compute.pool.archived"
)

// Kicker asks for a run of a chain now (a Cloud Task).
type Kicker interface {
	Kick(ctx context.Context, k chain.Kick) error
}

// Consumer records the substrates that the pools' events ask for.
type Consumer struct {
	fs   *firestore.Client
	kick Kicker
	now  func() time.Time
}

// NewConsumer returns the consumer of pool events. now is the clock (nil:
// time.Now).
func NewConsumer(fs *firestore.Client, kick Kicker, now func() time.Time) (*Consumer, error) {
	if fs == nil || kick == nil {
		return nil, errors.New("substrates: NewConsumer needs a Firestore client and a kicker")
	}
	if now == nil {
		now = time.Now
	}
	return &Consumer{fs: fs, kick: kick, now: now}, nil
}

// poolIndex is what this project knows of a pool, at
// tenants/{tenantId}/substratePools/{poolId}: the last version applied and
// the substrate the pool asks for now.
type poolIndex struct {
	Version     int64  `firestore:"version"`
	SubstrateID string `firestore:"substrateId"` // "" when the pool asks for none
	// Last is the pool's latest substrate, deleting or not: a new one
	// waits for it to be deleted.
	Last string `firestore:"last"`
}

// doc is a substrate's document: the object and its reconcile chain.
type doc struct {
	Substrate
	Reconcile chain.State `firestore:"reconcile"`
}

func substrateRef(fs *firestore.Client, tenantID, id string) *firestore.DocumentRef {
	return fs.Collection("tenants").Doc(tenantID).Collection(Kind).Doc(id)
}

func indexRef(fs *firestore.Client, tenantID, poolID string) *firestore.DocumentRef {
	return fs.Collection("tenants").Doc(tenantID).Collection("substratePools").Doc(poolID)
}

// Handle applies one pool event. A malformed event is logged and dropped
// (nil), after putting its pool's substrate, when known, in error with the
// reason; an error asks for the event again (a transient failure).
func (c *Consumer) Handle(ctx context.Context, typ string, data []byte) error {
	log := logging.FromContext(ctx)
	var head *input.PoolArchived
	var updated *input.PoolUpdated // nil: archived
	var err error
	switch typ {
	case PoolUpdated:
		updated, err = input.DecodePoolUpdated(data)
		head = &updated.PoolArchived
	case PoolArchived:
		head, err = input.DecodePoolArchived(data)
	default:
		log.Error("Pool event of an unknown type dropped", "type", typ)
		return nil
	}
	if err != nil {
		log.Error("Malformed pool event dropped", "type", typ, "poolId", head.ID, "tenantId", head.TenantID, "reason", err.Error())
		return c.malformed(ctx, head.TenantID, head.ID, head.Version, err)
	}
	return c.apply(ctx, head.TenantID, head.ID, head.Version, updated)
}

// malformed puts the substrate of a known pool in error with why its event
// was refused, unless the event is older than the last applied.
func (c *Consumer) malformed(ctx context.Context, tenantID, poolID string, version int64, why error) error {
	if tenantID == "" || poolID == "" || !validID(tenantID) || !validID(poolID) {
		return nil
	}
	var kick *chain.Kick
	err := c.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		kick = nil
		idx, err := readIndex(tx, indexRef(c.fs, tenantID, poolID))
		if err != nil || idx.SubstrateID == "" || (version > 0 && version <= idx.Version) {
			return err
		}
		cur, err := readSubstrate(tx, substrateRef(c.fs, tenantID, idx.SubstrateID))
		if err != nil || cur == nil {
			return err
		}
		spec := cur.Spec
		spec.Problem = "the pool's last event was refused: " + why.Error()
		if version > idx.Version {
			idx.Version = version
			if err := tx.Set(indexRef(c.fs, tenantID, poolID), idx); err != nil {
				return err
			}
		}
		k, err := writeSpec(tx, substrateRef(c.fs, tenantID, cur.ID), cur, spec, c.now())
		kick = &k
		return err
	})
	if err != nil {
		return fmt.Errorf("record the refused event of pool %s: %w", poolID, err)
	}
	c.kickAll(ctx, kick)
	return nil
}

// validID is whether s can name a Firestore document.
func validID(s string) bool {
	return s != "." && s != ".." && !slices.Contains([]byte(s), '/') && len(s) <= 128
}

// apply records what version v of the pool asks for: p is nil when the
// pool is archived.
func (c *Consumer) apply(ctx context.Context, tenantID, poolID string, v int64, p *input.PoolUpdated) error {
	log := logging.FromContext(ctx).With("tenantId", tenantID, "poolId", poolID, "poolVersion", v)
	var kicks []*chain.Kick
	var outcome string
	ir := indexRef(c.fs, tenantID, poolID)
	err := c.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		kicks, outcome = nil, ""
		idx, err := readIndex(tx, ir)
		if err != nil {
			return err
		}
		if v <= idx.Version {
			outcome = "ignored: not newer than the version applied"
			return nil
		}
		var cur *doc
		if idx.SubstrateID != "" {
			if cur, err = readSubstrate(tx, substrateRef(c.fs, tenantID, idx.SubstrateID)); err != nil {
				return err
			}
		}
		var want *Spec
		var record *store.Pool
		if p != nil && p.Substrate != nil {
			if want, record, err = c.desired(tx, tenantID, p); err != nil {
				return err
			}
		}
		if record != nil {
			// The clusters a substrate makes belong to its pool, on its
			// account, as the API's do.
			if err := tx.Set(c.fs.Collection("pools").Doc(record.ID), *record); err != nil {
				return err
			}
		}
		now := c.now()
		idx.Version = v
		switch {
		case cur != nil && (want == nil || !SameChoice(cur.Spec, *want)):
			// Torn down: the pool asks for no substrate, or another one.
			spec := cur.Spec
			spec.Deleting = true
			spec.PoolVersion = v
			k, err := writeSpec(tx, substrateRef(c.fs, tenantID, cur.ID), cur, spec, now)
			if err != nil {
				return err
			}
			kicks = append(kicks, &k)
			idx.SubstrateID = ""
			outcome = "substrate " + cur.ID + " torn down"
		case cur != nil:
			spec := *want
			spec.After = cur.Spec.After
			k, err := writeSpec(tx, substrateRef(c.fs, tenantID, cur.ID), cur, spec, now)
			if err != nil {
				return err
			}
			kicks = append(kicks, &k)
			outcome = "substrate " + cur.ID + " changed"
		}
		if want != nil && (cur == nil || idx.SubstrateID == "") {
			id := resource.NewSubstrateID()
			want.After = idx.Last
			d := &doc{Substrate: Substrate{ID: id, TenantID: tenantID, PoolID: poolID, CreatedAt: now, Active: true}}
			want.Generation, want.UpdatedAt = 1, now
			d.Spec = *want
			d.Status.State = resource.StatePending
			k := d.Reconcile.Restart(Kind, tenantID, id, now)
			if err := tx.Create(substrateRef(c.fs, tenantID, id), d); err != nil {
				return err
			}
			kicks = append(kicks, &k)
			idx.SubstrateID, idx.Last = id, id
			outcome += "; substrate " + id + " recorded"
		}
		if outcome == "" {
			outcome = "no substrate asked for"
		}
		return tx.Set(ir, idx)
	})
	if err != nil {
		return fmt.Errorf("record pool %s version %d: %w", poolID, v, err)
	}
	log.Info("Pool event applied", "outcome", strings.TrimPrefix(outcome, "; "))
	c.kickAll(ctx, kicks...)
	return nil
}

// desired is the substrate a well-formed policy asks for, with the reason
// it cannot be served, if any, as its Problem. It records the pool's
// account, to be recorded (pools/{id}) for the clusters the substrate
// makes, when the account provides them.
func (c *Consumer) desired(tx *firestore.Transaction, tenantID string, p *input.PoolUpdated) (*Spec, *store.Pool, error) {
	pol := p.Substrate
	s := &Spec{PoolVersion: p.Version, AccountID: pol.Account}
	for _, f := range p.Flavors {
		np := f.NodePool(resource.NewNodePoolID(), tenantID, "", time.Time{})
		np.Name = NodePoolName(p.ID, f.Name)
		s.Flavors = append(s.Flavors, Flavor{Name: f.Name, NodePool: lifecycle.NodePoolSpecOf(np)})
	}
	if pol.Create != nil {
		s.Mode = resource.SubstrateCreate
		s.Region, s.Zones, s.ReleaseChannel = pol.Create.Region, pol.Create.Zones, pol.Create.ReleaseChannel
	} else {
		s.Mode = resource.SubstrateAdopt
		s.AdoptClusterID = pol.Adopt.ClusterID
	}
	snap, err := tx.Get(c.fs.Collection("accounts").Doc(pol.Account))
	if err != nil && !isNotFound(err) {
		return nil, nil, fmt.Errorf("read account %s: %w", pol.Account, err)
	}
	var acc store.Account
	if snap == nil || !snap.Exists() {
		s.Problem = fmt.Sprintf("account %s does not exist", pol.Account)
		return s, nil, nil
	}
	if err := snap.DataTo(&acc); err != nil {
		return nil, nil, fmt.Errorf("decode account %s: %w", pol.Account, err)
	}
	if !acc.ManagedKubernetes() {
		s.Problem = fmt.Sprintf("the provider %q of account %s has no managed Kubernetes", acc.Provider, acc.ID)
		return s, nil, nil
	}
	if s.Mode == resource.SubstrateCreate {
		s.Problem = placement(s, acc.Regions)
	}
	return s, &store.Pool{ID: p.ID, TenantID: tenantID, AccountID: acc.ID}, nil
}

// placement is why the region and zones of a cluster to create, and its
// flavors' zones, are not the account's ("" when they are).
func placement(s *Spec, regions map[string][]string) string {
	allowed, ok := regions[s.Region]
	if !ok {
		return fmt.Sprintf("region %s is not enabled on account %s", s.Region, s.AccountID)
	}
	if fe := input.CheckZones("policy.substrate.cluster.create.zones", s.Zones, s.Region, allowed); len(fe) > 0 {
		return fe[0].Field + " " + fe[0].Reason
	}
	zones := allowed
	if len(s.Zones) > 0 {
		zones = s.Zones
	}
	for i, f := range s.Flavors {
		if fe := input.CheckZones(fmt.Sprintf("flavors[%d].zones", i), f.NodePool.Zones, s.Region, zones); len(fe) > 0 {
			return fe[0].Field + " " + fe[0].Reason
		}
	}
	return ""
}

// writeSpec writes a new spec over the substrate's, with its generation
// bumped, and restarts its chain.
func writeSpec(tx *firestore.Transaction, ref *firestore.DocumentRef, d *doc, spec Spec, now time.Time) (chain.Kick, error) {
	spec.Generation = d.Spec.Generation + 1
	spec.UpdatedAt = now
	k := d.Reconcile.Restart(Kind, d.TenantID, d.ID, now)
	return k, tx.Update(ref, []firestore.Update{{Path: "spec", Value: spec}, {Path: chain.Field, Value: d.Reconcile}})
}

func readIndex(tx *firestore.Transaction, ref *firestore.DocumentRef) (poolIndex, error) {
	var idx poolIndex
	snap, err := tx.Get(ref)
	if err != nil && !isNotFound(err) {
		return idx, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	if snap != nil && snap.Exists() {
		if err := snap.DataTo(&idx); err != nil {
			return idx, fmt.Errorf("decode %s: %w", ref.Path, err)
		}
	}
	return idx, nil
}

func readSubstrate(tx *firestore.Transaction, ref *firestore.DocumentRef) (*doc, error) {
	snap, err := tx.Get(ref)
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var d doc
	if err := snap.DataTo(&d); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ref.Path, err)
	}
	return &d, nil
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

// isNotFound reports whether a Get failed because the document is missing
// (the client returns NotFound with a snapshot that does not exist).
func isNotFound(err error) bool {
	return status.Code(errors.Unwrap(err)) == codes.NotFound || status.Code(err) == codes.NotFound
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs always marshal
	}
	return b
}
