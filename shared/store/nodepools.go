package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// ClustersKind is the chain kind of clusters: the collection of their
// documents, and the Kind of their kicks.
const ClustersKind = "clusters"

// NodePoolResult is the outcome of a node pool mutation: the pool as the API
// returns it, the events committed with it (for the relay) and the
// reconcile kick, if the cluster needs a run.
type NodePoolResult struct {
	NodePool resource.NodePool
	Events   []event.Event
	Kick     *chain.Kick
}

// CreateNodePoolRequest is a validated create: Spec is the pool's spec as
// the tenant asks for it (its version, generation and managing substrate
// are the store's to set); RequestHash is the hash of the canonical
// request, for idempotency.
type CreateNodePoolRequest struct {
	ClusterID      string
	Spec           model.NodePoolSpec
	IdempotencyKey string
	RequestHash    string
}

// CreateNodePool adds a pool to a standard cluster in one transaction: it
// reads the cluster, the caller's member document, the name reservation and
// the idempotency record in one batch, checks the pool against the cluster
// (lifecycle.AddNodePool, its zones among the cluster's included), then
// writes the pool, its reservation, the cluster's spec and chain, the
// idempotency record and the kubernetes.nodepool.created event. A
// substrate's pools are held to the same rules as a tenant's.
func (s *Store) CreateNodePool(ctx context.Context, c auth.Principal, req CreateNodePoolRequest) (NodePoolResult, error) {
	var res NodePoolResult
	clusterRef := s.ClusterRef(c.TenantID(), req.ClusterID)
	nameRef := s.poolNameRef(c.TenantID(), req.ClusterID, req.Spec.Name)
	var idemRef *firestore.DocumentRef
	refs := []*firestore.DocumentRef{s.grantRef(c), clusterRef, nameRef}
	if req.IdempotencyKey != "" {
		idemRef = s.idempotencyRef(c.TenantID(), "nodePools.create/"+req.ClusterID, c.Actor(), req.IdempotencyKey)
		refs = append(refs, idemRef)
	}
	err := s.transact(ctx, c.TenantID(), func(ctx context.Context, tx *firestore.Transaction) error {
		res = NodePoolResult{}
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		grant, err := admit(c, snaps[0])
		if err != nil {
			return err
		}
		cluster, err := decodeCluster(snaps[1], req.ClusterID)
		if err != nil {
			return err
		}
		if err := auth.Authorize(c, grant, auth.PermUpdate, clusterResource(cluster)); err != nil {
			return err
		}
		now := s.timestamp()
		if idemRef != nil && snaps[3].Exists() {
			rec, replay, err := s.replay(snaps[3], req.RequestHash, req.IdempotencyKey, now)
			if err != nil {
				return err
			}
			if replay {
				p, err := s.getNodePoolTx(tx, c.TenantID(), req.ClusterID, rec.ResourceID)
				if err != nil {
					return err
				}
				res.NodePool = p.View()
				return unchanged
			}
		}
		if err := s.rules.MayAddNodePool(c.SubstrateID(), &cluster.Cluster); err != nil {
			return err
		}
		if err := s.rules.AddNodePool(&cluster.Cluster, &req.Spec, snaps[2].Exists(), now); err != nil {
			return err
		}
		p := s.rules.NewNodePool(resource.NewNodePoolID(), c.TenantID(), cluster.ID, s.rules.Managed(req.Spec, c.SubstrateID(), c.Pool()), now)
		if err := tx.Create(s.NodePoolRef(c.TenantID(), cluster.ID, p.ID), p); err != nil {
			return err
		}
		if err := tx.Create(nameRef, reservation{ID: p.ID}); err != nil {
			return err
		}
		res.NodePool = p.View()
		res.Events = s.rules.NodePoolCreated(&p, now)
		if res.Kick, err = s.writeClusterSpec(tx, cluster, now, res.Events...); err != nil {
			return err
		}
		if idemRef != nil {
			rec := idempotencyRecord{RequestHash: req.RequestHash, ResourceID: p.ID, ClusterID: cluster.ID, ExpireAt: now.Add(IdempotencyTTL)}
			if err := tx.Set(idemRef, rec); err != nil {
				return err
			}
		}
		return s.createEvents(tx, res.Events)
	})
	if err != nil {
		return NodePoolResult{}, storageErr("create node pool", err)
	}
	return res, nil
}

