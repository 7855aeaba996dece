package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/better-compute/kubernetes/shared/apidoc"
)

// TestSchemaMatchesOpenAPI holds the provider's schemas to the OpenAPI
// document the server serves: every property of the API's resources and
// create bodies is an attribute of the provider, and every attribute of
// the provider is a property of the API (but the provider's own:
// timeouts). A field added to the API and not to the provider fails here.
func TestSchemaMatchesOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	res, data := providerSchemas(t)

	cases := []struct {
		name string
		api  string // schema of the document
		tf   *tfNode
		// configurable compares only the attributes a configuration
		// sets (a create body), both ways; else every attribute.
		configurable bool
		// renamed are the API's fields that the provider names otherwise
		// than in snake_case, in this pair.
		renamed map[string]string
		// apiOnly are the API's fields with no attribute, and why.
		apiOnly map[string]string
	}{
		{name: "node pool resource, NodePool", api: "NodePool", tf: res["bettercompute_kubernetes_node_pool"]},
		{name: "node pool resource, create body", api: "CreateNodePool", tf: res["bettercompute_kubernetes_node_pool"], configurable: true,
			apiOnly: map[string]string{"idempotencyKey": "made by the provider from the plan"}},
		{name: "cluster resource, Cluster", api: "Cluster", tf: res["bettercompute_kubernetes_cluster"],
			// node_pool is create-only input: the first pools, not part of
			// the cluster the API answers.
			renamed: map[string]string{}},
		{name: "cluster resource, create body", api: "CreateCluster", tf: res["bettercompute_kubernetes_cluster"], configurable: true,
			renamed: map[string]string{"nodePools": "node_pool"},
			apiOnly: map[string]string{"idempotencyKey": "made by the provider from the plan"}},
		{name: "cluster data source, Cluster", api: "Cluster", tf: data["bettercompute_kubernetes_cluster"]},
		{name: "node pools data source, NodePool", api: "NodePool", tf: data["bettercompute_kubernetes_node_pools"].child("node_pools")},
		{name: "substrate data source, Substrate", api: "Substrate", tf: data["bettercompute_kubernetes_substrate"]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.tf == nil {
				t.Fatalf("the provider has no schema for %s", c.name)
			}
			tf := c.tf
			if c.api == "Cluster" && !c.configurable {
				// The cluster's first node pools are create input only.
				tf = tf.without("node_pool")
			}
			compare(t, doc, c.api, doc.schema(c.api), tf.without("timeouts"), c.configurable, c.renamed, c.apiOnly)
		})
	}
}

// compare checks that the properties of the API's schema s and the
// attributes of n map one to one, recursively, at where.
func compare(t testing.TB, doc openAPI, where string, s map[string]any, n *tfNode, configurable bool, renamed, apiOnly map[string]string) {
	t.Helper()
	props := doc.properties(s)
	want := map[string]bool{}
	for field := range props {
		if _, ok := apiOnly[field]; ok {
			continue
		}
		name := snake(field)
		if r, ok := renamed[field]; ok {
			name = r
		}
		want[name] = true
		child := n.children[name]
		if child == nil || (configurable && !child.configurable) {
			t.Errorf("%s.%s: the API has it, the provider has no attribute %s", where, field, name)
			continue
		}
		if sub := doc.object(props[field]); sub != nil && len(child.children) > 0 {
			compare(t, doc, where+"."+field, sub, child, configurable, renamed, apiOnly)
		}
	}
	for name, child := range n.children {
		if configurable && !child.configurable {
			continue
		}
		if !want[name] {
			t.Errorf("%s: the provider has attribute %s, the API has no field for it", where, name)
		}
	}
}

// snake is the attribute name of an API field: camelCase in snake_case,
// with the one exception of an initialism (diskGiB).
func snake(field string) string {
	if field == "diskGiB" {
		return "disk_gib"
	}
	return snakeCase(field)
}

// tfNode is an attribute or block of a provider schema, with its nested ones.
type tfNode struct {
	children map[string]*tfNode
	// configurable: a configuration may set it (required or optional).
	configurable bool
}

func (n *tfNode) child(name string) *tfNode {
	if n == nil {
		return nil
	}
	return n.children[name]
}

func (n *tfNode) without(name string) *tfNode {
	c := &tfNode{children: map[string]*tfNode{}, configurable: n.configurable}
	for k, v := range n.children {
		if k != name {
			c.children[k] = v
		}
	}
	return c
}

func blockNode(b *tfprotov6.SchemaBlock) *tfNode {
	n := &tfNode{children: map[string]*tfNode{}, configurable: true}
	for _, a := range b.Attributes {
		n.children[a.Name] = attributeNode(a)
	}
	for _, nb := range b.BlockTypes {
		n.children[nb.TypeName] = blockNode(nb.Block)
	}
	return n
}

func attributeNode(a *tfprotov6.SchemaAttribute) *tfNode {
	n := &tfNode{children: map[string]*tfNode{}, configurable: a.Required || a.Optional}
	if a.NestedType != nil {
		for _, c := range a.NestedType.Attributes {
			n.children[c.Name] = attributeNode(c)
		}
	}
	return n
}

