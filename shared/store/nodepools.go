package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Caller is who makes a call: the tenant named in the request and the
// authenticated principal.
type Caller struct {
	TenantID  string
	Principal string
}

// Kick asks for a reconcile run of a cluster, carrying the chain token the
// run must present.
type Kick struct {
	TenantID  string
	ClusterID string
	Token     string
}

// NodePoolResult is the outcome of a node pool mutation: the pool as the API
// returns it, the events committed with it (for the relay) and the
// reconcile kick, if the cluster needs a run.
type NodePoolResult struct {
	NodePool resource.NodePool
	Events   []outbox.Event
	Kick     *Kick
}

// CreateNodePoolRequest is a validated create: Spec holds the pool's spec
// fields (name, machine type, counts, disks, accelerators, zones, labels,
// taints); RequestHash is the hash of the canonical request, for
// idempotency.
type CreateNodePoolRequest struct {
	ClusterID      string
	Spec           resource.NodePool
	IdempotencyKey string
	RequestHash    string
	// CheckZones says whether the pool's zones are among the zones of the
	// cluster's region enabled on its account (an INVALID_INPUT error).
	CheckZones func(region string, allowed []string) error
}

// CreateNodePool adds a pool to a standard cluster in one transaction: it
// reads the cluster, the caller's member document, the name reservation and
// the idempotency record in one batch, then writes the pool, its
// reservation, the cluster (count, state, kick), the idempotency record and
// the kubernetes.nodepool.created event.
func (s *Store) CreateNodePool(ctx context.Context, c Caller, req CreateNodePoolRequest) (NodePoolResult, error) {
	var res NodePoolResult
	clusterRef := s.ClusterRef(c.TenantID, req.ClusterID)
	nameRef := s.poolNameRef(c.TenantID, req.ClusterID, req.Spec.Name)
	var idemRef *firestore.DocumentRef
	refs := []*firestore.DocumentRef{s.memberRef(c.TenantID, c.Principal), clusterRef, nameRef}
	if req.IdempotencyKey != "" {
		idemRef = s.idempotencyRef(c.TenantID, "nodePools.create/"+req.ClusterID, c.Principal, req.IdempotencyKey)
		refs = append(refs, idemRef)
	}
	err := s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = NodePoolResult{}
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		member, err := decodeMember(snaps[0])
		if err != nil {
			return err
		}
		cluster, err := decodeCluster(snaps[1], req.ClusterID)
		if err != nil {
			return err
		}
		if err := authorize(member, PermUpdate, req.ClusterID); err != nil {
			return err
		}
		now := s.timestamp()
		if idemRef != nil && snaps[3].Exists() {
			var rec idempotencyRecord
			if err := snaps[3].DataTo(&rec); err != nil {
				return fmt.Errorf("decode idempotency record: %w", err)
			}
			if rec.ExpireAt.After(now) {
				if rec.RequestHash != req.RequestHash {
					return errs.E(errs.Conflict, "idempotency key %q was used with another request", req.IdempotencyKey)
				}
				p, err := s.getNodePoolTx(tx, c.TenantID, req.ClusterID, rec.ResourceID)
				if err != nil {
					return err
				}
				res.NodePool = p.NodePool
				return nil
			}
		}
		if cluster.Mode != resource.ModeStandard {
			return errs.E(errs.InvalidState, "cluster %s is %s: its nodes are run by the provider and it has no node pools", cluster.ID, cluster.Mode)
		}
		if cluster.State == resource.StateDeleting {
			return errs.E(errs.InvalidState, "cluster %s is being deleted", cluster.ID)
		}
		if snaps[2].Exists() {
			return errs.E(errs.Conflict, "node pool name %q is taken in cluster %s", req.Spec.Name, cluster.ID)
		}
		if cluster.ActivePoolCount >= resource.MaxNodePools {
			return errs.E(errs.Quota, "cluster %s has %d node pools, the most it may have", cluster.ID, resource.MaxNodePools)
		}
		if err := req.CheckZones(cluster.Region, cluster.Zones); err != nil {
			return err
		}

		p := newNodePool(c.TenantID, cluster.ID, req.Spec, now)
		res.NodePool = p.NodePool
		if err := tx.Create(s.NodePoolRef(c.TenantID, cluster.ID, p.ID), p); err != nil {
			return err
		}
		if err := tx.Create(nameRef, reservation{ID: p.ID}); err != nil {
			return err
		}
		cluster.ActivePoolCount++
		res.Kick = s.touchCluster(cluster, now)
		if err := tx.Set(clusterRef, cluster); err != nil {
			return err
		}
		if idemRef != nil {
			rec := idempotencyRecord{RequestHash: req.RequestHash, ResourceID: p.ID, ClusterID: cluster.ID, ExpireAt: now.Add(IdempotencyTTL)}
			if err := tx.Set(idemRef, rec); err != nil {
				return err
			}
		}
		res.Events = []outbox.Event{outbox.NodePoolEvent(outbox.NodePoolCreated, p.NodePool, now)}
		return s.writeEvents(tx, res.Events)
	})
	if err != nil {
		return NodePoolResult{}, storageErr("create node pool", err)
	}
	res.NodePool.Normalize()
	return res, nil
}

