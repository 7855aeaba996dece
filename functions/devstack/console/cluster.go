package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
)

// clusterView is a cluster's page.
type clusterView struct {
	Tenant, ID string
	Row        ClusterRow
	Pools      []poolView
	Substrate  *substrateView
	Kube       *KubeServer
	Timeline   timeline
	Events     []Event
	Runs       []Run
	Watching   time.Time // since when the console sees runs
	Stream     string
	// Logged is the log's latest warning of the cluster since it entered
	// its state, when it is not ready (LogTap).
	Logged *LogLine
}

type poolView struct {
	PoolCell
	Generation, Observed int64
	Operation, OpKind    string
	ZoneNames            []string
	MachineType          string
}

// readCluster reads a cluster, its pools and the substrate that uses it.
//
// Its timeline shows the window named (parseWindow).
func (c *Console) readCluster(ctx context.Context, tenant, id, window string) (*clusterView, error) {
	found, err := c.store.Cluster(ctx, tenant, id)
	if err != nil || found == nil {
		return nil, err
	}
	cl := *found
	v := &clusterView{Tenant: tenant, ID: id}
	pools, err := c.store.ActiveNodePools(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	var cells []PoolCell
	for i := range pools {
		p := &pools[i]
		cell := poolCell(p)
		if cell.Zones == 0 {
			cell.Zones = len(cl.Spec.Zones)
		}
		cells = append(cells, cell)
		v.Pools = append(v.Pools, poolView{PoolCell: cell, Generation: p.Spec.Generation, Observed: p.Status.ObservedGeneration,
			Operation: p.Status.Provider.Operation, OpKind: p.Status.Provider.OperationKind, ZoneNames: p.Spec.Zones, MachineType: p.Spec.MachineType})
	}
	slices.SortFunc(v.Pools, func(a, b poolView) int { return strings.Compare(a.Name, b.Name) })
	subs, err := c.store.TenantSubstrates(ctx, tenant)
	if err != nil {
		return nil, err
	}
	sub := ""
	for i := range subs {
		s := &subs[i]
		if s.ClusterID() != id {
			continue
		}
		// The newest one that uses it: a substrate torn down keeps
		// naming its cluster.
		if v.Substrate != nil && s.CreatedAt.Before(v.Substrate.Row.CreatedAt) {
			continue
		}
		if v.Substrate, err = c.substrateDetail(ctx, subs, s, &cl, pools); err != nil {
			return nil, err
		}
		sub = s.ID
	}
	v.Kube = c.kubeOf(&cl)
	v.Row = clusterRow(&cl, cells, sub)
	v.Events = c.ev.of(tenant, id)
	var ops []*containerpb.Operation
	if c.opt.Operations != nil && cl.Spec.ProviderName != "" {
		for _, op := range c.opt.Operations() {
			if l := op.GetTargetLink(); strings.HasSuffix(l, "/clusters/"+cl.Spec.ProviderName) || strings.Contains(l, "/clusters/"+cl.Spec.ProviderName+"/") {
				ops = append(ops, op)
			}
		}
	}
	c.watch.start(c.bg, &c.wg)
	v.Runs, v.Watching = c.watch.runsOf(tenant, id)
	hist := c.watch.historyOf(tenant, id)
	v.Timeline = buildTimeline(cl.CreatedAt, v.Row, v.Events, ops, v.Runs, hist, time.Now(), window)
	if l, ok := c.opt.Logs.Last("cluster", id); ok && v.Row.State != "ready" && v.Row.State != "deleted" {
		since := v.Row.UpdatedAt
		if h := hist.Changes[""]; len(h) > 0 {
			since = h[len(h)-1].At
		}
		if !l.At.Before(since.Add(-time.Second)) {
			v.Logged = &l
		}
	}
	win, _ := parseWindow(window)
	v.Timeline.Self = fmt.Sprintf("%s/clusters/%s/%s", Path, url.PathEscape(tenant), url.PathEscape(id))
	v.Stream = v.Timeline.Self + "/stream?window=" + win
	return v, nil
}

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	v, err := c.readCluster(r.Context(), r.PathValue("tenant"), r.PathValue("id"), r.URL.Query().Get("window"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if v == nil {
		http.Error(w, "no such cluster", http.StatusNotFound)
		return
	}
	flash, failed := flashed(r)
	c.render(w, "cluster", page{Title: "Cluster " + v.Row.Name, Nav: "fleet", Flash: flash, FlashErr: failed, Body: v})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
