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

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// PoolCell is a node pool as the fleet shows it.
type PoolCell struct {
	ID, Name, State, Message string
	// NodeCount is its nodeCount, the nodes wanted in each of its Zones
	// (its own, or the cluster's when it names none); Current the nodes
	// the provider runs in all of them.
	NodeCount   int
	Zones       int
	Current     *int
	Autoscaling *resource.Autoscaling
	ManagedBy   string
}

// ClusterRow is a cluster as the fleet shows it.
type ClusterRow struct {
	Tenant, ID, Name, State, Message, Mode, Region, Version string
	ProviderName                                            string
	Pools                                                   []PoolCell
	Zones                                                   []string
	// Wanted is the nodes its pools are made with, in all their zones;
	// CurrentNodeCount those the provider runs (when CurrentKnown).
	Wanted               int
	CurrentNodeCount     int
	CurrentKnown         bool
	Substrate            string
	CreatedAt, UpdatedAt time.Time
}

// Key is the row's identity on the page.
func (r ClusterRow) Key() string { return "cl-" + r.Tenant + "-" + r.ID }

// SubstrateRow is a substrate as the fleet shows it.
type SubstrateRow struct {
	Tenant, ID, State, Message, Mode, ClusterID, PoolID string
	Joined                                              int64
	NodePools                                           []resource.SubstrateNodePool
	CreatedAt                                           time.Time
	Progress                                            Progress
	// Logged is why its runs fail, as the log says it (LogTap).
	Logged string
}

// Key is the row's identity on the page.
func (r SubstrateRow) Key() string { return "sb-" + r.Tenant + "-" + r.ID }

// Fleet is everything the fleet view reads.
type Fleet struct {
	Clusters   []ClusterRow
	Substrates []SubstrateRow
}

// readFleet is every tenant's clusters, node pools and substrates, as the
// watcher holds them, a channel closed at their next change, and their
// version.
func (c *Console) readFleet(ctx context.Context) (*Fleet, <-chan struct{}, uint64, error) {
	if err := c.Warm(ctx); err != nil {
		return nil, nil, 0, err
	}
	f, changed, v := c.watch.fleet()
	return f, changed, v, nil
}

// Warm starts the listeners that hold the fleet, if they have not
// started, and waits (30 seconds at most) for their first snapshots.
func (c *Console) Warm(ctx context.Context) error {
	c.watch.start(c.bg, &c.wg)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.watch.wait(ctx)
}

// buildFleet makes the fleet's rows of the documents.
func buildFleet(cls []model.Cluster, ps []model.NodePool, ss []model.Substrate) *Fleet {
	f := &Fleet{}
	// The pools' documents are kept for the substrates' clusters alone:
	// their progress reads them.
	docs := map[string][]model.NodePool{}
	for i := range ss {
		if id := ss[i].ClusterID(); id != "" {
			docs[ss[i].TenantID+"/"+id] = nil
		}
	}
	pools := map[string][]PoolCell{}
	for i := range ps {
		p := &ps[i]
		if !p.Active {
			continue
		}
		k := p.TenantID + "/" + p.ClusterID
		pools[k] = append(pools[k], poolCell(p))
		if l, ok := docs[k]; ok {
			docs[k] = append(l, *p)
		}
	}
	byID := map[string]*model.Cluster{}
	for i := range cls {
		byID[cls[i].TenantID+"/"+cls[i].ID] = &cls[i]
	}
	d := fleetDocs{
		cluster:    func(t, id string) *model.Cluster { return byID[t+"/"+id] },
		pools:      func(t, id string) []model.NodePool { return docs[t+"/"+id] },
		substrates: ss,
	}
	used := map[string]string{}
	for i := range ss {
		r := substrateRow(&ss[i], d, nil)
		f.Substrates = append(f.Substrates, r)
		if r.ClusterID != "" {
			used[r.Tenant+"/"+r.ClusterID] = r.ID
		}
	}
	for i := range cls {
		cl := &cls[i]
		f.Clusters = append(f.Clusters, clusterRow(cl, pools[cl.TenantID+"/"+cl.ID], used[cl.TenantID+"/"+cl.ID]))
	}
	sortClusters(f.Clusters)
	sortSubstrates(f.Substrates)
	return f
}