// replay reads an idempotency record: replay is true when the key was used
// before with the same request (the caller answers with what it made), an
// error when with another one. An expired record counts as none.
func (s *Store) replay(snap *firestore.DocumentSnapshot, hash, key string, now time.Time) (idempotencyRecord, bool, error) {
	var rec idempotencyRecord
	if err := snap.DataTo(&rec); err != nil {
		return rec, false, fmt.Errorf("decode idempotency record: %w", err)
	}
	if !rec.ExpireAt.After(now) {
		return rec, false, nil
	}
	if rec.RequestHash != hash {
		return rec, false, errs.E(errs.Conflict, "idempotency key %q was used with another request", key)
	}
	return rec, true, nil
}

// writeClusterSpec writes the cluster's spec as an API call changed it,
// and starts a new reconcile chain so that the change is acted on now.
// Events the change causes are numbered after the cluster's sequence as
// the transaction read it, and the new last is written with the spec: the
// cluster's document is written once per commit. The caller writes the
// events themselves (createEvents).
func (s *Store) writeClusterSpec(tx *firestore.Transaction, c *clusterDoc, now time.Time, events ...event.Event) (*chain.Kick, error) {
	k := c.Reconcile.Restart(ClustersKind, c.TenantID, c.ID, now)
	updates := []firestore.Update{
		{Path: "spec", Value: c.Spec},
		{Path: chain.Field, Value: c.Reconcile},
	}
	if len(events) > 0 {
		updates = append(updates, firestore.Update{Path: outbox.SequenceField, Value: outbox.Number(events, c.Sequence)})
	}
	if err := tx.Update(s.ClusterRef(c.TenantID, c.ID), updates); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListNodePools returns the cluster's pools that are not deleted, deleting
// ones included, ordered by creation.
func (s *Store) ListNodePools(ctx context.Context, c auth.Principal, clusterID string) ([]resource.NodePool, error) {
	snaps, err := s.fs.GetAll(ctx, []*firestore.DocumentRef{s.grantRef(c), s.ClusterRef(c.TenantID(), clusterID)})
	if err != nil {
		return nil, storageErr("list node pools", err)
	}
	grant, err := admit(c, snaps[0])
	if err != nil {
		return nil, err
	}
	cl, err := decodeCluster(snaps[1], clusterID)
	if err != nil {
		return nil, err
	}
	if err := auth.Authorize(c, grant, auth.PermRead, clusterResource(cl)); err != nil {
		return nil, err
	}
	it := s.activePools(s.ClusterRef(c.TenantID(), clusterID)).Documents(ctx)
	defer it.Stop()
	pools := []resource.NodePool{}
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, storageErr("list node pools", err)
		}
		var p model.NodePool
		if err := snap.DataTo(&p); err != nil {
			return nil, storageErr("list node pools", fmt.Errorf("decode %s: %w", snap.Ref.Path, err))
		}
		pools = append(pools, p.View())
	}
	return pools, nil
}

// activePools is the query of a cluster's pools that are not deleted, by
// creation.
func (s *Store) activePools(cluster *firestore.DocumentRef) firestore.Query {
	return cluster.Collection("nodePools").Where("active", "==", true).OrderBy("createdAt", firestore.Asc)
}

// UpdateNodePool resizes a pool in one transaction (lifecycle.ResizeNodePool).
func (s *Store) UpdateNodePool(ctx context.Context, c auth.Principal, clusterID, nodePoolID string, resize model.Resize) (NodePoolResult, error) {
	return s.mutateNodePool(ctx, c, clusterID, nodePoolID, func(cluster *model.Cluster, p *model.NodePool, now time.Time) (bool, error) {
		return true, s.rules.ResizeNodePool(cluster, p, resize, now)
	})
}

