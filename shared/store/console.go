package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

// The reads of the devstack's web console (functions/devstack/console)
// and of the devstack's own endpoints: every tenant's fleet, read-only.
// They check no permission: the devstack serves one developer, who sees
// every tenant. Each is a query the console ran itself before, now
// spelled with the store's paths; the console keeps its listeners, which
// Listen* start here and hand back as decoded changes.

// inMax is how many values a Firestore "in" filter takes.
const inMax = 30

// FleetQuery is a page of the fleet's clusters or substrates in the
// fleet's order: by tenant, newest first, then by ID.
type FleetQuery struct {
	Tenant string // "" for every tenant's
	// ActiveOnly leaves out the clusters deleted (lifecycle.ClusterDeleted);
	// it has no effect on substrates.
	ActiveOnly bool
}

func (s *Store) fleetOrder(group string, q FleetQuery) firestore.Query {
	fq := s.fs.CollectionGroup(group).Query
	if q.Tenant != "" {
		fq = fq.Where("tenantId", "==", q.Tenant)
	} else {
		fq = fq.OrderBy("tenantId", firestore.Asc)
	}
	if q.ActiveOnly && group == ClustersKind {
		fq = fq.Where("active", "==", true)
	}
	return fq.OrderBy("createdAt", firestore.Desc).OrderBy("id", firestore.Asc)
}

// CountClusters is how many clusters q holds.
func (s *Store) CountClusters(ctx context.Context, q FleetQuery) (int, error) {
	return count(ctx, s.fleetOrder(ClustersKind, q), "count clusters")
}

// CountSubstrates is how many substrates q holds.
func (s *Store) CountSubstrates(ctx context.Context, q FleetQuery) (int, error) {
	return count(ctx, s.fleetOrder(SubstratesKind, q), "count substrates")
}

// ClustersPage is page p (from 1) of q's clusters, size a page.
func (s *Store) ClustersPage(ctx context.Context, q FleetQuery, p, size int) ([]model.Cluster, error) {
	return pageOf[model.Cluster](ctx, s.fleetOrder(ClustersKind, q), p, size, "read a page of clusters")
}

// SubstratesPage is page p (from 1) of q's substrates, size a page.
func (s *Store) SubstratesPage(ctx context.Context, q FleetQuery, p, size int) ([]model.Substrate, error) {
	return pageOf[model.Substrate](ctx, s.fleetOrder(SubstratesKind, q), p, size, "read a page of substrates")
}

func count(ctx context.Context, q firestore.Query, op string) (int, error) {
	res, err := q.NewAggregationQuery().WithCount("n").Get(ctx)
	if err != nil {
		return 0, storageErr(op, err)
	}
	n, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("%s: no count in %v", op, res)
	}
	return int(n.GetIntegerValue()), nil
}

func pageOf[T any](ctx context.Context, q firestore.Query, p, size int, op string) ([]T, error) {
	snaps, err := q.Offset((max(p, 1) - 1) * size).Limit(size).Documents(ctx).GetAll()
	if err != nil {
		return nil, storageErr(op, err)
	}
	return decodeAll[T](snaps)
}

