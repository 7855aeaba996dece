package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
)

// timeline is the picture of a cluster's history within a window: a lane
// of states for the cluster and for each pool, the reconcile runs, the
// provider's operations, and the events by ce-sequence; and the same
// steps as a list, which the picture's bars link to.
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
	// Window is the window shown ("" for all the history); Windows are
	// the others to choose from; Hidden is how many steps are older.
	Window  string
	Self    string // the cluster's page, which the windows' links are of
	Windows []windowLink
	Hidden  int
	Steps   []step
}

type lane struct {
	Label, Title string
	Y            int
	Segments     []bar
}

type bar struct {
	X, W  int
	Class string
	Label string // drawn in the bar only when it fits
	Title string
	Step  string // the id of its row in the list of steps
	// Grow, of a bar that runs until now (a run, an operation, a lane's
	// state now), is how many pixels a second it grows: the page draws
	// it on to the time now, up to the picture's edge, reading nothing
	// ("" for a bar that ended).
	Grow string
}

type mark struct {
	X     int
	Label string // drawn only when clear of the one before
	Title string
}

type tick struct {
	X     int
	Label string
}

// step is a row of the timeline's list: a state taken, with its reason,
// or a provider operation.
type step struct {
	ID          string
	At          time.Time
	Lane, State string
	Reason      string
	Took        string
}

type windowLink struct {
	Label, Value string
	Current      bool
}

const (
	tlLeft  = 130
	tlWidth = 1000
	tlRight = 40
	tlLane  = 22
	// charWidth is the width of a character of the timeline's 11px text,
	// a little over its widest.
	charWidth = 7
)

// windows are the timeline's windows; defaultWindow is the one shown
// when the history is longer, so that recent changes are not squeezed
// into a sliver of hours.
var windows = []struct {
	label, value string
	d            time.Duration
}{{"last minute", "1m", time.Minute}, {"last 10 minutes", "10m", 10 * time.Minute}, {"last hour", "1h", time.Hour}, {"all", "all", 0}}

const defaultWindow = "10m"

// parseWindow is the window a query names ("" for the default).
func parseWindow(v string) (string, time.Duration) {
	for _, w := range windows {
		if w.value == v {
			return w.value, w.d
		}
	}
	return parseWindow(defaultWindow)
}

// fits reports whether a label fits in a bar w wide.
func fits(label string, w int) bool { return len(label)*charWidth+4 <= w }

// change is a state a lane took.
type change struct {
	at            time.Time
	state, reason string
}

// laneChanges is a lane's states: those the documents were seen to take
// (hist), after the ones its events told of before the console saw the
// documents, and the state now when it differs from the last.
func laneChanges(fromEvents []change, hist []stateChange, current string, now time.Time) []change {
	var out []change
	for _, c := range fromEvents {
		if len(hist) == 0 || c.at.Before(hist[0].At) {
			out = append(out, c)
		}
	}
	for _, h := range hist {
		out = append(out, change{h.At, h.State, h.Message})
	}
	slices.SortStableFunc(out, func(a, b change) int { return a.at.Compare(b.at) })
	// Consecutive states alike are one.
	var l []change
	for _, c := range out {
		if n := len(l); n > 0 && l[n-1].state == c.state {
			if l[n-1].reason == "" {
				l[n-1].reason = c.reason
			}
			continue
		}
		l = append(l, c)
	}
	if current != "" && (len(l) == 0 || l[len(l)-1].state != current) {
		l = append(l, change{now, current, ""})
	}
	return l
}