// DeleteNodePool marks a pool for deletion and returns it deleting; a pool
// already deleting is returned unchanged, with no write.
func (s *Store) DeleteNodePool(ctx context.Context, c auth.Principal, clusterID, nodePoolID string) (NodePoolResult, error) {
	return s.mutateNodePool(ctx, c, clusterID, nodePoolID, func(cluster *model.Cluster, p *model.NodePool, now time.Time) (bool, error) {
		return s.rules.DeleteNodePool(cluster, p, now), nil
	})
}

// mutateNodePool runs change on a pool in one transaction (one batch read
// of member, cluster and pool). When change reports a change, the specs of
// the pool and of its cluster are written and the cluster's chain kicked.
func (s *Store) mutateNodePool(ctx context.Context, c auth.Principal, clusterID, nodePoolID string,
	change func(*model.Cluster, *model.NodePool, time.Time) (bool, error)) (NodePoolResult, error) {
	var res NodePoolResult
	clusterRef := s.ClusterRef(c.TenantID(), clusterID)
	poolRef := s.NodePoolRef(c.TenantID(), clusterID, nodePoolID)
	err := s.transact(ctx, c.TenantID(), func(ctx context.Context, tx *firestore.Transaction) error {
		res = NodePoolResult{}
		snaps, err := tx.GetAll([]*firestore.DocumentRef{s.grantRef(c), clusterRef, poolRef})
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		grant, err := admit(c, snaps[0])
		if err != nil {
			return err
		}
		cluster, err := decodeCluster(snaps[1], clusterID)
		if err != nil {
			return err
		}
		p, err := decodeNodePool(snaps[2], nodePoolID)
		if err != nil {
			return err
		}
		if err := auth.Authorize(c, grant, auth.PermUpdate, nodePoolResource(cluster, p)); err != nil {
			return err
		}
		if err := s.rules.MayChange(c.SubstrateID(), p.Spec.ManagedBy, p.Spec.ManagedPool, "node pool", p.Spec.Name); err != nil {
			return err
		}
		now := s.timestamp()
		changed, err := change(&cluster.Cluster, p, now)
		if err != nil {
			return err
		}
		res.NodePool = p.View()
		if !changed {
			return unchanged
		}
		if err := tx.Update(poolRef, []firestore.Update{{Path: "spec", Value: p.Spec}}); err != nil {
			return err
		}
		res.Kick, err = s.writeClusterSpec(tx, cluster, now)
		return err
	})
	if err != nil {
		return NodePoolResult{}, storageErr("change node pool", err)
	}
	return res, nil
}

func (s *Store) getNodePoolTx(tx *firestore.Transaction, tenantID, clusterID, nodePoolID string) (*model.NodePool, error) {
	snap, err := tx.Get(s.NodePoolRef(tenantID, clusterID, nodePoolID))
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("read node pool: %w", err)
	}
	var p model.NodePool
	if snap == nil || !snap.Exists() {
		return nil, errs.E(errs.NotFound, "node pool %s not found", nodePoolID)
	}
	if err := snap.DataTo(&p); err != nil {
		return nil, fmt.Errorf("decode node pool %s: %w", nodePoolID, err)
	}
	return &p, nil
}

// decodeCluster returns the cluster of snap, or NOT_FOUND when there is none
// or it is deleted.
func decodeCluster(snap *firestore.DocumentSnapshot, id string) (*clusterDoc, error) {
	if !snap.Exists() {
		return nil, errs.E(errs.NotFound, "cluster %s not found", id)
	}
	var c clusterDoc
	if err := snap.DataTo(&c); err != nil {
		return nil, fmt.Errorf("decode cluster %s: %w", id, err)
	}
	if !c.Active {
		return nil, errs.E(errs.NotFound, "cluster %s not found", id)
	}
	return &c, nil
}

// decodeNodePool returns the pool of snap, or NOT_FOUND when there is none
// or it is deleted.
func decodeNodePool(snap *firestore.DocumentSnapshot, id string) (*model.NodePool, error) {
	if !snap.Exists() {
		return nil, errs.E(errs.NotFound, "node pool %s not found", id)
	}
	var p model.NodePool
	if err := snap.DataTo(&p); err != nil {
		return nil, fmt.Errorf("decode node pool %s: %w", id, err)
	}
	if !p.Active {
		return nil, errs.E(errs.NotFound, "node pool %s not found", id)
	}
	return &p, nil
}
