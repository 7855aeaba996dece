package console

import (
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
)

// TestTimelineLanesFromDocuments draws the lanes of a cluster deleted an
// hour after its creation, with a resize at the end: the pool's lane
// shows updating (which no event tells of) with its reason, the lanes end
// at the deletion, not now, the window shows the last ten minutes, and
// no label is drawn where it does not fit.
func TestTimelineLanesFromDocuments(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	row := ClusterRow{Tenant: "acme", ID: "kcl-1", State: "deleted"}
	evs := []Event{
		{Type: "kubernetes.cluster.ready", Time: at(time.Minute), State: "ready"},
		{Type: "kubernetes.nodepool.ready", Time: at(time.Minute), NodePoolID: "knp-1", Name: "a", State: "ready"},
	}
	hist := laneHistory{Changes: map[string][]stateChange{
		"": {{at(0), "pending", ""}, {at(time.Minute), "ready", ""}, {at(58 * time.Minute), "deleting", ""}, {at(60 * time.Minute), "deleted", ""}},
		"knp-1": {{at(0), "pending", ""}, {at(time.Minute), "ready", ""}, {at(55 * time.Minute), "updating", "resizing to 3 nodes"},
			{at(55*time.Minute + time.Second), "ready", ""}, {at(58 * time.Minute), "deleting", ""}, {at(60 * time.Minute), "deleted", ""}},
	}, Names: map[string]string{"knp-1": "a"}}
	ops := []*containerpb.Operation{{Name: "op-1", OperationType: containerpb.Operation_CREATE_CLUSTER,
		StartTime: at(0).Format(time.RFC3339Nano), EndTime: at(time.Minute).Format(time.RFC3339Nano)}}
	now := at(5 * time.Hour)
	tl := buildTimeline(t0, row, evs, ops, nil, hist, now, "")

	if tl.Window != "10m" || !tl.From.Equal(at(50*time.Minute)) {
		t.Errorf("window %q from %v, want 10m from %v", tl.Window, tl.From, at(50*time.Minute))
	}
	if !tl.To.Before(at(61 * time.Minute)) {
		t.Errorf("the timeline ends at %v, want by the deletion (%v)", tl.To, at(60*time.Minute))
	}
	if len(tl.Lanes) != 2 {
		t.Fatalf("lanes %+v, want the cluster's and the pool's", tl.Lanes)
	}
	var states []string
	for _, s := range tl.Lanes[1].Segments {
		states = append(states, s.Class)
	}
	want := []string{"s-ready", "s-updating", "s-ready", "s-deleting", "s-deleted"}
	if len(states) != len(want) {
		t.Fatalf("the pool's lane %v, want %v", states, want)
	}
	for i := range want {
		if states[i] != want[i] {
			t.Fatalf("the pool's lane %v, want %v", states, want)
		}
	}
	right := tlWidth - tlRight
	for _, l := range tl.Lanes {
		for _, s := range l.Segments {
			if s.X+s.W > right+3 {
				t.Errorf("%s: %s ends at x=%d, past the deletion's %d", l.Label, s.Class, s.X+s.W, right)
			}
			if s.Label != "" && !fits(s.Label, s.W) {
				t.Errorf("%s: label %q drawn in a bar %d wide", l.Label, s.Label, s.W)
			}
			if s.Step == "" {
				t.Errorf("%s: %s links to no step", l.Label, s.Class)
			}
		}
	}
	found := false
	for _, s := range tl.Steps {
		if s.State == "updating" && s.Reason == "resizing to 3 nodes" && s.Lane == "node pool a" && s.Took == "1s" {
			found = true
		}
	}
	if !found {
		t.Errorf("no step of the pool's updating, with its reason, in %+v", tl.Steps)
	}
	if tl.Hidden == 0 {
		t.Errorf("no step said to be before the window")
	}
	if all := buildTimeline(t0, row, evs, ops, nil, hist, now, "all"); !all.From.Equal(t0) || all.Hidden != 0 {
		t.Errorf("window all: from %v, %d hidden; want from %v, none", all.From, all.Hidden, t0)
	}
}

