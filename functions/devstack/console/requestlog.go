package console

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/kubernetes/shared/httpapi"
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
		sw := &httpapi.StatusWriter{ResponseWriter: w}
		aborted := true
		defer func() {
			id := sw.Header().Get("X-Request-Id")
			l.add(Request{At: start, Method: r.Method, Path: r.URL.Path, Principal: subjectOfToken(r.Header.Get("Authorization")),
				Status: cmpOrInt(sw.Status, http.StatusOK), RequestID: id, Latency: time.Since(start).Round(time.Microsecond), Aborted: aborted})
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

// requestsView is the page of the latest requests.
type requestsView struct {
	Requests []Request
	Kept     bool
}

func (c *Console) requestsPage(w http.ResponseWriter, r *http.Request) {
	v := requestsView{Requests: c.opt.Requests.Latest(500), Kept: c.opt.Requests != nil}
	c.render(w, "requests", page{Title: "Requests", Nav: "requests", Body: v})
}
