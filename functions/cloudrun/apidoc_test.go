package cloudrun

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/better-compute/kubernetes/shared/apidoc"
)

// TestAPIDocumentsServed checks that every API function serves the API's
// documents (the HTTPS entry's default route reaches one of them) without
// building anything, that the reconciler's functions do not, and that the mux of the devstack serves them.
func TestAPIDocumentsServed(t *testing.T) {
	b := &fakeBuilder{}
	ok, _ := newTestApp(t, complete(), b)
	for _, tt := range []struct {
		name string
		h    http.Handler
		path string
		want []byte
	}{
		{"kubernetesClusters-get", ok.Handler("kubernetesClusters-get"), apidoc.OpenAPIPath, apidoc.OpenAPI()},
		{"kubernetesNodePools-create", ok.Handler("kubernetesNodePools-create"), apidoc.AsyncAPIPath, apidoc.AsyncAPI()},
		{"mux", ok.Edge(ok.Mux()), apidoc.OpenAPIPath, apidoc.OpenAPI()},
		{"mux", ok.Edge(ok.Mux()), apidoc.AsyncAPIPath, apidoc.AsyncAPI()},
		{"reconcile", ok.Handler("reconcile"), apidoc.OpenAPIPath, nil},
		{"watchdog", ok.Handler("watchdog"), apidoc.AsyncAPIPath, nil},
	} {
		rec := httptest.NewRecorder()
		tt.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if tt.want == nil {
			if rec.Code != http.StatusNotFound {
				t.Errorf("%s: GET %s = %d, want 404", tt.name, tt.path, rec.Code)
			}
			continue
		}
		if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), tt.want) {
			t.Errorf("%s: GET %s = %d (%d bytes), want 200 and the document", tt.name, tt.path, rec.Code, rec.Body.Len())
		}
		if rec.Header().Get("X-Request-Id") == "" {
			t.Errorf("%s: GET %s: no X-Request-Id: the documents are served behind the edge", tt.name, tt.path)
		}
	}
	if n := b.count("kubernetesClusters-get"); n != 0 {
		t.Errorf("builds = %d, want 0: serving a document builds nothing", n)
	}
}

// TestConsumedTopicsDocumented holds the topics the functions consume to
// the consumed channels of the AsyncAPI document.
func TestConsumedTopicsDocumented(t *testing.T) {
	var consumed []string
	for _, f := range Functions() {
		consumed = append(consumed, f.Topics...)
	}
	if !slices.Equal(consumed, apidoc.ConsumedTypes()) {
		t.Errorf("ConsumedTypes = %v, want the topics the functions consume: %v", apidoc.ConsumedTypes(), consumed)
	}
}
