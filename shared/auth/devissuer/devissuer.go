// Package devissuer is a development OpenID Connect token issuer: it signs
// JWTs with a key generated at start and publishes that key the way a real
// issuer does (discovery document and JWKS), so that the functions verify
// its tokens through shared/auth exactly as they verify production ones.
//
// It is for the devstack (POST /dev/token) and for emulators that mint
// tokens (the Cloud Tasks emulator's OIDC tokens); a deployed function never
// serves it. Differences from a real issuer: anyone who can reach
// TokenHandler gets a token for any subject; keys live in memory, unless the
// caller keeps the signing key (Key, MarshalKey) and gives it back to the
// next issuer (WithKey, ParseKey), as the devstack does in its -data file
// so that tokens stay valid across its restarts; there is no authorization
// endpoint, no refresh and no revocation.
package devissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/utils/clock"
)

// Paths of the issuer's documents, under the issuer URL's path.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
)

// TokenPath is where the devstack mounts TokenHandler (API.md §8).
const TokenPath = "/dev/token"

// Limits of tokens minted through TokenHandler.
const (
	DefaultTTL = time.Hour
	MaxTTL     = 24 * time.Hour
)

type options struct {
	alg      jose.SignatureAlgorithm
	audience string
	ttl      time.Duration
	now      func() time.Time
	key      crypto.Signer
}

// Option configures New.
type Option func(*options)

// WithAlgorithm makes the issuer sign with "ES256" (the default) or "RS256".
func WithAlgorithm(alg string) Option {
	return func(o *options) { o.alg = jose.SignatureAlgorithm(alg) }
}

// WithAudience sets the audience of tokens minted by TokenHandler when the
// request names none; by default it is the issuer URL. It must match the
// Audience the functions' verifier is configured with.
func WithAudience(aud string) Option { return func(o *options) { o.audience = aud } }

// WithTTL sets the lifetime of tokens minted by TokenHandler when the
// request names none (default DefaultTTL).
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.ttl = ttl } }

// WithClock sets the clock used for iat, nbf and exp; nil (the default)
// means the real one.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) {
		if c != nil {
			o.now = c.Now
		}
	}
}

// WithKey makes the issuer sign with key rather than a fresh one: an
// *ecdsa.PrivateKey on P-256 for ES256, an *rsa.PrivateKey for RS256. Given
// the Key of an earlier issuer with the same URL, it publishes the same
// key under the same kid, so the tokens that issuer signed keep verifying.
func WithKey(key crypto.Signer) Option { return func(o *options) { o.key = key } }

// Issuer signs tokens and serves its public keys. It is safe for concurrent
// use.
type Issuer struct {
	url       string
	basePath  string
	alg       jose.SignatureAlgorithm
	audience  string
	ttl       time.Duration
	now       func() time.Time
	discovery []byte // the discovery document, fixed for the issuer's life

	mu     sync.Mutex // guards the fields below
	signer jose.Signer
	key    crypto.Signer     // current private key
	keys   []jose.JSONWebKey // published public keys, current last
}

// New returns an issuer whose tokens carry iss = issuerURL, with a fresh
// key unless WithKey gives one. issuerURL is the URL at which Handler will be reachable (for a
// listener on 127.0.0.1:0, bind it first and pass "http://" + its address);
// a path in it prefixes DiscoveryPath and JWKSPath.
func New(issuerURL string, opts ...Option) (*Issuer, error) {
	u, err := url.Parse(issuerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("devissuer: issuer URL %q is not an http(s) URL without query", issuerURL)
	}
	o := options{alg: jose.ES256, audience: issuerURL, ttl: DefaultTTL, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.alg != jose.ES256 && o.alg != jose.RS256 {
		return nil, fmt.Errorf("devissuer: algorithm %q: want ES256 or RS256", o.alg)
	}
	if o.ttl <= 0 || o.ttl > MaxTTL {
		return nil, fmt.Errorf("devissuer: default TTL %v out of (0, %v]", o.ttl, MaxTTL)
	}
	if o.audience == "" {
		return nil, errors.New("devissuer: empty default audience")
	}
	i := &Issuer{
		url:      issuerURL,
		basePath: strings.TrimSuffix(u.Path, "/"),
		alg:      o.alg,
		audience: o.audience,
		ttl:      o.ttl,
		now:      o.now,
	}
	base := strings.TrimSuffix(issuerURL, "/")
	i.discovery, err = json.Marshal(map[string]any{
		"issuer":                                issuerURL,
		"jwks_uri":                              base + JWKSPath,
		"token_endpoint":                        base + TokenPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(o.alg)},
	})
	if err != nil {
		return nil, fmt.Errorf("devissuer: discovery document: %w", err)
	}
	key := o.key
	if key == nil {
		if key, err = i.generate(); err != nil {
			return nil, err
		}
	}
	if err := i.use(key); err != nil {
		return nil, err
	}
	return i, nil
}

// URL returns the issuer URL, the `iss` of its tokens.
func (i *Issuer) URL() string { return i.url }

// Audience returns the audience TokenHandler uses when a request names none.
func (i *Issuer) Audience() string { return i.audience }

// Rotate generates a new signing key and publishes it next to the old
// ones: tokens signed before keep verifying, later ones carry the new kid
// (a verifier must refetch the key set to accept them).
func (i *Issuer) Rotate() error {
	key, err := i.generate()
	if err != nil {
		return err
	}
	return i.use(key)
}

