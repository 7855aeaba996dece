package apidoc_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/better-compute/kubernetes/shared/apidoc"
)

// TestOpenAPIForTheEcosystem holds what the ecosystem's validators found
// missing or in the way: no jsonSchemaDialect (Prism cannot resolve OAS
// 3.1's and then checks no body), 415 on every method (a body not declared
// JSON), WWW-Authenticate on every 401, X-Request-Id required on every
// answer, and no component that nothing uses.
func TestOpenAPIForTheEcosystem(t *testing.T) {
	var doc struct {
		JSONSchemaDialect *string `json:"jsonSchemaDialect"`
		Paths             map[string]struct {
			Post struct {
				OperationID string `json:"operationId"`
				Responses   map[string]struct {
					Headers map[string]struct {
						Ref string `json:"$ref"`
					} `json:"headers"`
				} `json:"responses"`
			} `json:"post"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
			Headers map[string]struct {
				Required bool `json:"required"`
			} `json:"headers"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.JSONSchemaDialect != nil {
		t.Errorf("jsonSchemaDialect = %q, want none (the default)", *doc.JSONSchemaDialect)
	}
	for name, h := range doc.Components.Headers {
		if !h.Required {
			t.Errorf("header %s is not required where it is declared; every answer that declares it carries it", name)
		}
	}
	if len(doc.Paths) != len(apidoc.Operations()) {
		t.Fatalf("%d paths, want %d", len(doc.Paths), len(apidoc.Operations()))
	}
	for path, item := range doc.Paths {
		op := item.Post
		if _, ok := op.Responses[strconv.Itoa(http.StatusUnsupportedMediaType)]; !ok {
			t.Errorf("%s (%s) declares no 415", op.OperationID, path)
		}
		for status, res := range op.Responses {
			want := map[string]bool{"X-Request-Id": true}
			switch status {
			case "401":
				want["WWW-Authenticate"] = true
			case "415":
				want["Accept"] = true
			case "503":
				want["Retry-After"] = true
			}
			for name := range want {
				if res.Headers[name].Ref != "#/components/headers/"+name {
					t.Errorf("%s %s: header %s not declared", op.OperationID, status, name)
				}
			}
			if len(res.Headers) != len(want) {
				t.Errorf("%s %s: headers %v, want those of %v", op.OperationID, status, res.Headers, want)
			}
		}
	}
	if _, ok := doc.Components.Schemas["PoolArchived"]; ok {
		t.Error("components/schemas has PoolArchived, which no method takes or answers")
	}
}

// TestAsyncAPIForTheEcosystem holds what the AsyncAPI CLI and Spectral's
// AsyncAPI rules found: a message's headers are of type object, a
// googlepubsub channel binding would need the topic's schemaSettings
// (these topics have no Pub/Sub schema, so none is declared), and every
// operation has a description.
func TestAsyncAPIForTheEcosystem(t *testing.T) {
	var doc struct {
		Info struct {
			Tags []any `json:"tags"`
		} `json:"info"`
		Channels map[string]struct {
			Bindings map[string]any `json:"bindings"`
		} `json:"channels"`
		Operations map[string]struct {
			Description string `json:"description"`
		} `json:"operations"`
		Components struct {
			Messages map[string]struct {
				Headers struct {
					Type string `json:"type"`
				} `json:"headers"`
			} `json:"messages"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.AsyncAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for name, m := range doc.Components.Messages {
		if m.Headers.Type != "object" {
			t.Errorf("message %s: headers of type %q, want object", name, m.Headers.Type)
		}
	}
	for name, c := range doc.Channels {
		if b, ok := c.Bindings["googlepubsub"].(map[string]any); ok && b["schemaSettings"] == nil {
			t.Errorf("channel %s: a googlepubsub binding without the schemaSettings its schema requires", name)
		}
	}
	for name, op := range doc.Operations {
		if op.Description == "" {
			t.Errorf("operation %s has no description", name)
		}
	}
	if len(doc.Info.Tags) == 0 {
		t.Error("info has no tags")
	}
}
