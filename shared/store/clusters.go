package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// ClusterResult is the outcome of a cluster mutation.
type ClusterResult struct {
	Cluster resource.Cluster
	// Zones and NodePools are, for a create, the cluster's zones as the
	// store chose them and its first node pools, in the request's order
	// (what a substrate's run models the cluster it made with).
	Zones     []string
	NodePools []resource.NodePool
	Events    []event.Event
	Kick      *chain.Kick
}

// CreateClusterRequest is a validated cluster create. Spec holds name, mode,
// region, release channel and labels, and, when set, the cluster's Zones:
// some of its region's zones enabled on the account (a substrate's policy
// may name them); the store sets the rest from the pool and its account.
// NodePools are the specs of its first pools (standard clusters only).
type CreateClusterRequest struct {
	PoolID         string
	Spec           model.ClusterSpec
	NodePools      []model.NodePoolSpec
	IdempotencyKey string
	RequestHash    string
}

// CreateCluster records a new cluster, pending, with its first node pools.
// It reads the member, the provider pool, the name reservation, the
// tenant's document and the idempotency record in one batch, admits and
// authorizes the caller, answers a replay, then reads the pool's account
// and writes what lifecycle.DecideCreate decides (the pool's archival,
// the account, the region and zones, the name, the quota). The tenant's
// document counts the cluster against its quota: every create reads and
// writes it, so that concurrent creates at the quota conflict and exactly
// the quota's are let in.
func (s *Store) CreateCluster(ctx context.Context, c auth.Principal, req CreateClusterRequest) (ClusterResult, error) {
	var res ClusterResult
	poolRef := s.poolRef(req.PoolID)
	nameRef := s.clusterNameRef(c.TenantID(), req.Spec.Name)
	tenantRef := s.tenantRef(c.TenantID())
	refs := []*firestore.DocumentRef{s.grantRef(c), poolRef, nameRef, tenantRef}
	var idemRef *firestore.DocumentRef
	if req.IdempotencyKey != "" {
		idemRef = s.idempotencyRef(c.TenantID(), "clusters.create", c.Actor(), req.IdempotencyKey)
		refs = append(refs, idemRef)
	}
	err := s.transact(ctx, c.TenantID(), func(ctx context.Context, tx *firestore.Transaction) error {
		res = ClusterResult{}
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		grant, err := admit(c, snaps[0])
		if err != nil {
			return err
		}
		pool, err := tenantPool(snaps[1], c.TenantID(), req.PoolID)
		if err != nil {
			return err
		}
		if err := auth.Authorize(c, grant, auth.PermCreate, auth.Tenant(pool.ID)); err != nil {
			return err
		}
		now := s.timestamp()
		if idemRef != nil && snaps[4].Exists() {
			rec, replay, err := s.replay(snaps[4], req.RequestHash, req.IdempotencyKey, now)
			if err != nil {
				return err
			}
			if replay {
				res, err = s.createdCluster(tx, c.TenantID(), rec.ResourceID)
				if err != nil {
					return err
				}
				return unchanged
			}
		}
		// After a replay: a cluster made before its pool was archived
		// is still returned to a retry.
		var acc *Account
		if !pool.Archived {
			if acc, err = s.readAccountTx(tx, pool.AccountID); err != nil {
				return err
			}
		}
		tenant, err := decodeTenant(snaps[3])
		if err != nil {
			return err
		}
		spec, err := s.rules.DecideCreate(model.ClusterCreate{TenantID: c.TenantID(), Spec: req.Spec, NodePools: req.NodePools,
			Pool: pool, Account: acc, NameTaken: snaps[2].Exists(), Tenant: &tenant})
		if err != nil {
			return err
		}
		// Only the count: the quota is the seed's.
		if err := tx.Set(tenantRef, map[string]any{"clustersCreated": tenant.ClustersCreated}, firestore.MergeAll); err != nil {
			return err
		}
		res, err = s.writeNewCluster(tx, c, spec, req, nameRef, idemRef, now)
		return err
	})
	if err != nil {
		return ClusterResult{}, storageErr("create cluster", err)
	}
	return res, nil
}

