package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
// the streams of each. The publisher's path only queues what it
// publishes (publish, constant time under a lock of its own); one
// goroutine decodes, deduplicates and keeps each event, in constant time
// whatever the history holds: rings of the latest events and of the
// ce-ids seen, and the streams told by cluster.
type events struct {
	qmu     sync.Mutex
	queue   []published
	queued  int64         // publications queued so far
	kept    atomic.Int64  // of them, handled by the goroutine
	dropped int64         // publications past maxQueue, not kept
	wake    chan struct{} // a publication is queued (capacity 1)
	stop    chan struct{} // closed by close
	done    chan struct{} // closed when the goroutine ends

	mu         sync.Mutex
	n          int64
	all        ring[Event] // the latest max
	perCluster int
	byCluster  map[string]*ring[Event]
	seen       map[string]struct{} // the ce-ids of seenIDs: redeliveries dropped
	seenIDs    ring[string]
	subsAll    map[chan Event]struct{}            // the streams of every event
	subsBy     map[string]map[chan Event]struct{} // the streams of one cluster's
	closed     bool
}

// published is a publication as the publisher hands it over.
type published struct {
	attrs map[string]string
	data  []byte
	at    time.Time
}

// maxQueue bounds the publications waiting for the goroutine.
const maxQueue = 100_000

func newEvents(maxAll, perCluster int) *events {
	es := &events{perCluster: perCluster, all: newRing[Event](maxAll), byCluster: map[string]*ring[Event]{},
		seen: map[string]struct{}{}, seenIDs: newRing[string](4 * maxAll),
		subsAll: map[chan Event]struct{}{}, subsBy: map[string]map[chan Event]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go es.run()
	return es
}

func clusterKey(tenant, id string) string { return tenant + "/" + id }

// publish queues a publication for the goroutine: the publisher's whole
// cost.
func (es *events) publish(attrs map[string]string, data []byte) {
	es.qmu.Lock()
	if len(es.queue) >= maxQueue {
		es.dropped++
	} else {
		es.queue = append(es.queue, published{attrs, data, time.Now()})
		es.queued++
	}
	es.qmu.Unlock()
	select {
	case es.wake <- struct{}{}:
	default:
	}
}

// run keeps the queued publications until close.
func (es *events) run() {
	defer close(es.done)
	var batch []published
	for {
		select {
		case <-es.stop:
			return
		case <-es.wake:
		}
		es.qmu.Lock()
		batch, es.queue = es.queue, batch[:0]
		es.qmu.Unlock()
		for i, p := range batch {
			e := eventOf(p.attrs, p.data)
			e.Received = p.at
			es.add(e)
			batch[i] = published{}
			es.kept.Add(1)
		}
	}
}

// add keeps e, unless its ce-id was seen, and tells the streams.
func (es *events) add(e Event) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if e.ID != "" {
		if _, dup := es.seen[e.ID]; dup {
			return
		}
		if old, full := es.seenIDs.push(e.ID); full {
			delete(es.seen, old)
		}
		es.seen[e.ID] = struct{}{}
	}
	es.n++
	e.N = es.n
	es.all.push(e)
	k := ""
	if e.ClusterID != "" {
		k = clusterKey(e.Tenant, e.ClusterID)
		l := es.byCluster[k]
		if l == nil {
			l = ptr(newRing[Event](es.perCluster))
			es.byCluster[k] = l
		}
		l.push(e)
	}
	tell := func(subs map[chan Event]struct{}) {
		for ch := range subs {
			select {
			case ch <- e:
			default: // a slow reader misses it; its page still has the rest
			}
		}
	}
	tell(es.subsAll)
	if k != "" {
		tell(es.subsBy[k])
	}
}

func ptr[T any](v T) *T { return &v }

func (es *events) latest() []Event {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.all.items()
}

func (es *events) of(tenant, cluster string) []Event {
	es.mu.Lock()
	defer es.mu.Unlock()
	if l := es.byCluster[clusterKey(tenant, cluster)]; l != nil {
		return l.items()
	}
	return nil
}

// subscribe returns a channel of the events of the cluster key names
// (clusterKey), or of every event when key is empty, and its stop.
func (es *events) subscribe(key string) (chan Event, func()) {
	ch := make(chan Event, 256)
	es.mu.Lock()
	defer es.mu.Unlock()
	if !es.closed {
		if key == "" {
			es.subsAll[ch] = struct{}{}
		} else {
			if es.subsBy[key] == nil {
				es.subsBy[key] = map[chan Event]struct{}{}
			}
			es.subsBy[key][ch] = struct{}{}
		}
	}
	return ch, func() {
		es.mu.Lock()
		defer es.mu.Unlock()
		delete(es.subsAll, ch)
		if m := es.subsBy[key]; m != nil {
			delete(m, ch)
			if len(m) == 0 {
				delete(es.subsBy, key)
			}
		}
	}
}

// close stops the goroutine; what was still queued is not kept.
func (es *events) close() {
	es.mu.Lock()
	already := es.closed
	es.closed = true
	es.mu.Unlock()
	if !already {
		close(es.stop)
	}
	<-es.done
}

// ring keeps the latest cap values pushed.
type ring[T any] struct {
	buf   []T
	start int // the oldest, once full
	cap   int
}

func newRing[T any](n int) ring[T] { return ring[T]{cap: max(n, 1)} }

// push adds v, and returns the value it replaced when the ring was full.
func (r *ring[T]) push(v T) (old T, full bool) {
	if len(r.buf) < r.cap {
		r.buf = append(r.buf, v)
		return old, false
	}
	old = r.buf[r.start]
	r.buf[r.start] = v
	r.start = (r.start + 1) % r.cap
	return old, true
}

// items are the values kept, the oldest first, in a new slice.
func (r *ring[T]) items() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
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
	ch, stop := c.ev.subscribe("")
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