func decodeAll[T any](snaps []*firestore.DocumentSnapshot) ([]T, error) {
	out := make([]T, 0, len(snaps))
	for _, snap := range snaps {
		var v T
		if err := snap.DataTo(&v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ClusterKey names a cluster of a tenant.
type ClusterKey struct{ TenantID, ID string }

// ClustersOf reads the clusters named, in one round trip; those that do
// not exist are left out.
func (s *Store) ClustersOf(ctx context.Context, keys []ClusterKey) ([]model.Cluster, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, len(keys))
	for i, k := range keys {
		refs[i] = s.ClusterRef(k.TenantID, k.ID)
	}
	snaps, err := s.fs.GetAll(ctx, refs)
	if err != nil {
		return nil, storageErr("read clusters", err)
	}
	snaps = slices.DeleteFunc(snaps, func(snap *firestore.DocumentSnapshot) bool { return !snap.Exists() })
	return decodeAll[model.Cluster](snaps)
}

// nodePoolsGroup is every cluster's collection of node pools, named as
// NodePoolRef names it.
func (s *Store) nodePoolsGroup() *firestore.CollectionGroupRef {
	return s.fs.CollectionGroup(s.NodePoolRef("t", "c", "p").Parent.ID)
}

// NodePoolsOfClusters reads the node pools, deleted or not, of the
// clusters of these IDs in any tenant (an ID is a TypeID: no two tenants
// share one).
func (s *Store) NodePoolsOfClusters(ctx context.Context, clusterIDs []string) ([]model.NodePool, error) {
	// The snapshots are gathered, then decoded into one slice: a node
	// pool is a large value, not worth copying from chunk to chunk.
	var all []*firestore.DocumentSnapshot
	for chunk := range slices.Chunk(clusterIDs, inMax) {
		snaps, err := s.nodePoolsGroup().Where("clusterId", "in", chunk).Documents(ctx).GetAll()
		if err != nil {
			return nil, storageErr("read node pools", err)
		}
		all = append(all, snaps...)
	}
	return decodeAll[model.NodePool](all)
}

// TenantIDs are the tenants that hold documents. A tenant's document need
// not exist for its clusters to (TenantDoc); one whose ID was hashed
// (DocID), which cannot be read back, is left out.
func (s *Store) TenantIDs(ctx context.Context) ([]string, error) {
	refs, err := s.fs.Collection(TenantsCollection).DocumentRefs(ctx).GetAll()
	if err != nil {
		return nil, storageErr("list tenants", err)
	}
	var out []string
	for _, r := range refs {
		if t, ok := tenantOf(r.ID); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// tenantOf is the tenant ID of a tenant's document ID (DocID); false
// for a hashed one.
func tenantOf(id string) (string, bool) {
	enc, ok := strings.CutPrefix(id, "~")
	if !ok {
		return id, true
	}
	if strings.HasPrefix(enc, "~") {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	return string(b), err == nil
}

// TenantSubstrates are every substrate of the tenant, deleted or not; a
// document that is not one (no ID, or fields of other types) is left
// out.
func (s *Store) TenantSubstrates(ctx context.Context, tenantID string) ([]model.Substrate, error) {
	snaps, err := s.substrates(tenantID).Documents(ctx).GetAll()
	if err != nil {
		return nil, storageErr("read substrates", err)
	}
	var out []model.Substrate
	for _, snap := range snaps {
		var sb model.Substrate
		if snap.DataTo(&sb) == nil && sb.ID != "" {
			out = append(out, sb)
		}
	}
	return out, nil
}

// ClusterByID finds a cluster by its ID alone, in any tenant (an ID is a
// TypeID: no two tenants share one); nil when there is none.
func (s *Store) ClusterByID(ctx context.Context, id string) (*model.Cluster, error) {
	snaps, err := s.fs.CollectionGroup(ClustersKind).Where("id", "==", id).Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return nil, storageErr("find cluster", err)
	}
	if len(snaps) == 0 {
		return nil, nil
	}
	var c model.Cluster
	if err := snaps[0].DataTo(&c); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "decode cluster %s", id)
	}
	return &c, nil
}

// WatchedCluster is a cluster's document as a listener sees it: the
// cluster and its reconcile chain (who holds its lease, when it runs
// next).
type WatchedCluster struct {
	model.Cluster
	Reconcile chain.State `firestore:"reconcile"`
}

// Change is a change a listener saw of one document.
type Change[T any] struct {
	// Key is the document's full path: what names it among the
	// listener's.
	Key string
	// Gone: the document was removed, or it does not decode as a T
	// (Value is then the zero T).
	Gone  bool
	Value T
	// UpdateTime is when the document was last written.
	UpdateTime time.Time
}

// Listener is a snapshot listener on one kind of the product's
// documents, in every tenant.
type Listener[T any] struct {
	it *firestore.QuerySnapshotIterator
}

// Next waits for the listener's next snapshot and returns its changes:
// every document for the first. An error ends the listener (its context
// ended, or the stream broke); listening again starts with every
// document.
func (l *Listener[T]) Next() ([]Change[T], error) {
	snap, err := l.it.Next()
	if err != nil {
		return nil, err
	}
	out := make([]Change[T], len(snap.Changes))
	for i, ch := range snap.Changes {
		c := &out[i]
		c.Key, c.UpdateTime = ch.Doc.Ref.Path, ch.Doc.UpdateTime
		if ch.Kind == firestore.DocumentRemoved || ch.Doc.DataTo(&c.Value) != nil {
			var zero T
			c.Gone, c.Value = true, zero
		}
	}
	return out, nil
}

// Stop stops the listener.
func (l *Listener[T]) Stop() { l.it.Stop() }

// ListenClusters listens to every cluster of every tenant until ctx ends
// or Stop.
func (s *Store) ListenClusters(ctx context.Context) *Listener[WatchedCluster] {
	return &Listener[WatchedCluster]{it: s.fs.CollectionGroup(ClustersKind).Snapshots(ctx)}
}

// ListenNodePools listens to every node pool of every cluster.
func (s *Store) ListenNodePools(ctx context.Context) *Listener[model.NodePool] {
	return &Listener[model.NodePool]{it: s.nodePoolsGroup().Snapshots(ctx)}
}

// ListenSubstrates listens to every substrate of every tenant.
func (s *Store) ListenSubstrates(ctx context.Context) *Listener[model.Substrate] {
	return &Listener[model.Substrate]{it: s.fs.CollectionGroup(SubstratesKind).Snapshots(ctx)}
}