// TestTimelineEventLabelsApart draws events a pixel apart: only labels
// clear of the one before are drawn.
func TestTimelineEventLabelsApart(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	var evs []Event
	for i := range 50 {
		evs = append(evs, Event{Type: "kubernetes.cluster.updated", Time: t0.Add(time.Duration(i) * time.Second), Sequence: "000000000123"})
	}
	tl := buildTimeline(t0, ClusterRow{State: "ready"}, evs, nil, nil, laneHistory{}, t0.Add(10*time.Minute), "10m")
	last := -1000
	for _, m := range tl.Events {
		if m.Label == "" {
			continue
		}
		if m.X-last < len(m.Label)*6+10 {
			t.Errorf("label %q at x=%d, %d from the one before", m.Label, m.X, m.X-last)
		}
		last = m.X
	}
}

// TestTimelineOperationLabelsApart draws two long operations that
// overlap: only the first's label is drawn.
func TestTimelineOperationLabelsApart(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	op := func(name string, start, end time.Duration) *containerpb.Operation {
		return &containerpb.Operation{Name: name, OperationType: containerpb.Operation_CREATE_NODE_POOL,
			StartTime: t0.Add(start).Format(time.RFC3339Nano), EndTime: t0.Add(end).Format(time.RFC3339Nano)}
	}
	ops := []*containerpb.Operation{op("op-2", 2*time.Second, 60*time.Second), op("op-1", time.Second, 59*time.Second)}
	tl := buildTimeline(t0, ClusterRow{State: "ready"}, nil, ops, nil, laneHistory{}, t0.Add(time.Minute), "all")
	var labels []string
	for _, b := range tl.Ops {
		labels = append(labels, b.Label)
	}
	if len(labels) != 2 || labels[0] == "" || labels[1] != "" {
		t.Errorf("labels %q, want the first operation's alone", labels)
	}
}

// TestTimelineRunningBarsGrow draws a cluster whose operation and run go
// on: those bars, and each lane's state now, grow on the page (Grow, 830
// pixels over the minute shown: 13.83 a second); the ended operation and
// run do not, and nothing of a deleted cluster does.
func TestTimelineRunningBarsGrow(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	op := func(name string, end time.Duration) *containerpb.Operation {
		o := &containerpb.Operation{Name: name, OperationType: containerpb.Operation_UPGRADE_MASTER, StartTime: t0.Format(time.RFC3339Nano)}
		if end > 0 {
			o.EndTime = t0.Add(end).Format(time.RFC3339Nano)
		}
		return o
	}
	ops := []*containerpb.Operation{op("op-ended", 10*time.Second), op("op-running", 0)}
	runs := []Run{{Start: t0, End: t0.Add(time.Second), StartSeen: true}, {Start: t0.Add(30 * time.Second), StartSeen: true}}
	hist := laneHistory{Changes: map[string][]stateChange{"": {{t0, "pending", ""}, {t0.Add(time.Second), "updating", ""}}}}
	for _, state := range []string{"updating", "deleted"} {
		tl := buildTimeline(t0, ClusterRow{State: state}, nil, ops, runs, hist, t0.Add(time.Minute), "all")
		want := "13.83"
		if state == "deleted" {
			want = ""
		}
		grows := func(bs []bar) (out []string) {
			for _, b := range bs {
				out = append(out, b.Grow)
			}
			return out
		}
		seg := tl.Lanes[0].Segments
		for what, got := range map[string][]string{"operations": grows(tl.Ops), "runs": grows(tl.Runs), "lane": grows(seg[len(seg)-2:])} {
			if len(got) != 2 || got[0] != "" || got[1] != want {
				t.Errorf("%s: %s's grow %q, want the ended one's \"\" and the running one's %q", state, what, got, want)
			}
		}
	}
}
