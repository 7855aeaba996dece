package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

type fakeAuth struct{}

func (fakeAuth) Verify(_ context.Context, h string) (string, error) {
	if h != "Bearer good" {
		return "", errs.E(errs.Unauthenticated, "bad token")
	}
	return "alice", nil
}

type in struct{ Name string }

func handler(t *testing.T, call func(ctx context.Context, principal string, v in) (any, error)) http.Handler {
	t.Helper()
	h, err := Handler(fakeAuth{}, Method[in]{
		Name: "test.method",
		Decode: func(b []byte) (in, error) {
			var v in
			if err := json.Unmarshal(b, &v); err != nil || v.Name == "" {
				return v, errs.InvalidFields([]errs.FieldError{{Field: "name", Reason: "is required"}})
			}
			return v, nil
		},
		Call: call,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type envelopeJSON struct {
	Error struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Details []errs.FieldError `json:"details"`
	} `json:"error"`
}

func TestHandler(t *testing.T) {
	ok := func(_ context.Context, p string, v in) (any, error) {
		return map[string]string{"hello": v.Name, "by": p}, nil
	}
	fail := func(err error) func(context.Context, string, in) (any, error) {
		return func(context.Context, string, in) (any, error) { return nil, err }
	}
	tests := []struct {
		name       string
		method     string
		auth       string
		body       string
		call       func(context.Context, string, in) (any, error)
		wantStatus int
		wantCode   string
	}{
		{"ok", "POST", "Bearer good", `{"Name":"x"}`, ok, 200, ""},
		{"GET", "GET", "Bearer good", ``, ok, 405, "INVALID_INPUT"},
		{"no token", "POST", "", `{"Name":"x"}`, ok, 401, "UNAUTHENTICATED"},
		{"token before input", "POST", "Bearer bad", `not json`, ok, 401, "UNAUTHENTICATED"},
		{"bad input", "POST", "Bearer good", `{}`, ok, 400, "INVALID_INPUT"},
		{"too large", "POST", "Bearer good", `{"Name":"` + strings.Repeat("a", MaxBody) + `"}`, ok, 413, "INVALID_INPUT"},
		{"not found", "POST", "Bearer good", `{"Name":"x"}`, fail(errs.E(errs.NotFound, "no")), 404, "NOT_FOUND"},
		{"conflict", "POST", "Bearer good", `{"Name":"x"}`, fail(errs.E(errs.Conflict, "no")), 409, "CONFLICT"},
		{"invalid state", "POST", "Bearer good", `{"Name":"x"}`, fail(errs.E(errs.InvalidState, "no")), 409, "INVALID_STATE"},
		{"quota", "POST", "Bearer good", `{"Name":"x"}`, fail(errs.E(errs.Quota, "no")), 429, "QUOTA_EXCEEDED"},
		{"unsupported", "POST", "Bearer good", `{"Name":"x"}`, fail(errs.E(errs.Unsupported, "no")), 422, "UNSUPPORTED"},
		{"denied", "POST", "Bearer good", `{"Name":"x"}`, fail(errs.E(errs.PermissionDenied, "no")), 403, "PERMISSION_DENIED"},
		{"unavailable", "POST", "Bearer good", `{"Name":"x"}`, fail(errs.E(errs.Unavailable, "later")), 503, "UNAVAILABLE"},
		{"plain error", "POST", "Bearer good", `{"Name":"x"}`, fail(errors.New("secret detail")), 500, "INTERNAL"},
		{"panic", "POST", "Bearer good", `{"Name":"x"}`, func(context.Context, string, in) (any, error) { panic("secret detail") }, 500, "INTERNAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/api/compute/x/y", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			// As every function is served: through the edge.
			Edge(handler(t, tt.call)).ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", rec.Code, rec.Body, tt.wantStatus)
			}
			if rec.Header().Get("X-Request-Id") == "" {
				t.Errorf("no X-Request-Id")
			}
			if tt.wantCode == "" {
				return
			}
			var env envelopeJSON
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			if env.Error.Code != tt.wantCode {
				t.Errorf("code = %q, want %q", env.Error.Code, tt.wantCode)
			}
			if strings.Contains(rec.Body.String(), "secret detail") {
				t.Errorf("response leaks internals: %s", rec.Body)
			}
			if tt.wantStatus == 503 && rec.Header().Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			if tt.name == "bad input" && (len(env.Error.Details) != 1 || env.Error.Details[0].Field != "name") {
				t.Errorf("details = %v, want the name field", env.Error.Details)
			}
		})
	}
}