// generate returns a fresh key for the issuer's algorithm.
func (i *Issuer) generate() (crypto.Signer, error) {
	var (
		key crypto.Signer
		err error
	)
	switch i.alg {
	case jose.RS256:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, fmt.Errorf("devissuer: generate %s key: %w", i.alg, err)
	}
	return key, nil
}

// use makes key the signing key and publishes it next to the earlier ones.
func (i *Issuer) use(key crypto.Signer) error {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if i.alg != jose.ES256 || k.Curve != elliptic.P256() {
			return fmt.Errorf("devissuer: an ECDSA key on %s cannot sign %s", k.Curve.Params().Name, i.alg)
		}
	case *rsa.PrivateKey:
		if i.alg != jose.RS256 || k.N.BitLen() < 2048 {
			return fmt.Errorf("devissuer: a %d-bit RSA key cannot sign %s", k.N.BitLen(), i.alg)
		}
	default:
		return fmt.Errorf("devissuer: a %T cannot sign %s", key, i.alg)
	}
	pub := jose.JSONWebKey{Key: key.Public(), Algorithm: string(i.alg), Use: "sig"}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return fmt.Errorf("devissuer: key thumbprint: %w", err)
	}
	// The RFC 7638 thumbprint names the key without any state to keep.
	pub.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: i.alg, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", pub.KeyID))
	if err != nil {
		return fmt.Errorf("devissuer: signer: %w", err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.signer, i.key = signer, key
	i.keys = append(i.keys, pub)
	return nil
}

// Key returns the current signing key, for WithKey.
func (i *Issuer) Key() crypto.Signer {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.key
}

// MarshalKey encodes a signing key as PEM (PKCS #8), for ParseKey.
func MarshalKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("devissuer: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKey decodes a key written by MarshalKey.
func ParseKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("devissuer: parse key: not a PEM PRIVATE KEY")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devissuer: parse key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("devissuer: parse key: a %T cannot sign", k)
	}
	return signer, nil
}

// PublicKey returns the current signing key's public half (for
// auth.NewStaticVerifier).
func (i *Issuer) PublicKey() crypto.PublicKey {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.key.Public()
}

// KeyID returns the kid of the current signing key.
func (i *Issuer) KeyID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys[len(i.keys)-1].KeyID
}

// Token returns a signed JWT for subject sub and audience, valid from now
// for ttl: iss, sub, aud, iat, nbf, exp and a random jti.
func (i *Issuer) Token(sub, audience string, ttl time.Duration) (string, error) {
	return i.TokenWithClaims(sub, audience, ttl, nil)
}

// TokenWithClaims is Token with extra claims (an "email" for a service
// account's OIDC token, for instance). Extra claims cannot override the
// registered ones.
func (i *Issuer) TokenWithClaims(sub, audience string, ttl time.Duration, extra map[string]any) (string, error) {
	switch {
	case sub == "":
		return "", errors.New("devissuer: empty subject")
	case audience == "":
		return "", errors.New("devissuer: empty audience")
	case ttl <= 0:
		return "", fmt.Errorf("devissuer: ttl %v is not positive", ttl)
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", fmt.Errorf("devissuer: jti: %w", err)
	}
	now := i.now()
	claims := make(map[string]any, len(extra)+7)
	for k, v := range extra {
		claims[k] = v
	}
	claims["iss"] = i.url
	claims["sub"] = sub
	claims["aud"] = audience
	claims["iat"] = now.Unix()
	claims["nbf"] = now.Unix()
	claims["exp"] = now.Add(ttl).Unix()
	claims["jti"] = hex.EncodeToString(jti)
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("devissuer: claims: %w", err)
	}
	i.mu.Lock()
	signer := i.signer
	i.mu.Unlock()
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("devissuer: sign: %w", err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("devissuer: serialize: %w", err)
	}
	return tok, nil
}

// ServiceAccountToken returns an OIDC token of the service account
// account for audience, valid from now for ttl, shaped as Google's are
// when Cloud Tasks, Cloud Scheduler or a Pub/Sub push subscription call
// with one: the subject and azp are the account's numeric unique ID
// (ServiceAccountID), and the account is the email claim, with
// email_verified true. The functions' internal authenticators look at the
// email (auth.ServiceAccount), which POST /dev/token never sets.
func (i *Issuer) ServiceAccountToken(account, audience string, ttl time.Duration) (string, error) {
	if !strings.Contains(account, "@") {
		return "", fmt.Errorf("devissuer: %q is not a service account email", account)
	}
	id := ServiceAccountID(account)
	return i.TokenWithClaims(id, audience, ttl, map[string]any{"azp": id, "email": account, "email_verified": true})
}

// ServiceAccountID is the development stand-in for a service account's
// unique ID: 21 decimal digits, as Google's are, derived from the email so
// that an account keeps its ID across restarts.
func ServiceAccountID(account string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(account)))
	id := make([]byte, 21)
	id[0] = '1'
	for k := 1; k < len(id); k++ {
		id[k] = '0' + sum[k]%10
	}
	return string(id)
}

// Handler serves the discovery document at the issuer URL's path +
// DiscoveryPath and the key set at + JWKSPath (GET or HEAD); anything else
// is 404. Mount it at the root of the server whose URL the issuer has.
func (i *Issuer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		switch r.URL.Path {
		case i.basePath + DiscoveryPath:
			body = i.discovery
		case i.basePath + JWKSPath:
			i.mu.Lock()
			b, err := json.Marshal(jose.JSONWebKeySet{Keys: i.keys})
			i.mu.Unlock()
			if err != nil {
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
			body = b
		default:
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		// Keys can rotate; verifiers refetch on an unknown kid anyway.
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	})
}
