package store

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// substrateDoc is a substrate's document: the object and its reconcile
// chain.
type substrateDoc struct {
	model.Substrate
	Reconcile chain.State `firestore:"reconcile"`
	// Sequence is the last ce-sequence of the substrate's events
	// (outbox.SequenceField).
	Sequence int64 `firestore:"sequence"`
}

// Substrate returns a stored substrate, deleted or not; nil when there is
// none.
func (s *Store) Substrate(ctx context.Context, tenantID, id string) (*model.Substrate, error) {
	snap, err := s.substrateRef(tenantID, id).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, errs.Wrap(errs.Unavailable, err, "read substrate")
	}
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var d model.Substrate
	if err := snap.DataTo(&d); err != nil {
		return nil, fmt.Errorf("decode substrate %s: %w", id, err)
	}
	return &d, nil
}

// ActiveSubstrates returns the tenant's substrates that are not deleted,
// of one pool when poolID is set, by creation.
func (s *Store) ActiveSubstrates(ctx context.Context, tenantID, poolID string) ([]model.Substrate, error) {
	q := s.substrates(tenantID).Where("active", "==", true)
	if poolID != "" {
		q = q.Where("poolId", "==", poolID)
	}
	snaps, err := q.OrderBy("createdAt", firestore.Asc).Documents(ctx).GetAll()
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "list substrates")
	}
	out := make([]model.Substrate, len(snaps))
	for i, snap := range snaps {
		if err := snap.DataTo(&out[i]); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
	}
	return out, nil
}

// JoinedNodes returns up to limit (0: all) of the substrate's joined
// nodes, by name, after the node named after.
func (s *Store) JoinedNodes(ctx context.Context, tenantID, substrateID, after string, limit int) ([]resource.SubstrateNode, error) {
	q := s.substrateNodes(tenantID, substrateID).OrderBy(firestore.DocumentID, firestore.Asc)
	if after != "" {
		q = q.StartAfter(DocID(after))
	}
	if limit > 0 {
		q = q.Limit(limit)
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "read joined nodes")
	}
	nodes := make([]resource.SubstrateNode, len(snaps))
	for i, snap := range snaps {
		if err := snap.DataTo(&nodes[i]); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		nodes[i].JoinedAt = nodes[i].JoinedAt.UTC()
	}
	return nodes, nil
}

// Cluster returns a stored cluster, deleted or not; nil when there is
// none. It checks no permission: it is for the substrates' own reads.
func (s *Store) Cluster(ctx context.Context, tenantID, id string) (*model.Cluster, error) {
	snap, err := s.ClusterRef(tenantID, id).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, errs.Wrap(errs.Unavailable, err, "read cluster")
	}
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var c model.Cluster
	if err := snap.DataTo(&c); err != nil {
		return nil, fmt.Errorf("decode cluster %s: %w", id, err)
	}
	return &c, nil
}

// SubstrateRead is what a substrate's run reads when it starts.
type SubstrateRead struct {
	Substrate model.Substrate
	// PreviousGone: the substrate waits for none (Spec.After), or the one
	// it waits for is deleted.
	PreviousGone bool
	// Cluster is the substrate's cluster; nil while it has none, or when
	// it is gone.
	Cluster *model.Cluster
	// Adopted: the cluster records the substrate's adoption.
	Adopted bool
	// Pools are the cluster's node pools that are not deleted, by
	// creation.
	Pools []model.NodePool
}

// SubstrateLeave is what a substrate's run leaves, for its Save.
type SubstrateLeave struct {
	// Substrate is the substrate as the run leaves it: its status,
	// active and expireAt are written (never its spec).
	Substrate model.Substrate
	// Left names the joined nodes that left; Revoked are the hashes of
	// the join tokens revoked.
	Left    []string
	Revoked []string
	Events  []event.Event
}

// SubstrateRef is the document of a tenant's substrate, the subject of
// its chain (chain.Key names it).
func (s *Store) SubstrateRef(tenantID, id string) *firestore.DocumentRef {
	return s.substrateRef(tenantID, id)
}

