package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Errors of TakeLease.
var (
	// ErrStale: the task's chain token is not the cluster's (a newer chain
	// runs it), or the cluster is gone. The task ends without a successor.
	ErrStale = errors.New("reconcile token is stale")
	// ErrBusy: another run holds the cluster's lease. The task is retried.
	ErrBusy = errors.New("another run holds the cluster's lease")
	// ErrLeaseLost: the run's lease expired and another run took it; the
	// run must stop without writing.
	ErrLeaseLost = errors.New("the run's lease was lost")
)

// Lease is a run's hold on one cluster, with the documents it read.
type Lease struct {
	Owner   string
	Token   string
	Expiry  time.Time
	Cluster ClusterDoc
	Pools   []NodePoolDoc // not deleted, by creation
}

// TakeLease starts a run of the chain token on a cluster: in one
// transaction it checks the token and that no other run holds the lease,
// takes the lease for ttl, sets the watchdog's deadline to deadline, and
// reads the cluster's pools that are not deleted.
func (s *Store) TakeLease(ctx context.Context, tenantID, clusterID, token, owner string, ttl time.Duration, deadline time.Time) (*Lease, error) {
	ref := s.ClusterRef(tenantID, clusterID)
	var l *Lease
	err := s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		l = nil
		snap, err := tx.Get(ref)
		if isNotFound(err) {
			return ErrStale
		}
		if err != nil {
			return fmt.Errorf("read cluster: %w", err)
		}
		var c ClusterDoc
		if err := snap.DataTo(&c); err != nil {
			return fmt.Errorf("decode cluster: %w", err)
		}
		now := s.timestamp()
		switch {
		case c.State == resource.StateDeleted || c.Reconcile.Token != token:
			return ErrStale
		case c.Reconcile.LeaseOwner != "" && c.Reconcile.LeaseOwner != owner && c.Reconcile.LeaseExpiry.After(now):
			return ErrBusy
		}
		pools, err := s.readPools(tx, ref)
		if err != nil {
			return err
		}
		expiry := now.Add(ttl)
		c.Reconcile.LeaseOwner, c.Reconcile.LeaseExpiry, c.Reconcile.NextAt = owner, expiry, deadline
		l = &Lease{Owner: owner, Token: token, Expiry: expiry, Cluster: c, Pools: pools}
		return tx.Update(ref, []firestore.Update{
			{Path: "reconcile.leaseOwner", Value: owner},
			{Path: "reconcile.leaseExpiry", Value: expiry},
			{Path: "reconcile.nextAt", Value: deadline},
		})
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (s *Store) readPools(tx *firestore.Transaction, cluster *firestore.DocumentRef) ([]NodePoolDoc, error) {
	snaps, err := tx.Documents(cluster.Collection("nodePools").Where("active", "==", true).OrderBy("createdAt", firestore.Asc)).GetAll()
	if err != nil {
		return nil, fmt.Errorf("read node pools: %w", err)
	}
	pools := make([]NodePoolDoc, 0, len(snaps))
	for _, snap := range snaps {
		var p NodePoolDoc
		if err := snap.DataTo(&p); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		pools = append(pools, p)
	}
	return pools, nil
}

// holdsLease checks in tx that l still holds its cluster's lease, and
// returns the cluster as stored now.
func (s *Store) holdsLease(tx *firestore.Transaction, l *Lease) (*ClusterDoc, error) {
	snap, err := tx.Get(s.ClusterRef(l.Cluster.TenantID, l.Cluster.ID))
	if err != nil {
		return nil, fmt.Errorf("read cluster: %w", err)
	}
	var c ClusterDoc
	if err := snap.DataTo(&c); err != nil {
		return nil, fmt.Errorf("decode cluster: %w", err)
	}
	if c.Reconcile.LeaseOwner != l.Owner || !c.Reconcile.LeaseExpiry.After(s.timestamp()) {
		return nil, ErrLeaseLost
	}
	return &c, nil
}

// RecordIntent records, before a provider call, the call about to be made:
// on the pool nodePoolID, or on the cluster when nodePoolID is empty.
func (s *Store) RecordIntent(ctx context.Context, l *Lease, nodePoolID string, in *Intent) error {
	return s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := s.holdsLease(tx, l); err != nil {
			return err
		}
		ref := s.ClusterRef(l.Cluster.TenantID, l.Cluster.ID)
		if nodePoolID != "" {
			ref = s.NodePoolRef(l.Cluster.TenantID, l.Cluster.ID, nodePoolID)
		}
		return tx.Update(ref, []firestore.Update{{Path: "provider.intent", Value: in}})
	})
}

