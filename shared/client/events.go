package client

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Event is one kubernetes.* CloudEvent as Pub/Sub delivers it (API.md §7):
// its attributes (ce-id, ce-type, ce-sequence, ...) and its data.
type Event struct {
	Attributes map[string]string
	Data       []byte
}

// Chain is the chain whose ce-sequence e counts in: its substrate's for a
// substrate event, its cluster's otherwise (a node pool's events are its
// cluster's).
func (e Event) Chain() string {
	if id := e.Attributes["substrateId"]; id != "" {
		return "substrate/" + id
	}
	return "cluster/" + e.Attributes["clusterId"]
}

// Sequence is e's ce-sequence; false when it has none or it is not twenty
// decimal digits of a number above zero.
func (e Event) Sequence() (int64, bool) {
	s := e.Attributes["ce-sequence"]
	if len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// Gap is a run of events of a chain that an Orderer stopped waiting for:
// From to To (inclusive) were never seen, and what came after them was
// handed on.
type Gap struct {
	Chain    string
	From, To int64
}

func (g Gap) String() string {
	if g.From == g.To {
		return fmt.Sprintf("%s: event %d did not come; going on without it", g.Chain, g.From)
	}
	return fmt.Sprintf("%s: events %d to %d did not come; going on without them", g.Chain, g.From, g.To)
}

// Default bounds of an Orderer.
const (
	DefaultOrderWait = 10 * time.Second
	DefaultOrderHeld = 1000
)

// Orderer puts events back in the order of their ce-sequence, chain by
// chain, and drops duplicates. Pub/Sub delivers at least once and, when
// several instances publish a cluster's events, in any order: an event is
// held until its predecessor came, for at most Wait (or while fewer than
// Held events of its chain wait), and then what is held is handed on past
// the gap, reported. The first event seen of a chain is held too (its
// predecessors may be on their way) unless it is the chain's first.
// Events without ce-sequence are handed on at once, once per ce-id.
//
// An Orderer is safe for concurrent use.
type Orderer struct {
	wait time.Duration
	max  int

	mu     sync.Mutex
	chains map[string]*chainOrder
	seen   map[string]bool // ce-ids of events without ce-sequence
}

type chainOrder struct {
	next int64 // the number to hand on next; 0 until known
	held map[int64]heldEvent
}

type heldEvent struct {
	e     Event
	since time.Time
}

// NewOrderer returns an orderer holding an event at most wait for its
// predecessor, and at most held events per chain (0: the defaults).
func NewOrderer(wait time.Duration, held int) *Orderer {
	if wait <= 0 {
		wait = DefaultOrderWait
	}
	if held <= 0 {
		held = DefaultOrderHeld
	}
	return &Orderer{wait: wait, max: held, chains: map[string]*chainOrder{}, seen: map[string]bool{}}
}

// Add takes an event received at now and returns the events now in order
// (e and those held behind it) and the gaps given up on.
func (o *Orderer) Add(e Event, now time.Time) ([]Event, []Gap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, ok := e.Sequence()
	if !ok {
		id := e.Attributes["ce-id"]
		if id != "" && o.seen[id] {
			return nil, nil
		}
		o.seen[id] = true
		return []Event{e}, nil
	}
	c := o.chains[e.Chain()]
	if c == nil {
		c = &chainOrder{held: map[int64]heldEvent{}}
		o.chains[e.Chain()] = c
	}
	if (c.next > 0 && n < c.next) || hasKey(c.held, n) {
		return nil, nil // a redelivery, or one given up on
	}
	if c.next == 0 && n == 1 {
		c.next = 1
	}
	c.held[n] = heldEvent{e: e, since: now}
	out := c.release()
	var gaps []Gap
	for len(c.held) > o.max {
		if g := c.skip(e.Chain()); g.From > 0 {
			gaps = append(gaps, g)
		}
		out = append(out, c.release()...)
	}
	return out, gaps
}

// Flush hands on, at now, what waited longer than the orderer's wait
// for a predecessor, and returns it with the gaps given up on.
func (o *Orderer) Flush(now time.Time) ([]Event, []Gap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.flush(func(h heldEvent) bool { return now.Sub(h.since) >= o.wait })
}

// Close hands on everything held, in order, past its gaps: the reader
// stops.
func (o *Orderer) Close() ([]Event, []Gap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.flush(func(heldEvent) bool { return true })
}

func (o *Orderer) flush(expired func(heldEvent) bool) ([]Event, []Gap) {
	var out []Event
	var gaps []Gap
	names := make([]string, 0, len(o.chains))
	for name := range o.chains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := o.chains[name]
		for len(c.held) > 0 && expired(c.oldest()) {
			if g := c.skip(name); g.From > 0 {
				gaps = append(gaps, g)
			}
			out = append(out, c.release()...)
		}
	}
	return out, gaps
}

// Held is how many events wait for a predecessor.
func (o *Orderer) Held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.chains {
		n += len(c.held)
	}
	return n
}

// release hands on the held events that follow next without a gap.
func (c *chainOrder) release() []Event {
	var out []Event
	for c.next > 0 {
		h, ok := c.held[c.next]
		if !ok {
			break
		}
		delete(c.held, c.next)
		out = append(out, h.e)
		c.next++
	}
	return out
}

// skip moves next to the lowest held number and returns the gap jumped
// (From 0 when next was not known yet: nothing is known missing).
func (c *chainOrder) skip(name string) Gap {
	low := int64(-1)
	for n := range c.held {
		if low < 0 || n < low {
			low = n
		}
	}
	g := Gap{Chain: name}
	if c.next > 0 && low > c.next {
		g.From, g.To = c.next, low-1
	}
	c.next = low
	return g
}

// oldest is the held event that has waited longest.
func (c *chainOrder) oldest() heldEvent {
	var o heldEvent
	first := true
	for _, h := range c.held {
		if first || h.since.Before(o.since) {
			o, first = h, false
		}
	}
	return o
}

func hasKey(m map[int64]heldEvent, k int64) bool {
	_, ok := m[k]
	return ok
}