// buildTimeline draws a cluster's history: states from the documents'
// changes (hist) and the events, the runs and the operations, in the
// window win (0: all) ending now, or at the cluster's deletion.
func buildTimeline(created time.Time, row ClusterRow, evs []Event, ops []*containerpb.Operation, runs []Run, hist laneHistory,
	now time.Time, window string) timeline {
	window, win := parseWindow(window)
	type opSpan struct {
		start, end time.Time
		op         *containerpb.Operation
		running    bool
	}
	var spans []opSpan
	for _, op := range ops {
		s, err := time.Parse(time.RFC3339Nano, op.GetStartTime())
		if err != nil {
			continue
		}
		e, err := time.Parse(time.RFC3339Nano, op.GetEndTime())
		running := err != nil
		if running {
			e = now
		}
		spans = append(spans, opSpan{s, e, op, running})
	}

	// The lanes' states: the cluster's, then each pool's.
	fromEvents := map[string][]change{"": {{created, "pending", ""}}}
	names := map[string]string{}
	order := []string{""}
	seen := map[string]bool{"": true}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
	}
	for _, e := range evs {
		if e.State == "" {
			continue
		}
		k := e.NodePoolID
		add(k)
		if k != "" && e.Name != "" {
			names[k] = e.Name
		}
		fromEvents[k] = append(fromEvents[k], change{e.At(), e.State, ""})
	}
	current := map[string]string{"": row.State}
	for _, p := range row.Pools {
		current[p.ID] = p.State
		names[p.ID] = p.Name
		add(p.ID)
	}
	var histPools []string
	for k, n := range hist.Names {
		if n != "" && names[k] == "" {
			names[k] = n
		}
		if !seen[k] {
			histPools = append(histPools, k)
		}
	}
	slices.Sort(histPools)
	for _, k := range histPools {
		add(k)
	}
	changes := map[string][]change{}
	end := now
	deleted := row.State == "deleted"
	if deleted {
		// A deleted cluster's history ends at its deletion.
		end = time.Time{}
	}
	latest := func(t time.Time) {
		if deleted && t.After(end) {
			end = t
		}
	}
	for _, k := range order {
		cur := current[k]
		if deleted && cur == "" {
			cur = "deleted"
		}
		l := laneChanges(fromEvents[k], hist.Changes[k], cur, now)
		if deleted && len(l) > 0 && l[len(l)-1].state == "deleted" && l[len(l)-1].at.Equal(now) && len(l) > 1 {
			// Deleted, but when was not seen: at its last change.
			l[len(l)-1].at = l[len(l)-2].at
		}
		changes[k] = l
		for _, c := range l {
			latest(c.at)
		}
	}
	if deleted {
		for _, s := range spans {
			latest(s.end)
		}
		for _, e := range evs {
			latest(e.At())
		}
		if end.IsZero() {
			end = now
		}
	}

	// The window.
	from, to := created, end
	for _, s := range spans {
		if s.start.Before(from) || from.IsZero() {
			from = s.start
		}
	}
	for _, e := range evs {
		if e.At().Before(from) || from.IsZero() {
			from = e.At()
		}
	}
	tl := timeline{Width: tlWidth, Window: window}
	if win > 0 && to.Sub(from) > win {
		from = to.Add(-win)
	} else if win > 0 {
		tl.Window = "all"
	}
	for _, w := range windows {
		tl.Windows = append(tl.Windows, windowLink{Label: w.label, Value: w.value, Current: w.value == tl.Window})
	}
	if deleted {
		// Room after the deletion, so that its end shows.
		to = to.Add(to.Sub(from) / 50)
	}
	if from.IsZero() || !to.After(from) {
		from = to.Add(-time.Second)
	}
	tl.From, tl.To = from, to
	span := to.Sub(from)
	x := func(t time.Time) int {
		if t.Before(from) {
			t = from
		}
		if t.After(to) {
			t = to
		}
		return tlLeft + int(float64(tlWidth-tlLeft-tlRight)*float64(t.Sub(from))/float64(span))
	}
	stamp := func(t time.Time) string { return t.UTC().Format("15:04:05.000") }
	// What runs until now grows on the page at the picture's pace (a
	// deleted cluster's picture ends at its deletion: nothing grows).
	grow := ""
	if !deleted {
		grow = strconv.FormatFloat(float64(tlWidth-tlLeft-tlRight)/span.Seconds(), 'g', 4, 64)
	}

	y := 24
	for _, k := range order {
		l := lane{Label: "cluster", Title: "the cluster", Y: y}
		if k != "" {
			n := cmpOr(names[k], k)
			l.Title = "node pool " + n
			if len(n) > 14 {
				n = n[:13] + "…"
			}
			l.Label = "pool " + n
		}
		ch := changes[k]
		for i, c := range ch {
			stop := end
			if i+1 < len(ch) {
				stop = ch[i+1].at
			}
			id := fmt.Sprintf("step-%d", len(tl.Steps)+1)
			took := ""
			if c.state == "deleted" {
				took = "—"
			} else if i+1 < len(ch) {
				took = stop.Sub(c.at).Round(time.Millisecond).String()
			}
			tl.Steps = append(tl.Steps, step{ID: id, At: c.at, Lane: l.Title, State: c.state, Reason: c.reason, Took: took})
			if stop.Before(from) {
				tl.Hidden++
				continue
			}
			x0, x1 := x(c.at), x(stop)
			if c.state == "deleted" {
				// The lane ends here: a mark, not a bar.
				x1 = x0 + 3
			}
			title := fmt.Sprintf("%s %s from %s", l.Title, c.state, stamp(c.at))
			if c.reason != "" {
				title += ": " + c.reason
			}
			b := bar{X: x0, W: max(2, x1-x0), Class: "s-" + c.state, Title: title, Step: id}
			if i+1 == len(ch) && c.state != "deleted" {
				b.Grow = grow
			}
			if fits(c.state, b.W) {
				b.Label = c.state
			}
			l.Segments = append(l.Segments, b)
		}
		tl.Lanes = append(tl.Lanes, l)
		y += tlLane
	}
	tl.RunsY = y
	for _, r := range runs {
		stop, what := r.End, "running"
		if stop.IsZero() {
			stop = end
		} else {
			what = cmpOr(r.State+" "+r.Message, r.State)
			if r.OpKind != "" {
				what += "; operation " + r.OpKind + " " + r.Operation
			}
		}
		if stop.Before(from) {
			continue
		}
		x0 := x(r.Start)
		took := stop.Sub(r.Start).Round(time.Millisecond).String()
		if !r.StartSeen && !r.End.IsZero() {
			took = "between two reads"
		}
		b := bar{X: x0, W: max(2, x(stop)-x0), Class: "run",
			Title: fmt.Sprintf("run %s, %s: %s", stamp(r.Start), took, what)}
		if r.End.IsZero() {
			b.Grow = grow
		}
		tl.Runs = append(tl.Runs, b)
	}
	y += tlLane
	tl.OpsY = y
	// Operations may overlap: a label is drawn only clear of the last.
	slices.SortStableFunc(spans, func(a, b opSpan) int { return a.start.Compare(b.start) })
	labelEnd := 0
	for _, s := range spans {
		d := s.end.Sub(s.start).Round(time.Millisecond)
		id := fmt.Sprintf("step-%d", len(tl.Steps)+1)
		reason := s.op.GetStatus().String()
		if e := s.op.GetError(); e != nil && e.GetMessage() != "" {
			reason += ": " + e.GetMessage()
		}
		tl.Steps = append(tl.Steps, step{ID: id, At: s.start, Lane: "provider", State: s.op.GetOperationType().String(),
			Reason: reason + " (" + s.op.GetName() + ")", Took: d.String()})
		if s.end.Before(from) {
			tl.Hidden++
			continue
		}
		x0 := x(s.start)
		b := bar{X: x0, W: max(2, x(s.end)-x0), Class: "op", Step: id,
			Title: fmt.Sprintf("%s %s, %s, %v", s.op.GetOperationType(), s.op.GetName(), s.op.GetStatus(), d)}
		if s.running {
			b.Grow = grow
		}
		if l := s.op.GetOperationType().String(); fits(l, b.W) && b.X >= labelEnd {
			b.Label, labelEnd = l, b.X+len(l)*charWidth+4
		}
		tl.Ops = append(tl.Ops, b)
	}
	y += tlLane
	tl.EventsY = y
	lastLabel := -100
	for _, e := range evs {
		if e.At().Before(from) {
			continue
		}
		m := mark{X: x(e.At()), Title: fmt.Sprintf("%s %s %s, ce-sequence %s", stamp(e.At()), e.Short(), e.NodePoolID, e.Sequence)}
		if l := cmpOr(strings.TrimLeft(e.Sequence, "0"), "0"); m.X-lastLabel >= len(l)*6+10 {
			m.Label, lastLabel = l, m.X
		}
		tl.Events = append(tl.Events, m)
	}
	y += tlLane + 14
	for i := 0; i <= 4; i++ {
		t := from.Add(span * time.Duration(i) / 4)
		tl.Ticks = append(tl.Ticks, tick{X: x(t), Label: t.UTC().Format("15:04:05.0")})
	}
	tl.Height = y + 4
	slices.SortStableFunc(tl.Steps, func(a, b step) int { return a.At.Compare(b.At) })
	return tl
}