func newNodePool(tenantID, clusterID string, spec resource.NodePool, now time.Time) *NodePoolDoc {
	p := spec
	p.ID = resource.NewNodePoolID()
	p.TenantID = tenantID
	p.ClusterID = clusterID
	p.State = resource.StatePending
	p.Message = ""
	p.Version = 1
	p.CreatedAt = now
	p.UpdatedAt = now
	p.Normalize()
	return &NodePoolDoc{NodePool: p, Active: true}
}

// touchCluster records a change of the cluster's desired state: the cluster
// goes updating (unless it is still being created), its version goes up,
// and a new reconcile chain token is issued so the change is acted on now.
func (s *Store) touchCluster(c *ClusterDoc, now time.Time) *Kick {
	switch c.State {
	case resource.StateReady, resource.StateError, resource.StateUpdating:
		c.State = resource.StateUpdating
		c.Message = ""
	}
	c.Changed = true
	c.Version++
	c.UpdatedAt = now
	return s.kick(c, now)
}

// kick issues a new chain token due now; the old chain's next task finds
// its token stale and stops.
func (s *Store) kick(c *ClusterDoc, now time.Time) *Kick {
	c.Reconcile.Token = newToken()
	c.Reconcile.NextAt = now
	return &Kick{TenantID: c.TenantID, ClusterID: c.ID, Token: c.Reconcile.Token}
}

func (s *Store) writeEvents(tx *firestore.Transaction, events []outbox.Event) error {
	for _, e := range events {
		if err := tx.Create(outbox.Ref(s.fs, e), e); err != nil {
			return err
		}
	}
	return nil
}

// ListNodePools returns the cluster's pools that are not deleted, deleting
// ones included, ordered by creation.
func (s *Store) ListNodePools(ctx context.Context, c Caller, clusterID string) ([]resource.NodePool, error) {
	snaps, err := s.fs.GetAll(ctx, []*firestore.DocumentRef{s.memberRef(c.TenantID, c.Principal), s.ClusterRef(c.TenantID, clusterID)})
	if err != nil {
		return nil, storageErr("list node pools", err)
	}
	member, err := decodeMember(snaps[0])
	if err != nil {
		return nil, err
	}
	if _, err := decodeCluster(snaps[1], clusterID); err != nil {
		return nil, err
	}
	if err := authorize(member, PermRead, clusterID); err != nil {
		return nil, err
	}
	it := s.ClusterRef(c.TenantID, clusterID).Collection("nodePools").
		Where("active", "==", true).
		OrderBy("createdAt", firestore.Asc).
		Documents(ctx)
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
		var p NodePoolDoc
		if err := snap.DataTo(&p); err != nil {
			return nil, storageErr("list node pools", fmt.Errorf("decode %s: %w", snap.Ref.Path, err))
		}
		p.Normalize()
		pools = append(pools, p.NodePool)
	}
	return pools, nil
}

// Resize is an accepted change of a pool's size: it returns the pool with
// the new node count and autoscaling, or an INVALID_INPUT error.
type Resize func(resource.NodePool) (resource.NodePool, error)

