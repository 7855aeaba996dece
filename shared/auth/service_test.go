package auth

import (
	"context"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/better-compute/kubernetes/shared/errs"
)

// TestServiceAccount: an internal function's authenticator admits the
// verified email of its one service account, as Google's OIDC tokens
// carry it, and nobody else: a token without a verified email (a
// tenant's) or of another account is 403, a token the verifier refuses
// 401.
func TestServiceAccount(t *testing.T) {
	const iss = "https://accounts.example.test"
	const account = "tasks@bc-test.iam.gserviceaccount.com"
	v, err := NewStaticVerifier(Config{IssuerURL: iss, Audience: testAudience}, &ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := NewServiceAccount(v, account)
	if err != nil {
		t.Fatal(err)
	}
	token := func(extra map[string]any) string {
		c := map[string]any{"iss": iss, "aud": testAudience, "sub": "112233445566778899001", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range extra {
			c[k] = v
		}
		return "Bearer " + sign(t, jose.ES256, "k", ecKey, c)
	}
	tests := []struct {
		name     string
		auth     string
		wantKind errs.Kind // 0: admitted
	}{
		{"the account", token(map[string]any{"email": account, "email_verified": true}), 0},
		{"email_verified as a string", token(map[string]any{"email": account, "email_verified": "true"}), 0},
		{"the account in capitals", token(map[string]any{"email": "Tasks@BC-Test.iam.gserviceaccount.com", "email_verified": true}), 0},
		{"email not verified", token(map[string]any{"email": account, "email_verified": false}), errs.PermissionDenied},
		{"email_verified missing", token(map[string]any{"email": account}), errs.PermissionDenied},
		{"a tenant's token", token(map[string]any{"sub": "alice"}), errs.PermissionDenied},
		{"the account as the subject only", token(map[string]any{"sub": account}), errs.PermissionDenied},
		{"another account", token(map[string]any{"email": "scheduler@bc-test.iam.gserviceaccount.com", "email_verified": true}), errs.PermissionDenied},
		{"another audience", token(map[string]any{"aud": "https://other.example.test", "email": account, "email_verified": true}), errs.Unauthenticated},
		{"no token", "", errs.Unauthenticated},
		{"malformed", "Bearer not-a-jwt", errs.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sa.Verify(context.Background(), tt.auth)
			switch {
			case tt.wantKind == 0 && (err != nil || got != account && got != "Tasks@BC-Test.iam.gserviceaccount.com"):
				t.Errorf("Verify = %q, %v, want the account", got, err)
			case tt.wantKind != 0 && (got != "" || !errs.Is(err, tt.wantKind)):
				t.Errorf("Verify = %q, %v, want %v", got, err, tt.wantKind)
			}
		})
	}
	if _, err := NewServiceAccount(v, "tasks"); err == nil {
		t.Error("NewServiceAccount(\"tasks\") = nil error, want one: no service account email")
	}
	if _, err := NewServiceAccount(nil, account); err == nil {
		t.Error("NewServiceAccount(nil verifier) = nil error, want one")
	}
}
