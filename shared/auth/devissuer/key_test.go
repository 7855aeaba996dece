package devissuer_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
)

// TestKeyAcrossRestarts restarts an issuer on the same address with the
// key of the first: a token of the first verifies through the second,
// for a verifier that knew the first and for a new one.
func TestKeyAcrossRestarts(t *testing.T) {
	for _, alg := range []string{"ES256", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			ctx := context.Background()
			first, v := start(t, devissuer.WithAlgorithm(alg))
			tok, err := first.Token("alice", audience, time.Minute)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			if _, err := v.Verify(ctx, "Bearer "+tok); err != nil {
				t.Fatalf("Verify before the restart: %v", err)
			}
			pemKey, err := devissuer.MarshalKey(first.Key())
			if err != nil {
				t.Fatalf("MarshalKey: %v", err)
			}
			addr := strings.TrimPrefix(first.URL(), "http://")
			first.Close()

			key, err := devissuer.ParseKey(pemKey)
			if err != nil {
				t.Fatalf("ParseKey: %v", err)
			}
			second, err := devissuer.Start(addr, devissuer.WithAudience(audience), devissuer.WithAlgorithm(alg), devissuer.WithKey(key))
			if err != nil {
				t.Fatalf("Start again on %s: %v", addr, err)
			}
			t.Cleanup(func() { second.Close() })
			if second.KeyID() != first.KeyID() {
				t.Errorf("KeyID after the restart = %q, want the first's %q", second.KeyID(), first.KeyID())
			}
			fresh, err := auth.NewVerifier(ctx, auth.Config{IssuerURL: second.URL(), Audience: audience})
			if err != nil {
				t.Fatalf("NewVerifier: %v", err)
			}
			for name, v := range map[string]*auth.Verifier{"the first's verifier": v, "a new verifier": fresh} {
				if got, err := v.Verify(ctx, "Bearer "+tok); err != nil || got != "alice" {
					t.Errorf("%s: Verify(token signed before the restart) = %q, %v, want alice", name, got, err)
				}
			}
		})
	}
}

func TestKeyRefusals(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	tests := []struct {
		name string
		opts []devissuer.Option
	}{
		{"P-384 key", []devissuer.Option{devissuer.WithKey(p384)}},
		{"ECDSA key for RS256", []devissuer.Option{devissuer.WithAlgorithm("RS256"), devissuer.WithKey(p256)}},
		{"1024-bit RSA key", []devissuer.Option{devissuer.WithAlgorithm("RS256"), devissuer.WithKey(small)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := devissuer.New("http://127.0.0.1:1", tt.opts...); err == nil {
				t.Errorf("New with a %s = nil error, want one", tt.name)
			}
		})
	}
	for _, bad := range []string{"", "not PEM", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"} {
		if _, err := devissuer.ParseKey([]byte(bad)); err == nil {
			t.Errorf("ParseKey(%q) = nil error, want one", bad)
		}
	}
}