// Finish is the outcome of a run to write.
type Finish struct {
	Cluster  ClusterDoc
	Pools    []NodePoolDoc // as the run leaves them, in the lease's order
	Events   []outbox.Event
	NextAt   time.Time // the watchdog's deadline for the next run
	Failures int       // consecutive transient failures
}

// FinishRun writes a run's outcome and releases the lease, in one
// transaction. A document the API changed during the run (the tenant
// resized or deleted a pool) keeps the API's state: only the reconciler's
// own bookkeeping is written to it, and the events of the state it would
// have had are dropped; the API's kick runs the cluster again.
//
// It returns the events committed, and whether the run's chain token is
// still the cluster's (when it is not, a kick started a newer chain and the
// run must not schedule a successor).
func (s *Store) FinishRun(ctx context.Context, l *Lease, f Finish) ([]outbox.Event, bool, error) {
	var committed []outbox.Event
	current := false
	tenantID, clusterID := l.Cluster.TenantID, l.Cluster.ID
	clusterRef := s.ClusterRef(tenantID, clusterID)
	err := s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		committed, current = nil, false
		stored, err := s.holdsLease(tx, l)
		if err != nil {
			return err
		}
		poolRefs := make([]*firestore.DocumentRef, len(f.Pools))
		for i, p := range f.Pools {
			poolRefs[i] = s.NodePoolRef(tenantID, clusterID, p.ID)
		}
		snaps, err := tx.GetAll(poolRefs)
		if err != nil {
			return fmt.Errorf("read node pools: %w", err)
		}
		dropped := map[string]bool{} // node pool IDs, and "" for the cluster
		deletedPools := 0
		for i, after := range f.Pools {
			before := l.Pools[i]
			var now NodePoolDoc
			if err := snaps[i].DataTo(&now); err != nil {
				return fmt.Errorf("decode node pool %s: %w", after.ID, err)
			}
			if !now.UpdatedAt.Equal(before.UpdatedAt) || now.State != before.State || now.Version != before.Version {
				dropped[after.ID] = true
				if err := tx.Update(poolRefs[i], []firestore.Update{{Path: "provider", Value: after.Provider}}); err != nil {
					return err
				}
				continue
			}
			if after.State == resource.StateDeleted && before.State != resource.StateDeleted {
				deletedPools++
				if err := tx.Delete(s.poolNameRef(tenantID, clusterID, after.Name)); err != nil {
					return err
				}
			}
			if err := tx.Set(poolRefs[i], after); err != nil {
				return err
			}
		}

		c := f.Cluster
		updates := []firestore.Update{
			{Path: "provider.id", Value: c.Provider.ID},
			{Path: "provider.operation", Value: c.Provider.Operation},
			{Path: "provider.operationKind", Value: c.Provider.OperationKind},
			{Path: "provider.intent", Value: c.Provider.Intent},
			{Path: "kubernetesVersion", Value: c.KubernetesVersion},
			{Path: "endpoint", Value: c.Endpoint},
			{Path: "reconcile.leaseOwner", Value: ""},
			{Path: "reconcile.leaseExpiry", Value: time.Time{}},
			{Path: "reconcile.nextAt", Value: f.NextAt},
			{Path: "reconcile.failures", Value: f.Failures},
		}
		if deletedPools > 0 {
			updates = append(updates, firestore.Update{Path: "activePoolCount", Value: firestore.Increment(-deletedPools)})
		}
		if stored.Version == l.Cluster.Version && stored.State == l.Cluster.State {
			updates = append(updates,
				firestore.Update{Path: "state", Value: c.State},
				firestore.Update{Path: "message", Value: c.Message},
				firestore.Update{Path: "updatedAt", Value: c.UpdatedAt},
				firestore.Update{Path: "changed", Value: c.Changed},
				firestore.Update{Path: "active", Value: c.Active},
				firestore.Update{Path: "expireAt", Value: c.ExpireAt},
				firestore.Update{Path: "provider.everReady", Value: c.Provider.EverReady},
			)
			if c.State == resource.StateDeleted && l.Cluster.State != resource.StateDeleted {
				if err := tx.Delete(s.clusterNameRef(tenantID, c.Name)); err != nil {
					return err
				}
			}
		} else {
			dropped[""] = true
		}
		if err := tx.Update(clusterRef, updates); err != nil {
			return err
		}
		for _, e := range f.Events {
			if dropped[e.NodePoolID] {
				continue
			}
			committed = append(committed, e)
		}
		current = stored.Reconcile.Token == l.Token
		return s.writeEvents(tx, committed)
	})
	if err != nil {
		return nil, false, err
	}
	return committed, current, nil
}

