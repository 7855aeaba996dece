package devstack_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestDevRoutesFollowTheAPIsTransport checks that the devstack's own
// endpoints answer as the API does (API.md §1, §2): a body over 1 MiB is
// 413 INVALID_INPUT, another method is 405 with an Allow header, and a
// body of the wrong shape is 400 naming the field, never a Go type; every
// error in the envelope, with a request ID.
func TestDevRoutesFollowTheAPIsTransport(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	huge := `{"sub":"` + strings.Repeat("a", 1<<20) + `"}`
	tests := []struct {
		method, path, body string
		wantStatus         int
		wantAllow          string
		wantField          string // the field the details name, if any
	}{
		{"POST", "/dev/token", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"GET", "/dev/token", "", http.StatusMethodNotAllowed, "POST", ""},
		{"POST", "/dev/token", `{"sub":1}`, http.StatusBadRequest, "", "sub"},
		{"POST", "/dev/token", `[1]`, http.StatusBadRequest, "", ""},
		{"POST", "/dev/token", `{"sub":"alice","bogus":1}`, http.StatusBadRequest, "", "bogus"},

		{"POST", "/dev/access-token", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"GET", "/dev/access-token", "", http.StatusMethodNotAllowed, "POST", ""},
		{"PUT", "/dev/access-token", `{}`, http.StatusMethodNotAllowed, "POST", ""},
		{"POST", "/dev/access-token", `{"principal":1}`, http.StatusBadRequest, "", "principal"},
		{"POST", "/dev/access-token", `{"bogus":"x"}`, http.StatusBadRequest, "", "bogus"},
		{"POST", "/dev/access-token", `["x"]`, http.StatusBadRequest, "", ""},

		{"POST", "/dev/pools/put", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"GET", "/dev/pools/put", "", http.StatusMethodNotAllowed, "POST", ""},
		{"POST", "/dev/pools/put", `[1]`, http.StatusBadRequest, "", ""},
		{"POST", "/dev/pools/put", `{"id":`, http.StatusBadRequest, "", ""},
		{"POST", "/dev/pools/archive", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"DELETE", "/dev/pools/archive", "", http.StatusMethodNotAllowed, "POST", ""},
		{"POST", "/dev/pools/archive", `"pool"`, http.StatusBadRequest, "", ""},

		{"POST", "/dev/gke/upgrade", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"GET", "/dev/gke/upgrade", "", http.StatusMethodNotAllowed, "POST", ""},
		{"POST", "/dev/gke/upgrade", `{"clusterId":1}`, http.StatusBadRequest, "", "clusterId"},
		{"POST", "/dev/gke/upgrade", `{"clusterId":"kcl_x","bogus":1}`, http.StatusBadRequest, "", "bogus"},
		{"POST", "/dev/gke/upgrade", `{}`, http.StatusBadRequest, "", "clusterId"},
		{"POST", "/dev/gke/upgrade", `{"clusterId":"kcl_x","duration":"soon"}`, http.StatusBadRequest, "", "duration"},
		{"POST", "/dev/gke/upgrade", `{"clusterId":"kcl_x","duration":"100000h"}`, http.StatusBadRequest, "", "duration"},
		{"POST", "/dev/gke/upgrade", `{"clusterId":"kcl_x","duration":"-1s"}`, http.StatusBadRequest, "", "duration"},

		{"POST", "/dev/gke/stockout", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"GET", "/dev/gke/stockout", "", http.StatusMethodNotAllowed, "POST", ""},
		{"POST", "/dev/gke/stockout", `{"zone":"us-central1-a"}`, http.StatusBadRequest, "", "count"},
		{"POST", "/dev/gke/stockout", `{"count":1}`, http.StatusBadRequest, "", "zone"},
		{"POST", "/dev/gke/stockout", `{"zone":"us-central1-a","count":"2"}`, http.StatusBadRequest, "", "count"},
		{"POST", "/dev/gke/stockout", `{"zone":"us-central1-a","count":1001}`, http.StatusBadRequest, "", "count"},
		{"POST", "/dev/gke/stockout", `{"zone":"us-central1-z","count":1}`, http.StatusBadRequest, "", "zone"},
		{"POST", "/dev/gke/stockout", `{"zone":"mars-north1-a","count":1}`, http.StatusBadRequest, "", "zone"},
		{"POST", "/dev/gke/stockout", `{"zone":"us-central1","count":1}`, http.StatusBadRequest, "", "zone"},
		{"POST", "/dev/gke/autoscale", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"GET", "/dev/gke/autoscale", "", http.StatusMethodNotAllowed, "POST", ""},
		{"POST", "/dev/gke/autoscale", `{"clusterId":"kcl_x","nodeCount":1}`, http.StatusBadRequest, "", "nodePool"},
		{"POST", "/dev/gke/autoscale", `{"clusterId":"kcl_x","nodePool":"a","nodeCount":-1}`, http.StatusBadRequest, "", "nodeCount"},
		{"POST", "/dev/gke/autoscale", `{"clusterId":"kcl_x","nodePool":"a","nodeCount":1,"zone":"x"}`, http.StatusBadRequest, "", "zone"},

		{"POST", "/dev/faults", huge, http.StatusRequestEntityTooLarge, "", ""},
		{"PUT", "/dev/faults", `{}`, http.StatusMethodNotAllowed, "GET, HEAD, POST, DELETE", ""},
		{"POST", "/dev/faults/gke-1", `{}`, http.StatusMethodNotAllowed, "DELETE", ""},
		{"POST", "/dev/faults", `{"service":"gke","method":"*","action":"fail","bogus":1}`, http.StatusBadRequest, "", "bogus"},
		{"POST", "/dev/faults", `{"service":"gke","method":"*","action":"fail","count":"2"}`, http.StatusBadRequest, "", "count"},

		{"POST", "/dev/clusters/kcl_x/kubeconfig", `{}`, http.StatusMethodNotAllowed, "GET, HEAD", ""},
		{"POST", "/healthz", `{}`, http.StatusMethodNotAllowed, "GET, HEAD", ""},
		{"POST", "/healthz/kubernetes", `{}`, http.StatusMethodNotAllowed, "GET, HEAD", ""},
	}
	for _, tt := range tests {
		name := tt.method + " " + tt.path + " " + tt.body
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, e.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			var env struct {
				Error struct {
					Code, Message string
					Details       []struct{ Field, Reason string }
				} `json:"error"`
			}
			if err := json.Unmarshal(buf.Bytes(), &env); err != nil {
				t.Fatalf("%s %s = %d %q, not the error envelope: %v", tt.method, tt.path, resp.StatusCode, buf.String(), err)
			}
			got := env.Error
			if resp.StatusCode != tt.wantStatus || got.Code != "INVALID_INPUT" {
				t.Errorf("%s %s = %d %s %q, want %d INVALID_INPUT", tt.method, tt.path, resp.StatusCode, got.Code, got.Message, tt.wantStatus)
			}
			if allow := resp.Header.Get("Allow"); allow != tt.wantAllow {
				t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.path, allow, tt.wantAllow)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Errorf("%s %s: no X-Request-Id", tt.method, tt.path)
			}
			shown := got.Message
			for _, d := range got.Details {
				shown += " " + d.Field + ": " + d.Reason
			}
			for _, goWord := range []string{"Go ", "struct", "interface {", "json:", "map["} {
				if strings.Contains(shown, goWord) {
					t.Errorf("%s %s says %q: it names Go (%q)", tt.method, tt.path, shown, goWord)
				}
			}
			if tt.wantField != "" && (len(got.Details) != 1 || got.Details[0].Field != tt.wantField) {
				t.Errorf("%s %s: details = %+v, want one naming %s", tt.method, tt.path, got.Details, tt.wantField)
			}
		})
	}

	// What is well formed is still served.
	for _, tt := range []struct{ path, body string }{
		{"/dev/access-token", ``},
		{"/dev/access-token", `{}`},
		{"/dev/access-token", `{"principal":"someone@bc-dev.iam.gserviceaccount.com"}`},
		{"/dev/token", `{"sub":"alice"}`},
	} {
		resp, err := http.Post(e.URL+tt.path, "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s %s = %d, want 200", tt.path, tt.body, resp.StatusCode)
		}
	}
}