// TestEdge checks what the edge gives every request: a request ID, echoed
// or made, and a recovered panic answered once.
func TestEdge(t *testing.T) {
	okHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { WriteJSON(w, http.StatusOK, struct{}{}) })
	tests := []struct {
		name       string
		requestID  string
		h          http.Handler
		wantStatus int
		wantCode   string
		wantSameID bool
	}{
		{"echoed", "req-123", okHandler, 200, "", true},
		{"made when missing", "", okHandler, 200, "", false},
		{"made when too long", strings.Repeat("r", 129), okHandler, 200, "", false},
		{"kept at 128 characters", strings.Repeat("r", 128), okHandler, 200, "", true},
		{"panic before answering", "req-p", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("secret detail") }), 500, "INTERNAL", true},
		{"panic after answering", "req-q", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			WriteError(r.Context(), w, errs.E(errs.Conflict, "taken"))
			panic("secret detail")
		}), 409, "CONFLICT", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", strings.NewReader(`{}`))
			if tt.requestID != "" {
				req.Header.Set("X-Request-Id", tt.requestID)
			}
			rec := httptest.NewRecorder()
			Edge(tt.h).ServeHTTP(rec, req)
			id := rec.Header().Get("X-Request-Id")
			if tt.wantSameID && id != tt.requestID {
				t.Errorf("X-Request-Id = %q, want %q", id, tt.requestID)
			}
			if !tt.wantSameID && (len(id) != 32 || id == tt.requestID) {
				t.Errorf("X-Request-Id = %q, want a new one of 32 hex digits", id)
			}
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", rec.Code, rec.Body, tt.wantStatus)
			}
			var env envelopeJSON
			_ = json.Unmarshal(rec.Body.Bytes(), &env)
			if env.Error.Code != tt.wantCode {
				t.Errorf("code = %q, want %q", env.Error.Code, tt.wantCode)
			}
			if strings.Contains(rec.Body.String(), "secret detail") || strings.Count(rec.Body.String(), `"error"`) > 1 {
				t.Errorf("body = %s, want one answer that does not leak the panic", rec.Body)
			}
		})
	}
}

// TestEdgeReraisesAbort keeps net/http's way to abort an answer working.
func TestEdgeReraisesAbort(t *testing.T) {
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler re-raised", p)
		}
	}()
	Edge(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil))
}

// TestHandlerLeavesTheEdgeToEdge checks that a method's handler gives no
// request ID of its own: Edge is the one place that does.
func TestHandlerGivesNoRequestID(t *testing.T) {
	req := httptest.NewRequest("POST", "/", strings.NewReader(`{"Name":"x"}`))
	req.Header.Set("Authorization", "Bearer good")
	rec := httptest.NewRecorder()
	handler(t, func(context.Context, string, in) (any, error) { return struct{}{}, nil }).ServeHTTP(rec, req)
	if got := rec.Header().Get("X-Request-Id"); got != "" {
		t.Errorf("X-Request-Id = %q from the method's handler, want none (given by Edge)", got)
	}
}

