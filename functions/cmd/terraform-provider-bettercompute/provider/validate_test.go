package provider

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

const (
	clusterID  = "kcl_01jd0000000000000000000000"
	nodePoolID = "knp_01jd0000000000000000000000"
)

// unknown marks a value not known at plan time (another resource's ID).
type unknown struct{}

// TestValidateConfig checks plan-time validation through the plugin
// protocol, as OpenTofu calls it: every field the API's decoder refuses
// is one diagnostic on its attribute, with the API's reason; values not
// known yet are not judged.
func TestValidateConfig(t *testing.T) {
	pool := func(over map[string]any) map[string]any {
		m := map[string]any{"cluster_id": clusterID, "name": "web", "machine_type": "e2-standard-4", "node_count": 2}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	spec := map[string]any{"name": "default", "machine_type": "e2-standard-4", "node_count": 1}
	cluster := func(over map[string]any) map[string]any {
		m := map[string]any{"pool_id": "pool-dev", "name": "prod", "region": "us-central1", "node_pool": []any{spec}}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name     string
		resource string
		config   map[string]any
		want     []string // attribute paths, sorted
		reason   string   // in the first diagnostic's detail
	}{
		{"valid pool", "bettercompute_kubernetes_node_pool", pool(nil), nil, ""},
		{"bad machine type and managed label", "bettercompute_kubernetes_node_pool",
			pool(map[string]any{"machine_type": "E2_standard", "labels": map[string]any{"kubernetes.io/role": "x"}}),
			[]string{`labels["kubernetes.io/role"]`, "machine_type"}, "machineType"},
		{"autoscaling out of order", "bettercompute_kubernetes_node_pool",
			pool(map[string]any{"autoscaling": map[string]any{"min_nodes": 4, "max_nodes": 2}}),
			[]string{"autoscaling.min_nodes"}, "maxNodes"},
		{"bad taint effect and zone", "bettercompute_kubernetes_node_pool",
			pool(map[string]any{"zones": []any{"us-central1-a", "Nope"},
				"taints": []any{map[string]any{"key": "gpu", "value": "true", "effect": "Sometimes"}}}),
			[]string{"taints[0].effect", "zones[1]"}, ""},
		{"cluster not known yet", "bettercompute_kubernetes_node_pool", pool(map[string]any{"cluster_id": unknown{}}), nil, ""},
		{"bad cluster id", "bettercompute_kubernetes_node_pool", pool(map[string]any{"cluster_id": "cluster-1"}), []string{"cluster_id"}, ""},
		{"valid cluster", "bettercompute_kubernetes_cluster", cluster(nil), nil, ""},
		{"bad second pool", "bettercompute_kubernetes_cluster",
			cluster(map[string]any{"node_pool": []any{spec, map[string]any{"name": "b", "machine_type": "e2", "node_count": 1, "disk_gib": 5}}}),
			[]string{"node_pool[1].disk_gib"}, ""},
		{"standard with no pool", "bettercompute_kubernetes_cluster", cluster(map[string]any{"node_pool": []any{}}), []string{"node_pool"}, ""},
		{"bad release channel", "bettercompute_kubernetes_cluster", cluster(map[string]any{"release_channel": "nightly"}), []string{"release_channel"}, ""},
	}
	server, all := testServer(t)
	schemas := all.ResourceSchemas
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ := schemas[c.resource].ValueType()
			cfg, err := tfprotov6.NewDynamicValue(typ, objectValue(t, typ.(tftypes.Object), c.config))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := server.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{TypeName: c.resource, Config: &cfg})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range resp.Diagnostics {
				if d.Attribute == nil {
					t.Errorf("diagnostic with no attribute: %s: %s", d.Summary, d.Detail)
					continue
				}
				got = append(got, attributeString(d.Attribute))
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("diagnostics on %q, want %q; all: %+v", got, c.want, resp.Diagnostics)
			}
			if c.reason != "" && len(resp.Diagnostics) > 0 && !strings.Contains(resp.Diagnostics[len(resp.Diagnostics)-1].Detail+resp.Diagnostics[0].Detail, c.reason) {
				t.Errorf("details %q and %q do not say %q", resp.Diagnostics[0].Detail, resp.Diagnostics[len(resp.Diagnostics)-1].Detail, c.reason)
			}
		})
	}
}

