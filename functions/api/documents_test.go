package api_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/shared/apidoc"
)

// TestOperationsAreTheAPIs holds the methods this package serves equal to
// those the document describes (apidoc.Operations), in the same order.
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