// ReleaseLease gives up a run's lease without other changes, so that the
// next run need not wait for it to expire.
func (s *Store) ReleaseLease(ctx context.Context, l *Lease, nextAt time.Time, failures int) error {
	return s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := s.holdsLease(tx, l); err != nil {
			return err
		}
		return tx.Update(s.ClusterRef(l.Cluster.TenantID, l.Cluster.ID), []firestore.Update{
			{Path: "reconcile.leaseOwner", Value: ""},
			{Path: "reconcile.leaseExpiry", Value: time.Time{}},
			{Path: "reconcile.nextAt", Value: nextAt},
			{Path: "reconcile.failures", Value: failures},
		})
	})
}

// Overdue returns the clusters, of every tenant, whose next run is overdue
// by before (chains that died: an enqueue failed, a task was lost), at
// most limit of them.
func (s *Store) Overdue(ctx context.Context, before time.Time, limit int) ([]ClusterDoc, error) {
	docs, err := s.fs.CollectionGroup("clusters").
		Where("active", "==", true).
		Where("reconcile.nextAt", "<", before).
		OrderBy("reconcile.nextAt", firestore.Asc).
		Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("query overdue clusters: %w", err)
	}
	out := make([]ClusterDoc, 0, len(docs))
	for _, d := range docs {
		var c ClusterDoc
		if err := d.DataTo(&c); err != nil {
			return nil, fmt.Errorf("decode %s: %w", d.Ref.Path, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Rekick starts a new chain for a cluster whose chain died, unless its
// next run is no longer overdue (a run or a kick got there first).
func (s *Store) Rekick(ctx context.Context, tenantID, clusterID string, before time.Time) (*Kick, error) {
	ref := s.ClusterRef(tenantID, clusterID)
	var k *Kick
	err := s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		k = nil
		snap, err := tx.Get(ref)
		if err != nil {
			return fmt.Errorf("read cluster: %w", err)
		}
		var c ClusterDoc
		if err := snap.DataTo(&c); err != nil {
			return fmt.Errorf("decode cluster: %w", err)
		}
		if !c.Active || !c.Reconcile.NextAt.Before(before) {
			return nil
		}
		now := s.timestamp()
		k = s.kick(&c, now)
		return tx.Update(ref, []firestore.Update{
			{Path: "reconcile.token", Value: c.Reconcile.Token},
			{Path: "reconcile.nextAt", Value: c.Reconcile.NextAt},
		})
	})
	return k, err
}

// leaseMargin is how long before its expiry a lease may still be dropped
// without a transaction: until then no other run can have taken it, since
// runs only take expired leases, whatever the clocks' small disagreement.
const leaseMargin = 2 * time.Second

// DropLease gives up a run's lease with one blind write, so that a kick
// arriving right after a refresh that changed nothing need not wait for the
// lease to expire. It writes only the lease fields, which only runs write,
// and only well before the lease expires; past that it leaves the lease to
// expire on its own.
func (s *Store) DropLease(ctx context.Context, l *Lease) error {
	if s.now().Add(leaseMargin).After(l.Expiry) {
		return nil
	}
	_, err := s.ClusterRef(l.Cluster.TenantID, l.Cluster.ID).Update(ctx, []firestore.Update{
		{Path: "reconcile.leaseOwner", Value: ""},
		{Path: "reconcile.leaseExpiry", Value: time.Time{}},
	})
	if err != nil {
		return fmt.Errorf("drop lease: %w", err)
	}
	return nil
}
