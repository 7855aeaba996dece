package devissuer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/wait"
)

const audience = "https://compute.example.test"

func start(t *testing.T, opts ...devissuer.Option) (*devissuer.Server, *auth.Verifier) {
	t.Helper()
	srv, err := devissuer.Start("127.0.0.1:0", append([]devissuer.Option{devissuer.WithAudience(audience)}, opts...)...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	v, err := auth.NewVerifier(context.Background(), auth.Config{IssuerURL: srv.URL(), Audience: audience})
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return srv, v
}

func TestTokensVerifyThroughAuth(t *testing.T) {
	for _, alg := range []string{"ES256", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			srv, v := start(t, devissuer.WithAlgorithm(alg))
			tok, err := srv.Token("alice", audience, time.Minute)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			if got, err := v.Verify(context.Background(), "Bearer "+tok); err != nil || got != "alice" {
				t.Errorf("Verify(%s token) = %q, %v, want alice", alg, got, err)
			}
		})
	}
}

func TestTokenRefusals(t *testing.T) {
	srv, v := start(t)
	other, _ := start(t)
	ctx := context.Background()
	mint := func(iss *devissuer.Server, sub, aud string) string {
		tok, err := iss.Token(sub, aud, time.Minute)
		if err != nil {
			t.Fatalf("Token: %v", err)
		}
		return tok
	}
	tests := []struct {
		name  string
		token string
	}{
		{"wrong audience", mint(srv, "alice", "https://other.example.test")},
		{"another issuer", mint(other, "alice", audience)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := v.Verify(ctx, "Bearer "+tt.token); !errs.Is(err, errs.Unauthenticated) {
				t.Errorf("Verify() = %q, %v, want UNAUTHENTICATED", got, err)
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	iss, err := devissuer.New("https://issuer.example.test", devissuer.WithClock(testingclock.NewFakePassiveClock(now)))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Token("alice", audience, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		at   time.Time
		want errs.Kind // -1: valid
	}{
		{now, -1},
		{now.Add(9 * time.Minute), -1},
		{now.Add(time.Hour), errs.Unauthenticated},
		{now.Add(-time.Hour), errs.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.at.Format(time.RFC3339), func(t *testing.T) {
			v, err := auth.NewStaticVerifier(auth.Config{
				IssuerURL: iss.URL(), Audience: audience, Clock: testingclock.NewFakePassiveClock(tt.at),
			}, iss.PublicKey())
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(context.Background(), "Bearer "+tok)
			if (tt.want == -1) != (err == nil) || (err != nil && !errs.Is(err, tt.want)) {
				t.Errorf("Verify() at %v = %v, want kind %v", tt.at, err, tt.want)
			}
		})
	}
}

func TestRotate(t *testing.T) {
	srv, v := start(t)
	ctx := context.Background()
	before, _ := srv.Token("alice", audience, time.Minute)
	if _, err := v.Verify(ctx, "Bearer "+before); err != nil {
		t.Fatalf("Verify(before rotation) = %v", err)
	}
	oldKid := srv.KeyID()
	if err := srv.Rotate(); err != nil {
		t.Fatal(err)
	}
	if srv.KeyID() == oldKid {
		t.Fatalf("KeyID() after Rotate = %q, want a new one", oldKid)
	}
	after, _ := srv.Token("bob", audience, time.Minute)
	// The verifier refetches the key set for the new kid; go-oidc may answer
	// a refetch that closely follows the previous fetch with that fetch's
	// keys, so the new key can take another attempt to be seen.
	wait.For(t, "the rotated key's token verified", func() (bool, string) {
		_, err := v.Verify(ctx, "Bearer "+after)
		return err == nil, fmt.Sprintf("Verify = %v", err)
	})
	if _, err := v.Verify(ctx, "Bearer "+before); err != nil {
		t.Errorf("Verify(token of the old key) = %v", err)
	}
}

func TestHandlerUnderPath(t *testing.T) {
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	iss, err := devissuer.New(ts.URL+"/issuer", devissuer.WithAudience(audience))
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/issuer/", iss.Handler())

	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/issuer" + devissuer.DiscoveryPath, http.StatusOK},
		{http.MethodGet, "/issuer" + devissuer.JWKSPath, http.StatusOK},
		{http.MethodHead, "/issuer" + devissuer.JWKSPath, http.StatusOK},
		{http.MethodPost, "/issuer" + devissuer.JWKSPath, http.StatusMethodNotAllowed},
		{http.MethodGet, "/issuer/other", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}

	v, err := auth.NewVerifier(context.Background(), auth.Config{IssuerURL: iss.URL(), Audience: audience})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := iss.Token("carol", audience, time.Minute)
	if got, err := v.Verify(context.Background(), "Bearer "+tok); err != nil || got != "carol" {
		t.Errorf("Verify() = %q, %v, want carol", got, err)
	}
}

func TestTokenHandler(t *testing.T) {
	srv, v := start(t)
	type errBody struct {
		Error struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Details []errs.FieldError `json:"details"`
		} `json:"error"`
	}
	tests := []struct {
		name       string
		method     string
		body       string
		wantStatus int
		wantSub    string
		wantFields []string
	}{
		{"sub only", http.MethodPost, `{"sub": "alice"}`, http.StatusOK, "alice", nil},
		{"with aud and ttl", http.MethodPost, `{"sub": "bob", "aud": "` + audience + `", "ttl": "5m"}`, http.StatusOK, "bob", nil},
		{"missing sub", http.MethodPost, `{}`, http.StatusBadRequest, "", []string{"sub"}},
		{"blank sub and bad ttl", http.MethodPost, `{"sub": " ", "ttl": "forever"}`, http.StatusBadRequest, "", []string{"sub", "ttl"}},
		{"ttl too long", http.MethodPost, `{"sub": "a", "ttl": "48h"}`, http.StatusBadRequest, "", []string{"ttl"}},
		{"negative ttl", http.MethodPost, `{"sub": "a", "ttl": "-1m"}`, http.StatusBadRequest, "", []string{"ttl"}},
		{"unknown field", http.MethodPost, `{"sub": "a", "role": "admin"}`, http.StatusBadRequest, "", []string{"role"}},
		{"malformed JSON", http.MethodPost, `{"sub": `, http.StatusBadRequest, "", nil},
		{"trailing data", http.MethodPost, `{"sub": "a"} {}`, http.StatusBadRequest, "", nil},
		{"not an object", http.MethodPost, `["a"]`, http.StatusBadRequest, "", nil},
		{"oversized", http.MethodPost, `{"sub": "` + strings.Repeat("a", 1<<20) + `"}`, http.StatusRequestEntityTooLarge, "", nil},
		{"GET", http.MethodGet, ``, http.StatusMethodNotAllowed, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL()+devissuer.TokenPath, bytes.NewBufferString(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("POST %s = %d, want %d", tt.body, resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusOK {
				var got devissuer.TokenResponse
				if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
					t.Fatal(err)
				}
				if sub, err := v.Verify(context.Background(), "Bearer "+got.Token); err != nil || sub != tt.wantSub {
					t.Errorf("Verify(minted) = %q, %v, want %q", sub, err, tt.wantSub)
				}
				return
			}
			var got errBody
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("error body: %v", err)
			}
			if got.Error.Code != "INVALID_INPUT" || got.Error.Message == "" {
				t.Errorf("error = %+v, want code INVALID_INPUT with a message", got.Error)
			}
			var fields []string
			for _, d := range got.Error.Details {
				fields = append(fields, d.Field)
			}
			if !reflect.DeepEqual(fields, tt.wantFields) {
				t.Errorf("details fields = %v, want %v", fields, tt.wantFields)
			}
		})
	}
}

func TestNewRefusals(t *testing.T) {
	tests := []struct {
		name string
		url  string
		opts []devissuer.Option
	}{
		{"relative URL", "issuer", nil},
		{"query", "http://127.0.0.1:1/?x=1", nil},
		{"HS256", "http://127.0.0.1:1", []devissuer.Option{devissuer.WithAlgorithm("HS256")}},
		{"zero TTL", "http://127.0.0.1:1", []devissuer.Option{devissuer.WithTTL(0)}},
		{"empty audience", "http://127.0.0.1:1", []devissuer.Option{devissuer.WithAudience("")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := devissuer.New(tt.url, tt.opts...); err == nil {
				t.Errorf("New(%q) = nil error, want one", tt.url)
			}
		})
	}
	iss, err := devissuer.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sub, aud string
		ttl      time.Duration
	}{{"", "a", time.Minute}, {"s", "", time.Minute}, {"s", "a", 0}} {
		if _, err := iss.Token(c.sub, c.aud, c.ttl); err == nil {
			t.Errorf("Token(%q, %q, %v) = nil error, want one", c.sub, c.aud, c.ttl)
		}
	}
}

