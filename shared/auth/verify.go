// Package auth authenticates callers by their bearer token and decides what
// they may do (API.md §3).
//
// Authentication: a Verifier checks an `Authorization: Bearer <JWT>` header
// against the issuer's published keys (OpenID Connect discovery and JWKS)
// and returns the principal, the token's `sub`. Authorization is pure: a
// Member holds one principal's role bindings in one tenant and answers
// whether a permission is granted on a cluster or on the tenant.
package auth

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/logging"
)

// The signing algorithms a token may use (API.md §3); any other (none,
// HMAC, PS256, ...) is refused before a key is even looked up.
var (
	algNames = []string{oidc.RS256, oidc.ES256}
	algs     = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}
)

// maxTokenBytes bounds the work an unauthenticated caller can cause; real
// ID tokens are a few hundred bytes to a couple of kilobytes.
const maxTokenBytes = 16 << 10

// minKeyRefetch is the least time between two fetches of the issuer's key
// set caused by tokens whose key is not in the cache: a forged kid costs at
// most one fetch per interval, and a rotated-in key is accepted at most
// this long after its first token.
const minKeyRefetch = 5 * time.Second

// Discovery backoff: the first retry after a failure waits minBackoff, each
// further failure doubles it up to maxBackoff.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// Config says which tokens a Verifier accepts. It is read at the edge (the
// function's main); this package reads no environment.
type Config struct {
	// IssuerURL is the token issuer, exactly as tokens carry it in `iss`;
	// its discovery document is IssuerURL + "/.well-known/openid-configuration".
	IssuerURL string
	// Audience must be one of the token's `aud` values.
	Audience string
	// ClockSkew is the tolerance on `exp` and `nbf` for clocks that
	// disagree; zero means one minute, negative means none.
	ClockSkew time.Duration
	// HTTPClient fetches the discovery document and the key set; nil means
	// a client with a 10 s timeout (a hung fetch must not hang key refresh).
	HTTPClient *http.Client
	// Clock is the clock tokens are checked by; nil means the real one.
	Clock clock.PassiveClock
}

// Verifier checks bearer tokens. It is safe for concurrent use and meant to
// live as long as the process: it caches the issuer's keys and refetches
// them when a token names a key it has not seen (key rotation).
//
// A Verifier made by NewVerifier discovers the issuer lazily, on the first
// Verify (or Ready), and retries a failed discovery with backoff, so it can
// be built before the issuer is reachable (the devstack's issuer runs in
// the same process; on Cloud Run an issuer may answer slowly at start).
//
// Keys are cached. A token whose key is not in the cache (an unknown kid,
// or a signature no cached key verifies) makes the Verifier fetch the key
// set again, but at most once per minKeyRefetch (5 s) and one fetch at a
// time: forged kids cannot make it fetch on every request, and a key the
// issuer rotated in is accepted at most that long after its first token.
type Verifier struct {
	issuer   string
	audience string
	skew     time.Duration
	client   *http.Client
	now      func() time.Time

	// sem serializes discovery attempts while letting waiters give up
	// when their request is cancelled.
	sem chan struct{}

	cache tokenCache

	mu       sync.Mutex // guards the fields below
	idv      *oidc.IDTokenVerifier
	lastErr  error
	retryAt  time.Time
	backoff  time.Duration
	attempts int
}

// NewVerifier returns a Verifier for cfg. It validates cfg but does no I/O:
// discovery happens on first use (call Ready to do it now). ctx is read only
// for an HTTP client stored by oidc.ClientContext, used when cfg.HTTPClient
// is nil.
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	v, err := newVerifier(cfg)
	if err != nil {
		return nil, err
	}
	if c, ok := ctx.Value(oauth2.HTTPClient).(*http.Client); ok && c != nil && cfg.HTTPClient == nil {
		v.client = c
	}
	return v, nil
}

// NewStaticVerifier returns a Verifier that checks signatures against keys
// (*rsa.PublicKey or *ecdsa.PublicKey) instead of a discovered key set,
// for tests and tools. It checks `iss`, `aud`, `exp`, `nbf` and `sub` like
// any Verifier, but ignores `kid`: every key is tried.
func NewStaticVerifier(cfg Config, keys ...crypto.PublicKey) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("auth: static verifier needs at least one key")
	}
	v, err := newVerifier(cfg)
	if err != nil {
		return nil, err
	}
	v.idv = oidc.NewVerifier(v.issuer, &oidc.StaticKeySet{PublicKeys: keys}, v.oidcConfig())
	return v, nil
}

