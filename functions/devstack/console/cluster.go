package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/docpath"
	"github.com/better-compute/kubernetes/shared/lifecycle"
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
}

type poolView struct {
	PoolCell
	Generation, Observed int64
	Operation, OpKind    string
	Zones                []string
	MachineType          string
}

// readCluster reads a cluster, its pools and the substrate that uses it.
func (c *Console) readCluster(ctx context.Context, tenant, id string) (*clusterView, error) {
	t := docpath.Tenant(c.opt.Firestore, tenant)
	ref := t.Collection("clusters").Doc(docpath.ID(id))
	snap, err := ref.Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cl lifecycle.Cluster
	if err := snap.DataTo(&cl); err != nil {
		return nil, err
	}
	v := &clusterView{Tenant: tenant, ID: id}
	pools, err := activePools(ctx, ref)
	if err != nil {
		return nil, err
	}
	var cells []PoolCell
	for i := range pools {
		p := &pools[i]
		cell := poolCell(p)
		cells = append(cells, cell)
		v.Pools = append(v.Pools, poolView{PoolCell: cell, Generation: p.Spec.Generation, Observed: p.Status.ObservedGeneration,
			Operation: p.Status.Provider.Operation, OpKind: p.Status.Provider.OperationKind, Zones: p.Spec.Zones, MachineType: p.Spec.MachineType})
	}
	slices.SortFunc(v.Pools, func(a, b poolView) int { return strings.Compare(a.Name, b.Name) })
	subs, err := c.tenantSubstrates(ctx, tenant)
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
	c.watch.start(c.bg, c.opt.Firestore, &c.wg)
	v.Runs, v.Watching = c.watch.runsOf(tenant, id)
	v.Timeline = buildTimeline(cl.CreatedAt, v.Row, v.Events, ops, v.Runs, time.Now())
	v.Stream = fmt.Sprintf("%s/clusters/%s/%s/stream", Path, tenant, id)
	return v, nil
}

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	v, err := c.readCluster(r.Context(), r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if v == nil {
		http.Error(w, "no such cluster", http.StatusNotFound)
		return
	}
	c.render(w, "cluster", page{Title: "Cluster " + v.Row.Name, Nav: "fleet", Flash: r.URL.Query().Get("flash"), Body: v})
}

// timeline is the picture of a cluster's history: a lane of states for
// the cluster and for each pool, the provider's operations, and the
// events by ce-sequence.
type timeline struct {
	Width, Height int
	Lanes         []lane
	Ops           []bar
	Runs          []bar
	RunsY         int
	Events        []mark
	Ticks         []tick
	From, To      time.Time
	OpsY, EventsY int
}

type lane struct {
	Label    string
	Y        int
	Segments []bar
}

type bar struct {
	X, W  int
	Class string
	Label string
	Title string
}

type mark struct {
	X     int
	Label string
	Title string
}

type tick struct {
	X     int
	Label string
}

const (
	tlLeft  = 130
	tlWidth = 1000
	tlLane  = 22
)

