package store

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// poolIndex is what the project knows of a pool of the pools module, at
// tenants/{tenantId}/substratePools/{poolId}: the last version applied and
// the substrate the pool asks for now.
type poolIndex struct {
	Version     int64  `firestore:"version"`
	SubstrateID string `firestore:"substrateId"` // "" when the pool asks for none
	// Last is the pool's latest substrate, deleting or not: a new one
	// waits for it to be deleted.
	Last string `firestore:"last"`
	// Archived: an archive event was applied. Archival is final: no
	// later event of the pool changes anything.
	Archived bool `firestore:"archived,omitempty"`
}

// PoolEvent is what one event of the pools module asks of its pool's
// substrate (API.md §9).
type PoolEvent struct {
	TenantID string
	PoolID   string
	Version  int64
	// Want is the substrate the pool asks for; nil when it asks for none
	// (archived, or no substrate in its policy). Its Generation,
	// UpdatedAt and After are set when it is recorded, by the rule of
	// lifecycle.ChangePool.
	Want *lifecycle.SubstrateSpec
	// AccountID, when set, is the account that provides the clusters of
	// the pool's substrate, one its tenant may use: the pool is recorded
	// (pools/{id}) on it, as the API's pools are, so that those clusters
	// belong to the pool.
	AccountID string
	// Archived: the event archives the pool (Want is nil). An archive at
	// the version of the last update applied is applied too, so that
	// even a pool at the greatest version can be archived.
	Archived bool
}

// PoolEventResult is what an applied pool event did.
type PoolEventResult struct {
	// Outcome says what became of the pool's substrates, for the log.
	Outcome string
	// Kicks are the chains to run now.
	Kicks []chain.Kick
	// Owner, when set, is the tenant that owns the pool's ID: the event
	// named it for another tenant, and nothing of the owner's changed.
	Owner string
}

// ApplyPoolEvent records what version ev.Version of a pool asks for, in
// one transaction, unless a version as new was applied already. A pool ID
// belongs to the tenant that first announced it (seeded, or by an event):
// an event naming it for another tenant changes nothing of the owner's,
// and that tenant's substrate shows the conflict as its problem.
func (s *Store) ApplyPoolEvent(ctx context.Context, ev PoolEvent) (PoolEventResult, error) {
	var res PoolEventResult
	ir := s.substratePoolRef(ev.TenantID, ev.PoolID)
	pr := s.poolRef(ev.PoolID)
	err := s.transact(ctx, ev.TenantID, func(ctx context.Context, tx *firestore.Transaction) error {
		res = PoolEventResult{}
		snaps, err := tx.GetAll([]*firestore.DocumentRef{ir, pr})
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		idx, err := decodeIndex(snaps[0])
		if err != nil {
			return err
		}
		switch {
		case idx.Archived:
			res.Outcome = "ignored: the pool is archived, and archival is final"
			return unchanged
		case ev.Version < idx.Version, ev.Version == idx.Version && !ev.Archived:
			res.Outcome = "ignored: not newer than the version applied"
			return unchanged
		}
		var owner Pool
		if snaps[1].Exists() {
			if err := snaps[1].DataTo(&owner); err != nil {
				return fmt.Errorf("decode pool: %w", err)
			}
		}
		var cur *substrateDoc
		if idx.SubstrateID != "" {
			if cur, err = s.readSubstrateTx(tx, ev.TenantID, idx.SubstrateID); err != nil {
				return err
			}
		}
		want := ev.Want
		if owner.TenantID != "" && owner.TenantID != ev.TenantID {
			res.Owner = owner.TenantID
			if want != nil {
				w := *want
				w.Problem = lifecycle.ForeignPool(ev.PoolID)
				want = &w
			}
		} else if want != nil && ev.AccountID != "" && (owner.AccountID != ev.AccountID || owner.Archived) {
			if err := tx.Set(pr, Pool{ID: ev.PoolID, TenantID: ev.TenantID, AccountID: ev.AccountID}); err != nil {
				return err
			}
		} else if ev.Archived && owner.TenantID == ev.TenantID && !owner.Archived {
			// Its clusters stay the tenant's, and manageable; it takes
			// no new one (CreateCluster).
			if err := tx.Update(pr, []firestore.Update{{Path: "archived", Value: true}}); err != nil {
				return err
			}
		}
		idx.Archived = ev.Archived
		now := s.timestamp()
		idx.Version = ev.Version
		var curSpec *lifecycle.SubstrateSpec
		if cur != nil {
			curSpec = &cur.Spec
		}
		change := lifecycle.ChangePool(curSpec, want, ev.Version, idx.Last, now)
		outcome := ""
		if change.Next != nil {
			k, err := s.writeSubstrateSpec(tx, cur, *change.Next, now)
			if err != nil {
				return err
			}
			res.Kicks = append(res.Kicks, k)
			outcome = "substrate " + cur.ID + " changed"
			if change.Next.Deleting {
				// The pool asks for no substrate, or another one.
				idx.SubstrateID = ""
				outcome = "substrate " + cur.ID + " torn down"
			}
		}
		if change.New != nil {
			id := resource.NewSubstrateID()
			d := &substrateDoc{Substrate: lifecycle.Substrate{ID: id, TenantID: ev.TenantID, PoolID: ev.PoolID, CreatedAt: now, Active: true, Spec: *change.New}}
			d.Status.State = resource.StatePending
			k := d.Reconcile.Restart(SubstratesKind, ev.TenantID, id, now)
			if err := tx.Create(s.substrateRef(ev.TenantID, id), d); err != nil {
				return err
			}
			res.Kicks = append(res.Kicks, k)
			idx.SubstrateID, idx.Last = id, id
			if outcome != "" {
				outcome += "; "
			}
			outcome += "substrate " + id + " recorded"
		}
		if outcome == "" {
			outcome = "no substrate asked for"
		}
		res.Outcome = outcome
		return tx.Set(ir, idx)
	})
	if err != nil {
		return PoolEventResult{}, storageErr("record a pool event", err)
	}
	return res, nil
}