func newVerifier(cfg Config) (*Verifier, error) {
	u, err := url.Parse(cfg.IssuerURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("auth: issuer URL %q is not an http(s) URL", cfg.IssuerURL)
	}
	if cfg.Audience == "" {
		return nil, errors.New("auth: audience is required")
	}
	v := &Verifier{
		issuer:   cfg.IssuerURL,
		audience: cfg.Audience,
		skew:     cfg.ClockSkew,
		client:   cfg.HTTPClient,
		sem:      make(chan struct{}, 1),
	}
	if v.skew == 0 {
		v.skew = time.Minute
	}
	if v.skew < 0 {
		v.skew = 0
	}
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	v.now = time.Now
	if cfg.Clock != nil {
		v.now = cfg.Clock.Now
	}
	return v, nil
}

// oidcConfig makes go-oidc check the algorithm and the signature only: the
// claims are checked by Verify itself so that each failure gets its own
// message and the clock skew policy applies to exp and nbf alike.
func (v *Verifier) oidcConfig() *oidc.Config {
	return &oidc.Config{
		SupportedSigningAlgs: algNames,
		SkipClientIDCheck:    true,
		SkipIssuerCheck:      true,
		SkipExpiryCheck:      true,
	}
}

// Ready discovers the issuer if that has not happened yet. It returns nil
// once the issuer's configuration is known, an errs.Unavailable error while
// it cannot be fetched (attempts are spaced by a backoff, so a failed call
// may return the previous failure without trying again).
func (v *Verifier) Ready(ctx context.Context) error {
	_, err := v.verifier(ctx)
	return err
}

// verifier returns the go-oidc verifier, discovering the issuer first if
// needed.
func (v *Verifier) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	if idv, err := v.cached(); idv != nil || err != nil {
		return idv, err
	}
	select {
	case v.sem <- struct{}{}:
		defer func() { <-v.sem }()
	case <-ctx.Done():
		return nil, errs.Wrap(errs.Unavailable, ctx.Err(), "identity provider unavailable")
	}
	// Another caller may have finished discovery while this one waited.
	if idv, err := v.cached(); idv != nil || err != nil {
		return idv, err
	}

	log := logging.FromContext(ctx).With("issuer", v.issuer)
	log.InfoContext(ctx, "Discovering token issuer")
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, v.client), v.issuer)

	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		// The caller gave up; that says nothing about the issuer.
		return nil, errs.Wrap(errs.Unavailable, err, "identity provider unavailable")
	}
	if err != nil {
		v.attempts++
		v.backoff = min(max(2*v.backoff, minBackoff), maxBackoff)
		v.retryAt = v.now().Add(v.backoff)
		v.lastErr = fmt.Errorf("discover issuer %q: %w", v.issuer, err)
		log.WarnContext(ctx, "Token issuer discovery failed; retrying on a later request",
			"attempt", v.attempts, "retryIn", v.backoff, "error", err)
		return nil, errs.Wrap(errs.Unavailable, v.lastErr, "identity provider unavailable")
	}
	var meta struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
		v.lastErr = fmt.Errorf("discover issuer %q: no jwks_uri in its configuration", v.issuer)
		v.retryAt = v.now().Add(maxBackoff)
		log.WarnContext(ctx, "Token issuer publishes no key set", "error", v.lastErr)
		return nil, errs.Wrap(errs.Unavailable, v.lastErr, "identity provider unavailable")
	}
	v.idv = oidc.NewVerifier(v.issuer, newKeySet(meta.JWKSURL, v.client, v.now), v.oidcConfig())
	v.lastErr = nil
	return v.idv, nil
}

// cached returns the verifier if discovery is done, or the last discovery
// error while the backoff after it has not elapsed; (nil, nil) means try.
func (v *Verifier) cached() (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idv != nil {
		return v.idv, nil
	}
	if v.lastErr != nil && v.now().Before(v.retryAt) {
		return nil, errs.Wrap(errs.Unavailable, v.lastErr, "identity provider unavailable")
	}
	return nil, nil
}

