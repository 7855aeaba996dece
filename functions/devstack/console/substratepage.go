package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/store"
)

// maxJoinedRead bounds the joined nodes a substrate's page reads to
// count them by pool: a substrate may have thousands.
const maxJoinedRead = 5000

// substrateView is a substrate's page, or its part of its cluster's.
type substrateView struct {
	Tenant, ID string
	Row        SubstrateRow
	// NodesRead counts the joined nodes read; NodesCapped says there may
	// be more (maxJoinedRead).
	NodesRead   int
	NodesCapped bool
	Stream      string
	// NoKube says the devstack runs without the simulated clusters'
	// Kubernetes API servers, which a substrate needs (-kubernetes).
	NoKube bool
}

// substrateDetail is substrate s of the tenant's substrates subs, with
// its cluster cl and that cluster's pools (nil when it has none yet):
// its progress, its joined nodes counted by pool.
func (c *Console) substrateDetail(ctx context.Context, subs []model.Substrate, s *model.Substrate, cl *model.Cluster, pools []model.NodePool) (*substrateView, error) {
	nodes, err := c.store.JoinedNodes(ctx, s.TenantID, s.ID, "", maxJoinedRead)
	if err != nil {
		return nil, fmt.Errorf("read the joined nodes: %w", err)
	}
	// The clusters of the substrates it replaces or is replaced by.
	clusters := map[string]*model.Cluster{}
	if cl != nil {
		clusters[cl.ID] = cl
	}
	var keys []store.ClusterKey
	for i := range subs {
		o := &subs[i]
		if id := o.ClusterID(); id != "" && clusters[id] == nil && (o.ID == s.Spec.After || o.Spec.After == s.ID) {
			keys = append(keys, store.ClusterKey{TenantID: s.TenantID, ID: id})
		}
	}
	more, err := c.store.ClustersOf(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i := range more {
		clusters[more[i].ID] = &more[i]
	}
	d := fleetDocs{
		cluster: func(_, id string) *model.Cluster { return clusters[id] },
		pools: func(_, id string) []model.NodePool {
			if cl != nil && id == cl.ID {
				return pools
			}
			return nil
		},
		substrates: subs,
	}
	row := substrateRow(s, d, nodes)
	row.Logged = c.logged(s)
	return &substrateView{Tenant: s.TenantID, ID: s.ID, Row: row, NodesRead: len(nodes),
		NodesCapped: len(nodes) == maxJoinedRead, NoKube: c.opt.Kubernetes == nil || c.opt.Kubernetes() == nil}, nil
}

// loggedRow is why a row's substrate fails, as the log says it.
func (c *Console) loggedRow(r *SubstrateRow) string {
	if r.Progress.Retrying == "" {
		return ""
	}
	s := model.Substrate{ID: r.ID}
	s.Status.Retrying = &model.Retry{Since: r.Progress.RetryingSince, Reason: r.Progress.Retrying}
	return c.logged(&s)
}

// logged is why the substrate's runs fail as the log says it, while they
// fail: the latest warning logged of it since it has been retried ("" when
// the log has none, or the runs do not fail).
func (c *Console) logged(s *model.Substrate) string {
	r := s.Status.Retrying
	if r == nil {
		return ""
	}
	l, ok := c.opt.Logs.Last("substrate", s.ID)
	if !ok || l.At.Before(r.Since.Add(-time.Second)) {
		return ""
	}
	if l.Err == "" {
		return l.Message
	}
	return l.Err
}

// readSubstrate reads a substrate's page; nil when it does not exist.
func (c *Console) readSubstrate(ctx context.Context, tenant, id string) (*substrateView, error) {
	subs, err := c.store.TenantSubstrates(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var s *model.Substrate
	for i := range subs {
		if subs[i].ID == id {
			s = &subs[i]
		}
	}
	if s == nil {
		return nil, nil
	}
	var cl *model.Cluster
	var pools []model.NodePool
	if cid := s.ClusterID(); cid != "" {
		if cl, err = c.store.Cluster(ctx, tenant, cid); err != nil {
			return nil, fmt.Errorf("read cluster %s: %w", cid, err)
		}
		if cl != nil {
			if pools, err = c.store.ActiveNodePools(ctx, tenant, cid); err != nil {
				return nil, err
			}
		}
	}
	v, err := c.substrateDetail(ctx, subs, s, cl, pools)
	if err != nil {
		return nil, err
	}
	v.Stream = fmt.Sprintf("%s/substrates/%s/%s/stream", Path, tenant, id)
	return v, nil
}

func (c *Console) substratePage(w http.ResponseWriter, r *http.Request) {
	v, err := c.readSubstrate(r.Context(), r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if v == nil {
		http.Error(w, "no such substrate", http.StatusNotFound)
		return
	}
	c.render(w, "substrate", page{Title: "Substrate " + v.ID, Nav: "fleet", Body: v})
}

// substrateStream sends the substrate's page again whenever it, its
// cluster or that cluster's pools change, as the watcher hears.
func (c *Console) substrateStream(w http.ResponseWriter, r *http.Request) {
	tenant, id := r.PathValue("tenant"), r.PathValue("id")
	c.liveStream(w, r, "substrate-live", "substrateProgress", []string{substrateKey(tenant, id)}, func(ctx context.Context) (any, []string, bool) {
		keys := []string{substrateKey(tenant, id)}
		v, err := c.readSubstrate(ctx, tenant, id)
		if err != nil || v == nil {
			return nil, keys, false
		}
		if v.Row.ClusterID != "" {
			keys = append(keys, clusterKey(tenant, v.Row.ClusterID))
		}
		return v, keys, true
	}, nil)
}