// LoadSubstrate reads through rd what a substrate's run reads, snap being
// the substrate's document: its cluster and pools, and its previous
// substrate while it waits for it.
func (s *Store) LoadSubstrate(rd *chain.Reader, snap chain.Doc) (SubstrateRead, error) {
	r := SubstrateRead{PreviousGone: true}
	if err := snap.DataTo(&r.Substrate); err != nil {
		return r, fmt.Errorf("decode substrate: %w", err)
	}
	sub := &r.Substrate
	if sub.Spec.After != "" && !sub.Spec.Deleting {
		prev, err := get(rd, s.substrateRef(sub.TenantID, sub.Spec.After))
		if err != nil {
			return r, fmt.Errorf("read previous substrate: %w", err)
		}
		var p model.Substrate
		if prev.Exists() {
			if err := prev.DataTo(&p); err != nil {
				return r, fmt.Errorf("decode previous substrate: %w", err)
			}
		}
		r.PreviousGone = !prev.Exists() || !p.Active
	}
	clusterID := sub.ClusterID()
	if clusterID == "" {
		return r, nil
	}
	cs, err := get(rd, s.ClusterRef(sub.TenantID, clusterID))
	if err != nil {
		return r, fmt.Errorf("read cluster %s: %w", clusterID, err)
	}
	if !cs.Exists() {
		return r, nil
	}
	var c clusterDoc
	if err := cs.DataTo(&c); err != nil {
		return r, fmt.Errorf("decode cluster %s: %w", clusterID, err)
	}
	r.Cluster = &c.Cluster
	r.Adopted = s.rules.Adopts(&c.Cluster, sub.ID, sub.PoolID)
	if r.Pools, err = s.LoadNodePools(rd, cs.Ref); err != nil {
		return r, err
	}
	return r, nil
}

// SaveSubstrateRun writes, in tx, what a substrate's run that read read
// leaves (l): the run's status whole; it removes the nodes that left and
// the revoked tokens, and returns the events to commit. The substrate's
// state events are dropped when its spec changed during the run (a new
// event of its pool came): they announce a state it no longer shows. now
// is the substrate's document as it is now. When the run deletes the
// substrate, the pool's next substrate, waiting for that, is woken in tx:
// the kicks returned are to be sent once it commits.
func (s *Store) SaveSubstrateRun(t chain.Tx, doc chain.Doc, read SubstrateRead, l SubstrateLeave) ([]event.Event, []chain.Kick, error) {
	tx, now := txOf(t), snapOf(doc)
	var cur model.Substrate
	if err := now.DataTo(&cur); err != nil {
		return nil, nil, fmt.Errorf("decode substrate: %w", err)
	}
	sub := &l.Substrate
	var next []*firestore.DocumentSnapshot
	if !sub.Active && cur.Active {
		// Every read before the first write.
		var err error
		if next, err = s.waiting(tx, sub); err != nil {
			return nil, nil, err
		}
	}
	updates := statusUpdates(sub.Status, sub.Active, sub.ExpireAt)
	if len(l.Left) > 0 {
		updates = append(updates, firestore.Update{Path: "joined", Value: firestore.Increment(-len(l.Left))})
	}
	if err := tx.Update(now.Ref, updates); err != nil {
		return nil, nil, err
	}
	for _, n := range l.Left {
		if err := tx.Delete(s.substrateNodes(sub.TenantID, sub.ID).Doc(DocID(n))); err != nil {
			return nil, nil, err
		}
	}
	for _, h := range l.Revoked {
		if err := tx.Delete(s.joinTokenRef(h)); err != nil {
			return nil, nil, err
		}
	}
	kicks, err := s.wakeSubstrates(tx, next, s.timestamp())
	if err != nil {
		return nil, nil, fmt.Errorf("wake the pool's next substrate: %w", err)
	}
	stale := cur.Spec.Generation != read.Substrate.Spec.Generation
	var events []event.Event
	for _, e := range l.Events {
		if stale && e.Type != event.SubstrateNodeLeft {
			continue
		}
		events = append(events, e)
	}
	return events, kicks, nil
}

// waiting reads, in tx, the pool's current substrate when it waits for
// sub to be deleted (its Spec.After); none otherwise.
func (s *Store) waiting(tx *firestore.Transaction, sub *model.Substrate) ([]*firestore.DocumentSnapshot, error) {
	snap, err := tx.Get(s.substratePoolRef(sub.TenantID, sub.PoolID))
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("read the pool's index: %w", err)
	}
	idx, err := decodeIndex(snap)
	if err != nil || idx.SubstrateID == "" || idx.SubstrateID == sub.ID {
		return nil, err
	}
	ns, err := tx.Get(s.substrateRef(sub.TenantID, idx.SubstrateID))
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("read the pool's next substrate: %w", err)
	}
	if ns == nil || !ns.Exists() {
		return nil, nil
	}
	var d model.Substrate
	if err := ns.DataTo(&d); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ns.Ref.Path, err)
	}
	if d.Spec.After != sub.ID {
		return nil, nil
	}
	return []*firestore.DocumentSnapshot{ns}, nil
}

