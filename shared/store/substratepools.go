package store

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// PoolEvent is what one event of the pools module asks of its pool's
// substrate (model.PoolEvent).
type PoolEvent = model.PoolEvent

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
// one transaction: it reads the pool's index, the record of its pool ID,
// the account ev.Want names and the pool's current substrate, and writes
// what lifecycle.DecidePoolEvent decides of them.
func (s *Store) ApplyPoolEvent(ctx context.Context, ev PoolEvent) (PoolEventResult, error) {
	var res PoolEventResult
	ir := s.substratePoolRef(ev.TenantID, ev.PoolID)
	pr := s.poolRef(ev.PoolID)
	refs := []*firestore.DocumentRef{ir, pr}
	if ev.Want != nil {
		refs = append(refs, s.accountRef(ev.Want.AccountID))
	}
	err := s.transact(ctx, ev.TenantID, func(ctx context.Context, tx *firestore.Transaction) error {
		res = PoolEventResult{}
		st, cur, err := s.readPoolState(tx, ev.TenantID, refs)
		if err != nil {
			return err
		}
		now := s.timestamp()
		d := s.rules.DecidePoolEvent(ev, st, resource.NewSubstrateID(), now)
		res.Outcome, res.Owner = d.Outcome, d.Foreign
		if d.Ignored != "" {
			res.Outcome = d.Ignored
			return unchanged
		}
		switch {
		case d.Pool != nil:
			err = tx.Set(pr, *d.Pool)
		case d.ArchivePool:
			err = tx.Update(pr, []firestore.Update{{Path: "archived", Value: true}})
		}
		if err != nil {
			return err
		}
		if d.Next != nil {
			k, err := s.writeSubstrateSpec(tx, cur, *d.Next, now)
			if err != nil {
				return err
			}
			res.Kicks = append(res.Kicks, k)
		}
		if d.New != nil {
			doc := &substrateDoc{Substrate: *d.New}
			k := doc.Reconcile.Restart(SubstratesKind, ev.TenantID, doc.ID, now)
			if err := tx.Create(s.substrateRef(ev.TenantID, doc.ID), doc); err != nil {
				return err
			}
			res.Kicks = append(res.Kicks, k)
		}
		return tx.Set(ir, d.Index)
	})
	if err != nil {
		return PoolEventResult{}, storageErr("record a pool event", err)
	}
	return res, nil
}

// readPoolState reads, in tx, a pool's index, the record of its pool ID
// and, when refs holds a third, the account the event names, in one
// batch, then the pool's current substrate.
func (s *Store) readPoolState(tx *firestore.Transaction, tenantID string, refs []*firestore.DocumentRef) (model.PoolState, *substrateDoc, error) {
	var st model.PoolState
	snaps, err := tx.GetAll(refs)
	if err != nil {
		return st, nil, fmt.Errorf("read: %w", err)
	}
	if st.Index, err = decodeIndex(snaps[0]); err != nil {
		return st, nil, err
	}
	if snaps[1].Exists() {
		if err := snaps[1].DataTo(&st.Owner); err != nil {
			return st, nil, fmt.Errorf("decode pool: %w", err)
		}
	}
	if len(snaps) > 2 {
		if st.Account, err = decodeAccount(snaps[2]); err != nil {
			return st, nil, err
		}
	}
	cur, err := s.readSubstrateTx(tx, tenantID, st.Index.SubstrateID)
	if cur != nil {
		st.Current = &cur.Substrate
	}
	return st, cur, err
}

// RefusePoolEvent puts the substrate of a known pool in error with
// problem, why an event of version of the pool was refused, unless a
// version as new was applied already (lifecycle.DecideRefusal). It
// returns the kick of the substrate's chain, if it has one.
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
		cur, err := s.readSubstrateTx(tx, tenantID, idx.SubstrateID)
		if err != nil {
			return err
		}
		now := s.timestamp()
		var curSub *model.Substrate
		if cur != nil {
			curSub = &cur.Substrate
		}
		spec, idx := s.rules.DecideRefusal(idx, curSub, version, problem, now)
		if spec == nil {
			return unchanged
		}
		if err := tx.Set(ir, idx); err != nil {
			return err
		}
		k, err := s.writeSubstrateSpec(tx, cur, *spec, now)
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
	return decodeAccount(snap)
}

// decodeAccount decodes an account's document; nil when there is none.
func decodeAccount(snap *firestore.DocumentSnapshot) (*Account, error) {
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var a Account
	if err := snap.DataTo(&a); err != nil {
		return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
	}
	return &a, nil
}

// writeSubstrateSpec writes a new spec over the substrate's (its next
// generation: lifecycle.Respec) and restarts its chain.
func (s *Store) writeSubstrateSpec(tx *firestore.Transaction, d *substrateDoc, spec model.SubstrateSpec, now time.Time) (chain.Kick, error) {
	k := d.Reconcile.Restart(SubstratesKind, d.TenantID, d.ID, now)
	return k, tx.Update(s.substrateRef(d.TenantID, d.ID), []firestore.Update{{Path: "spec", Value: spec}, {Path: chain.Field, Value: d.Reconcile}})
}

func decodeIndex(snap *firestore.DocumentSnapshot) (model.PoolIndex, error) {
	var idx model.PoolIndex
	if snap != nil && snap.Exists() {
		if err := snap.DataTo(&idx); err != nil {
			return idx, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
	}
	return idx, nil
}

// readSubstrateTx reads a substrate in tx; nil when id is "" or there is
// none.
func (s *Store) readSubstrateTx(tx *firestore.Transaction, tenantID, id string) (*substrateDoc, error) {
	if id == "" {
		return nil, nil
	}
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