func buildTimeline(created time.Time, row ClusterRow, evs []Event, ops []*containerpb.Operation, runs []Run, now time.Time) timeline {
	from, to := created, now
	if from.IsZero() && len(evs) > 0 {
		from = evs[0].At()
	}
	type opSpan struct {
		start, end time.Time
		op         *containerpb.Operation
	}
	var spans []opSpan
	for _, op := range ops {
		s, err := time.Parse(time.RFC3339Nano, op.GetStartTime())
		if err != nil {
			continue
		}
		e, err := time.Parse(time.RFC3339Nano, op.GetEndTime())
		if err != nil {
			e = now
		}
		spans = append(spans, opSpan{s, e, op})
		if s.Before(from) {
			from = s
		}
	}
	for _, e := range evs {
		if e.At().Before(from) {
			from = e.At()
		}
	}
	if from.IsZero() || !to.After(from) {
		from = to.Add(-time.Second)
	}
	span := to.Sub(from)
	x := func(t time.Time) int {
		return tlLeft + int(float64(tlWidth-tlLeft-40)*float64(t.Sub(from))/float64(span))
	}
	tl := timeline{Width: tlWidth, From: from, To: to}

	// The lanes: the cluster's, then each pool's, states from the events'
	// data, the state now at the end.
	type change struct {
		at    time.Time
		state string
	}
	lanes := map[string][]change{"": {{created, "pending"}}}
	names := map[string]string{}
	order := []string{""}
	for _, e := range evs {
		if e.State == "" {
			continue
		}
		k := e.NodePoolID
		if _, ok := lanes[k]; !ok {
			order = append(order, k)
		}
		if k != "" && e.Name != "" {
			names[k] = e.Name
		}
		lanes[k] = append(lanes[k], change{e.At(), e.State})
	}
	current := map[string]string{"": row.State}
	for _, p := range row.Pools {
		current[p.ID] = p.State
		names[p.ID] = p.Name
		if _, ok := lanes[p.ID]; !ok {
			order = append(order, p.ID)
			lanes[p.ID] = nil
		}
	}
	y := 24
	for _, k := range order {
		l := lane{Label: "cluster", Y: y}
		if k != "" {
			l.Label = "pool " + cmpOr(names[k], k)
		}
		ch := lanes[k]
		if cur := current[k]; cur != "" && (len(ch) == 0 || ch[len(ch)-1].state != cur) {
			ch = append(ch, change{now, cur})
		}
		for i, c := range ch {
			end := now
			if i+1 < len(ch) {
				end = ch[i+1].at
			}
			x0 := x(c.at)
			l.Segments = append(l.Segments, bar{X: x0, W: max(2, x(end)-x0), Class: "s-" + c.state, Label: c.state,
				Title: fmt.Sprintf("%s %s from %s", l.Label, c.state, c.at.UTC().Format("15:04:05.000"))})
		}
		tl.Lanes = append(tl.Lanes, l)
		y += tlLane
	}
	tl.RunsY = y
	for _, r := range runs {
		if r.Start.Before(from) {
			continue
		}
		end, what := r.End, "running"
		if end.IsZero() {
			end = now
		} else {
			what = cmpOr(r.State+" "+r.Message, r.State)
			if r.OpKind != "" {
				what += "; operation " + r.OpKind + " " + r.Operation
			}
		}
		x0 := x(r.Start)
		tl.Runs = append(tl.Runs, bar{X: x0, W: max(2, x(end)-x0), Class: "run",
			Title: fmt.Sprintf("run %s, %v: %s", r.Start.UTC().Format("15:04:05.000"), end.Sub(r.Start).Round(time.Millisecond), what)})
	}
	y += tlLane
	tl.OpsY = y
	for _, s := range spans {
		x0 := x(s.start)
		d := s.end.Sub(s.start).Round(time.Millisecond)
		tl.Ops = append(tl.Ops, bar{X: x0, W: max(2, x(s.end)-x0), Class: "op", Label: s.op.GetOperationType().String(),
			Title: fmt.Sprintf("%s %s, %s, %v", s.op.GetOperationType(), s.op.GetName(), s.op.GetStatus(), d)})
	}
	y += tlLane
	tl.EventsY = y
	for _, e := range evs {
		tl.Events = append(tl.Events, mark{X: x(e.At()), Label: cmpOr(strings.TrimLeft(e.Sequence, "0"), "0"),
			Title: fmt.Sprintf("%s %s %s, ce-sequence %s", e.At().UTC().Format("15:04:05.000"), e.Short(), e.NodePoolID, e.Sequence)})
	}
	y += tlLane + 14
	for i := 0; i <= 4; i++ {
		t := from.Add(span * time.Duration(i) / 4)
		tl.Ticks = append(tl.Ticks, tick{X: x(t), Label: t.UTC().Format("15:04:05.0")})
	}
	tl.Height = y + 4
	return tl
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
