package console

import (
	"encoding/json"
	"fmt"
	"net/http"
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