// attributeString writes a path as the test's wants: a.b[0]["k"].
func attributeString(p *tftypes.AttributePath) string {
	var b strings.Builder
	for _, s := range p.Steps() {
		switch s := s.(type) {
		case tftypes.AttributeName:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(s))
		case tftypes.ElementKeyInt:
			b.WriteString("[" + strconv.FormatInt(int64(s), 10) + "]")
		case tftypes.ElementKeyString:
			b.WriteString(`["` + string(s) + `"]`)
		}
	}
	return b.String()
}

// testServer is the provider over the plugin protocol, and its schemas as
// OpenTofu gets them.
func testServer(t *testing.T) (tfprotov6.ProviderServer, *tfprotov6.GetProviderSchemaResponse) {
	t.Helper()
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return server, resp
}

// objectValue is a configuration of type typ with the attributes of m
// (Go values: string, int, bool, []any, map[string]any, unknown{}) and
// null for every other.
func objectValue(t *testing.T, typ tftypes.Object, m map[string]any) tftypes.Value {
	t.Helper()
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		v, ok := m[name]
		if !ok {
			vals[name] = tftypes.NewValue(at, nil)
			continue
		}
		vals[name] = goValue(t, at, v)
	}
	for name := range m {
		if _, ok := typ.AttributeTypes[name]; !ok {
			t.Fatalf("no attribute %s in the schema", name)
		}
	}
	return tftypes.NewValue(typ, vals)
}

func goValue(t *testing.T, typ tftypes.Type, v any) tftypes.Value {
	t.Helper()
	if _, ok := v.(unknown); ok {
		return tftypes.NewValue(typ, tftypes.UnknownValue)
	}
	switch typ := typ.(type) {
	case tftypes.Object:
		return objectValue(t, typ, v.(map[string]any))
	case tftypes.List:
		var elems []tftypes.Value
		for _, e := range v.([]any) {
			elems = append(elems, goValue(t, typ.ElementType, e))
		}
		return tftypes.NewValue(typ, elems)
	case tftypes.Map:
		elems := map[string]tftypes.Value{}
		for k, e := range v.(map[string]any) {
			elems[k] = goValue(t, typ.ElementType, e)
		}
		return tftypes.NewValue(typ, elems)
	}
	switch x := v.(type) {
	case int:
		return tftypes.NewValue(typ, int64(x))
	}
	return tftypes.NewValue(typ, v)
}

// TestAttributePath checks the reading of shared/input's JSON paths.
func TestAttributePath(t *testing.T) {
	cases := []struct {
		field string
		want  path.Path
		bad   bool
	}{
		{field: "machineType", want: path.Root("machine_type")},
		{field: "diskGiB", want: path.Root("disk_gib")},
		{field: "autoscaling.minNodes", want: path.Root("autoscaling").AtName("min_nodes")},
		{field: "taints[3].effect", want: path.Root("taints").AtListIndex(3).AtName("effect")},
		{field: `labels["team"]`, want: path.Root("labels").AtMapKey("team")},
		{field: `labels["a]b\"c"]`, want: path.Root("labels").AtMapKey(`a]b"c`)},
		{field: "nodePools[1].zones[0]", want: path.Root("node_pool").AtListIndex(1).AtName("zones").AtListIndex(0)},
		{field: "[0]", bad: true},
		{field: "zones[x]", bad: true},
		{field: `labels["open`, bad: true},
		{field: "", bad: true},
	}
	for _, c := range cases {
		got, err := attributePath(c.field)
		if c.bad {
			if err == nil {
				t.Errorf("attributePath(%q) = %s, want an error", c.field, got)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("attributePath(%q) = %s, %v; want %s", c.field, got, err, c.want)
		}
	}
}