func BenchmarkToken(b *testing.B) {
	iss, err := devissuer.New("http://127.0.0.1:1")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := iss.Token("alice", audience, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// TestServiceAccountToken: a service account's token looks like Google's
// (a numeric subject, the account as a verified email), which is what
// the internal functions' authenticator admits; a token of /dev/token
// for the account's address as its subject is not admitted.
func TestServiceAccountToken(t *testing.T) {
	srv, v := start(t)
	const account = "tasks@bc-dev.iam.gserviceaccount.com"
	tok, err := srv.ServiceAccountToken(account, audience, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Identify(context.Background(), "Bearer "+tok)
	if err != nil {
		t.Fatalf("Identify = %v", err)
	}
	if want := devissuer.ServiceAccountID(account); id.Subject != want || len(want) != 21 || strings.Trim(want, "0123456789") != "" {
		t.Errorf("subject = %q, want the account's 21-digit ID %q", id.Subject, want)
	}
	if id.Email != account {
		t.Errorf("email = %q, want %q verified", id.Email, account)
	}
	sa, err := auth.NewServiceAccount(v, account)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Verify(context.Background(), "Bearer "+tok); err != nil {
		t.Errorf("the account's authenticator refuses its token: %v", err)
	}
	posed, err := srv.Token(account, audience, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Verify(context.Background(), "Bearer "+posed); !errs.Is(err, errs.PermissionDenied) {
		t.Errorf("a token whose subject is the account's address = %v, want PERMISSION_DENIED", err)
	}
	if _, err := srv.ServiceAccountToken("tasks", audience, time.Minute); err == nil {
		t.Error("ServiceAccountToken(\"tasks\") = nil error, want one")
	}
	if a, b := devissuer.ServiceAccountID(account), devissuer.ServiceAccountID("scheduler@bc-dev.iam.gserviceaccount.com"); a == b {
		t.Errorf("two accounts share the ID %s", a)
	}
}
