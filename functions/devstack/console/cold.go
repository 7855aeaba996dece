package console

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"

	"github.com/better-compute/kubernetes/shared/docpath"
	"github.com/better-compute/kubernetes/shared/lifecycle"
)

// The first view of the fleet comes before the watcher holds it: the
// listeners' first snapshots read every cluster, node pool and substrate
// (3,001 documents for 1,000 clusters), which the Firestore emulator
// answers in about a second on a loaded machine. coldView reads the
// page's rows alone instead: a page of clusters and one of substrates in
// the fleet's order, their counts, their node pools, and the tenants.
// The page's stream brings it up to date whole once the watcher has the
// fleet (its version, 0, is none of the watcher's), which also corrects
// what the queries cannot say exactly (a substrate whose cluster or
// predecessor is on no page, a cluster adopted by a substrate that made
// no pool in it yet).

// inMax is how many values a Firestore "in" filter takes.
const inMax = 30

// coldView is the page of the fleet flt asks for, without a state filter
// (a cluster's state is derived from fields a query cannot combine).
func (c *Console) coldView(ctx context.Context, flt filter) (fleetView, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v := newFleetView(flt)
	size := c.opt.PageSize
	var (
		cls          []lifecycle.Cluster
		subs         []lifecycle.Substrate
		nCls, nSubs  int
		errs         = make([]error, 5)
		wg           sync.WaitGroup
		clsQ, subsQ  = c.ordered("clusters", flt.Tenant), c.ordered("substrates", flt.Tenant)
		tenants      []string
		cPage, sPage = flt.Page, flt.SPage
	)
	if !flt.showsDeleted() {
		// A deleted cluster is no longer active (lifecycle.ClusterDeleted).
		clsQ = clsQ.Where("active", "==", true)
	}
	for i, f := range []func() error{
		func() (err error) { nCls, err = count(ctx, clsQ); return err },
		func() (err error) { nSubs, err = count(ctx, subsQ); return err },
		func() (err error) { cls, err = pageOf[lifecycle.Cluster](ctx, clsQ, cPage, size); return err },
		func() (err error) { subs, err = pageOf[lifecycle.Substrate](ctx, subsQ, sPage, size); return err },
		func() (err error) { tenants, err = c.tenants(ctx); return err },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return v, err
		}
	}
	// A page past the last is the last, as the watcher's view has it.
	var err error
	if v.CPager.paginate(nCls, size); v.CPager.Page != cPage {
		if cls, err = pageOf[lifecycle.Cluster](ctx, clsQ, v.CPager.Page, size); err != nil {
			return v, err
		}
	}
	if v.SPager.paginate(nSubs, size); v.SPager.Page != sPage {
		if subs, err = pageOf[lifecycle.Substrate](ctx, subsQ, v.SPager.Page, size); err != nil {
			return v, err
		}
	}

	// The substrates' clusters that are not on the page are read too.
	byID := map[string]*lifecycle.Cluster{}
	for i := range cls {
		byID[cls[i].TenantID+"/"+cls[i].ID] = &cls[i]
	}
	var refs []*firestore.DocumentRef
	for i := range subs {
		if id := subs[i].ClusterID(); id != "" && byID[subs[i].TenantID+"/"+id] == nil {
			refs = append(refs, docpath.Tenant(c.opt.Firestore, subs[i].TenantID).Collection("clusters").Doc(docpath.ID(id)))
		}
	}
	more, err := getAll[lifecycle.Cluster](ctx, c.opt.Firestore, refs)
	if err != nil {
		return v, err
	}
	for i := range more {
		byID[more[i].TenantID+"/"+more[i].ID] = &more[i]
	}
	pools, err := c.poolsOf(ctx, byID)
	if err != nil {
		return v, err
	}
	d := fleetDocs{
		cluster:    func(t, id string) *lifecycle.Cluster { return byID[t+"/"+id] },
		pools:      func(t, id string) []lifecycle.NodePool { return pools[t+"/"+id] },
		substrates: subs,
	}
	for i := range cls {
		cl := &cls[i]
		var cells []PoolCell
		sub := cl.Spec.ManagedBy
		for j := range pools[cl.TenantID+"/"+cl.ID] {
			p := &pools[cl.TenantID+"/"+cl.ID][j]
			cells = append(cells, poolCell(p))
			sub = cmpOr(sub, p.Spec.ManagedBy)
		}
		v.Clusters = append(v.Clusters, clusterRow(cl, cells, sub))
	}
	for i := range subs {
		v.Substrates = append(v.Substrates, substrateRow(&subs[i], d, nil))
	}
	// The queries' order is the fleet's; sorting again costs nothing and
	// keeps the two the same for documents that lack a field.
	sortClusters(v.Clusters)
	sortSubstrates(v.Substrates)
	v.Tenants = tenants
	v.Empty = nCls == 0 && nSubs == 0 && len(tenants) == 0
	if flt.Tenant != "" && !slices.Contains(tenants, flt.Tenant) {
		v.Tenants = append(v.Tenants, flt.Tenant)
	}
	slices.Sort(v.Tenants)
	v.links()
	return v, nil
}

