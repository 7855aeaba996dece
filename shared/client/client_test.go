package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/client"
)

// TestCoversEveryMethod holds the client's methods equal to the
// document's, and each request type's JSON members equal to the members
// of the document's schema for that body.
func TestCoversEveryMethod(t *testing.T) {
	var want []string
	for _, op := range apidoc.Operations() {
		if op.JoinToken {
			continue // bcd's, with a join token: no tenant calls it
		}
		want = append(want, op.Path())
	}
	if got := client.MethodPaths(); !slices.Equal(got, want) {
		t.Errorf("client methods = %v, want the document's (every method a tenant calls) %v", got, want)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for schema, typ := range map[string]reflect.Type{
		"CreateNodePool": reflect.TypeFor[client.CreateNodePoolRequest](),
		"NodePoolSpec":   reflect.TypeFor[client.NodePoolSpec](),
		"CreateCluster":  reflect.TypeFor[client.CreateClusterRequest](),
		"ListClusters":   reflect.TypeFor[client.ListClustersRequest](),

		"ListSubstrateNodes": reflect.TypeFor[client.ListSubstrateNodesRequest](),
	} {
		got := jsonMembers(typ)
		var want []string
		for k := range doc.Components.Schemas[schema].Properties {
			want = append(want, k)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s members = %v, want the document's %s: %v", typ.Name(), got, schema, want)
		}
	}
	// UpdateNodePoolRequest writes its own JSON: every member, once.
	n := 1
	b, _ := json.Marshal(client.UpdateNodePoolRequest{NodeCount: &n, Autoscaling: &client.Autoscaling{}})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	var gotU, wantU []string
	for k := range m {
		gotU = append(gotU, k)
	}
	for k := range doc.Components.Schemas["UpdateNodePool"].Properties {
		wantU = append(wantU, k)
	}
	slices.Sort(gotU)
	slices.Sort(wantU)
	if !slices.Equal(gotU, wantU) {
		t.Errorf("UpdateNodePoolRequest members = %v, want %v", gotU, wantU)
	}
	b, _ = json.Marshal(client.UpdateNodePoolRequest{DisableAutoscaling: true})
	if !strings.Contains(string(b), `"autoscaling":null`) || strings.Contains(string(b), "nodeCount") {
		t.Errorf("DisableAutoscaling marshals as %s, want autoscaling null and no nodeCount", b)
	}
}

// TestSubstrateBodies checks the bodies the substrates' methods send,
// with every argument given, carry the members of the document's schema.
func TestSubstrateBodies(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	bodies := map[string]map[string]any{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		bodies[r.URL.Path] = m
		mu.Unlock()
		_, _ = w.Write([]byte(`{"id":"ksb_01jd8x4k2m9q7v3w5y6z0a1b2e","substrates":[],"nodes":[],"nextPageToken":"","actions":[]}`))
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id = "ksb_01jd8x4k2m9q7v3w5y6z0a1b2e"
	if _, err := c.GetSubstrate(ctx, "acme", id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListSubstrates(ctx, "acme", "pool-gpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListSubstrateNodes(ctx, client.ListSubstrateNodesRequest{TenantID: "acme", SubstrateID: id, PageSize: 10, PageToken: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PlanSubstrate(ctx, "acme", json.RawMessage(`{"id":"pool-gpu","tenantId":"acme","version":1}`)); err != nil {
		t.Fatal(err)
	}
	for _, op := range apidoc.Operations() {
		if op.Resource != "kubernetesSubstrates" || op.JoinToken {
			continue
		}
		body, ok := bodies[op.Path()]
		if !ok {
			t.Errorf("%s was not called", op.ID())
			continue
		}
		var got, want []string
		for k := range body {
			got = append(got, k)
		}
		for k := range doc.Components.Schemas[op.Request].Properties {
			want = append(want, k)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s sent members %v, want the document's %s: %v", op.ID(), got, op.Request, want)
		}
	}
	// Without a pool, the list is the tenant's.
	if _, err := c.ListSubstrates(ctx, "acme", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := bodies["/api/compute/kubernetesSubstrates/list"]["poolId"]; ok {
		t.Errorf("ListSubstrates without a pool sent %v, want no poolId", bodies["/api/compute/kubernetesSubstrates/list"])
	}
}

func jsonMembers(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			out = append(out, jsonMembers(f.Type)...)
			continue
		}
		if name != "-" && name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// fakeAPI answers with the statuses and bodies in turn and records what
// it was sent.
type fakeAPI struct {
	mu      sync.Mutex
	answers []answer
	calls   int
	ids     []string
}

type answer struct {
	status     int
	retryAfter string
	body       string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, r.Header.Get(client.RequestIDHeader))
	a := f.answers[min(f.calls, len(f.answers)-1)]
	f.calls++
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.Header().Set(client.RequestIDHeader, "srv-"+r.Header.Get(client.RequestIDHeader))
	w.WriteHeader(a.status)
	_, _ = w.Write([]byte(a.body))
}

const (
	unavailable = `{"error":{"code":"UNAVAILABLE","message":"Firestore is down; retry"}}`
	okCluster   = `{"id":"kcl_01jd8x4k2m9q7v3w5y6z0a1b2c","state":"ready"}`
)

func TestRetries(t *testing.T) {
	tests := []struct {
		name       string
		answers    []answer
		maxRetries int
		wantCalls  int
		wantCode   string
		wantSleeps []time.Duration
	}{
		{"unavailable then ok, after Retry-After", []answer{{503, "2", unavailable}, {503, "0", unavailable}, {200, "", okCluster}}, 4, 3, "", []time.Duration{2 * time.Second, 0}},
		{"no Retry-After: backoff", []answer{{503, "", unavailable}, {200, "", okCluster}}, 4, 2, "", []time.Duration{200 * time.Millisecond}},
		{"Retry-After capped", []answer{{503, "3600", unavailable}, {200, "", okCluster}}, 4, 2, "", []time.Duration{30 * time.Second}},
		{"gives up after MaxRetries", []answer{{503, "1", unavailable}}, 2, 3, client.CodeUnavailable, []time.Duration{time.Second, time.Second}},
		{"no retries", []answer{{503, "1", unavailable}}, 0, 1, client.CodeUnavailable, nil},
		{"other codes are not retried", []answer{{409, "", `{"error":{"code":"INVALID_STATE","message":"being deleted"}}`}}, 4, 1, client.CodeInvalidState, nil},
		{"a proxy's page", []answer{{502, "", "<html>bad gateway</html>"}, {200, "", okCluster}}, 4, 2, "", []time.Duration{200 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAPI{answers: tt.answers}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c, err := client.New(srv.URL, client.WithMaxRetries(tt.maxRetries))
			if err != nil {
				t.Fatal(err)
			}
			var sleeps []time.Duration
			client.SetSleep(c, func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil })
			cl, err := c.GetCluster(context.Background(), "acme", "kcl_01jd8x4k2m9q7v3w5y6z0a1b2c")
			if got := client.Code(err); got != tt.wantCode {
				t.Errorf("GetCluster error = %v, want code %q", err, tt.wantCode)
			}
			if err == nil && (cl == nil || cl.State != client.StateReady) {
				t.Errorf("GetCluster = %+v, want the ready cluster", cl)
			}
			if f.calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", f.calls, tt.wantCalls)
			}
			if !slices.Equal(sleeps, tt.wantSleeps) {
				t.Errorf("waits = %v, want %v", sleeps, tt.wantSleeps)
			}
			for _, id := range f.ids {
				if id == "" || id != f.ids[0] {
					t.Errorf("request IDs = %v, want one, the same on every attempt", f.ids)
					break
				}
			}
			var e *client.Error
			if errors.As(err, &e) && e.RequestID != "srv-"+f.ids[0] {
				t.Errorf("error request ID = %q, want the answer's", e.RequestID)
			}
		})
	}
}

// TestLostAnswers checks which calls are repeated when the connection
// fails: creates (keyed), reads and deletes are, an update is not.
func TestLostAnswers(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // every call now fails to connect
	c, err := client.New(url, client.WithMaxRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	client.SetSleep(c, func(context.Context, time.Duration) error { n++; return nil })
	ctx := context.Background()
	one := 1
	for _, tt := range []struct {
		name  string
		call  func() error
		tries int
	}{
		{"create", func() error {
			_, err := c.CreateNodePool(ctx, client.CreateNodePoolRequest{TenantID: "acme"})
			return err
		}, 2},
		{"get", func() error { _, err := c.GetCluster(ctx, "acme", "x"); return err }, 2},
		{"delete", func() error { _, err := c.DeleteCluster(ctx, "acme", "x"); return err }, 2},
		{"update", func() error {
			_, err := c.UpdateNodePool(ctx, client.UpdateNodePoolRequest{NodeCount: &one})
			return err
		}, 0},
	} {
		n = 0
		if err := tt.call(); err == nil || client.Code(err) != "" {
			t.Errorf("%s without a server = %v, want a transport error", tt.name, err)
		}
		if n != tt.tries {
			t.Errorf("%s retried %d times, want %d", tt.name, n, tt.tries)
		}
	}
}

func TestCanceledWaitStopsRetrying(t *testing.T) {
	f := &fakeAPI{answers: []answer{{503, "1", unavailable}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := client.New(srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetCluster(ctx, "acme", "x")
	if !client.IsCode(err, client.CodeUnavailable) || time.Since(start) > 5*time.Second {
		t.Errorf("GetCluster with a short context = %v after %v, want UNAVAILABLE soon", err, time.Since(start))
	}
}
