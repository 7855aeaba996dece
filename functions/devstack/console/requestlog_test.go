package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRequestLogKeepsTheLatest serves more requests than the log keeps:
// it lists the newest first, with their status, and none of the
// console's own.
func TestRequestLogKeepsTheLatest(t *testing.T) {
	l := NewRequestLog()
	h := l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "id-"+r.URL.Query().Get("i"))
		if r.URL.Query().Get("i") == fmt.Sprint(maxRequests+9) {
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	for i := range maxRequests + 10 {
		req := httptest.NewRequest("POST", fmt.Sprintf("/api/x?i=%d", i), nil)
		req.Header.Set("Authorization", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.x")
		h.ServeHTTP(httptest.NewRecorder(), req)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/console/fleet/stream", nil))
	}
	got := l.Latest(3)
	if len(got) != 3 {
		t.Fatalf("Latest(3) = %d requests", len(got))
	}
	if r := got[0]; r.RequestID != fmt.Sprintf("id-%d", maxRequests+9) || r.Status != http.StatusTeapot || r.Principal != "alice" || r.Method != "POST" || r.Path != "/api/x" {
		t.Errorf("newest = %+v, want the last request, 418, alice", r)
	}
	if got[1].RequestID != fmt.Sprintf("id-%d", maxRequests+8) || got[1].Status != http.StatusOK {
		t.Errorf("second = %+v, want the one before, 200", got[1])
	}
	if all := l.Latest(maxRequests * 2); len(all) != maxRequests || all[len(all)-1].RequestID != "id-10" {
		t.Errorf("kept %d, the oldest %q; want %d from id-10", len(all), all[len(all)-1].RequestID, maxRequests)
	}
}