// sortClusters orders cluster rows as the fleet shows them: by tenant,
// the newest first.
func sortClusters(rows []ClusterRow) {
	slices.SortFunc(rows, func(a, b ClusterRow) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}

func poolCell(p *model.NodePool) PoolCell {
	v := p.View()
	return PoolCell{ID: v.ID, Name: v.Name, State: string(v.State), Message: v.Message,
		NodeCount: v.NodeCount, Zones: len(v.Zones), Current: v.CurrentNodeCount, Autoscaling: v.Autoscaling, ManagedBy: v.ManagedBy}
}

// Wanted is how many nodes the pool is made with: its nodeCount in each
// of its zones.
func (p PoolCell) Wanted() int { return p.NodeCount * max(p.Zones, 1) }

func clusterRow(cl *model.Cluster, pools []PoolCell, substrate string) ClusterRow {
	v := cl.View()
	r := ClusterRow{Tenant: v.TenantID, ID: v.ID, Name: v.Name, State: string(v.State), Message: v.Message, Mode: string(v.Mode),
		Region: v.Region, Version: v.KubernetesVersion, ProviderName: v.ProviderName, Substrate: substrate,
		CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, CurrentKnown: len(pools) > 0, Zones: cl.Spec.Zones}
	slices.SortFunc(pools, func(a, b PoolCell) int { return cmp.Compare(a.Name, b.Name) })
	r.Pools = pools
	for i := range pools {
		p := &pools[i]
		if p.Zones == 0 {
			p.Zones = len(cl.Spec.Zones)
		}
		r.Wanted += p.Wanted()
		if p.Current == nil {
			r.CurrentKnown = false
		} else {
			r.CurrentNodeCount += *p.Current
		}
	}
	return r
}

// filter is the fleet's query: a tenant, a state, a page of clusters and
// one of substrates, and whether deleted clusters are shown (they are
// hidden unless asked for, or their state is).
type filter struct {
	Tenant, State string
	Page, SPage   int
	Deleted       bool
}

func parseFilter(q url.Values) filter {
	f := filter{Tenant: q.Get("tenant"), State: q.Get("state"), Deleted: q.Get("deleted") != ""}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	f.SPage, _ = strconv.Atoi(q.Get("spage"))
	f.Page, f.SPage = max(f.Page, 1), max(f.SPage, 1)
	return f
}

func (f filter) clusterMatches(r *ClusterRow) bool {
	return (f.Tenant == "" || r.Tenant == f.Tenant) && (f.State == "" || r.State == f.State) && (f.showsDeleted() || r.State != "deleted")
}

// showsDeleted says deleted clusters are shown.
func (f filter) showsDeleted() bool { return f.Deleted || f.State == "deleted" }

func (f filter) substrateMatches(r *SubstrateRow) bool {
	return (f.Tenant == "" || r.Tenant == f.Tenant) && (f.State == "" || r.State == f.State)
}

// values is the filter as a query, at cluster page p and substrate page
// sp.
func (f filter) values(p, sp int) url.Values {
	q := url.Values{}
	if f.Tenant != "" {
		q.Set("tenant", f.Tenant)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Deleted {
		q.Set("deleted", "1")
	}
	if p > 1 {
		q.Set("page", strconv.Itoa(p))
	}
	if sp > 1 {
		q.Set("spage", strconv.Itoa(sp))
	}
	return q
}

// query is the filter as a query string, at cluster page p and substrate
// page sp.
func (f filter) query(p, sp int) string {
	q := f.values(p, sp)
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// pager is the place of a page among a table's pages, and the links to
// its neighbours.
type pager struct {
	ID, Label          string // the element that holds it, and what its navigation is named
	What               string // "cluster", "substrate"
	Total, Pages, Page int
	First, Last        int
	Prev, Next         string
}

// paginate is the page of n rows the pager p asks for (the last one when
// it asks for a page past it): the rows' bounds.
func (p *pager) paginate(n, size int) (lo, hi int) {
	p.Total = n
	p.Pages = max(1, (n+size-1)/size)
	p.Page = min(max(p.Page, 1), p.Pages)
	lo, hi = (p.Page-1)*size, min(p.Page*size, n)
	p.First, p.Last = lo+1, hi
	return lo, hi
}

// fleetView is the fleet page's data.
type fleetView struct {
	Filter          filter
	Tenants, States []string
	Clusters        []ClusterRow
	Substrates      []SubstrateRow
	CPager, SPager  pager
	Stream          string
	// Version is the watcher's version the page shows; 0 for a page read
	// by queries before the watcher had the fleet (coldView).
	Version uint64
	// Counts are the tenant's clusters in each state (nil before the
	// watcher holds the fleet: its stream sends them); Empty says the
	// fleet has nothing yet.
	Counts *clusterCounts
	Empty  bool
	Origin string // the devstack's, for the first screen's commands
}

// clusterCounts are how many clusters are in each state, each with the
// fleet's link to them, and the link that shows or hides the deleted.
type clusterCounts struct {
	States                   []clusterCount
	Total, Deleted           int
	ShowDeleted, HideDeleted string
}

type clusterCount struct {
	State string
	N     int
	Link  string
}

// countStates counts the clusters of rows that flt's tenant shows.
func countStates(rows []ClusterRow, flt filter) *clusterCounts {
	n := map[string]int{}
	out := &clusterCounts{}
	for i := range rows {
		if flt.Tenant == "" || rows[i].Tenant == flt.Tenant {
			n[rows[i].State]++
			out.Total++
		}
	}
	for _, st := range states {
		if n[st] == 0 || st == "deleted" && !flt.showsDeleted() {
			continue // the deleted hidden are said apart
		}
		f := filter{Tenant: flt.Tenant, State: st}
		out.States = append(out.States, clusterCount{State: st, N: n[st], Link: Path + f.query(1, 1) + "#h-clusters"})
	}
	out.Deleted = n["deleted"]
	if !flt.showsDeleted() && out.Deleted > 0 {
		f := flt
		f.Deleted = true
		out.ShowDeleted = Path + f.query(1, 1) + "#h-clusters"
	}
	if flt.Deleted {
		f := flt
		f.Deleted = false
		out.HideDeleted = Path + f.query(1, 1) + "#h-clusters"
	}
	return out
}

var states = []string{"pending", "provisioning", "ready", "updating", "error", "deleting", "deleted"}

// links sets the pagers' links, once their pages are known, and the
// page's stream.
func (v *fleetView) links() {
	flt := v.Filter
	p, sp := v.CPager.Page, v.SPager.Page
	v.Filter.Page, v.Filter.SPage = p, sp
	if p > 1 {
		v.CPager.Prev = Path + flt.query(p-1, sp) + "#h-clusters"
	}
	if p < v.CPager.Pages {
		v.CPager.Next = Path + flt.query(p+1, sp) + "#h-clusters"
	}
	if sp > 1 {
		v.SPager.Prev = Path + flt.query(p, sp-1) + "#h-substrates"
	}
	if sp < v.SPager.Pages {
		v.SPager.Next = Path + flt.query(p, sp+1) + "#h-substrates"
	}
	q := flt.values(p, sp)
	q.Set("v", strconv.FormatUint(v.Version, 10))
	v.Stream = Path + "/fleet/stream?" + q.Encode()
}

func newFleetView(flt filter) fleetView {
	return fleetView{Filter: flt, States: states,
		CPager: pager{ID: "clusters-pager", Label: "Cluster pages", What: "cluster", Page: flt.Page},
		SPager: pager{ID: "substrates-pager", Label: "Substrate pages", What: "substrate", Page: flt.SPage}}
}

// fleetView is the page of the fleet that flt asks for.
func (c *Console) fleetView(f *Fleet, flt filter, version uint64) fleetView {
	v := newFleetView(flt)
	v.Version = version
	seen := map[string]bool{}
	var clusters []ClusterRow
	for i := range f.Clusters {
		r := &f.Clusters[i]
		if !seen[r.Tenant] {
			seen[r.Tenant] = true
			v.Tenants = append(v.Tenants, r.Tenant)
		}
		if flt.clusterMatches(r) {
			clusters = append(clusters, *r)
		}
	}
	var subs []SubstrateRow
	for i := range f.Substrates {
		r := &f.Substrates[i]
		if !seen[r.Tenant] {
			seen[r.Tenant] = true
			v.Tenants = append(v.Tenants, r.Tenant)
		}
		if flt.substrateMatches(r) {
			row := *r
			row.Logged = c.loggedRow(r)
			subs = append(subs, row)
		}
	}
	if flt.Tenant != "" && !seen[flt.Tenant] {
		v.Tenants = append(v.Tenants, flt.Tenant)
	}
	slices.Sort(v.Tenants)
	v.Counts = countStates(f.Clusters, flt)
	v.Empty = len(f.Clusters) == 0 && len(f.Substrates) == 0
	lo, hi := v.CPager.paginate(len(clusters), c.opt.PageSize)
	v.Clusters = clusters[lo:hi]
	lo, hi = v.SPager.paginate(len(subs), c.opt.PageSize)
	v.Substrates = subs[lo:hi]
	v.links()
	return v
}

// fleetPage answers the fleet's page: from the watcher once it holds the
// fleet; before, from queries of the page's rows alone (coldView), so
// that the first view of a large fleet does not wait for all of it to be
// read, and the watcher starts after the page is sent. A state filter,
// which the documents' fields cannot express (a cluster's state is
// derived from its spec and status), waits for the watcher.
func (c *Console) fleetPage(w http.ResponseWriter, r *http.Request) {
	flt := parseFilter(r.URL.Query())
	var v fleetView
	cold := false
	if !c.watch.isReady() && flt.State == "" {
		var err error
		if v, err = c.coldView(r.Context(), flt); err == nil {
			cold = true
		} else {
			c.opt.Log.Warn("The console's first view of the fleet could not be queried; it waits for the listeners", "error", err)
		}
	}
	if !cold {
		f, _, ver, err := c.readFleet(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		v = c.fleetView(f, flt, ver)
	}
	v.Origin = "http://" + r.Host
	flash, failed := flashed(r)
	c.render(w, "fleet", page{Title: "Fleet", Nav: "fleet", Flash: flash, FlashErr: failed, Body: v})
	if cold {
		c.watch.start(c.bg, &c.wg)
	}
}

// rowHTML renders one row of the fleet: a cluster's or a substrate's.
func (c *Console) rowHTML(name string, row any) string {
	var b bytes.Buffer
	if err := c.rows.ExecuteTemplate(&b, name, row); err != nil {
		c.opt.Log.Warn("Console row failed", "template", name, "error", err)
		return ""
	}
	return b.String()
}

// tableState is what a fleet stream last sent of one table: its rows in
// order, each row and its HTML (a row that did not change is not
// rendered again), and its pager's HTML.
type tableState struct {
	keys  []string
	sent  map[string]sentRow
	pager string
}

type sentRow struct {
	row  any
	html string
}

// item is a row of a table, in the page's order.
type item struct {
	key string
	row any
}

// diff brings the table the browser shows from ts to items, in the
// order the browser applies them: the rows gone from the page removed,
// then each row that is new, changed or moved put after the one before
// it, then the pager. With full, the browser's table is not known (a
// page from before the stream's first snapshot): every row is put, and
// the others removed. It updates ts.
func (c *Console) diff(ts *tableState, table, tmpl string, items []item, pg pager, full bool) []rowMsg {
	var msgs []rowMsg
	keys := make([]string, len(items))
	on := make(map[string]bool, len(items))
	for i, it := range items {
		keys[i] = it.key
		on[it.key] = true
	}
	if full {
		msgs = append(msgs, rowMsg{Op: "keep", Table: table, Keys: keys})
		ts.keys, ts.sent, ts.pager = nil, nil, ""
	}
	// dom is the browser's order of the rows as the messages so far leave
	// it: its first i rows are the page's first i once row i is placed.
	var dom []string
	for _, k := range ts.keys {
		if on[k] {
			dom = append(dom, k)
		} else {
			msgs = append(msgs, rowMsg{Op: "remove", Key: k})
		}
	}
	next := make(map[string]sentRow, len(items))
	for i, it := range items {
		prev, had := ts.sent[it.key]
		s := prev
		if !had || !reflect.DeepEqual(prev.row, it.row) {
			s = sentRow{it.row, c.rowHTML(tmpl, it.row)}
		}
		next[it.key] = s
		moved := i >= len(dom) || dom[i] != it.key
		changed := !had || s.html != prev.html
		if !moved && !changed {
			continue
		}
		m := rowMsg{Op: "put", Key: it.key, Table: table}
		if i > 0 {
			m.After = keys[i-1]
		}
		if changed {
			m.HTML = s.html
		}
		msgs = append(msgs, m)
		if moved {
			dom = slices.DeleteFunc(dom, func(k string) bool { return k == it.key })
			dom = slices.Insert(dom, i, it.key)
		}
	}
	if h := c.rowHTML("pager", pg); h != ts.pager {
		msgs = append(msgs, rowMsg{Op: "pager", Key: pg.ID, HTML: h})
		ts.pager = h
	}
	ts.keys, ts.sent = keys, next
	return msgs
}

// fleetStream keeps a page of the fleet as the fleet changes: each
// message puts a row of the page (new, changed or moved, after the row
// that precedes it), removes one that left it (by the page's order and
// filter), or replaces a pager, so that every page, not only the first,
// shows the rows that belong on it. A page rendered from another version
// of the fleet than the stream's first (v) is brought up to date whole.
func (c *Console) fleetStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	flt := parseFilter(q)
	shown, _ := strconv.ParseUint(q.Get("v"), 10, 64)
	st, ok := startStream(w, r)
	if !ok {
		return
	}
	var clusters, substrates tableState
	counts := ""
	first := true
	for {
		f, changed, ver, err := c.readFleet(r.Context())
		if err != nil {
			return
		}
		v := c.fleetView(f, flt, ver)
		full := first && ver != shown
		var cl, sb []item
		for _, row := range v.Clusters {
			cl = append(cl, item{row.Key(), row})
		}
		for _, row := range v.Substrates {
			sb = append(sb, item{row.Key(), row})
		}
		msgs := c.diff(&clusters, "clusters", "clusterRow", cl, v.CPager, full)
		msgs = append(msgs, c.diff(&substrates, "substrates", "substrateRow", sb, v.SPager, full)...)
		if h := c.rowHTML("fleetCounts", v.Counts); h != counts {
			msgs = append(msgs, rowMsg{Op: "pager", Key: "cluster-counts", HTML: h})
			counts = h
		}
		if first && !full {
			msgs = nil // the page shows this version
		}
		for _, m := range msgs {
			if !st.send("row", m) {
				return
			}
		}
		first = false
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

// rowMsg is a message of a stream: Op "put" (the events' when empty)
// puts the row Key into Table, with HTML when it changed, after the row
// After (first when empty); "remove" removes it; "keep" removes the
// rows of Table that are not Keys; "pager" replaces the content of the
// element Key with HTML.
type rowMsg struct {
	Op    string   `json:"op,omitempty"`
	Key   string   `json:"key,omitempty"`
	Table string   `json:"table,omitempty"`
	HTML  string   `json:"html,omitempty"`
	After string   `json:"after,omitempty"`
	Keys  []string `json:"keys,omitempty"`
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
	"for": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return time.Since(t).Round(time.Second).String()
	},
	"pathEscape": url.PathEscape,
	// age is how long ago t was, coarsely (so that a row changes with it
	// rarely): minutes within the hour, hours within the day, then days.
	"age": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		switch d := time.Since(t); {
		case d < time.Minute:
			return "<1m"
		case d < time.Hour:
			return strconv.Itoa(int(d/time.Minute)) + "m"
		case d < 48*time.Hour:
			return strconv.Itoa(int(d/time.Hour)) + "h"
		default:
			return strconv.Itoa(int(d/(24*time.Hour))) + "d"
		}
	},
	// role is what a pool does in its flavor's replacement ("" for the
	// flavor's only pool).
	"role": func(r string) string {
		return map[string]string{roleNew: "new, coming up", roleOld: "old, serving until the new pool's nodes join",
			roleDeleting: "old, being deleted"}[r]
	},
	"queryEscape": url.QueryEscape,
}