// Every 401 names the scheme to use (RFC 6750 §3): a request without
// credentials gets the bare challenge, one with a refused token is told so.
func TestUnauthenticatedChallenge(t *testing.T) {
	tests := []struct {
		name, auth, want string
	}{
		{"no token", "", "Bearer"},
		{"bad token", "Bearer bad", `Bearer error="invalid_token"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", strings.NewReader(`{"Name":"x"}`))
			req.Header.Set("Content-Type", "application/json")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			handler(t, func(context.Context, string, in) (any, error) { return struct{}{}, nil }).ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401", rec.Code)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != tt.want {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.want)
			}
		})
	}
	// Only 401 carries the challenge.
	rec := httptest.NewRecorder()
	WriteError(context.Background(), rec, errs.E(errs.PermissionDenied, "no"))
	if got := rec.Header().Get("WWW-Authenticate"); got != "" {
		t.Errorf("403: WWW-Authenticate = %q, want none", got)
	}
}

// countingReader counts the bytes read from a request body.
type countingReader struct {
	r    *strings.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

// The token is checked before the body is read (API.md §3): an
// unauthenticated request gets 401 whatever its size, and its body is
// never read.
func TestTokenBeforeBody(t *testing.T) {
	for _, size := range []int{10, MaxBody + 1, 4 * MaxBody} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			body := &countingReader{r: strings.NewReader(`{"Name":"` + strings.Repeat("a", size) + `"}`)}
			req := httptest.NewRequest("POST", "/", body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer bad")
			rec := httptest.NewRecorder()
			handler(t, func(context.Context, string, in) (any, error) { return struct{}{}, nil }).ServeHTTP(rec, req)
			var env envelopeJSON
			_ = json.Unmarshal(rec.Body.Bytes(), &env)
			if rec.Code != http.StatusUnauthorized || env.Error.Code != "UNAUTHENTICATED" {
				t.Errorf("status = %d %q, want 401 UNAUTHENTICATED", rec.Code, env.Error.Code)
			}
			if body.read != 0 {
				t.Errorf("read %d bytes of an unauthenticated body, want none", body.read)
			}
		})
	}
}

// A body is JSON and says so (API.md §1): any other Content-Type, curl
// -d's form type and none at all included, is 415 INVALID_INPUT, before
// a byte of the body is read; the token still comes first.
func TestContentType(t *testing.T) {
	tests := []struct {
		contentType string
		auth        string
		wantStatus  int
		wantCode    string
	}{
		{"application/json", "Bearer good", 200, ""},
		{"application/json; charset=utf-8", "Bearer good", 200, ""},
		{"Application/JSON", "Bearer good", 200, ""},
		{"application/json;charset=UTF-8", "Bearer good", 200, ""},
		{"", "Bearer good", 415, "INVALID_INPUT"},
		{"text/plain", "Bearer good", 415, "INVALID_INPUT"},
		{"application/x-www-form-urlencoded", "Bearer good", 415, "INVALID_INPUT"},
		{"application/jsonx", "Bearer good", 415, "INVALID_INPUT"},
		{"application/problem+json", "Bearer good", 415, "INVALID_INPUT"},
		{"application/json; charset", "Bearer good", 415, "INVALID_INPUT"},
		{"text/plain", "Bearer bad", 401, "UNAUTHENTICATED"},
		{"", "Bearer bad", 401, "UNAUTHENTICATED"},
	}
	for _, tt := range tests {
		t.Run(tt.contentType+"/"+tt.auth, func(t *testing.T) {
			body := &countingReader{r: strings.NewReader(`{"Name":"x"}`)}
			req := httptest.NewRequest("POST", "/", body)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			req.Header.Set("Authorization", tt.auth)
			rec := httptest.NewRecorder()
			handler(t, func(context.Context, string, in) (any, error) { return struct{}{}, nil }).ServeHTTP(rec, req)
			var env envelopeJSON
			_ = json.Unmarshal(rec.Body.Bytes(), &env)
			if rec.Code != tt.wantStatus || env.Error.Code != tt.wantCode {
				t.Errorf("Content-Type %q = %d %q, want %d %q", tt.contentType, rec.Code, env.Error.Code, tt.wantStatus, tt.wantCode)
			}
			if tt.wantStatus != 200 && body.read != 0 {
				t.Errorf("read %d bytes of a refused body, want none", body.read)
			}
			if got := rec.Header().Get("Accept"); tt.wantStatus == 415 && got != "application/json" {
				t.Errorf("Accept = %q on a 415, want application/json", got)
			}
		})
	}
}
