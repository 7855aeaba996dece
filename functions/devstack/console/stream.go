package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// stream is a response of server-sent events (text/event-stream).
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startStream answers r with an event stream. The server's read deadline
// would end the request: a stream has none.
func startStream(w http.ResponseWriter, r *http.Request) (*stream, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: rc}
	// A comment at once, so that the browser sees the stream open.
	if _, err := fmt.Fprint(w, ": open\nretry: 1000\n\n"); err != nil {
		return nil, false
	}
	return s, rc.Flush() == nil
}

// send sends one event of the name with v as its JSON data; false once the
// client is gone.
func (s *stream) send(name string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return true
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// clusterStream sends the cluster's live part again whenever it changes:
// when the watcher hears of a change of the cluster, its pools or its
// substrate, and when one of its events arrives. An idle cluster costs
// its streams nothing.
func (c *Console) clusterStream(w http.ResponseWriter, r *http.Request) {
	tenant, id, window := r.PathValue("tenant"), r.PathValue("id"), r.URL.Query().Get("window")
	ch, stop := c.ev.subscribe(clusterKey(tenant, id))
	defer stop()
	keys := []string{clusterKey(tenant, id)}
	c.liveStream(w, r, "cluster-live", "clusterLive", keys, func(ctx context.Context) (any, []string, bool) {
		v, err := c.readCluster(ctx, tenant, id, window)
		return v, keys, err == nil && v != nil
	}, ch)
}

// liveStream sends the template tmpl of what read returns, under key,
// whenever it changes: read again at each change of the watcher's keys
// (keys at first, then those that read names), or at an event on wake
// (nil: none), a burst of changes within a quarter of the poll read
// once.
func (c *Console) liveStream(w http.ResponseWriter, r *http.Request, key, tmpl string, keys []string,
	read func(context.Context) (v any, keys []string, ok bool), wake <-chan Event) {
	st, ok := startStream(w, r)
	if !ok {
		return
	}
	c.watch.start(c.bg, &c.wg)
	last := ""
	for {
		// Asked before the read: a change during it wakes the stream
		// once more, never less.
		changed, stop := c.watch.changedOf(keys...)
		v, now, ok := read(r.Context())
		if !slices.Equal(now, keys) {
			stop()
			keys = now // what to wait on moved (a substrate's cluster)
			continue
		}
		if ok {
			var b bytes.Buffer
			if c.rows.ExecuteTemplate(&b, tmpl, v) == nil && b.String() != last {
				last = b.String()
				if !st.send("live", rowMsg{Key: key, HTML: last}) {
					stop()
					return
				}
			}
		}
		woken := c.waitLive(r.Context(), changed, wake)
		stop()
		if !woken {
			return
		}
	}
}

// waitLive waits for changed to close or an event on wake, then lets a
// burst of changes pass; false when the stream or the console ends.
func (c *Console) waitLive(ctx context.Context, changed <-chan struct{}, wake <-chan Event) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c.done:
		return false
	case <-changed:
	case _, open := <-wake:
		if !open {
			return false
		}
	}
	t := time.NewTimer(c.opt.Poll / 4)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.done:
		return false
	case <-t.C:
		return true
	}
}