// ActiveNodePools returns a cluster's node pools that are not deleted, by
// creation, read afresh (a substrate's run, after it changed one).
func (s *Store) ActiveNodePools(ctx context.Context, tenantID, clusterID string) ([]model.NodePool, error) {
	return s.LoadNodePools(chain.NewReader(ctx, nil), s.ClusterRef(tenantID, clusterID))
}

// AdoptCluster records that the calling substrate uses the tenant's
// cluster (auth.PermAdopt, then lifecycle.DecideAdoption), in one transaction:
// of two substrates adopting one cluster at once, exactly one wins. An
// adoption left by a substrate that is gone (deleted without releasing
// the cluster, its run killed) is dropped. The cluster's spec is not
// written: adopting changes nothing the tenant asked for.
func (s *Store) AdoptCluster(ctx context.Context, c auth.Principal, clusterID, accountID string) (resource.Cluster, error) {
	var view resource.Cluster
	ref := s.ClusterRef(c.TenantID(), clusterID)
	err := s.transact(ctx, c.TenantID(), func(ctx context.Context, tx *firestore.Transaction) error {
		grant, cl, err := s.readCluster(tx, c, clusterID)
		if err != nil {
			return err
		}
		view = cl.View()
		if err := auth.Authorize(c, grant, auth.PermAdopt, clusterResource(cl)); err != nil {
			return err
		}
		r := model.AdoptionRequest{Substrate: c.ID(), Pool: c.Pool(), AccountID: accountID, Cluster: &cl.Cluster, Adopters: map[string]*model.Substrate{}}
		for _, id := range s.rules.OtherAdopters(&cl.Cluster, c.ID()) {
			other, err := s.readSubstrateTx(tx, c.TenantID(), id)
			if err != nil {
				return err
			}
			if other != nil {
				r.Adopters[id] = &other.Substrate
			}
		}
		a, err := s.rules.DecideAdoption(r)
		if err != nil {
			return err
		}
		if !a.Changes() {
			return unchanged
		}
		var updates []firestore.Update
		for _, id := range a.Drop {
			updates = append(updates, firestore.Update{FieldPath: firestore.FieldPath{"substrates", id}, Value: firestore.Delete})
		}
		if a.Record {
			updates = append(updates, firestore.Update{FieldPath: firestore.FieldPath{"substrates", c.ID()}, Value: c.Pool()})
		}
		return tx.Update(ref, updates)
	})
	if err != nil {
		return resource.Cluster{}, storageErr("adopt cluster", err)
	}
	return view, nil
}

// ReleaseCluster records that the calling substrate no longer uses the
// cluster it adopted (auth.PermAdopt): it removes its own adoption and
// nothing else.
func (s *Store) ReleaseCluster(ctx context.Context, c auth.Principal, clusterID string) error {
	ref := s.ClusterRef(c.TenantID(), clusterID)
	err := s.transact(ctx, c.TenantID(), func(ctx context.Context, tx *firestore.Transaction) error {
		snaps, err := tx.GetAll([]*firestore.DocumentRef{s.grantRef(c), ref})
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		grant, err := admit(c, snaps[0])
		if err != nil {
			return err
		}
		if !snaps[1].Exists() {
			return unchanged
		}
		var cl clusterDoc
		if err := snaps[1].DataTo(&cl); err != nil {
			return fmt.Errorf("decode cluster %s: %w", clusterID, err)
		}
		if err := auth.Authorize(c, grant, auth.PermAdopt, clusterResource(&cl)); err != nil {
			return err
		}
		if !s.rules.Releases(&cl.Cluster, c.ID()) {
			return unchanged
		}
		return tx.Update(ref, []firestore.Update{{FieldPath: firestore.FieldPath{"substrates", c.ID()}, Value: firestore.Delete}})
	})
	if err != nil {
		return storageErr("release cluster", err)
	}
	return nil
}
