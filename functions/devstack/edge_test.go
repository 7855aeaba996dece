package devstack_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Every answer of the devstack carries an X-Request-Id, and a path that is
// no method answers in the API's error envelope.
func TestEdge(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	tests := []struct {
		method, path string
		requestID    string
		wantStatus   int
		wantCode     string
	}{
		{"GET", "/healthz", "", http.StatusOK, ""},
		{"GET", "/healthz", "given-id", http.StatusOK, ""},
		{"POST", "/healthz", "", http.StatusMethodNotAllowed, "INVALID_INPUT"},
		{"GET", "/.well-known/openid-configuration", "", http.StatusOK, ""},
		{"POST", "/internal/watchdog", "given-id", http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"POST", "/api/compute/kubernetesNodePools/resize", "", http.StatusNotFound, "NOT_FOUND"},
		{"POST", "/nowhere", "given-id", http.StatusNotFound, "NOT_FOUND"},
		{"GET", "/api/compute/kubernetesNodePools/list", "given-id", http.StatusMethodNotAllowed, "INVALID_INPUT"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, e.URL+tt.path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if tt.requestID != "" {
			req.Header.Set("X-Request-Id", tt.requestID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantStatus || body.Error.Code != tt.wantCode {
			t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, resp.StatusCode, body.Error.Code, tt.wantStatus, tt.wantCode)
		}
		id := resp.Header.Get("X-Request-Id")
		if id == "" || (tt.requestID != "" && id != tt.requestID) {
			t.Errorf("%s %s: X-Request-Id = %q, want %q or a new one", tt.method, tt.path, id, tt.requestID)
		}
	}
}

// A client that sends less of a body than it announced does not hold its
// connection: the server closes it once the read timeout passes.
func TestShortBodyDoesNotHoldTheConnection(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.ReadTimeout = 200 * time.Millisecond
	e := startEnv(t, cfg)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Authenticated, so that the server reads the body rather than
	// answering 401 at once.
	fmt.Fprintf(conn, "POST /api/compute/kubernetesClusters/list HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tenantId\":", e.api.token)
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(waitTime))
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection was still open after %v", waitTime)
			}
			if time.Since(start) < cfg.ReadTimeout/2 {
				t.Fatalf("closed after %v, before the server waited for the body", time.Since(start))
			}
			return // closed by the server
		}
	}
}
