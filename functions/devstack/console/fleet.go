package console

import (
	"bytes"
	"cmp"
	"context"
	"html/template"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// PoolCell is a node pool as the fleet shows it.
type PoolCell struct {
	ID, Name, State, Message string
	NodeCount                int
	Current                  *int
	Autoscaling              *resource.Autoscaling
	ManagedBy                string
}

// ClusterRow is a cluster as the fleet shows it.
type ClusterRow struct {
	Tenant, ID, Name, State, Message, Mode, Region, Version string
	ProviderName                                            string
	Pools                                                   []PoolCell
	NodeCount                                               int
	CurrentNodeCount                                        int
	CurrentKnown                                            bool
	Substrate                                               string
	CreatedAt, UpdatedAt                                    time.Time
}

// Key is the row's identity on the page.
func (r ClusterRow) Key() string { return "cl-" + r.Tenant + "-" + r.ID }

// SubstrateRow is a substrate as the fleet shows it.
type SubstrateRow struct {
	Tenant, ID, State, Message, Mode, ClusterID, PoolID string
	Joined                                              int64
	NodePools                                           []resource.SubstrateNodePool
	CreatedAt                                           time.Time
}

// Key is the row's identity on the page.
func (r SubstrateRow) Key() string { return "sb-" + r.Tenant + "-" + r.ID }

// Fleet is everything the fleet view reads.
type Fleet struct {
	Clusters   []ClusterRow
	Substrates []SubstrateRow
}

// readFleet is every tenant's clusters, node pools and substrates, as the
// watcher holds them, and a channel closed at their next change.
func (c *Console) readFleet(ctx context.Context) (*Fleet, <-chan struct{}, error) {
	c.watch.start(c.bg, c.opt.Firestore, &c.wg)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.watch.wait(ctx); err != nil {
		return nil, nil, err
	}
	f, changed := c.watch.fleet()
	return f, changed, nil
}

// buildFleet makes the fleet's rows of the documents.
func buildFleet(cls []lifecycle.Cluster, ps []lifecycle.NodePool, ss []lifecycle.Substrate) *Fleet {
	f := &Fleet{}
	pools := map[string][]PoolCell{}
	for i := range ps {
		p := &ps[i]
		if !p.Active {
			continue
		}
		v := p.View()
		k := p.TenantID + "/" + p.ClusterID
		pools[k] = append(pools[k], PoolCell{ID: v.ID, Name: v.Name, State: string(v.State), Message: v.Message,
			NodeCount: v.NodeCount, Current: v.CurrentNodeCount, Autoscaling: v.Autoscaling, ManagedBy: v.ManagedBy})
	}
	used := map[string]string{}
	for i := range ss {
		v := ss[i].View()
		f.Substrates = append(f.Substrates, SubstrateRow{Tenant: v.TenantID, ID: v.ID, State: string(v.State), Message: v.Message,
			Mode: string(v.Mode), ClusterID: v.ClusterID, PoolID: v.PoolID, Joined: v.JoinedNodes, NodePools: v.NodePools, CreatedAt: v.CreatedAt})
		if v.ClusterID != "" {
			used[v.TenantID+"/"+v.ClusterID] = v.ID
		}
	}
	for i := range cls {
		cl := &cls[i]
		f.Clusters = append(f.Clusters, clusterRow(cl, pools[cl.TenantID+"/"+cl.ID], used[cl.TenantID+"/"+cl.ID]))
	}
	slices.SortFunc(f.Clusters, func(a, b ClusterRow) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(f.Substrates, func(a, b SubstrateRow) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return f
}

func clusterRow(cl *lifecycle.Cluster, pools []PoolCell, substrate string) ClusterRow {
	v := cl.View()
	r := ClusterRow{Tenant: v.TenantID, ID: v.ID, Name: v.Name, State: string(v.State), Message: v.Message, Mode: string(v.Mode),
		Region: v.Region, Version: v.KubernetesVersion, ProviderName: v.ProviderName, Substrate: substrate,
		CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, CurrentKnown: len(pools) > 0}
	slices.SortFunc(pools, func(a, b PoolCell) int { return cmp.Compare(a.Name, b.Name) })
	r.Pools = pools
	for _, p := range pools {
		r.NodeCount += p.NodeCount
		if p.Current == nil {
			r.CurrentKnown = false
		} else {
			r.CurrentNodeCount += *p.Current
		}
	}
	return r
}

// filter is the fleet's query: a tenant, a state, a page.
type filter struct {
	Tenant, State string
	Page          int
}

func parseFilter(q url.Values) filter {
	f := filter{Tenant: q.Get("tenant"), State: q.Get("state")}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	f.Page = max(f.Page, 1)
	return f
}

func (f filter) clusterMatches(r *ClusterRow) bool {
	return (f.Tenant == "" || r.Tenant == f.Tenant) && (f.State == "" || r.State == f.State)
}

func (f filter) substrateMatches(r *SubstrateRow) bool {
	return (f.Tenant == "" || r.Tenant == f.Tenant) && (f.State == "" || r.State == f.State)
}

// query is the filter as a query string, at page p.
func (f filter) query(p int) string {
	q := url.Values{}
	if f.Tenant != "" {
		q.Set("tenant", f.Tenant)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if p > 1 {
		q.Set("page", strconv.Itoa(p))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// fleetView is the fleet page's data.
type fleetView struct {
	Filter             filter
	Tenants, States    []string
	Clusters           []ClusterRow
	Substrates         []SubstrateRow
	Total, Pages       int
	First, Last        int
	Prev, Next, Stream string
}

var states = []string{"pending", "provisioning", "ready", "updating", "error", "deleting", "deleted"}

func (c *Console) fleetView(f *Fleet, flt filter) fleetView {
	v := fleetView{Filter: flt, States: states}
	seen := map[string]bool{}
	var matched []ClusterRow
	for i := range f.Clusters {
		r := &f.Clusters[i]
		if !seen[r.Tenant] {
			seen[r.Tenant] = true
			v.Tenants = append(v.Tenants, r.Tenant)
		}
		if flt.clusterMatches(r) {
			matched = append(matched, *r)
		}
	}
	for i := range f.Substrates {
		r := &f.Substrates[i]
		if !seen[r.Tenant] {
			seen[r.Tenant] = true
			v.Tenants = append(v.Tenants, r.Tenant)
		}
		if flt.substrateMatches(r) {
			v.Substrates = append(v.Substrates, *r)
		}
	}
	slices.Sort(v.Tenants)
	size := c.opt.PageSize
	v.Total = len(matched)
	v.Pages = max(1, (len(matched)+size-1)/size)
	p := min(flt.Page, v.Pages)
	lo, hi := (p-1)*size, min(p*size, len(matched))
	v.Clusters = matched[lo:hi]
	v.First, v.Last = lo+1, hi
	if p > 1 {
		v.Prev = Path + flt.query(p-1)
	}
	if p < v.Pages {
		v.Next = Path + flt.query(p+1)
	}
	v.Filter.Page = p
	v.Stream = Path + "/fleet/stream" + flt.query(p)
	return v
}

func (c *Console) fleetPage(w http.ResponseWriter, r *http.Request) {
	f, _, err := c.readFleet(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	c.render(w, "fleet", page{Title: "Fleet", Nav: "fleet", Flash: r.URL.Query().Get("flash"), Body: c.fleetView(f, parseFilter(r.URL.Query()))})
}

// rowHTML renders one row of the fleet: a cluster's or a substrate's.
func (c *Console) rowHTML(name string, row any) string {
	var b bytes.Buffer
	if err := c.rows.ExecuteTemplate(&b, name, row); err != nil {
		return ""
	}
	return b.String()
}

// fleetStream sends the fleet's rows that change, as they change: each
// message {"key", "html", "table"} puts the row, an empty html removes it
// (it no longer matches the page's filter).
func (c *Console) fleetStream(w http.ResponseWriter, r *http.Request) {
	flt := parseFilter(r.URL.Query())
	st, ok := startStream(w, r)
	if !ok {
		return
	}
	// Each row as last sent, and its HTML: a row that did not change is
	// not rendered again.
	type sent struct {
		row  any
		html string
	}
	last := map[string]sent{}
	first := true
	for {
		f, changed, err := c.readFleet(r.Context())
		if err != nil {
			return
		}
		next := map[string]sent{}
		var msgs []rowMsg
		put := func(key, table, tmpl string, row any) {
			prev, ok := last[key]
			if ok && reflect.DeepEqual(prev.row, row) {
				next[key] = prev
				return
			}
			html := c.rowHTML(tmpl, row)
			next[key] = sent{row, html}
			if prev.html != html && !first {
				msgs = append(msgs, rowMsg{Key: key, Table: table, HTML: html})
			}
		}
		for i := range f.Clusters {
			if cr := f.Clusters[i]; flt.clusterMatches(&cr) {
				put(cr.Key(), "clusters", "clusterRow", cr)
			}
		}
		for i := range f.Substrates {
			if sr := f.Substrates[i]; flt.substrateMatches(&sr) {
				put(sr.Key(), "substrates", "substrateRow", sr)
			}
		}
		if !first {
			for k := range last {
				if _, ok := next[k]; !ok {
					msgs = append(msgs, rowMsg{Key: k})
				}
			}
		}
		for _, m := range msgs {
			if !st.send("row", m) {
				return
			}
		}
		last, first = next, false
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-changed:
		}
		// Changes come in bursts (a run writes a cluster and its pools):
		// one message per row for the burst.
		select {
		case <-time.After(c.opt.Poll / 4):
		case <-c.done:
			return
		}
	}
}

type rowMsg struct {
	Key   string `json:"key"`
	Table string `json:"table,omitempty"`
	HTML  string `json:"html"`
}

var funcs = template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("15:04:05.000")
	},
	"deref": func(p *int) string {
		if p == nil {
			return "?"
		}
		return strconv.Itoa(*p)
	},
	"pathEscape":  url.PathEscape,
	"queryEscape": url.QueryEscape,
}