// ordered is a collection group (clusters, substrates) in the fleet's
// order, of one tenant or all.
func (c *Console) ordered(group, tenant string) firestore.Query {
	q := c.opt.Firestore.CollectionGroup(group).Query
	if tenant != "" {
		q = q.Where("tenantId", "==", tenant)
	} else {
		q = q.OrderBy("tenantId", firestore.Asc)
	}
	return q.OrderBy("createdAt", firestore.Desc).OrderBy("id", firestore.Asc)
}

func count(ctx context.Context, q firestore.Query) (int, error) {
	res, err := q.NewAggregationQuery().WithCount("n").Get(ctx)
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	n, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("count: no count in %v", res)
	}
	return int(n.GetIntegerValue()), nil
}

// pageOf is page p (from 1) of q, size documents a page.
func pageOf[T any](ctx context.Context, q firestore.Query, p, size int) ([]T, error) {
	snaps, err := q.Offset((max(p, 1) - 1) * size).Limit(size).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("read a page: %w", err)
	}
	return decode[T](snaps)
}

func getAll[T any](ctx context.Context, fsc *firestore.Client, refs []*firestore.DocumentRef) ([]T, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	snaps, err := fsc.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("read documents: %w", err)
	}
	var found []*firestore.DocumentSnapshot
	for _, s := range snaps {
		if s.Exists() {
			found = append(found, s)
		}
	}
	return decode[T](found)
}

func decode[T any](snaps []*firestore.DocumentSnapshot) ([]T, error) {
	out := make([]T, 0, len(snaps))
	for _, s := range snaps {
		var v T
		if err := s.DataTo(&v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", s.Ref.Path, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// poolsOf are the active node pools of the clusters, by tenant/cluster.
func (c *Console) poolsOf(ctx context.Context, clusters map[string]*lifecycle.Cluster) (map[string][]lifecycle.NodePool, error) {
	var ids []string
	for _, cl := range clusters {
		ids = append(ids, cl.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := map[string][]lifecycle.NodePool{}
	for chunk := range slices.Chunk(ids, inMax) {
		snaps, err := c.opt.Firestore.CollectionGroup("nodePools").Where("clusterId", "in", chunk).Documents(ctx).GetAll()
		if err != nil {
			return nil, fmt.Errorf("read node pools: %w", err)
		}
		ps, err := decode[lifecycle.NodePool](snaps)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			k := p.TenantID + "/" + p.ClusterID
			if p.Active && clusters[k] != nil {
				out[k] = append(out[k], p)
			}
		}
	}
	return out, nil
}

// tenants are the tenants that hold documents, by their IDs: a tenant's
// document need not exist for its clusters to (docpath.Tenant).
func (c *Console) tenants(ctx context.Context) ([]string, error) {
	refs, err := c.opt.Firestore.Collection(docpath.TenantsCollection).DocumentRefs(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	var out []string
	for _, r := range refs {
		if t, ok := tenantOf(r.ID); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// tenantOf is the tenant ID of a tenant's document ID (docpath.ID); false
// for a hashed one, which cannot be read back.
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
