package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

const testAudience = "https://compute.example.test"

// The keys are generated once: RSA key generation is slow under -race.
var (
	rsaKey, rsaOther *rsa.PrivateKey
	ecKey            *ecdsa.PrivateKey
)

func init() {
	var err error
	if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if rsaOther, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
}

// testIssuer serves an OpenID discovery document and a JWKS the way a real
// issuer does, with keys the test can change and counters of fetches.
type testIssuer struct {
	srv        *httptest.Server
	discovery  atomic.Int32
	jwksFetch  atomic.Int32
	down       atomic.Bool // discovery answers 503 while set
	mu         sync.Mutex
	publicKeys []jose.JSONWebKey
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	ti := &testIssuer{}
	ti.addKey("rsa-1", jose.RS256, &rsaKey.PublicKey)
	ti.addKey("ec-1", jose.ES256, &ecKey.PublicKey)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		ti.discovery.Add(1)
		if ti.down.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                ti.srv.URL,
			"jwks_uri":                              ti.srv.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		ti.jwksFetch.Add(1)
		ti.mu.Lock()
		defer ti.mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: ti.publicKeys})
	})
	ti.srv = httptest.NewServer(mux)
	t.Cleanup(ti.srv.Close)
	return ti
}

func (ti *testIssuer) addKey(kid string, alg jose.SignatureAlgorithm, pub crypto.PublicKey) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.publicKeys = append(ti.publicKeys, jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: string(alg), Use: "sig"})
}

// sign returns a compact JWS of claims signed with key under alg and kid.
func sign(t *testing.T, alg jose.SignatureAlgorithm, kid string, key any, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatalf("CompactSerialize: %v", err)
	}
	return out
}

// rawToken assembles a token from a header and claims with any signature,
// for algorithms a signer library refuses to produce.
func rawToken(header, claims map[string]any, signature func(signingInput string) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return in + "." + base64.RawURLEncoding.EncodeToString(signature(in))
}