// providerSchemas are the provider's resource and data source schemas as
// OpenTofu gets them, over the plugin protocol.
func providerSchemas(t *testing.T) (resources, dataSources map[string]*tfNode) {
	t.Helper()
	_, resp := testServer(t)
	for _, d := range resp.Diagnostics {
		t.Errorf("GetProviderSchema: %s: %s", d.Summary, d.Detail)
	}
	resources, dataSources = map[string]*tfNode{}, map[string]*tfNode{}
	for name, s := range resp.ResourceSchemas {
		resources[name] = blockNode(s.Block)
	}
	for name, s := range resp.DataSourceSchemas {
		dataSources[name] = blockNode(s.Block)
	}
	return resources, dataSources
}

// openAPI is the document the server serves, as JSON values.
type openAPI struct{ schemas map[string]any }

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	var d struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI(), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Components.Schemas) == 0 {
		t.Fatal("the OpenAPI document has no schemas")
	}
	return openAPI{d.Components.Schemas}
}

func (d openAPI) schema(name string) map[string]any {
	s, _ := d.schemas[name].(map[string]any)
	return s
}

// resolve follows a $ref.
func (d openAPI) resolve(v any) map[string]any {
	s, _ := v.(map[string]any)
	for s != nil {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = d.schema(strings.TrimPrefix(ref, "#/components/schemas/"))
	}
	return s
}

func (d openAPI) properties(s map[string]any) map[string]any {
	p, _ := d.resolve(s)["properties"].(map[string]any)
	return p
}

// object is the object schema of a property: itself, or its items; nil
// for a scalar or a map.
func (d openAPI) object(v any) map[string]any {
	s := d.resolve(v)
	if items, ok := s["items"]; ok {
		s = d.resolve(items)
	}
	if _, ok := s["properties"]; ok {
		return s
	}
	return nil
}

// TestSchemaTestFails checks the check: an API field the provider lacks,
// and an attribute the API lacks, are both named.
func TestSchemaTestFails(t *testing.T) {
	doc := openAPI{schemas: map[string]any{
		"X": map[string]any{"properties": map[string]any{"fooBar": map[string]any{"type": "string"}, "diskGiB": map[string]any{}}},
	}}
	n := &tfNode{children: map[string]*tfNode{"disk_gib": {}, "extra": {}}}
	ft := &fakeT{}
	compare(ft, doc, "X", doc.schema("X"), n, false, nil, nil)
	want := []string{"X.fooBar: the API has it, the provider has no attribute foo_bar",
		"X: the provider has attribute extra, the API has no field for it"}
	slices.Sort(ft.errors)
	slices.Sort(want)
	if !slices.Equal(ft.errors, want) {
		t.Errorf("errors = %q, want %q", ft.errors, want)
	}
}

// fakeT records the errors of compare.
type fakeT struct {
	testing.TB
	errors []string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// TestInPlaceIsWhatUpdateTakes holds the node pool resource's in-place
// arguments to kubernetesNodePools.update's body (nodeCount and
// autoscaling, API.md §5): every other argument forces a replacement, and
// one the API started to take in an update would fail here until the
// provider changes it in place.
func TestInPlaceIsWhatUpdateTakes(t *testing.T) {
	doc := loadOpenAPI(t)
	inPlace := map[string]bool{}
	for field := range doc.properties(doc.schema("UpdateNodePool")) {
		switch field {
		case "tenantId", "clusterId", "nodePoolId":
			// Which pool: tenant_id and cluster_id replace, id is computed.
		default:
			inPlace[snake(field)] = true
		}
	}
	if len(inPlace) == 0 {
		t.Fatal("UpdateNodePool has no field to change")
	}
	var resp resource.SchemaResponse
	(&nodePoolResource{}).Schema(context.Background(), resource.SchemaRequest{}, &resp)
	for name, a := range resp.Schema.Attributes {
		if !a.IsRequired() && !a.IsOptional() {
			continue
		}
		replaces := forcesReplacement(a)
		if inPlace[name] && replaces {
			t.Errorf("%s: the API updates it in place, the provider replaces the pool", name)
		}
		if !inPlace[name] && !replaces {
			t.Errorf("%s: the API never changes it, the provider does not replace the pool", name)
		}
	}
}

// describer is a plan modifier of any attribute type.
type describer interface {
	Description(context.Context) string
}

// describers are the plan modifiers of one attribute type as describers.
func describers[M describer](mods []M) []describer {
	out := make([]describer, len(mods))
	for i, m := range mods {
		out[i] = m
	}
	return out
}

// forcesReplacement says whether one of the attribute's plan modifiers is
// a RequiresReplace.
func forcesReplacement(a rschema.Attribute) bool {
	var mods []describer
	switch a := a.(type) {
	case rschema.StringAttribute:
		mods = describers(a.PlanModifiers)
	case rschema.Int64Attribute:
		mods = describers(a.PlanModifiers)
	case rschema.BoolAttribute:
		mods = describers(a.PlanModifiers)
	case rschema.ListAttribute:
		mods = describers(a.PlanModifiers)
	case rschema.ListNestedAttribute:
		mods = describers(a.PlanModifiers)
	case rschema.MapAttribute:
		mods = describers(a.PlanModifiers)
	case rschema.SingleNestedAttribute:
		mods = describers(a.PlanModifiers)
	}
	want := stringplanmodifier.RequiresReplace().Description(context.Background())
	for _, m := range mods {
		if m.Description(context.Background()) == want {
			return true
		}
	}
	return false
}