// UpdateNodePool resizes a pool in one transaction. The pool goes updating
// (a pending one stays pending) with its version up by one; the cluster
// goes updating.
func (s *Store) UpdateNodePool(ctx context.Context, c Caller, clusterID, nodePoolID string, resize Resize) (NodePoolResult, error) {
	return s.mutateNodePool(ctx, c, clusterID, nodePoolID, func(cluster *ClusterDoc, p *NodePoolDoc, now time.Time) (bool, error) {
		if cluster.State == resource.StateDeleting {
			return false, errs.E(errs.InvalidState, "cluster %s is being deleted", cluster.ID)
		}
		if p.State == resource.StateDeleting {
			return false, errs.E(errs.InvalidState, "node pool %s is being deleted", p.ID)
		}
		resized, err := resize(p.NodePool)
		if err != nil {
			return false, err
		}
		p.NodeCount = resized.NodeCount
		p.Autoscaling = resized.Autoscaling
		if p.State != resource.StatePending {
			p.State = resource.StateUpdating
		}
		p.Message = ""
		p.Version++
		p.UpdatedAt = now
		return true, nil
	})
}

// DeleteNodePool marks a pool for deletion and returns it deleting; a pool
// already deleting is returned unchanged, with no write.
func (s *Store) DeleteNodePool(ctx context.Context, c Caller, clusterID, nodePoolID string) (NodePoolResult, error) {
	return s.mutateNodePool(ctx, c, clusterID, nodePoolID, func(cluster *ClusterDoc, p *NodePoolDoc, now time.Time) (bool, error) {
		if p.State == resource.StateDeleting {
			return false, nil
		}
		p.State = resource.StateDeleting
		p.Message = ""
		p.UpdatedAt = now
		return true, nil
	})
}

// mutateNodePool runs change on a pool in one transaction (one batch read
// of member, cluster and pool). When change reports a change, the pool and
// the touched cluster are written.
func (s *Store) mutateNodePool(ctx context.Context, c Caller, clusterID, nodePoolID string,
	change func(*ClusterDoc, *NodePoolDoc, time.Time) (bool, error)) (NodePoolResult, error) {
	var res NodePoolResult
	clusterRef := s.ClusterRef(c.TenantID, clusterID)
	poolRef := s.NodePoolRef(c.TenantID, clusterID, nodePoolID)
	err := s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = NodePoolResult{}
		snaps, err := tx.GetAll([]*firestore.DocumentRef{s.memberRef(c.TenantID, c.Principal), clusterRef, poolRef})
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		member, err := decodeMember(snaps[0])
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
		if err := authorize(member, PermUpdate, clusterID); err != nil {
			return err
		}
		now := s.timestamp()
		changed, err := change(cluster, p, now)
		if err != nil {
			return err
		}
		res.NodePool = p.NodePool
		if !changed {
			return nil
		}
		res.Kick = s.touchCluster(cluster, now)
		if err := tx.Set(poolRef, p); err != nil {
			return err
		}
		return tx.Set(clusterRef, cluster)
	})
	if err != nil {
		return NodePoolResult{}, storageErr("change node pool", err)
	}
	res.NodePool.Normalize()
	return res, nil
}

func (s *Store) getNodePoolTx(tx *firestore.Transaction, tenantID, clusterID, nodePoolID string) (*NodePoolDoc, error) {
	snap, err := tx.Get(s.NodePoolRef(tenantID, clusterID, nodePoolID))
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("read node pool: %w", err)
	}
	var p NodePoolDoc
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
func decodeCluster(snap *firestore.DocumentSnapshot, id string) (*ClusterDoc, error) {
	if !snap.Exists() {
		return nil, errs.E(errs.NotFound, "cluster %s not found", id)
	}
	var c ClusterDoc
	if err := snap.DataTo(&c); err != nil {
		return nil, fmt.Errorf("decode cluster %s: %w", id, err)
	}
	if !notDeleted(c.State) {
		return nil, errs.E(errs.NotFound, "cluster %s not found", id)
	}
	return &c, nil
}

// decodeNodePool returns the pool of snap, or NOT_FOUND when there is none
// or it is deleted.
func decodeNodePool(snap *firestore.DocumentSnapshot, id string) (*NodePoolDoc, error) {
	if !snap.Exists() {
		return nil, errs.E(errs.NotFound, "node pool %s not found", id)
	}
	var p NodePoolDoc
	if err := snap.DataTo(&p); err != nil {
		return nil, fmt.Errorf("decode node pool %s: %w", id, err)
	}
	if !notDeleted(p.State) {
		return nil, errs.E(errs.NotFound, "node pool %s not found", id)
	}
	return &p, nil
}
