package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// A page of another origin must not act through the console's forms
// (API.md §8): a form posted from elsewhere carries no token of a page
// the console rendered, and the browser says where it comes from
// (Sec-Fetch-Site, Origin). The console also refuses to be framed
// (securityHeaders), so that no page can make a user click its buttons.

// formTokenField is the field of every POST form that carries the
// page's token; the layout holds the token and console.js adds the field.
const formTokenField = "form-token"

// formTokens mints and checks the per-page tokens: a random nonce and its
// MAC under a key of the console's, so that only a page the console
// rendered holds a valid one.
type formTokens struct{ key []byte }

func newFormTokens() formTokens {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return formTokens{key: key}
}

func (t formTokens) mac(nonce []byte) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write(nonce)
	return m.Sum(nil)[:16]
}

// mint is a new page's token.
func (t formTokens) mint() string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(append(nonce, t.mac(nonce)...))
}

// valid reports whether tok is a token the console minted.
func (t formTokens) valid(tok string) bool {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	return err == nil && len(b) == 32 && hmac.Equal(b[16:], t.mac(b[:16]))
}

// checkForm says why a form's request may not act, or nil: it must come
// from the console's own origin, as the browser tells (Sec-Fetch-Site,
// else Origin), and carry a page's token.
func (c *Console) checkForm(r *http.Request) error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return fmt.Errorf("the form was sent by a page of another site (Sec-Fetch-Site: %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
		return fmt.Errorf("the form was sent by a page of another origin (%s)", o)
	}
	if !c.tokens.valid(r.PostFormValue(formTokenField)) {
		return errors.New("the form carries no token of a console page: reload the page and send it again")
	}
	return nil
}

// securityHeaders are the headers of every page: nothing loaded from
// outside the devstack, and no framing by any page.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

// Defaults of Options.MaxStreams and MaxStreamsPerClient.
const (
	DefaultMaxStreams          = 1000
	DefaultMaxStreamsPerClient = 200
)

// streamSlots bounds the open streams, in all and by client address.
type streamSlots struct {
	mu        sync.Mutex
	max, per  int
	open      int
	perClient map[string]int
}

// take takes a slot for the client at remote (a request's RemoteAddr),
// or answers why not: 429 past the client's bound, 503 past the total,
// both with Retry-After. The release gives the slot back.
func (s *streamSlots) take(w http.ResponseWriter, remote string) (release func(), ok bool) {
	client, _, err := net.SplitHostPort(remote)
	if err != nil {
		client = remote
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.perClient[client] >= s.per:
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("too many streams: %d are open from %s, at most %d (close some of the console's pages)", s.perClient[client], client, s.per), http.StatusTooManyRequests)
		return nil, false
	case s.open >= s.max:
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("too many streams: %d are open, at most %d", s.open, s.max), http.StatusServiceUnavailable)
		return nil, false
	}
	s.open++
	s.perClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.open--
			if s.perClient[client]--; s.perClient[client] <= 0 {
				delete(s.perClient, client)
			}
		})
	}, true
}

// bounded serves a stream's route within the bounds of the open streams.
func (c *Console) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		release, ok := c.slots.take(w, r.RemoteAddr)
		if !ok {
			return
		}
		defer release()
		h(w, r)
	}
}

// OpenStreams is how many streams are open now.
func (c *Console) OpenStreams() int {
	c.slots.mu.Lock()
	defer c.slots.mu.Unlock()
	return c.slots.open
}
