package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// Event is a kubernetes.* event as the console received it.
type Event struct {
	N          int64 // the order of arrival at the console
	Received   time.Time
	Type       string
	ID         string
	Subject    string
	Tenant     string
	ClusterID  string
	NodePoolID string
	Sequence   string
	Time       time.Time // ce-time
	Attrs      map[string]string
	Data       string
	// State and Name are the resource's, from the data.
	State, Name string
}

// Short is the type without kubernetes.
func (e Event) Short() string { return strings.TrimPrefix(e.Type, "kubernetes.") }

// Attributes are the event's attributes, sorted.
func (e Event) Attributes() [][2]string {
	var out [][2]string
	for k, v := range e.Attrs {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// At is when the event happened: its ce-time, else its arrival.
func (e Event) At() time.Time {
	if !e.Time.IsZero() {
		return e.Time
	}
	return e.Received
}

// events keeps the latest events, all of them and by cluster, and tells
// the streams of each.
type events struct {
	mu         sync.Mutex
	n          int64
	all        []Event // a ring of the latest max
	max        int
	perCluster int
	byCluster  map[string][]Event
	seen       map[string]time.Time // ce-id → when, redeliveries dropped
	subs       map[chan Event]struct{}
	closed     bool
}

func newEvents(maxAll, perCluster int) *events {
	return &events{max: maxAll, perCluster: perCluster, byCluster: map[string][]Event{}, seen: map[string]time.Time{}, subs: map[chan Event]struct{}{}}
}

func clusterKey(tenant, id string) string { return tenant + "/" + id }

// add keeps e, unless its ce-id was seen, and tells the streams.
func (es *events) add(e Event) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if e.ID != "" {
		if _, dup := es.seen[e.ID]; dup {
			return
		}
		es.seen[e.ID] = e.Received
		if len(es.seen) > 4*es.max {
			for id, t := range es.seen {
				if time.Since(t) > time.Hour {
					delete(es.seen, id)
				}
			}
		}
	}
	es.n++
	e.N = es.n
	es.all = append(es.all, e)
	if len(es.all) > es.max {
		es.all = slices.Delete(es.all, 0, len(es.all)-es.max)
	}
	if e.ClusterID != "" {
		k := clusterKey(e.Tenant, e.ClusterID)
		l := append(es.byCluster[k], e)
		if len(l) > es.perCluster {
			l = slices.Delete(l, 0, len(l)-es.perCluster)
		}
		es.byCluster[k] = l
	}
	for ch := range es.subs {
		select {
		case ch <- e:
		default: // a slow reader misses it; its page still has the rest
		}
	}
}

func (es *events) latest() []Event {
	es.mu.Lock()
	defer es.mu.Unlock()
	return slices.Clone(es.all)
}

func (es *events) of(tenant, cluster string) []Event {
	es.mu.Lock()
	defer es.mu.Unlock()
	return slices.Clone(es.byCluster[clusterKey(tenant, cluster)])
}

func (es *events) subscribe() (chan Event, func()) {
	ch := make(chan Event, 256)
	es.mu.Lock()
	defer es.mu.Unlock()
	if !es.closed {
		es.subs[ch] = struct{}{}
	}
	return ch, func() {
		es.mu.Lock()
		defer es.mu.Unlock()
		delete(es.subs, ch)
	}
}

func (es *events) close() {
	es.mu.Lock()
	defer es.mu.Unlock()
	es.closed = true
}

// Add records an event as if it had been received (tests, benchmarks).
func (c *Console) Add(m *pubsub.Message) { c.ev.add(eventOf(m.Attributes, m.Data)) }

func eventOf(a map[string]string, data []byte) Event {
	e := Event{Received: time.Now(), Type: a["ce-type"], ID: a["ce-id"], Subject: a["ce-subject"], Tenant: a["tenantId"],
		ClusterID: a["clusterId"], NodePoolID: a["nodePoolId"], Sequence: a["ce-sequence"], Attrs: a, Data: string(data)}
	e.Time, _ = time.Parse(time.RFC3339Nano, a["ce-time"])
	var d struct {
		State string `json:"state"`
		Name  string `json:"name"`
	}
	if json.Unmarshal(data, &d) == nil {
		e.State, e.Name = d.State, d.Name
	}
	if e.State == "" {
		// From the type: kubernetes.cluster.ready → ready.
		switch last := e.Type[strings.LastIndex(e.Type, ".")+1:]; last {
		case "ready", "error", "deleted":
			e.State = last
		}
	}
	return e
}

// eventFilter is the events view's query.
type eventFilter struct{ Type, Cluster string }

func (f eventFilter) matches(e *Event) bool {
	return (f.Type == "" || e.Type == f.Type || strings.HasPrefix(e.Type, f.Type+".")) &&
		(f.Cluster == "" || e.ClusterID == f.Cluster || e.Subject == f.Cluster)
}

type eventsView struct {
	Filter eventFilter
	Types  []string
	Events []Event
	Stream string
}

func (c *Console) eventsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := eventFilter{Type: q.Get("type"), Cluster: q.Get("cluster")}
	v := eventsView{Filter: f, Types: c.opt.Topics, Stream: Path + "/events/stream?" + q.Encode()}
	all := c.ev.latest()
	for i := len(all) - 1; i >= 0 && len(v.Events) < 500; i-- {
		if f.matches(&all[i]) {
			v.Events = append(v.Events, all[i])
		}
	}
	c.render(w, "events", page{Title: "Events", Nav: "events", Body: v})
}

// eventsStream sends each event that matches the query, as the row of
// the events table ({"key", "html"}).
func (c *Console) eventsStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := eventFilter{Type: q.Get("type"), Cluster: q.Get("cluster")}
	ch, stop := c.ev.subscribe()
	defer stop()
	st, ok := startStream(w, r)
	if !ok {
		return
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-keep.C:
			if !st.send("ping", struct{}{}) {
				return
			}
		case e := <-ch:
			if !f.matches(&e) {
				continue
			}
			if !st.send("event", rowMsg{Key: fmt.Sprintf("ev-%d", e.N), Table: "events", HTML: c.rowHTML("eventRow", e)}) {
				return
			}
		}
	}
}
