package console

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RequestLog keeps the latest requests the devstack served (its API, the
// functions, the /dev routes), for the console's requests view: the
// method, path, principal, status, request ID and latency of each. The
// console's own requests are not kept.
type RequestLog struct {
	mu   sync.Mutex
	ring []Request
	next int
	n    int64
}

// Request is a request as the log keeps it.
type Request struct {
	N            int64
	At           time.Time
	Method, Path string
	Principal    string // the bearer token's subject, as it claims (not verified here)
	Status       int
	RequestID    string
	Latency      time.Duration
	Aborted      bool
}

// maxRequests is how many requests the log keeps.
const maxRequests = 2000

// NewRequestLog is an empty log.
func NewRequestLog() *RequestLog { return &RequestLog{ring: make([]Request, 0, maxRequests)} }

// Wrap is h, which also logs each request it serves in l.
func (l *RequestLog) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Path || strings.HasPrefix(r.URL.Path, Path+"/") {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		aborted := true
		defer func() {
			id := sw.Header().Get("X-Request-Id")
			l.add(Request{At: start, Method: r.Method, Path: r.URL.Path, Principal: subjectOfToken(r.Header.Get("Authorization")),
				Status: cmpOrInt(sw.status, http.StatusOK), RequestID: id, Latency: time.Since(start).Round(time.Microsecond), Aborted: aborted})
		}()
		h.ServeHTTP(sw, r)
		aborted = false
	})
}

func (l *RequestLog) add(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	r.N = l.n
	if len(l.ring) < maxRequests {
		l.ring = append(l.ring, r)
		return
	}
	l.ring[l.next] = r
	l.next = (l.next + 1) % maxRequests
}

// Latest are the latest n requests, newest first.
func (l *RequestLog) Latest(n int) []Request {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Request, 0, min(n, len(l.ring)))
	for i := 0; i < len(l.ring) && len(out) < n; i++ {
		j := (l.next - 1 - i + 2*len(l.ring)) % len(l.ring)
		if len(l.ring) < maxRequests {
			j = len(l.ring) - 1 - i
		}
		out = append(out, l.ring[j])
	}
	return out
}

// subjectOfToken is the sub claim of a bearer JWT, unverified ("" for
// none): the log shows who the request says it is, and the API decides.
func subjectOfToken(h string) string {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return ""
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Sub   string `json:"sub"`
		Email string `json:"email"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return cmpOr(c.Email, c.Sub)
}

func cmpOrInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// statusWriter notes the status a handler writes, and passes on the
// flushes and hijacks of the writer it wraps.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("the response cannot be hijacked")
}

// Unwrap is the writer wrapped, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestsView is the page of the latest requests.
type requestsView struct {
	Requests []Request
	Kept     bool
}

func (c *Console) requestsPage(w http.ResponseWriter, r *http.Request) {
	v := requestsView{Requests: c.opt.Requests.Latest(500), Kept: c.opt.Requests != nil}
	c.render(w, "requests", page{Title: "Requests", Nav: "requests", Body: v})
}