func TestVerify(t *testing.T) {
	ti := newTestIssuer(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	v, err := NewVerifier(context.Background(), Config{IssuerURL: ti.srv.URL, Audience: testAudience, Clock: testingclock.NewFakePassiveClock(now)})
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}

	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": ti.srv.URL, "aud": testAudience, "sub": "alice",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		}
		if edit != nil {
			edit(c)
		}
		return c
	}
	rs := func(edit func(map[string]any)) string { return sign(t, jose.RS256, "rsa-1", rsaKey, claims(edit)) }
	pubDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid := rs(nil)

	tests := []struct {
		name     string
		header   string
		want     string
		wantKind errs.Kind // when want is ""
		wantMsg  string
	}{
		{name: "valid RS256", header: "Bearer " + valid, want: "alice"},
		{name: "valid ES256", header: "Bearer " + sign(t, jose.ES256, "ec-1", ecKey, claims(func(c map[string]any) { c["sub"] = "bob" })), want: "bob"},
		{name: "scheme is case-insensitive", header: "bearer " + valid, want: "alice"},
		{name: "audience list containing ours", header: "Bearer " + rs(func(c map[string]any) { c["aud"] = []string{"other", testAudience} }), want: "alice"},
		{name: "expired within clock skew", header: "Bearer " + rs(func(c map[string]any) { c["exp"] = now.Add(-30 * time.Second).Unix() }), want: "alice"},
		{name: "nbf within clock skew", header: "Bearer " + rs(func(c map[string]any) { c["nbf"] = now.Add(30 * time.Second).Unix() }), want: "alice"},
		{name: "nbf in the past", header: "Bearer " + rs(func(c map[string]any) { c["nbf"] = now.Add(-time.Hour).Unix() }), want: "alice"},

		{name: "empty header", header: "", wantKind: errs.Unauthenticated, wantMsg: "missing bearer token"},
		{name: "Bearer without token", header: "Bearer", wantKind: errs.Unauthenticated, wantMsg: "missing bearer token"},
		{name: "Bearer and spaces", header: "Bearer   ", wantKind: errs.Unauthenticated, wantMsg: "missing bearer token"},
		{name: "Basic scheme", header: "Basic x", wantKind: errs.Unauthenticated, wantMsg: "authorization scheme must be Bearer"},
		{name: "token without scheme", header: valid, wantKind: errs.Unauthenticated, wantMsg: "authorization scheme must be Bearer"},
		{name: "garbage", header: "Bearer garbage", wantKind: errs.Unauthenticated, wantMsg: "malformed token"},
		{name: "garbage in three parts", header: "Bearer a.b.c", wantKind: errs.Unauthenticated, wantMsg: "malformed token"},
		{name: "two tokens", header: "Bearer " + valid + " " + valid, wantKind: errs.Unauthenticated, wantMsg: "malformed token"},
		{name: "five parts", header: "Bearer " + valid + ".x.y", wantKind: errs.Unauthenticated, wantMsg: "malformed token"},
		{name: "oversized", header: "Bearer " + strings.Repeat("a", maxTokenBytes+1), wantKind: errs.Unauthenticated, wantMsg: "malformed token"},

		{name: "expired", header: "Bearer " + rs(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() }), wantKind: errs.Unauthenticated, wantMsg: "token expired"},
		{name: "no exp", header: "Bearer " + rs(func(c map[string]any) { delete(c, "exp") }), wantKind: errs.Unauthenticated, wantMsg: "token has no expiry"},
		{name: "not yet valid", header: "Bearer " + rs(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() }), wantKind: errs.Unauthenticated, wantMsg: "token not yet valid"},
		{name: "wrong audience", header: "Bearer " + rs(func(c map[string]any) { c["aud"] = "https://other.example.test" }), wantKind: errs.Unauthenticated, wantMsg: "wrong token audience"},
		{name: "no audience", header: "Bearer " + rs(func(c map[string]any) { delete(c, "aud") }), wantKind: errs.Unauthenticated, wantMsg: "wrong token audience"},
		{name: "wrong issuer", header: "Bearer " + rs(func(c map[string]any) { c["iss"] = "https://evil.example.test" }), wantKind: errs.Unauthenticated, wantMsg: "wrong token issuer"},
		{name: "missing sub", header: "Bearer " + rs(func(c map[string]any) { delete(c, "sub") }), wantKind: errs.Unauthenticated, wantMsg: "token has no subject"},
		{name: "empty sub", header: "Bearer " + rs(func(c map[string]any) { c["sub"] = "" }), wantKind: errs.Unauthenticated, wantMsg: "token has no subject"},

		{name: "bad signature: other key, known kid", header: "Bearer " + sign(t, jose.RS256, "rsa-1", rsaOther, claims(nil)), wantKind: errs.Unauthenticated, wantMsg: "invalid token signature"},
		{name: "bad signature: tampered payload", header: "Bearer " + tamper(valid), wantKind: errs.Unauthenticated, wantMsg: "invalid token signature"},
		{name: "unknown kid", header: "Bearer " + sign(t, jose.RS256, "rsa-9", rsaOther, claims(nil)), wantKind: errs.Unauthenticated, wantMsg: "invalid token signature"},
		{name: "known key under unknown kid", header: "Bearer " + sign(t, jose.RS256, "rsa-9", rsaKey, claims(nil)), wantKind: errs.Unauthenticated, wantMsg: "invalid token signature"},
		{name: "alg none", header: "Bearer " + rawToken(map[string]any{"alg": "none", "typ": "JWT"}, claims(nil), func(string) []byte { return nil }), wantKind: errs.Unauthenticated, wantMsg: `unsupported token algorithm "none"`},
		{name: "HS256 keyed with the public key", header: "Bearer " + rawToken(map[string]any{"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims(nil), func(in string) []byte {
			m := hmac.New(sha256.New, pubPEM)
			m.Write([]byte(in))
			return m.Sum(nil)
		}), wantKind: errs.Unauthenticated, wantMsg: `unsupported token algorithm "HS256"`},
		{name: "PS256 by a known key", header: "Bearer " + sign(t, jose.PS256, "rsa-1", rsaKey, claims(nil)), wantKind: errs.Unauthenticated, wantMsg: `unsupported token algorithm "PS256"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), tt.header)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("Verify() = %q, %v, want %q", got, err, tt.want)
				}
				return
			}
			var e *errs.Error
			if !errors.As(err, &e) {
				t.Fatalf("Verify() = %q, %v, want a %v error", got, err, tt.wantKind)
			}
			if e.Kind != tt.wantKind || e.Message != tt.wantMsg {
				t.Errorf("Verify() error = %v %q, want %v %q", e.Kind, e.Message, tt.wantKind, tt.wantMsg)
			}
			if got != "" {
				t.Errorf("Verify() principal = %q with an error, want empty", got)
			}
		})
	}
}

// tamper changes the token's subject while keeping its signature.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	json.Unmarshal(b, &c)
	c["sub"] = "mallory"
	b, _ = json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

func TestUnknownKidRefetchesKeys(t *testing.T) {
	ti := newTestIssuer(t)
	clock := testingclock.NewFakeClock(time.Now())
	v, err := NewVerifier(context.Background(), Config{IssuerURL: ti.srv.URL, Audience: testAudience, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": ti.srv.URL, "aud": testAudience, "sub": "alice", "exp": clock.Now().Add(time.Hour).Unix()}
	ctx := context.Background()
	if _, err := v.Verify(ctx, "Bearer "+sign(t, jose.RS256, "rsa-1", rsaKey, claims)); err != nil {
		t.Fatalf("Verify(known kid) = %v", err)
	}
	fetches := ti.jwksFetch.Load()

	// A rotated-in key is not cached yet: the verifier refetches, and
	// refuses the token while the issuer does not publish the key.
	clock.Step(minKeyRefetch)
	rotated := "Bearer " + sign(t, jose.RS256, "rsa-2", rsaOther, claims)
	if _, err := v.Verify(ctx, rotated); !errs.Is(err, errs.Unauthenticated) {
		t.Fatalf("Verify(unpublished kid) = %v, want UNAUTHENTICATED", err)
	}
	if got := ti.jwksFetch.Load() - fetches; got != 1 {
		t.Fatalf("JWKS fetches after an unknown kid = %d, want 1", got)
	}
	ti.addKey("rsa-2", jose.RS256, &rsaOther.PublicKey)
	clock.Step(minKeyRefetch)
	if got, err := v.Verify(ctx, rotated); err != nil || got != "alice" {
		t.Fatalf("Verify(rotated kid) = %q, %v, want alice", got, err)
	}
	// The old key still works and comes from the cache.
	fetches = ti.jwksFetch.Load()
	if _, err := v.Verify(ctx, "Bearer "+sign(t, jose.RS256, "rsa-1", rsaKey, claims)); err != nil {
		t.Fatalf("Verify(old kid) = %v", err)
	}
	if got := ti.jwksFetch.Load(); got != fetches {
		t.Errorf("JWKS fetches for a cached kid = %d, want %d", got, fetches)
	}
}

func TestLazyDiscovery(t *testing.T) {
	ti := newTestIssuer(t)
	ti.down.Store(true)
	clock := testingclock.NewFakeClock(time.Now())
	v, err := NewVerifier(context.Background(), Config{IssuerURL: ti.srv.URL, Audience: testAudience, Clock: clock})
	if err != nil {
		t.Fatalf("NewVerifier with the issuer down = %v, want success", err)
	}
	if got := ti.discovery.Load(); got != 0 {
		t.Errorf("discovery requests by NewVerifier = %d, want 0", got)
	}
	token := "Bearer " + sign(t, jose.ES256, "ec-1", ecKey, map[string]any{
		"iss": ti.srv.URL, "aud": testAudience, "sub": "alice", "exp": clock.Now().Add(time.Hour).Unix(),
	})
	ctx := context.Background()

	if _, err := v.Verify(ctx, token); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("Verify(issuer down) = %v, want UNAVAILABLE", err)
	}
	if got := ti.discovery.Load(); got != 1 {
		t.Fatalf("discovery requests = %d, want 1", got)
	}
	// Within the backoff the verifier does not hammer the issuer.
	ti.down.Store(false)
	if err := v.Ready(ctx); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("Ready(within backoff) = %v, want UNAVAILABLE", err)
	}
	if got := ti.discovery.Load(); got != 1 {
		t.Errorf("discovery requests within backoff = %d, want 1", got)
	}
	// Malformed tokens are refused without waiting for the issuer.
	if _, err := v.Verify(ctx, "Basic x"); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("Verify(Basic) = %v, want UNAUTHENTICATED", err)
	}

	clock.Step(minBackoff)
	if got, err := v.Verify(ctx, token); err != nil || got != "alice" {
		t.Fatalf("Verify(after backoff) = %q, %v, want alice", got, err)
	}
	if err := v.Ready(ctx); err != nil {
		t.Errorf("Ready() = %v, want nil", err)
	}
	if got := ti.discovery.Load(); got != 2 {
		t.Errorf("discovery requests = %d, want 2 (discovered once)", got)
	}
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	ti := newTestIssuer(t)
	// The document names ti.srv.URL; configuring a different spelling of
	// the issuer must not be accepted.
	v, err := NewVerifier(context.Background(), Config{IssuerURL: ti.srv.URL + "/", Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Ready(context.Background()); !errs.Is(err, errs.Unavailable) {
		t.Errorf("Ready() = %v, want UNAVAILABLE", err)
	}
}

func TestStaticVerifier(t *testing.T) {
	const iss = "https://issuer.example.test"
	v, err := NewStaticVerifier(Config{IssuerURL: iss, Audience: testAudience}, &ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": iss, "aud": testAudience, "sub": "carol", "exp": time.Now().Add(time.Hour).Unix()}
	tests := []struct {
		name     string
		token    string
		want     string
		wantKind errs.Kind
	}{
		{"its key", sign(t, jose.ES256, "any", ecKey, claims), "carol", 0},
		{"another key", sign(t, jose.RS256, "rsa-1", rsaKey, claims), "", errs.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), "Bearer "+tt.token)
			if got != tt.want || (tt.want == "" && !errs.Is(err, tt.wantKind)) {
				t.Errorf("Verify() = %q, %v, want %q (%v)", got, err, tt.want, tt.wantKind)
			}
		})
	}
	if _, err := NewStaticVerifier(Config{IssuerURL: iss, Audience: testAudience}); err == nil {
		t.Errorf("NewStaticVerifier(no keys) = nil error, want one")
	}
}

func TestNewVerifierConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"ok", Config{IssuerURL: "https://issuer.example.test", Audience: "a"}, false},
		{"http", Config{IssuerURL: "http://127.0.0.1:9", Audience: "a"}, false},
		{"no issuer", Config{Audience: "a"}, true},
		{"relative issuer", Config{IssuerURL: "issuer.example.test", Audience: "a"}, true},
		{"other scheme", Config{IssuerURL: "ftp://issuer.example.test", Audience: "a"}, true},
		{"no audience", Config{IssuerURL: "https://issuer.example.test"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewVerifier(context.Background(), tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Errorf("NewVerifier(%+v) = %v, want error %v", tt.cfg, err, tt.wantErr)
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	t := &testing.T{}
	ti := newTestIssuer(t)
	defer ti.srv.Close()
	v, err := NewVerifier(context.Background(), Config{IssuerURL: ti.srv.URL, Audience: testAudience})
	if err != nil {
		b.Fatal(err)
	}
	claims := map[string]any{"iss": ti.srv.URL, "aud": testAudience, "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	for _, bc := range []struct {
		name  string
		token string
	}{
		{"RS256", sign(t, jose.RS256, "rsa-1", rsaKey, claims)},
		{"ES256", sign(t, jose.ES256, "ec-1", ecKey, claims)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Verify(context.Background(), "Bearer "+bc.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A token naming a key the issuer never published (a forged kid) must not
// make every request fetch the issuer's key set: unknown kids refetch at
// most once per minKeyRefetch, and a key the issuer really rotated in is
// accepted once that interval has passed.
func TestForgedKidRefetchesAreRateLimited(t *testing.T) {
	ti := newTestIssuer(t)
	clock := testingclock.NewFakeClock(time.Now())
	v, err := NewVerifier(context.Background(), Config{IssuerURL: ti.srv.URL, Audience: testAudience, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": ti.srv.URL, "aud": testAudience, "sub": "alice", "exp": clock.Now().Add(time.Hour).Unix()}
	ctx := context.Background()
	if _, err := v.Verify(ctx, "Bearer "+sign(t, jose.RS256, "rsa-1", rsaKey, claims)); err != nil {
		t.Fatalf("Verify(known kid) = %v", err)
	}
	fetches := ti.jwksFetch.Load()

	for i := range 50 {
		forged := sign(t, jose.RS256, fmt.Sprintf("forged-%d", i), rsaOther, claims)
		if _, err := v.Verify(ctx, "Bearer "+forged); !errs.Is(err, errs.Unauthenticated) {
			t.Fatalf("Verify(forged kid) = %v, want UNAUTHENTICATED", err)
		}
	}
	if got := ti.jwksFetch.Load() - fetches; got > 1 {
		t.Errorf("JWKS fetches for 50 forged kids within %v = %d, want at most 1", minKeyRefetch, got)
	}

	// The issuer rotates in a key just after a forged kid caused a fetch:
	// it is accepted as soon as the interval allows another fetch.
	clock.Step(minKeyRefetch)
	if _, err := v.Verify(ctx, "Bearer "+sign(t, jose.RS256, "forged-x", rsaOther, claims)); !errs.Is(err, errs.Unauthenticated) {
		t.Fatalf("Verify(forged kid) = %v, want UNAUTHENTICATED", err)
	}
	ti.addKey("rsa-2", jose.RS256, &rsaOther.PublicKey)
	rotated := "Bearer " + sign(t, jose.RS256, "rsa-2", rsaOther, claims)
	if _, err := v.Verify(ctx, rotated); !errs.Is(err, errs.Unauthenticated) {
		t.Fatalf("Verify(rotated kid, within the interval) = %v, want UNAUTHENTICATED", err)
	}
	clock.Step(minKeyRefetch)
	fetches = ti.jwksFetch.Load()
	if got, err := v.Verify(ctx, rotated); err != nil || got != "alice" {
		t.Fatalf("Verify(rotated kid, after the interval) = %q, %v, want alice", got, err)
	}
	if got := ti.jwksFetch.Load() - fetches; got != 1 {
		t.Errorf("JWKS fetches to learn the rotated key = %d, want 1", got)
	}
}