// writeNewCluster writes, in tx, the cluster of spec that c creates, its
// first node pools, their names' reservations, the create's idempotency
// record and its event.
func (s *Store) writeNewCluster(tx *firestore.Transaction, c auth.Principal, spec model.ClusterSpec, req CreateClusterRequest,
	nameRef, idemRef *firestore.DocumentRef, now time.Time) (ClusterResult, error) {
	var res ClusterResult
	id := resource.NewClusterID()
	spec.ProviderName = resource.ProviderClusterName(id)
	spec.ManagedBy, spec.ManagedPool = c.SubstrateID(), c.Pool()
	cl := &clusterDoc{Cluster: s.rules.NewCluster(id, c.TenantID(), spec, len(req.NodePools), now)}
	kick := cl.Reconcile.Restart(ClustersKind, c.TenantID(), id, now)
	res.Kick = &kick
	for i, np := range req.NodePools {
		// A microsecond apart, so that the pools are listed by
		// creation in the order the request gave them (their IDs
		// need not sort so within one millisecond).
		at := now.Add(time.Duration(i) * time.Microsecond)
		p := s.rules.NewNodePool(resource.NewNodePoolID(), c.TenantID(), id, s.rules.Managed(np, c.SubstrateID(), c.Pool()), at)
		if err := tx.Create(s.NodePoolRef(c.TenantID(), id, p.ID), p); err != nil {
			return res, err
		}
		if err := tx.Create(s.poolNameRef(c.TenantID(), id, p.Spec.Name), reservation{ID: p.ID}); err != nil {
			return res, err
		}
		res.NodePools = append(res.NodePools, p.View())
	}
	res.Zones = spec.Zones
	// The cluster's chain of events starts here: its document is
	// created with the sequence of its first event.
	res.Events = s.rules.ClusterCreated(&cl.Cluster, now)
	cl.Sequence = outbox.Number(res.Events, 0)
	if err := tx.Create(s.ClusterRef(c.TenantID(), id), cl); err != nil {
		return res, err
	}
	if err := tx.Create(nameRef, reservation{ID: id}); err != nil {
		return res, err
	}
	if idemRef != nil {
		rec := idempotencyRecord{RequestHash: req.RequestHash, ResourceID: id, ExpireAt: now.Add(IdempotencyTTL)}
		if err := tx.Set(idemRef, rec); err != nil {
			return res, err
		}
	}
	res.Cluster = cl.View()
	return res, s.createEvents(tx, res.Events)
}

// createdCluster is the result of the create of a cluster, read in tx,
// for a replay of the create.
func (s *Store) createdCluster(tx *firestore.Transaction, tenantID, clusterID string) (ClusterResult, error) {
	var res ClusterResult
	snap, err := tx.Get(s.ClusterRef(tenantID, clusterID))
	if err != nil {
		return res, fmt.Errorf("read cluster %s: %w", clusterID, err)
	}
	var cl model.Cluster
	if err := snap.DataTo(&cl); err != nil {
		return res, fmt.Errorf("decode cluster: %w", err)
	}
	res.Cluster, res.Zones = cl.View(), cl.Spec.Zones
	pools, err := tx.Documents(s.activePools(snap.Ref)).GetAll()
	if err != nil {
		return res, fmt.Errorf("read node pools: %w", err)
	}
	for _, ps := range pools {
		var p model.NodePool
		if err := ps.DataTo(&p); err != nil {
			return res, fmt.Errorf("decode %s: %w", ps.Ref.Path, err)
		}
		res.NodePools = append(res.NodePools, p.View())
	}
	return res, nil
}

// tenantPool decodes the tenant's pool poolID from snap: NOT_FOUND when
// there is none, or it is another tenant's.
func tenantPool(snap *firestore.DocumentSnapshot, tenantID, poolID string) (Pool, error) {
	var pool Pool
	if !snap.Exists() {
		return pool, errs.E(errs.NotFound, "pool %s not found", poolID)
	}
	if err := snap.DataTo(&pool); err != nil {
		return pool, fmt.Errorf("decode pool: %w", err)
	}
	if pool.TenantID != tenantID {
		return pool, errs.E(errs.NotFound, "pool %s not found", poolID)
	}
	return pool, nil
}

// readAccountTx reads an account in tx; nil when there is none.
func (s *Store) readAccountTx(tx *firestore.Transaction, id string) (*Account, error) {
	snap, err := tx.Get(s.accountRef(id))
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("read account %s: %w", id, err)
	}
	return decodeAccount(snap)
}

// decodeTenant decodes a tenant's document; zero when there is none.
func decodeTenant(snap *firestore.DocumentSnapshot) (model.Tenant, error) {
	var t model.Tenant
	if snap.Exists() {
		if err := snap.DataTo(&t); err != nil {
			return t, fmt.Errorf("decode tenant: %w", err)
		}
	}
	return t, nil
}

// GetCluster returns a cluster that is not deleted.
func (s *Store) GetCluster(ctx context.Context, c auth.Principal, clusterID string) (resource.Cluster, error) {
	snaps, err := s.fs.GetAll(ctx, []*firestore.DocumentRef{s.grantRef(c), s.ClusterRef(c.TenantID(), clusterID)})
	if err != nil {
		return resource.Cluster{}, storageErr("get cluster", err)
	}
	grant, err := admit(c, snaps[0])
	if err != nil {
		return resource.Cluster{}, err
	}
	cl, err := decodeCluster(snaps[1], clusterID)
	if err != nil {
		return resource.Cluster{}, storageErr("get cluster", err)
	}
	if err := auth.Authorize(c, grant, auth.PermRead, clusterResource(cl)); err != nil {
		return resource.Cluster{}, err
	}
	return cl.View(), nil
}

// ListClustersRequest selects a page of a tenant's clusters.
type ListClustersRequest struct {
	PoolID    string
	PageSize  int
	PageToken string
}