// claims are the registered claims Verify checks beyond the signature,
// and the email claims that name a service account (Identify).
type claims struct {
	Issuer        string           `json:"iss"`
	Subject       string           `json:"sub"`
	Audience      jwt.Audience     `json:"aud"`
	Expiry        *jwt.NumericDate `json:"exp"`
	NotBefore     *jwt.NumericDate `json:"nbf"`
	Email         string           `json:"email"`
	EmailVerified verifiedFlag     `json:"email_verified"`
}

// verifiedFlag is an email_verified claim: true, or "true" as some
// issuers write it; anything else, absent included, is false.
type verifiedFlag bool

func (f *verifiedFlag) UnmarshalJSON(b []byte) error {
	*f = verifiedFlag(string(b) == "true" || string(b) == `"true"`)
	return nil
}

// Identity is who a verified token names: its subject, and the email the
// issuer vouches for, if any. Google's OIDC tokens of a service account
// (those Cloud Tasks, Cloud Scheduler and Pub/Sub push subscriptions
// send) carry the account's numeric unique ID as the subject and its
// address as a verified email.
type Identity struct {
	Subject string
	// Email is the token's email claim when its email_verified claim is
	// true; empty otherwise.
	Email string
}

// header is the part of the JOSE header Verify looks at before the key.
type header struct {
	Alg string `json:"alg"`
}

// Verify checks the Authorization header value of a request and returns
// the principal (the token's `sub`). The token must be a compact JWS signed
// with RS256 or ES256 by a key of the issuer, issued by the configured
// issuer for the configured audience, within its validity (`exp` required,
// `nbf` if present, both with the clock skew) and with a non-empty `sub`.
//
// Errors are errs.Unauthenticated with a message safe to show the caller
// ("missing bearer token", "token expired", ...), the detail in the cause;
// errs.Unavailable if the issuer has never been reachable. Verify may fetch
// the issuer's keys (a token naming an unknown key triggers a refetch).
func (v *Verifier) Verify(ctx context.Context, authorization string) (string, error) {
	id, err := v.Identify(ctx, authorization)
	return id.Subject, err
}

// Identify checks the Authorization header value as Verify does and
// returns the whole identity the token names.
func (v *Verifier) Identify(ctx context.Context, authorization string) (Identity, error) {
	raw, err := bearerToken(authorization)
	if err != nil {
		return Identity{}, err
	}
	if c, ok := v.cache.get(raw, v.now()); ok {
		if err := v.checkClaims(&c); err != nil {
			return Identity{}, err
		}
		return c.identity(), nil
	}
	if err := checkHeader(raw); err != nil {
		return Identity{}, err
	}
	idv, err := v.verifier(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := idv.Verify(ctx, raw)
	if err != nil {
		return Identity{}, errs.Wrap(errs.Unauthenticated, err, "invalid token signature")
	}
	var c claims
	if err := tok.Claims(&c); err != nil {
		return Identity{}, errs.Wrap(errs.Unauthenticated, err, "malformed token claims")
	}
	if err := v.checkClaims(&c); err != nil {
		return Identity{}, err
	}
	v.cache.put(raw, c, v.now())
	return c.identity(), nil
}

func (c *claims) identity() Identity {
	id := Identity{Subject: c.Subject}
	if c.EmailVerified {
		id.Email = c.Email
	}
	return id
}

// bearerToken extracts the token of an `Authorization: Bearer` value. The
// scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(authorization string) (string, error) {
	authorization = strings.TrimSpace(authorization)
	if authorization == "" {
		return "", errs.E(errs.Unauthenticated, "missing bearer token")
	}
	scheme, token, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errs.E(errs.Unauthenticated, "authorization scheme must be Bearer")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", errs.E(errs.Unauthenticated, "missing bearer token")
	}
	if len(token) > maxTokenBytes || strings.ContainsAny(token, " \t") {
		return "", errs.E(errs.Unauthenticated, "malformed token")
	}
	return token, nil
}

// checkHeader refuses tokens that are not three-part JWS or that name an
// algorithm other than RS256 and ES256, with a clearer message than the parser's.
func checkHeader(raw string) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return errs.E(errs.Unauthenticated, "malformed token")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return errs.Wrap(errs.Unauthenticated, err, "malformed token")
	}
	var h header
	if err := json.Unmarshal(b, &h); err != nil {
		return errs.Wrap(errs.Unauthenticated, err, "malformed token")
	}
	if !slices.Contains(algNames, h.Alg) {
		return errs.E(errs.Unauthenticated, "unsupported token algorithm %q", h.Alg)
	}
	// What go-oidc then refuses is the signature, not the token's shape.
	if _, err := jose.ParseSigned(raw, algs); err != nil {
		return errs.Wrap(errs.Unauthenticated, err, "malformed token")
	}
	return nil
}

