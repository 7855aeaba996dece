package store

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// ClusterRun is what a reconcile run of a cluster read when it took the
// cluster's lease: the cluster and its pools that are not deleted, by
// creation.
type ClusterRun struct {
	Cluster model.Cluster
	Pools   []model.NodePool
}

// DecodeCluster decodes a cluster's document, as a run of it reads it
// (chain.Subject.Load).
func DecodeCluster(doc chain.Doc) (model.Cluster, error) {
	var c model.Cluster
	if err := doc.DataTo(&c); err != nil {
		return c, fmt.Errorf("decode cluster: %w", err)
	}
	return c, nil
}

// LoadNodePools reads through r the pools of the cluster at ref that are
// not deleted, by creation.
func (s *Store) LoadNodePools(r *chain.Reader, ref *firestore.DocumentRef) ([]model.NodePool, error) {
	return s.BeginNodePools(r, ref)()
}

// BeginNodePools starts LoadNodePools' read (beginRead) and
// returns what waits for its pools: a run reads them with its cluster's
// document, not after it.
func (s *Store) BeginNodePools(r *chain.Reader, ref *firestore.DocumentRef) func() ([]model.NodePool, error) {
	wait := beginRead(r, s.activePools(ref))
	return func() ([]model.NodePool, error) { return decodePools(wait()) }
}

// BeginClusterPools is BeginNodePools of the cluster clusterID of the
// tenant: a run names its cluster by its IDs.
func (s *Store) BeginClusterPools(r *chain.Reader, tenantID, clusterID string) func() ([]model.NodePool, error) {
	return s.BeginNodePools(r, s.ClusterRef(tenantID, clusterID))
}

func decodePools(snaps []*firestore.DocumentSnapshot, err error) ([]model.NodePool, error) {
	if err != nil {
		return nil, fmt.Errorf("read node pools: %w", err)
	}
	pools := make([]model.NodePool, len(snaps))
	for i, ps := range snaps {
		if err := ps.DataTo(&pools[i]); err != nil {
			return nil, fmt.Errorf("decode %s: %w", ps.Ref.Path, err)
		}
	}
	return pools, nil
}

// RecordIntent records, under the run's lease, the provider call the run
// is about to make: on the pool nodePoolID, or on the cluster when
// nodePoolID is empty.
func (s *Store) RecordIntent(ctx context.Context, lease *chain.Lease, c *model.Cluster, nodePoolID string, in *model.Intent) error {
	ref := s.ClusterRef(c.TenantID, c.ID)
	if nodePoolID != "" {
		ref = s.NodePoolRef(c.TenantID, c.ID, nodePoolID)
	}
	return lease.Write(ctx, func(tx chain.Tx) error {
		return txOf(tx).Update(ref, []firestore.Update{{Path: "status.provider.intent", Value: in}})
	})
}

// SaveClusterRun writes, in tx, the statuses a run leaves (after) over those
// it read (before), and returns the events to commit with them. Statuses
// are written whole, with the fields derived from them (active, expireAt),
// and never a spec: the tenant's changes during the run stand. The events
// of an object whose spec changed during the run (its generation moved)
// are dropped, since they announce a state it no longer shows; the change's
// kick runs the cluster again. now is the cluster's document as it is now.
//
// When the run changes what the cluster's substrates read of it (its
// state, its pools'), their chains are woken in tx: the kicks returned
// are to be sent once it commits.
func (s *Store) SaveClusterRun(t chain.Tx, doc chain.Doc, before, after ClusterRun, events []event.Event) ([]event.Event, []chain.Kick, error) {
	tx, now := txOf(t), snapOf(doc)
	var stored model.Cluster
	if err := now.DataTo(&stored); err != nil {
		return nil, nil, fmt.Errorf("decode cluster: %w", err)
	}
	c := &after.Cluster
	refs := make([]*firestore.DocumentRef, len(after.Pools))
	for i, p := range after.Pools {
		refs[i] = s.NodePoolRef(c.TenantID, c.ID, p.ID)
	}
	// Every read before the first write: the pools, and the substrates
	// to wake (the cluster's users as stored now).
	var users []string
	if seenChanged(&before, &after) {
		users = usersOf(&stored)
	}
	for _, id := range users {
		refs = append(refs, s.substrateRef(c.TenantID, id))
	}
	snaps, err := tx.GetAll(refs)
	if err != nil {
		return nil, nil, fmt.Errorf("read node pools: %w", err)
	}
	subs := snaps[len(after.Pools):]
	snaps = snaps[:len(after.Pools)]
	events, err = s.saveClusterRun(tx, now, &stored, snaps, before, after, events)
	if err != nil {
		return nil, nil, err
	}
	kicks, err := s.wakeSubstrates(tx, subs, s.timestamp())
	if err != nil {
		return nil, nil, fmt.Errorf("wake the cluster's substrates: %w", err)
	}
	return events, kicks, nil
}

// saveClusterRun writes the statuses (SaveClusterRun), snaps being the
// pools' documents as stored now.
func (s *Store) saveClusterRun(tx *firestore.Transaction, now *firestore.DocumentSnapshot, stored *model.Cluster, snaps []*firestore.DocumentSnapshot,
	before, after ClusterRun, events []event.Event) ([]event.Event, error) {
	c := &after.Cluster
	stale := map[string]bool{} // node pool IDs, and "" for the cluster
	for i := range after.Pools {
		p, was := &after.Pools[i], &before.Pools[i]
		var cur model.NodePool
		if err := snaps[i].DataTo(&cur); err != nil {
			return nil, fmt.Errorf("decode node pool %s: %w", p.ID, err)
		}
		stale[p.ID] = cur.Spec.Generation != was.Spec.Generation
		if p.Status.State == resource.StateDeleted && was.Status.State != resource.StateDeleted {
			if err := tx.Delete(s.poolNameRef(c.TenantID, c.ID, p.Spec.Name)); err != nil {
				return nil, err
			}
		}
		if reflect.DeepEqual(p.Status, cur.Status) && p.Active == cur.Active && equalTimes(p.ExpireAt, cur.ExpireAt) {
			// A pool whose stored status is already the run's costs no
			// write. (Compared with the stored one, not the one read: the
			// run may have recorded an intent since.)
			continue
		}
		if err := tx.Update(snaps[i].Ref, statusUpdates(p.Status, p.Active, p.ExpireAt)); err != nil {
			return nil, err
		}
	}
	stale[""] = stored.Spec.Generation != before.Cluster.Spec.Generation
	if c.Status.State == resource.StateDeleted && before.Cluster.Status.State != resource.StateDeleted {
		if err := tx.Delete(s.clusterNameRef(c.TenantID, c.Spec.Name)); err != nil {
			return nil, err
		}
		// The tenant's count, written blind (an increment), so that the
		// run does not read the document every create writes.
		if err := tx.Set(s.tenantRef(c.TenantID), map[string]any{"clustersDeleted": firestore.Increment(1)}, firestore.MergeAll); err != nil {
			return nil, err
		}
	}
	if err := tx.Update(now.Ref, statusUpdates(c.Status, c.Active, c.ExpireAt)); err != nil {
		return nil, err
	}
	var committed []event.Event
	for _, e := range events {
		if !stale[e.NodePoolID] {
			committed = append(committed, e)
		}
	}
	return committed, nil
}

func equalTimes(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// statusUpdates writes a status whole, with the fields derived from it.
func statusUpdates(status any, active bool, expireAt any) []firestore.Update {
	return []firestore.Update{
		{Path: "status", Value: status},
		{Path: "active", Value: active},
		{Path: "expireAt", Value: expireAt},
	}
}