// pageToken is where a list's next page starts, bound to the tenant and
// the filter of the list that issued it: a token of another list is
// INVALID_INPUT, never a page of something else.
type pageToken struct {
	CreatedAt time.Time `json:"c"`
	ID        string    `json:"i"`
	TenantID  string    `json:"t"`
	PoolID    string    `json:"p,omitempty"`
}

// ListClusters returns the tenant's clusters that are not deleted and that
// the caller may read, newest first, a page at a time. The next page token is
// empty on the last page.
func (s *Store) ListClusters(ctx context.Context, c auth.Principal, req ListClustersRequest) ([]resource.Cluster, string, error) {
	grant, err := s.Grant(ctx, c)
	if err != nil {
		return nil, "", err
	}
	q := s.clusters(c.TenantID()).Where("active", "==", true)
	if req.PoolID != "" {
		q = q.Where("spec.poolId", "==", req.PoolID)
	}
	q = q.OrderBy("createdAt", firestore.Desc).OrderBy(firestore.DocumentID, firestore.Desc)
	if req.PageToken != "" {
		tok, err := decodePageToken(req.PageToken)
		if err != nil || tok.TenantID != c.TenantID() || tok.PoolID != req.PoolID {
			return nil, "", errs.InvalidFields([]errs.FieldError{{Field: "pageToken", Reason: "is not a page token of this list"}})
		}
		q = q.StartAfter(tok.CreatedAt, DocID(tok.ID))
	}
	// Clusters the caller may not read are skipped, so a page may take
	// more than one query; one extra document tells whether a next page
	// exists.
	out := []resource.Cluster{}
	var examined *model.Cluster
	for {
		docs, err := q.Limit(req.PageSize + 1).Documents(ctx).GetAll()
		if err != nil {
			return nil, "", storageErr("list clusters", err)
		}
		for _, d := range docs {
			var cl clusterDoc
			if err := d.DataTo(&cl); err != nil {
				return nil, "", storageErr("list clusters", fmt.Errorf("decode %s: %w", d.Ref.Path, err))
			}
			examined = &cl.Cluster
			if auth.Authorize(c, grant, auth.PermRead, clusterResource(&cl)) != nil {
				continue
			}
			if len(out) == req.PageSize {
				last := out[len(out)-1]
				return out, encodePageToken(pageToken{CreatedAt: last.CreatedAt, ID: last.ID, TenantID: c.TenantID(), PoolID: req.PoolID}), nil
			}
			out = append(out, cl.View())
		}
		if len(docs) <= req.PageSize {
			return out, "", nil
		}
		q = q.StartAfter(examined.CreatedAt, DocID(examined.ID))
	}
}

func encodePageToken(t pageToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s string) (pageToken, error) {
	var t pageToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, err
	}
	if t.ID == "" || t.CreatedAt.IsZero() {
		return t, errors.New("incomplete page token")
	}
	return t, nil
}

// DeleteCluster marks a cluster and its node pools for deletion; a cluster
// already deleting is returned unchanged.
func (s *Store) DeleteCluster(ctx context.Context, c auth.Principal, clusterID string) (ClusterResult, error) {
	var res ClusterResult
	clusterRef := s.ClusterRef(c.TenantID(), clusterID)
	err := s.transact(ctx, c.TenantID(), func(ctx context.Context, tx *firestore.Transaction) error {
		res = ClusterResult{}
		grant, cl, err := s.readCluster(tx, c, clusterID)
		if err != nil {
			return err
		}
		if err := auth.Authorize(c, grant, auth.PermDelete, clusterResource(cl)); err != nil {
			return err
		}
		if err := s.rules.MayChange(c.SubstrateID(), cl.Spec.ManagedBy, cl.Spec.ManagedPool, "cluster", cl.Spec.Name); err != nil {
			return err
		}
		if err := s.rules.MayDeleteCluster(&cl.Cluster, cl.AdoptedBy); err != nil {
			return err
		}
		now := s.timestamp()
		res.Cluster = cl.View()
		if cl.Spec.Deleting {
			return unchanged
		}
		snaps, err := tx.Documents(s.activePools(clusterRef)).GetAll()
		if err != nil {
			return fmt.Errorf("read node pools: %w", err)
		}
		pools := make([]*model.NodePool, len(snaps))
		for i, snap := range snaps {
			pools[i] = &model.NodePool{}
			if err := snap.DataTo(pools[i]); err != nil {
				return fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
			}
		}
		if !s.rules.DeleteCluster(&cl.Cluster, pools, now) {
			return unchanged
		}
		for i, p := range pools {
			if err := tx.Update(snaps[i].Ref, []firestore.Update{{Path: "spec", Value: p.Spec}}); err != nil {
				return err
			}
		}
		res.Cluster = cl.View()
		res.Kick, err = s.writeClusterSpec(tx, cl, now)
		return err
	})
	if err != nil {
		return ClusterResult{}, storageErr("delete cluster", err)
	}
	return res, nil
}