func (v *Verifier) checkClaims(c *claims) error {
	now := v.now()
	switch {
	case c.Issuer != v.issuer:
		return errs.Wrap(errs.Unauthenticated,
			fmt.Errorf("issuer %q, want %q", c.Issuer, v.issuer), "wrong token issuer")
	case !c.Audience.Contains(v.audience):
		return errs.Wrap(errs.Unauthenticated,
			fmt.Errorf("audience %q, want %q", []string(c.Audience), v.audience), "wrong token audience")
	case c.Expiry == nil:
		return errs.E(errs.Unauthenticated, "token has no expiry")
	case !now.Before(c.Expiry.Time().Add(v.skew)):
		return errs.Wrap(errs.Unauthenticated,
			fmt.Errorf("expired at %s", c.Expiry.Time().UTC().Format(time.RFC3339)), "token expired")
	case c.NotBefore != nil && now.Add(v.skew).Before(c.NotBefore.Time()):
		return errs.Wrap(errs.Unauthenticated,
			fmt.Errorf("not before %s", c.NotBefore.Time().UTC().Format(time.RFC3339)), "token not yet valid")
	case c.Subject == "":
		return errs.E(errs.Unauthenticated, "token has no subject")
	}
	return nil
}

// maxJWKSBytes bounds the issuer's key set document.
const maxJWKSBytes = 1 << 20

// keySet is the issuer's key set (JWKS), cached, and fetched again when a
// token's key is not in the cache, but at most once per minKeyRefetch: a
// stream of tokens naming keys the issuer never published (forged kids)
// costs the issuer one fetch per interval, not one per request. go-oidc's
// remote key set fetches on every such token.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	// sem admits one fetch at a time; waiters give up with their request.
	sem chan struct{}

	mu        sync.Mutex // guards the fields below
	keys      []jose.JSONWebKey
	gen       int       // bumped by every successful fetch
	tried     bool      // a fetch was attempted
	fetchedAt time.Time // of the last attempt, successful or not
}

func newKeySet(url string, client *http.Client, now func() time.Time) *keySet {
	return &keySet{url: url, client: client, now: now, sem: make(chan struct{}, 1)}
}

// VerifySignature implements oidc.KeySet: it returns the payload of the
// compact JWS raw if a key of the issuer (the one its kid names, or any when
// it names none) verifies it.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, algs)
	if err != nil {
		return nil, fmt.Errorf("parse token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("token has more than one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, gen := k.cached()
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	keys, err = k.refresh(ctx, gen)
	if err != nil {
		return nil, err
	}
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	return nil, fmt.Errorf("no key of the issuer with kid %q verifies the token", kid)
}

func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

func (k *keySet) cached() ([]jose.JSONWebKey, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.gen
}

// refresh fetches the key set unless a fetch succeeded since the caller
// read generation seen, or one was attempted less than minKeyRefetch ago;
// it returns the keys then known.
func (k *keySet) refresh(ctx context.Context, seen int) ([]jose.JSONWebKey, error) {
	select {
	case k.sem <- struct{}{}:
		defer func() { <-k.sem }()
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the issuer's keys: %w", ctx.Err())
	}
	k.mu.Lock()
	if k.gen != seen || (k.tried && k.now().Sub(k.fetchedAt) < minKeyRefetch) {
		keys := k.keys
		k.mu.Unlock()
		return keys, nil
	}
	k.tried = true
	k.fetchedAt = k.now()
	k.mu.Unlock()

	// The fetch outlives a caller that gives up: its result serves the
	// next requests, and a cancelled fetch would still use up the interval.
	keys, err := k.fetch(context.WithoutCancel(ctx))
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		return k.keys, err
	}
	k.keys = keys
	k.gen++
	return keys, nil
}

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch the issuer's keys: %w", err)
	}
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the issuer's keys: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return nil, fmt.Errorf("read the issuer's keys: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the issuer's keys: %s", resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("decode the issuer's keys: %w", err)
	}
	return set.Keys, nil
}
