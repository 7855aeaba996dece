package console

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/store"
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

// coldView is the page of the fleet flt asks for, without a state filter
// (a cluster's state is derived from fields a query cannot combine).
func (c *Console) coldView(ctx context.Context, flt filter) (fleetView, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v := newFleetView(flt)
	size := c.opt.PageSize
	var (
		cls          []model.Cluster
		subs         []model.Substrate
		nCls, nSubs  int
		errs         = make([]error, 5)
		wg           sync.WaitGroup
		tenants      []string
		cPage, sPage = flt.Page, flt.SPage
	)
	// A deleted cluster is no longer active (lifecycle.ClusterDeleted).
	clsQ := store.FleetQuery{Tenant: flt.Tenant, ActiveOnly: !flt.showsDeleted()}
	subsQ := store.FleetQuery{Tenant: flt.Tenant}
	for i, f := range []func() error{
		func() (err error) { nCls, err = c.store.CountClusters(ctx, clsQ); return err },
		func() (err error) { nSubs, err = c.store.CountSubstrates(ctx, subsQ); return err },
		func() (err error) { cls, err = c.store.ClustersPage(ctx, clsQ, cPage, size); return err },
		func() (err error) { subs, err = c.store.SubstratesPage(ctx, subsQ, sPage, size); return err },
		func() (err error) { tenants, err = c.store.TenantIDs(ctx); return err },
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
		if cls, err = c.store.ClustersPage(ctx, clsQ, v.CPager.Page, size); err != nil {
			return v, err
		}
	}
	if v.SPager.paginate(nSubs, size); v.SPager.Page != sPage {
		if subs, err = c.store.SubstratesPage(ctx, subsQ, v.SPager.Page, size); err != nil {
			return v, err
		}
	}

	// The substrates' clusters that are not on the page are read too.
	byID := map[string]*model.Cluster{}
	for i := range cls {
		byID[cls[i].TenantID+"/"+cls[i].ID] = &cls[i]
	}
	var keys []store.ClusterKey
	for i := range subs {
		if id := subs[i].ClusterID(); id != "" && byID[subs[i].TenantID+"/"+id] == nil {
			keys = append(keys, store.ClusterKey{TenantID: subs[i].TenantID, ID: id})
		}
	}
	more, err := c.store.ClustersOf(ctx, keys)
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
		cluster:    func(t, id string) *model.Cluster { return byID[t+"/"+id] },
		pools:      func(t, id string) []model.NodePool { return pools[t+"/"+id] },
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

// poolsOf are the active node pools of the clusters, by tenant/cluster.
func (c *Console) poolsOf(ctx context.Context, clusters map[string]*model.Cluster) (map[string][]model.NodePool, error) {
	var ids []string
	for _, cl := range clusters {
		ids = append(ids, cl.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	ps, err := c.store.NodePoolsOfClusters(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := map[string][]model.NodePool{}
	for _, p := range ps {
		k := p.TenantID + "/" + p.ClusterID
		if p.Active && clusters[k] != nil {
			out[k] = append(out[k], p)
		}
	}
	return out, nil
}
