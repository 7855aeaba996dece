package apidoc_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/apidoc/apidoctest"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// TestOpenAPIValid validates the document as OpenAPI 3.1 with
// libopenapi-validator, and every example body of it as a request.
func TestOpenAPIValid(t *testing.T) {
	doc, err := libopenapi.NewDocument(apidoc.OpenAPI())
	if err != nil {
		t.Fatalf("libopenapi.NewDocument: %v", err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Errorf("version = %q, want 3.1.0", v)
	}
	v, errList := validator.NewValidator(doc)
	if len(errList) > 0 {
		t.Fatalf("NewValidator: %v", errList)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
			for _, sv := range e.SchemaValidationErrors {
				t.Errorf("  %s at %s (%s)", sv.Reason, sv.FieldPath, sv.KeywordLocation)
			}
		}
	}
	for _, op := range apidoc.Operations() {
		for name, body := range op.Examples {
			req := httptest.NewRequest(http.MethodPost, op.Path(), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer x.y.z")
			if ok, verrs := v.ValidateHttpRequestSync(req); !ok {
				for _, e := range verrs {
					t.Errorf("%s example %s: %s: %s", op.ID(), name, e.Message, e.Reason)
				}
			}
		}
		// A body breaking the schema is refused by the same validator:
		// the check above can fail.
		req := httptest.NewRequest(http.MethodPost, op.Path(), strings.NewReader(`{"tenantId":"acme","unknown":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer x.y.z")
		if ok, _ := v.ValidateHttpRequestSync(req); ok {
			t.Errorf("%s: a body with an unknown member passes the document", op.ID())
		}
	}
}

// TestOperationsAreTheAPIs holds the documented methods equal to those
// functions/api serves, in the same order.
func TestOperationsAreTheAPIs(t *testing.T) {
	var got, want []string
	for _, op := range apidoc.Operations() {
		got = append(got, op.Path())
	}
	for _, m := range api.Methods() {
		want = append(want, m.Path())
	}
	if !slices.Equal(got, want) {
		t.Errorf("documented paths = %v, want the API's %v", got, want)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range want {
		if _, ok := doc.Paths[p]["post"]; !ok {
			t.Errorf("the document has no POST %s", p)
		}
	}
	if len(doc.Paths) != len(want) {
		t.Errorf("the document has %d paths, want %d", len(doc.Paths), len(want))
	}
}

// TestAsyncAPIEvents checks the event document lists every event type
// with a summary, and that events as shared/outbox makes them match their
// message's attribute and data schemas.
func TestAsyncAPIEvents(t *testing.T) {
	var doc struct {
		AsyncAPI   string                    `json:"asyncapi"`
		Channels   map[string]map[string]any `json:"channels"`
		Components struct {
			Messages map[string]struct {
				Summary string `json:"summary"`
			} `json:"messages"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.AsyncAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AsyncAPI != "3.0.0" {
		t.Errorf("asyncapi = %q, want 3.0.0", doc.AsyncAPI)
	}
	if len(doc.Channels) != len(outbox.Types) {
		t.Errorf("channels = %d, want %d", len(doc.Channels), len(outbox.Types))
	}
	pool := resource.NodePool{ID: resource.NewNodePoolID(), TenantID: "acme", ClusterID: resource.NewClusterID(), Name: "a", MachineType: "e2-standard-4", NodeCount: 1, State: resource.StateReady, Version: 1}
	cl := resource.Cluster{ID: pool.ClusterID, TenantID: "acme", PoolID: "pool-dev", Name: "c", Mode: "standard", Region: "us-central1", ReleaseChannel: "regular", State: resource.StateReady, Version: 1}
	for _, typ := range outbox.Types {
		if doc.Channels[typ] == nil {
			t.Errorf("no channel %s", typ)
		}
		if doc.Components.Messages[typ].Summary == "" {
			t.Errorf("message %s has no summary", typ)
		}
		var e outbox.Event
		if apidoc.IsNodePoolEvent(typ) {
			e = outbox.NodePoolEvent(typ, pool, pool.CreatedAt)
		} else {
			e = outbox.ClusterEvent(typ, cl, cl.CreatedAt)
		}
		m := e.Message()
		attrs, _ := json.Marshal(m.Attributes)
		ptr := "/components/messages/" + typ
		if err := apidoctest.Validate(apidoctest.AsyncAPI, ptr+"/headers", attrs); err != nil {
			t.Errorf("%s attributes %s: %v", typ, attrs, err)
		}
		if err := apidoctest.Validate(apidoctest.AsyncAPI, ptr+"/payload", m.Data); err != nil {
			t.Errorf("%s data %s: %v", typ, m.Data, err)
		}
		// Another type's attributes do not pass: the check can fail.
		other := map[string]string{}
		for k, v := range m.Attributes {
			other[k] = v
		}
		other["ce-type"] = "kubernetes.other"
		attrs, _ = json.Marshal(other)
		if err := apidoctest.Validate(apidoctest.AsyncAPI, ptr+"/headers", attrs); err == nil {
			t.Errorf("%s: attributes of another type pass", typ)
		}
	}
}

func TestHandler(t *testing.T) {
	h := apidoc.Handler()
	for _, tt := range []struct {
		method, path string
		status       int
		body         []byte
	}{
		{"GET", apidoc.OpenAPIPath, 200, apidoc.OpenAPI()},
		{"GET", apidoc.AsyncAPIPath, 200, apidoc.AsyncAPI()},
		{"HEAD", apidoc.OpenAPIPath, 200, nil},
		{"POST", apidoc.OpenAPIPath, 405, nil},
		{"GET", "/other.json", 404, nil},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.status {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, rec.Code, tt.status)
		}
		if tt.body != nil && !bytes.Equal(rec.Body.Bytes(), tt.body) {
			t.Errorf("%s %s: body is not the document", tt.method, tt.path)
		}
		if tt.status == 200 && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tt.method, tt.path, rec.Header().Get("Content-Type"))
		}
	}
}

// TestREADMEConsumer holds the README's example consumer to
// Example_consumer, which go test compiles: every line of the README's
// block is a line of the example.
func TestREADMEConsumer(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("consumer_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(example), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	_, block, ok := strings.Cut(string(readme), "```go\nps, err := pubsub.NewClient")
	if !ok {
		t.Fatal("the README has no example consumer")
	}
	block, _, _ = strings.Cut("ps, err := pubsub.NewClient"+block, "```")
	n := 0
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		n++
		if !lines[l] {
			t.Errorf("README line %q is not in Example_consumer", l)
		}
	}
	if n < 20 {
		t.Errorf("the README's consumer has %d lines", n)
	}
}
