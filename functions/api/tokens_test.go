package api_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// claimsFor returns valid claims for sub, for the harness's issuer and the
// API's audience.
func claimsFor(sub string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": h.url, "sub": sub, "aud": audience,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// signJWT signs claims with key under kid.
func signJWT(t *testing.T, alg jose.SignatureAlgorithm, kid string, key any, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatalf("CompactSerialize: %v", err)
	}
	return tok
}

// rawJWT builds a token by hand from a header, claims and a signature
// function over the signing input.
func rawJWT(t *testing.T, header, claims map[string]any, sign func(input string) []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign(input))
}

func except(claims map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range claims {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// withIssuerClock mints a development token with the issuer's clock moved
// by d.
func withIssuerClock(t *testing.T, d time.Duration, sub string, ttl time.Duration) string {
	t.Helper()
	h.clockOffset.Store(int64(d))
	defer h.clockOffset.Store(0)
	tok, err := h.issuer.Token(sub, audience, ttl)
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	return tok
}

// TestTokens checks API.md §3's authentication: only a well-signed RS256
// or ES256 token of the issuer, for the API, in its validity, is accepted.
func TestTokens(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	body := obj{"tenantId": tn.ID, "clusterId": c.ID}

	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, err := x509.MarshalPKIXPublicKey(h.rsaKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: rsaDER})
	hs256 := func(key []byte) func(string) []byte {
		return func(input string) []byte {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(input))
			return m.Sum(nil)
		}
	}
	tamper := func(tok string) string {
		parts := strings.Split(tok, ".")
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			t.Fatal(err)
		}
		sig[len(sig)/2] ^= 0x01
		return parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	good := claimsFor(viewer)

	tests := []struct {
		name          string
		authorization string
		ok            bool
	}{
		{"development issuer", "Bearer " + token(t, viewer), true},
		{"scheme in lower case", "bearer " + token(t, viewer), true},
		{"ES256 key of the issuer", "Bearer " + signJWT(t, jose.ES256, "test-es", h.ecKey, good), true},
		{"RS256 key of the issuer", "Bearer " + signJWT(t, jose.RS256, "test-rs", h.rsaKey, good), true},
		{"missing", "", false},
		{"empty bearer", "Bearer ", false},
		{"basic scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("bob:secret")), false},
		{"token without scheme", token(t, viewer), false},
		{"not a JWT", "Bearer not-a-jwt", false},
		{"two parts", "Bearer a.b", false},
		{"garbage parts", "Bearer a.b.c", false},
		{"oversized", "Bearer " + repeat("a", 17<<10), false},
		{"expired", "Bearer " + withIssuerClock(t, -2*time.Hour, viewer, time.Hour), false},
		{"not yet valid", "Bearer " + withIssuerClock(t, 2*time.Hour, viewer, time.Hour), false},
		{"expired, own key", "Bearer " + signJWT(t, jose.ES256, "test-es", h.ecKey, except(good, "exp", time.Now().Add(-2*time.Minute).Unix(), "nbf", time.Now().Add(-time.Hour).Unix())), false},
		{"wrong audience", "Bearer " + mustToken(t, viewer, "https://other.example"), false},
		{"wrong audience, own key", "Bearer " + signJWT(t, jose.ES256, "test-es", h.ecKey, except(good, "aud", "https://other.example")), false},
		{"wrong issuer", "Bearer " + signJWT(t, jose.ES256, "test-es", h.ecKey, except(good, "iss", "https://evil.example")), false},
		{"no subject", "Bearer " + signJWT(t, jose.ES256, "test-es", h.ecKey, except(good, "sub", nil)), false},
		{"no expiry", "Bearer " + signJWT(t, jose.ES256, "test-es", h.ecKey, except(good, "exp", nil)), false},
		{"bad signature", "Bearer " + tamper(token(t, viewer)), false},
		{"bad signature, RS256", "Bearer " + tamper(signJWT(t, jose.RS256, "test-rs", h.rsaKey, good)), false},
		{"claims changed after signing", "Bearer " + swapClaims(t, token(t, viewer), except(good, "sub", admin)), false},
		{"signed by another key under a known kid", "Bearer " + signJWT(t, jose.ES256, "test-es", stranger, good), false},
		{"unknown kid", "Bearer " + signJWT(t, jose.ES256, "unknown-kid", stranger, good), false},
		{"alg none", "Bearer " + rawJWT(t, map[string]any{"alg": "none", "typ": "JWT"}, good, func(string) []byte { return nil }), false},
		{"alg None", "Bearer " + rawJWT(t, map[string]any{"alg": "None", "typ": "JWT"}, good, func(string) []byte { return nil }), false},
		{"HS256 with the public key (PEM)", "Bearer " + rawJWT(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": "test-rs"}, good, hs256(rsaPEM)), false},
		{"HS256 with the public key (DER)", "Bearer " + rawJWT(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": "test-rs"}, good, hs256(rsaDER)), false},
		{"PS256", "Bearer " + signJWT(t, jose.PS256, "test-rs", h.rsaKey, good), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, http.MethodPost, "kubernetesNodePools/list", tc.authorization, body, nil)
			if tc.ok {
				if r.Status != http.StatusOK {
					t.Fatalf("answer %v, want 200", r)
				}
				return
			}
			wantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		})
	}
	// Every method checks the token.
	for _, m := range []string{
		"kubernetesNodePools/create", "kubernetesNodePools/list", "kubernetesNodePools/update", "kubernetesNodePools/delete",
		"kubernetesClusters/create", "kubernetesClusters/get", "kubernetesClusters/list", "kubernetesClusters/delete",
	} {
		t.Run("expired on "+m, func(t *testing.T) {
			tok := withIssuerClock(t, -2*time.Hour, admin, time.Hour)
			r := do(t, http.MethodPost, m, "Bearer "+tok, methodBody(m, target{tenantID: tn.ID, poolID: tn.Pool, clusterID: c.ID, nodePoolID: unknownNodePool()}, 0), nil)
			wantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		})
	}
}

func mustToken(t *testing.T, sub, aud string) string {
	t.Helper()
	tok, err := h.issuer.Token(sub, aud, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// swapClaims replaces the payload of a signed token, keeping its header and
// signature.
func swapClaims(t *testing.T, tok string, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}
