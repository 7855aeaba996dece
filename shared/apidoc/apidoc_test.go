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
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/apidoc/apidoctest"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/input"
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

// TestJoinTokenScheme checks that the method bcd calls takes the join
// token, and only it, and every other method a user's JWT.
func TestJoinTokenScheme(t *testing.T) {
	var doc struct {
		Security []map[string]any `json:"security"`
		Paths    map[string]map[string]struct {
			Security   []map[string]any `json:"security"`
			Permission any              `json:"x-permission"`
		} `json:"paths"`
		Components struct {
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Errorf("document security = %v, want the bearer JWT", doc.Security)
	}
	var joins int
	for _, op := range apidoc.Operations() {
		got := doc.Paths[op.Path()]["post"]
		if op.JoinToken {
			joins++
			if len(got.Security) != 1 || got.Security[0]["joinToken"] == nil || got.Permission != nil {
				t.Errorf("%s: security %v, x-permission %v; want joinToken alone and no permission", op.ID(), got.Security, got.Permission)
			}
			continue
		}
		if got.Security != nil || got.Permission == nil || op.Permission == "" {
			t.Errorf("%s: security %v, x-permission %v; want the document's bearer JWT and a permission", op.ID(), got.Security, got.Permission)
		}
	}
	if joins != 1 || doc.Components.SecuritySchemes["joinToken"]["scheme"] != "bearer" {
		t.Errorf("%d methods take the join token, scheme %v; want kubernetesSubstrates.join alone, a bearer scheme", joins, doc.Components.SecuritySchemes["joinToken"])
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
	if want := len(event.Types) + len(apidoc.ConsumedTypes()); len(doc.Channels) != want {
		t.Errorf("channels = %d, want %d: one per event type published and consumed", len(doc.Channels), want)
	}
	pool := resource.NodePool{ID: resource.NewNodePoolID(), TenantID: "acme", ClusterID: resource.NewClusterID(), Name: "a", MachineType: "e2-standard-4", NodeCount: 1, State: resource.StateReady, Version: 1}
	cl := resource.Cluster{ID: pool.ClusterID, TenantID: "acme", PoolID: "pool-dev", Name: "c", Mode: "standard", Region: "us-central1", ReleaseChannel: "regular", State: resource.StateReady, Version: 1}
	managed := cl
	managed.ManagedBy = resource.NewSubstrateID()
	now := time.Now()
	sub := resource.Substrate{ID: managed.ManagedBy, TenantID: "acme", PoolID: "pool-gpu", PoolVersion: 7, AccountID: "acc-gcp", Mode: resource.SubstrateCreate,
		ClusterID: cl.ID, NodePools: []resource.SubstrateNodePool{{Flavor: "l4", Name: "bc-pool-gpu-l4", NodePoolID: pool.ID, State: resource.StateReady}},
		JoinedNodes: 3, State: resource.StateReady, CreatedAt: now, UpdatedAt: now}
	// A substrate without a cluster yet (its subject is itself), and one
	// that adopted a cluster whose ID is longer than the API makes.
	early := resource.Substrate{ID: resource.NewSubstrateID(), TenantID: "acme", PoolID: "pool-gpu", PoolVersion: 1, AccountID: "acc-gcp",
		Mode: resource.SubstrateCreate, NodePools: []resource.SubstrateNodePool{{Flavor: "l4", Name: "bc-pool-gpu-l4", State: resource.StatePending}},
		State: resource.StateError, Message: "account acc-metal has no managed Kubernetes", CreatedAt: now, UpdatedAt: now}
	adopted := sub
	adopted.Mode, adopted.ClusterID = resource.SubstrateAdopt, cl.ID+"0123456789"
	node := resource.SubstrateNode{Name: "gke-bc-pool-gpu-l4-1a2b-x7k2", Flavor: "l4", Zone: "us-central1-a", ProviderID: "gce://bc-dev/us-central1-a/gke-bc-pool-gpu-l4-1a2b-x7k2", JoinedAt: now}
	for _, typ := range event.Types {
		if doc.Channels[typ] == nil {
			t.Errorf("no channel %s", typ)
		}
		if doc.Components.Messages[typ].Summary == "" {
			t.Errorf("message %s has no summary", typ)
		}
		var events []event.Event
		switch {
		case apidoc.IsNodePoolEvent(typ):
			managedPool := pool
			managedPool.ManagedBy = sub.ID
			events = append(events, event.ForNodePool(typ, pool, pool.CreatedAt), event.ForNodePool(typ, managedPool, now))
		case apidoc.IsSubstrateNodeEvent(typ):
			for _, s := range []resource.Substrate{sub, early, adopted} {
				events = append(events, event.ForSubstrateNode(typ, s, node, now))
			}
		case apidoc.IsSubstrateEvent(typ):
			for _, s := range []resource.Substrate{sub, early, adopted} {
				events = append(events, event.ForSubstrate(typ, s, now))
			}
		default:
			events = append(events, event.ForCluster(typ, cl, cl.CreatedAt), event.ForCluster(typ, managed, now))
		}
		// Numbered as the transaction that writes them numbers them.
		outbox.Number(events, 41)
		for _, e := range events {
			m := outbox.Message(e)
			if apidoc.IsSubstrateEvent(typ) != (m.Attributes["substrateId"] != "") {
				t.Errorf("%s: substrateId %q", typ, m.Attributes["substrateId"])
			}
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
}

// TestAsyncAPIPoolEvents checks the pools module's events that this
// project consumes: their channels are received, not sent, and their
// data schema agrees with the consumer's decoders on the example of
// API.md §9 and on variants of it.
func TestAsyncAPIPoolEvents(t *testing.T) {
	var doc struct {
		Operations map[string]struct {
			Action  string `json:"action"`
			Channel struct {
				Ref string `json:"$ref"`
			} `json:"channel"`
		} `json:"operations"`
	}
	if err := json.Unmarshal(apidoc.AsyncAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, op := range doc.Operations {
		actions[strings.TrimPrefix(op.Channel.Ref, "#/channels/")] = op.Action
	}
	for _, typ := range event.Types {
		if actions[typ] != "send" {
			t.Errorf("channel %s: action %q, want send: this project publishes it", typ, actions[typ])
		}
	}
	consumed := apidoc.ConsumedTypes()
	if !slices.Equal(consumed, event.Consumed) {
		t.Errorf("ConsumedTypes = %v, want the types this project consumes: %v", consumed, event.Consumed)
	}
	for _, typ := range consumed {
		if actions[typ] != "receive" {
			t.Errorf("channel %s: action %q, want receive: kubernetesSubstrates-poolEvents consumes it", typ, actions[typ])
		}
	}

	const example = `{"id": "pool-gpu", "tenantId": "acme", "version": 7,
 "policy": {"substrate": {"kind": "kubernetes", "account": "acc-gcp",
   "cluster": {"create": {"region": "us-central1", "zones": ["us-central1-a"],
                          "releaseChannel": "regular"}}}},
 "flavors": [{"name": "l4", "machineType": "g2-standard-8", "nodeCount": 1,
              "autoscaling": {"minNodes": 0, "maxNodes": 8}, "spot": true,
              "accelerators": {"type": "nvidia-l4", "count": 1}}]}`
	adopt := `{"id":"pool-gpu","tenantId":"acme","version":8,"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp",` +
		`"cluster":{"adopt":{"clusterId":"kcl_01jd8x4k2m9q7v3w5y6z0a1b2c"}}}},"flavors":[{"name":"cpu","machineType":"e2-standard-4","nodeCount":1}],"owner":"team-ml"}`
	flavors := func(names ...string) string {
		var fs []string
		for _, n := range names {
			fs = append(fs, `{"name":"`+n+`","machineType":"e2-standard-4","nodeCount":1}`)
		}
		return `{"id":"p","tenantId":"acme","version":1,"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp","cluster":{"create":{"region":"us-central1"}}}},"flavors":[` +
			strings.Join(fs, ",") + `]}`
	}
	for _, tt := range []struct {
		name, data string
		valid      bool
	}{
		{"API.md's example", example, true},
		{"adopt, with a member of the pools module's", adopt, true},
		{"no substrate", `{"id":"p","tenantId":"acme","version":2,"policy":{}}`, true},
		{"another kind", `{"id":"p","tenantId":"acme","version":2,"policy":{"substrate":{"kind":"vm"}}}`, true},
		{"a flavor name of 20 characters", flavors(strings.Repeat("a", 20)), true},
		{"eight flavors", flavors("a", "b", "c", "d", "e", "f", "g", "h"), true},
		{"no version", `{"id":"p","tenantId":"acme","policy":{}}`, false},
		{"version 0", `{"id":"p","tenantId":"acme","version":0}`, false},
		{"no flavors", `{"id":"p","tenantId":"acme","version":1,"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp","cluster":{"create":{"region":"us-central1"}}}}}`, false},
		{"no account", strings.Replace(example, `"account": "acc-gcp",`, "", 1), false},
		{"create and adopt", strings.Replace(example, `"cluster": {"create"`, `"cluster": {"adopt":{"clusterId":"kcl_01jd8x4k2m9q7v3w5y6z0a1b2c"},"create"`, 1), false},
		{"neither create nor adopt", strings.Replace(adopt, `"adopt":{"clusterId":"kcl_01jd8x4k2m9q7v3w5y6z0a1b2c"}`, "", 1), false},
		{"an unknown member of create", strings.Replace(example, `"releaseChannel": "regular"`, `"releaseChannel": "regular", "size": 3`, 1), false},
		{"a bad release channel", strings.Replace(example, `"regular"`, `"fast"`, 1), false},
		{"a bad adopted cluster ID", strings.Replace(adopt, "kcl_01jd", "kcl_01JD", 1), false},
		{"a flavor name of 21 characters", flavors(strings.Repeat("a", 21)), false},
		{"a flavor name ending with -", flavors("gpu-"), false},
		{"nine flavors", flavors("a", "b", "c", "d", "e", "f", "g", "h", "i"), false},
		{"a flavor breaking a node pool rule", strings.Replace(example, `"nodeCount": 1`, `"nodeCount": 1001`, 1), false},
	} {
		docOK := apidoctest.Validate(apidoctest.AsyncAPI, "/components/messages/"+event.PoolUpdated+"/payload", []byte(tt.data)) == nil
		_, err := input.DecodePoolUpdated([]byte(tt.data))
		if docOK != tt.valid || (err == nil) != tt.valid {
			t.Errorf("%s: the document accepts it: %v, the decoder: %v (%v); want %v", tt.name, docOK, err == nil, err, tt.valid)
		}
	}
	// Duplicate flavor names break the x-rule the document lists.
	if _, err := input.DecodePoolUpdated([]byte(flavors("a", "a"))); err == nil {
		t.Errorf("DecodePoolUpdated accepts duplicate flavor names, which the document's %s forbids", apidoc.RuleUniqueFlavorNames)
	}
	for _, tt := range []struct {
		data  string
		valid bool
	}{
		{`{"id":"pool-gpu","tenantId":"acme","version":9}`, true},
		{`{"id":"pool-gpu","tenantId":"acme","version":9,"archivedBy":"alice"}`, true},
		{`{"id":"pool-gpu","tenantId":"acme"}`, false},
		{`{"id":"","tenantId":"acme","version":9}`, false},
	} {
		docOK := apidoctest.Validate(apidoctest.AsyncAPI, "/components/messages/"+event.PoolArchived+"/payload", []byte(tt.data)) == nil
		_, err := input.DecodePoolArchived([]byte(tt.data))
		if docOK != tt.valid || (err == nil) != tt.valid {
			t.Errorf("archived %s: the document accepts it: %v, the decoder: %v (%v); want %v", tt.data, docOK, err == nil, err, tt.valid)
		}
	}
	// The attributes the devstack publishes them with, as the pools
	// module does.
	attrs := `{"ce-specversion":"1.0","ce-id":"evt_01jd8x4k2m9q7v3w5y6z0a1b2c","ce-type":"` + event.PoolUpdated + `",` +
		`"ce-source":"//compute.better-compute.dev/tenants/acme","ce-subject":"pool-gpu","ce-time":"2026-11-30T12:00:00Z","content-type":"application/json","tenantId":"acme"}`
	ptr := "/components/messages/" + event.PoolUpdated + "/headers"
	if err := apidoctest.Validate(apidoctest.AsyncAPI, ptr, []byte(attrs)); err != nil {
		t.Errorf("pool event attributes: %v", err)
	}
	if err := apidoctest.Validate(apidoctest.AsyncAPI, ptr, []byte(strings.Replace(attrs, event.PoolUpdated, event.PoolArchived, 1))); err == nil {
		t.Errorf("%s's attributes pass %s's message", event.PoolArchived, event.PoolUpdated)
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

// TestREADMEConsumer holds the example consumer of this package's
// README.md (the API's documents and events) to Example_consumer, which go
// test compiles: every line of the README's block is a line of the example.
func TestREADMEConsumer(t *testing.T) {
	readme, err := os.ReadFile("README.md")
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

// TestPlanBodyAgreesWithDocument: kubernetesSubstrates.plan's body is
// refused by the document exactly when its decoder refuses it, for the
// pool's rules (those of compute.pool.updated) and the body's own.
func TestPlanBodyAgreesWithDocument(t *testing.T) {
	const pool = `{"id":"pool-gpu","tenantId":"acme","version":8,"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp",` +
		`"cluster":{"create":{"region":"us-central1","zones":["us-central1-a"]}}}},"flavors":[{"name":"cpu","machineType":"e2-standard-4","nodeCount":1}]}`
	body := func(p string) string { return `{"tenantId":"acme","pool":` + p + `}` }
	for _, tt := range []struct {
		name, data string
		valid      bool
	}{
		{"a pool", body(pool), true},
		{"a pool with a member of the pools module's", body(strings.Replace(pool, `"version":8`, `"version":8,"owner":"team-ml"`, 1)), true},
		{"a pool asking for no substrate", body(`{"id":"p","tenantId":"acme","version":2,"policy":{}}`), true},
		{"no pool", `{"tenantId":"acme"}`, false},
		{"no tenant", `{"pool":` + pool + `}`, false},
		{"an unknown member", `{"tenantId":"acme","dryRun":true,"pool":` + pool + `}`, false},
		{"a pool that is not an object", `{"tenantId":"acme","pool":[]}`, false},
		{"a pool without version", body(strings.Replace(pool, `"version":8,`, "", 1)), false},
		{"a flavor breaking a node pool rule", body(strings.Replace(pool, `"nodeCount":1`, `"nodeCount":1001`, 1)), false},
		{"no flavors", body(strings.Replace(pool, `,"flavors":[{"name":"cpu","machineType":"e2-standard-4","nodeCount":1}]`, "", 1)), false},
	} {
		docOK := apidoctest.Validate(apidoctest.OpenAPI, "/components/schemas/PlanSubstrate", []byte(tt.data)) == nil
		_, err := input.DecodePlanSubstrate([]byte(tt.data))
		if docOK != tt.valid || (err == nil) != tt.valid {
			t.Errorf("%s: the document accepts it: %v, the decoder: %v (%v); want %v", tt.name, docOK, err == nil, err, tt.valid)
		}
	}
	// Another tenant's pool breaks the x-rule the document lists.
	if _, err := input.DecodePlanSubstrate([]byte(body(strings.Replace(pool, `"tenantId":"acme"`, `"tenantId":"globex"`, 1)))); err == nil {
		t.Errorf("DecodePlanSubstrate accepts another tenant's pool, which the document's %s forbids", apidoc.RuleSamePoolTenant)
	}
}
