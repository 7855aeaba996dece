package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/better-compute/kubernetes/shared/apidoc"
)

// documentTransport is the harness's HTTP client's transport: every answer
// to a method of /openapi.json (a POST to /api/compute/...) is validated
// against the document as published (status, Content-Type, body, the
// headers it declares required), and one that does not match fails the
// call, so no test passes on an answer the document does not describe.
// Requests are not validated: many tests send bodies the document refuses
// on purpose. Answers to other requests (another HTTP method, 405; an
// unknown path) are not the document's and are counted apart.
type documentTransport struct {
	next http.RoundTripper
	doc  *responseValidator

	validated atomic.Int64 // answers checked against the document
	skipped   atomic.Int64 // answers to requests the document has no operation for
}

func (d *documentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := d.next.RoundTrip(req)
	if err != nil || !d.doc.describes(req) {
		if err == nil {
			d.skipped.Add(1)
		}
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read answer of %s: %w", req.URL.Path, err)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	d.validated.Add(1)
	if err := d.doc.check(req, res.StatusCode, res.Header, body); err != nil {
		return nil, err
	}
	return res, nil
}

// responseValidator checks answers against /openapi.json with
// libopenapi-validator, which reads OpenAPI 3.1 and its JSON Schema 2020-12
// (kin-openapi's openapi3filter validates 3.0 documents only).
type responseValidator struct {
	mu sync.Mutex // the validator's caches are not documented as safe for concurrent use
	v  validator.Validator
}

func newResponseValidator() (*responseValidator, error) {
	doc, err := libopenapi.NewDocument(apidoc.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("parse /openapi.json: %w", err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("validator of /openapi.json: %w", errors.Join(errs...))
	}
	return &responseValidator{v: v}, nil
}

// describes reports whether the document has an operation for req.
func (rv *responseValidator) describes(req *http.Request) bool {
	if req.Method != http.MethodPost {
		return false
	}
	for _, op := range apidoc.Operations() {
		if req.URL.Path == op.Path() {
			return true
		}
	}
	return false
}

// check returns an error naming every way the answer (status, header, body)
// to req breaks the document, or nil.
func (rv *responseValidator) check(req *http.Request, status int, header http.Header, body []byte) error {
	// The request's body was sent and is not validated: a copy without it.
	r := req.Clone(req.Context())
	r.Body = http.NoBody
	res := &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: header, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
	rv.mu.Lock()
	ok, verrs := rv.v.ValidateHttpResponse(r, res)
	rv.mu.Unlock()
	if ok {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the answer %d %s to POST %s breaks /openapi.json:", status, bytes.TrimSpace(body), req.URL.Path)
	for _, e := range verrs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, sv := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s at %s (%s)", sv.Reason, sv.FieldPath, sv.KeywordLocation)
		}
	}
	return errors.New(b.String())
}

// TestAnswersAreValidatedAgainstTheDocument: the harness's client checks
// the answers of the suite against /openapi.json, a success as well as
// refusals, and leaves alone the requests the document has no operation
// for.
func TestAnswersAreValidatedAgainstTheDocument(t *testing.T) {
	dt, ok := h.http.Transport.(*documentTransport)
	if !ok {
		t.Fatalf("the harness's client's transport is %T, want the document's", h.http.Transport)
	}
	tn := newTenant(t)
	c := newCluster(t, tn)
	before, skippedBefore := dt.validated.Load(), dt.skipped.Load()
	call(t, viewer, "kubernetesNodePools/list", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &struct {
		NodePools []any `json:"nodePools"`
	}{})
	wantError(t, call(t, "", "kubernetesNodePools/list", obj{"tenantId": tn.ID, "clusterId": c.ID}), http.StatusUnauthorized, "UNAUTHENTICATED")
	wantError(t, call(t, admin, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": unknownCluster()}), http.StatusNotFound, "NOT_FOUND")
	wantError(t, do(t, http.MethodPost, "kubernetesClusters/get", "Bearer "+token(t, admin), `{}`, http.Header{"Content-Type": {"text/plain"}}),
		http.StatusUnsupportedMediaType, "INVALID_INPUT")
	if got := dt.validated.Load() - before; got < 4 {
		t.Errorf("%d answers validated, want at least 4 (h.http is shared: more when tests run in parallel)", got)
	}
	wantError(t, do(t, http.MethodGet, "kubernetesClusters/get", "", nil, nil), http.StatusMethodNotAllowed, "INVALID_INPUT")
	if dt.skipped.Load() == skippedBefore {
		t.Error("a GET, which the document has no operation for, was not counted apart")
	}
}

// TestDocumentValidatorCatchesMismatches plants answers that break the
// document, each in one way, behind the same transport the harness's
// client uses, and wants every one reported: the check of the suite's
// answers can fail.
func TestDocumentValidatorCatchesMismatches(t *testing.T) {
	rv, err := newResponseValidator()
	if err != nil {
		t.Fatal(err)
	}
	const pool = `{"id":"knp_01jd8x4k2m9q7v3w5y6z0a1b2d","clusterId":"kcl_01jd8x4k2m9q7v3w5y6z0a1b2c","tenantId":"acme","name":"gpu",` +
		`"machineType":"g2-standard-8","nodeCount":2,"spot":false,"zones":[],"labels":{},"taints":[],"state":"pending","message":"",` +
		`"version":1,"createdAt":"2025-01-01T00:00:00Z","updatedAt":"2025-01-01T00:00:00Z"}`
	const envelope = `{"error":{"code":"UNAUTHENTICATED","message":"no token"}}`
	jsonHeader := func(kv ...string) http.Header {
		hd := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req-1"}}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				hd.Del(kv[i])
				continue
			}
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   string // in the report; "" for an answer that matches
	}{
		{"matches", 200, jsonHeader(), pool, ""},
		{"a 401 that matches", 401, jsonHeader("WWW-Authenticate", "Bearer"), envelope, ""},
		{"undeclared member", 200, jsonHeader(), strings.Replace(pool, `"name":"gpu"`, `"name":"gpu","colour":"blue"`, 1), "colour"},
		{"missing member", 200, jsonHeader(), strings.Replace(pool, `"name":"gpu",`, ``, 1), "name"},
		{"wrong type", 200, jsonHeader(), strings.Replace(pool, `"nodeCount":2`, `"nodeCount":"2"`, 1), "nodeCount"},
		{"state outside the enum", 200, jsonHeader(), strings.Replace(pool, `"pending"`, `"provisioning"`, 1), "state"},
		{"a time that is not RFC 3339", 200, jsonHeader(), strings.Replace(pool, `"2025-01-01T00:00:00Z","updatedAt"`, `"yesterday","updatedAt"`, 1), "createdAt"},
		{"undeclared status", http.StatusTeapot, jsonHeader(), envelope, "418"},
		{"a status the method never answers", http.StatusTooManyRequests, jsonHeader(), `{"error":{"code":"QUOTA_EXCEEDED","message":"x"}}`, "429"},
		{"an error code outside the enum", 401, jsonHeader("WWW-Authenticate", "Bearer"), `{"error":{"code":"NOPE","message":"x"}}`, "code"},
		{"no X-Request-Id", 200, jsonHeader("X-Request-Id", ""), pool, "X-Request-Id"},
		{"a 401 without WWW-Authenticate", 401, jsonHeader(), envelope, "WWW-Authenticate"},
		{"another content type", 200, jsonHeader("Content-Type", "text/plain"), pool, "text/plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header()[k] = v
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			client := &http.Client{Transport: &documentTransport{next: http.DefaultTransport, doc: rv}}
			res, err := client.Post(srv.URL+"/api/compute/kubernetesNodePools/delete", "application/json", strings.NewReader(`{}`))
			if res != nil {
				res.Body.Close()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("a matching answer is reported: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("the planted mismatch (%s) is not reported", tt.name)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("the report does not name %q: %v", tt.want, err)
			}
		})
	}
}
