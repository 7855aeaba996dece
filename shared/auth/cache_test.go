package auth

import (
	"context"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

// A remembered token is still checked for expiry on every use, and is
// forgotten after cacheTTL.
func TestCachedTokenStillExpires(t *testing.T) {
	const iss = "https://issuer.example.test"
	clock := testingclock.NewFakeClock(time.Now())
	v, err := NewStaticVerifier(Config{IssuerURL: iss, Audience: testAudience, Clock: clock, ClockSkew: -1}, &ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jose.ES256, "ec-1", ecKey, map[string]any{"iss": iss, "aud": testAudience, "sub": "dave", "exp": clock.Now().Add(time.Minute).Unix()})
	if got, err := v.Verify(context.Background(), "Bearer "+tok); err != nil || got != "dave" {
		t.Fatalf("Verify() = %q, %v, want dave", got, err)
	}
	if _, ok := v.cache.get(tok, clock.Now()); !ok {
		t.Fatalf("token not remembered after a successful Verify")
	}
	clock.Step(2 * time.Minute)
	if _, err := v.Verify(context.Background(), "Bearer "+tok); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("Verify(expired, cached) = %v, want UNAUTHENTICATED", err)
	}
	if _, ok := v.cache.get(tok, clock.Now().Add(cacheTTL)); ok {
		t.Errorf("token remembered past cacheTTL")
	}
}
