package store

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// RecordJoinToken records, under the run's lease, the substrate's new join
// token (by its hash) and revokes its old one, before the token is put in
// the cluster's Secret: a run killed in between leaves a token nobody
// holds, and the next run finds the Secret missing and mints again.
func (s *Store) RecordJoinToken(ctx context.Context, lease *chain.Lease, sub *model.Substrate, t model.JoinToken) error {
	old := sub.Status.Token.Hash
	err := lease.Write(ctx, func(ltx chain.Tx) error {
		tx := txOf(ltx)
		grant := JoinGrant{TenantID: sub.TenantID, SubstrateID: sub.ID, PoolID: sub.PoolID}
		if err := tx.Set(s.joinTokenRef(t.Hash), grant); err != nil {
			return err
		}
		if old != "" {
			if err := tx.Delete(s.joinTokenRef(old)); err != nil {
				return err
			}
		}
		return tx.Update(s.substrateRef(sub.TenantID, sub.ID), []firestore.Update{{Path: "status.token", Value: t}})
	})
	if err != nil {
		return fmt.Errorf("record a new join token: %w", err)
	}
	return nil
}

// JoinGrant is a join token's record, at joinTokens/{sha256 of the
// token}: the token itself is never stored.
type JoinGrant struct {
	TenantID    string `firestore:"tenantId"`
	SubstrateID string `firestore:"substrateId"`
	PoolID      string `firestore:"poolId"`
}

// JoinGrant returns the record of the join token of hash; nil when the
// token is unknown or revoked.
func (s *Store) JoinGrant(ctx context.Context, hash string) (*JoinGrant, error) {
	snap, err := s.joinTokenRef(hash).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, errs.Wrap(errs.Unavailable, err, "read join token")
	}
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var g JoinGrant
	if err := snap.DataTo(&g); err != nil {
		return nil, fmt.Errorf("decode join token: %w", err)
	}
	return &g, nil
}

// RecordJoin records the node as joined to the substrate of the join
// token of hash, once (kubernetes.substrate.node.joined), and returns the
// events committed: none when the node joined already. A token revoked
// meanwhile is UNAUTHENTICATED. A substrate that converges (joinWakes) is
// woken in the same transaction: kick, when not nil, is to be sent.
func (s *Store) RecordJoin(ctx context.Context, hash string, g JoinGrant, n resource.SubstrateNode) (events []event.Event, kick *chain.Kick, err error) {
	nodeRef := s.substrateNodes(g.TenantID, g.SubstrateID).Doc(DocID(n.Name))
	subRef := s.substrateRef(g.TenantID, g.SubstrateID)
	err = s.transact(ctx, g.TenantID, func(ctx context.Context, tx *firestore.Transaction) error {
		events, kick = nil, nil
		snaps, err := tx.GetAll([]*firestore.DocumentRef{s.joinTokenRef(hash), subRef, nodeRef})
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if !snaps[0].Exists() {
			return errs.E(errs.Unauthenticated, "the join token is unknown or revoked")
		}
		if snaps[2].Exists() {
			return unchanged // joined already: idempotent
		}
		var cur substrateDoc
		if err := snaps[1].DataTo(&cur); err != nil {
			return fmt.Errorf("decode substrate: %w", err)
		}
		if err := tx.Create(nodeRef, n); err != nil {
			return err
		}
		events = s.rules.NodeJoined(&cur.Substrate, n)
		last := outbox.Number(events, cur.Sequence)
		updates := []firestore.Update{
			{Path: "joined", Value: firestore.Increment(1)},
			{Path: outbox.SequenceField, Value: last},
		}
		if joinWakes(&cur.Substrate) {
			if kick = cur.Reconcile.Wake(SubstratesKind, cur.TenantID, cur.ID, s.timestamp()); kick != nil {
				updates = append(updates, firestore.Update{Path: chain.Field, Value: cur.Reconcile})
			}
		}
		if err := tx.Update(subRef, updates); err != nil {
			return err
		}
		return s.createEvents(tx, events)
	})
	if err != nil {
		if _, ok := errors.AsType[*errs.Error](err); ok {
			return nil, nil, err
		}
		return nil, nil, errs.Wrap(errs.Unavailable, err, "record the join")
	}
	return events, kick, nil
}
