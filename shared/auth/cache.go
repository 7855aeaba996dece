package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Verified tokens are remembered so that a caller's next requests skip the
// signature check (about 0.1 ms, most of an API call's own CPU time). An
// entry lives at most cacheTTL, so a key withdrawn from the issuer's key
// set stops being honoured within that time; the token's own expiry and
// not-before are checked on every hit.
const (
	cacheTTL  = 5 * time.Minute
	cacheSize = 10000
)

type cachedToken struct {
	claims  claims
	addedAt time.Time
}

type tokenCache struct {
	mu      sync.Mutex
	entries map[[32]byte]cachedToken
}

func (c *tokenCache) get(raw string, now time.Time) (claims, bool) {
	k := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || now.Sub(e.addedAt) > cacheTTL {
		return claims{}, false
	}
	return e.claims, true
}

func (c *tokenCache) put(raw string, cl claims, now time.Time) {
	k := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= cacheSize {
		// Starting over is simpler than an LRU, and at this size a
		// flush costs one signature check per active caller.
		c.entries = make(map[[32]byte]cachedToken)
	}
	c.entries[k] = cachedToken{claims: cl, addedAt: now}
}
