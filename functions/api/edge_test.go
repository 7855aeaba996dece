package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestEdge checks, over a real connection, what a careful HTTP client
// notices at the edge: the token comes before the body (API.md §3), a 401
// names the Bearer scheme (RFC 6750 §3), and a body must be declared JSON
// (API.md §1).
func TestEdge(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	valid := `{"tenantId":"` + tn.ID + `","clusterId":"` + c.ID + `"}`
	big := `{"tenantId":"` + tn.ID + `","pad":"` + strings.Repeat("x", 2<<20) + `"}`
	good := "Bearer " + token(t, admin)
	const method = "kubernetesNodePools/list"
	tests := []struct {
		name          string
		authorization string
		contentType   []string // nil: no Content-Type header
		body          string
		wantStatus    int
		wantCode      string
		wantChallenge string // WWW-Authenticate
	}{
		{"ok", good, []string{"application/json"}, valid, 200, "", ""},
		{"charset", good, []string{"application/json; charset=utf-8"}, valid, 200, "", ""},
		{"no token", "", []string{"application/json"}, valid, 401, "UNAUTHENTICATED", "Bearer"},
		{"bad token", "Bearer not.a.token", []string{"application/json"}, valid, 401, "UNAUTHENTICATED", `Bearer error="invalid_token"`},
		{"no token, over 1 MiB", "", []string{"application/json"}, big, 401, "UNAUTHENTICATED", "Bearer"},
		{"bad token, over 1 MiB", "Bearer not.a.token", []string{"application/json"}, big, 401, "UNAUTHENTICATED", `Bearer error="invalid_token"`},
		{"no token, not JSON", "", []string{"text/plain"}, valid, 401, "UNAUTHENTICATED", "Bearer"},
		{"over 1 MiB", good, []string{"application/json"}, big, 413, "INVALID_INPUT", ""},
		{"no Content-Type", good, nil, valid, 415, "INVALID_INPUT", ""},
		{"form, as curl -d sends", good, []string{"application/x-www-form-urlencoded"}, valid, 415, "INVALID_INPUT", ""},
		{"form, not JSON", good, []string{"application/x-www-form-urlencoded"}, "tenantId=" + tn.ID, 415, "INVALID_INPUT", ""},
		{"text", good, []string{"text/plain"}, valid, 415, "INVALID_INPUT", ""},
		{"form, over 1 MiB", good, []string{"application/x-www-form-urlencoded"}, big, 415, "INVALID_INPUT", ""},
		{"no token, form", "", []string{"application/x-www-form-urlencoded"}, valid, 401, "UNAUTHENTICATED", "Bearer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, http.MethodPost, method, tt.authorization, tt.body, http.Header{"Content-Type": tt.contentType})
			if tt.wantStatus == 200 {
				if r.Status != 200 {
					t.Fatalf("answer %v, want 200", r)
				}
			} else {
				wantError(t, r, tt.wantStatus, tt.wantCode)
			}
			if got := r.Header.Get("WWW-Authenticate"); got != tt.wantChallenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.wantChallenge)
			}
		})
	}
}