// RefusePoolEvent puts the substrate of a known pool in error with
// problem, why an event of version of the pool was refused, unless a
// version as new was applied already. It returns the kick of the
// substrate's chain, if it has one.
func (s *Store) RefusePoolEvent(ctx context.Context, tenantID, poolID string, version int64, problem string) (*chain.Kick, error) {
	var kick *chain.Kick
	ir := s.substratePoolRef(tenantID, poolID)
	err := s.transact(ctx, tenantID, func(ctx context.Context, tx *firestore.Transaction) error {
		kick = nil
		snap, err := tx.Get(ir)
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("read %s: %w", ir.Path, err)
		}
		idx, err := decodeIndex(snap)
		if err != nil {
			return err
		}
		if idx.SubstrateID == "" || version <= idx.Version || idx.Archived {
			return unchanged
		}
		cur, err := s.readSubstrateTx(tx, tenantID, idx.SubstrateID)
		if err != nil {
			return err
		}
		if cur == nil {
			return unchanged
		}
		now := s.timestamp()
		spec := cur.Spec
		spec.Problem = problem
		idx.Version = version
		if err := tx.Set(ir, idx); err != nil {
			return err
		}
		k, err := s.writeSubstrateSpec(tx, cur, lifecycle.Respec(cur.Spec, spec, now), now)
		kick = &k
		return err
	})
	if err != nil {
		return nil, storageErr("record a refused pool event", err)
	}
	return kick, nil
}

// Account returns a provider account; nil when there is none.
func (s *Store) Account(ctx context.Context, id string) (*Account, error) {
	snap, err := s.accountRef(id).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, storageErr("read account", err)
	}
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var a Account
	if err := snap.DataTo(&a); err != nil {
		return nil, fmt.Errorf("decode account %s: %w", id, err)
	}
	return &a, nil
}

// writeSubstrateSpec writes a new spec over the substrate's (its next
// generation: lifecycle.Respec) and restarts its chain.
func (s *Store) writeSubstrateSpec(tx *firestore.Transaction, d *substrateDoc, spec lifecycle.SubstrateSpec, now time.Time) (chain.Kick, error) {
	k := d.Reconcile.Restart(SubstratesKind, d.TenantID, d.ID, now)
	return k, tx.Update(s.substrateRef(d.TenantID, d.ID), []firestore.Update{{Path: "spec", Value: spec}, {Path: chain.Field, Value: d.Reconcile}})
}

func decodeIndex(snap *firestore.DocumentSnapshot) (poolIndex, error) {
	var idx poolIndex
	if snap != nil && snap.Exists() {
		if err := snap.DataTo(&idx); err != nil {
			return idx, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
	}
	return idx, nil
}

func (s *Store) readSubstrateTx(tx *firestore.Transaction, tenantID, id string) (*substrateDoc, error) {
	ref := s.substrateRef(tenantID, id)
	snap, err := tx.Get(ref)
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var d substrateDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ref.Path, err)
	}
	return &d, nil
}
