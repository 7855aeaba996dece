package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/input"
)

// Plan-time validation builds the request body the create would send
// from the configuration's known values and runs the API's own decoder on
// it (shared/input: the definitions the OpenAPI document is made from),
// so the provider holds no copy of a constraint. Each field the decoder
// names becomes one diagnostic on the attribute it came from. A value not
// known yet (another resource's ID) is left out of the body, and what the
// decoder says of it is dropped; so is what it says of a field left out
// because it is null: OpenTofu checks required attributes itself, and the
// provider fills the others (tenant_id) at apply.

// requestBody is a request body being built, with the JSON paths of the
// fields left out of it.
type requestBody struct {
	fields  map[string]any
	skipped []string
}

func newRequestBody() *requestBody { return &requestBody{fields: map[string]any{}} }

// set puts the value of an attribute at the JSON path key (a member of
// the body, or of one of its objects at prefix): left out when null or
// not wholly known.
func (b *requestBody) set(obj map[string]any, prefix, key string, v attr.Value) {
	p, known := plain(v)
	if !known || p == nil {
		b.skipped = append(b.skipped, joinJSON(prefix, key))
		return
	}
	obj[key] = p
}

func joinJSON(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// setSpec puts a node pool spec's attributes into obj, whose JSON path is
// prefix.
func (b *requestBody) setSpec(obj map[string]any, prefix string, s specModel) {
	b.set(obj, prefix, "name", s.Name)
	b.set(obj, prefix, "machineType", s.MachineType)
	b.set(obj, prefix, "nodeCount", s.NodeCount)
	b.set(obj, prefix, "autoscaling", s.Autoscaling)
	b.set(obj, prefix, "diskGiB", s.DiskGiB)
	b.set(obj, prefix, "diskType", s.DiskType)
	b.set(obj, prefix, "spot", s.Spot)
	b.set(obj, prefix, "accelerators", s.Accelerators)
	b.set(obj, prefix, "zones", s.Zones)
	b.set(obj, prefix, "labels", s.Labels)
	b.set(obj, prefix, "taints", s.Taints)
}

// validate runs decode on the body and returns a diagnostic per field
// the decoder names, on the attribute toPath maps it to.
func (b *requestBody) validate(decode func([]byte) error) diag.Diagnostics {
	var diags diag.Diagnostics
	data, err := json.Marshal(b.fields)
	if err != nil {
		diags.AddError("Cannot validate the configuration", err.Error())
		return diags
	}
	err = decode(data)
	if err == nil {
		return nil
	}
	var e *errs.Error
	if !errors.As(err, &e) || len(e.Fields) == 0 {
		diags.AddError("Invalid configuration", err.Error())
		return diags
	}
	for _, f := range e.Fields {
		if b.isSkipped(f.Field) {
			continue
		}
		p, err := attributePath(f.Field)
		if err != nil {
			diags.AddError("Invalid configuration", f.String())
			continue
		}
		diags.AddAttributeError(p, "Invalid "+attributeName(p), fmt.Sprintf("The API refuses %s: %s.", f.Field, f.Reason))
	}
	return diags
}

// isSkipped says whether field lies at or under a field left out.
func (b *requestBody) isSkipped(field string) bool {
	for _, s := range b.skipped {
		if field == s || strings.HasPrefix(field, s+".") || strings.HasPrefix(field, s+"[") {
			return true
		}
	}
	return false
}

// attributeName is the last attribute name of p, for a diagnostic's summary.
func attributeName(p path.Path) string {
	steps := p.Steps()
	for i := len(steps) - 1; i >= 0; i-- {
		if n, ok := steps[i].(path.PathStepAttributeName); ok {
			return string(n)
		}
	}
	return p.String()
}

// plain is v as encoding/json writes it, with object attribute names in
// the API's camelCase; known is false when any part of v is unknown. A
// null is nil.
func plain(v attr.Value) (out any, known bool) {
	if v.IsUnknown() {
		return nil, false
	}
	if v.IsNull() {
		return nil, true
	}
	switch v := v.(type) {
	case basetypes.StringValue:
		return v.ValueString(), true
	case basetypes.Int64Value:
		return v.ValueInt64(), true
	case basetypes.BoolValue:
		return v.ValueBool(), true
	case basetypes.NumberValue:
		f, _ := v.ValueBigFloat().Int(new(big.Int))
		return f, true
	case basetypes.ListValue:
		return plainList(v.Elements())
	case basetypes.SetValue:
		return plainList(v.Elements())
	case basetypes.MapValue:
		m := map[string]any{}
		for k, e := range v.Elements() {
			p, ok := plain(e)
			if !ok {
				return nil, false
			}
			m[k] = p
		}
		return m, true
	case basetypes.ObjectValue:
		m := map[string]any{}
		for k, e := range v.Attributes() {
			p, ok := plain(e)
			if !ok {
				return nil, false
			}
			if p != nil {
				m[jsonName(k)] = p
			}
		}
		return m, true
	}
	return nil, false
}

func plainList(elems []attr.Value) (any, bool) {
	out := make([]any, len(elems))
	for i, e := range elems {
		p, ok := plain(e)
		if !ok {
			return nil, false
		}
		out[i] = p
	}
	return out, true
}

// nameExceptions are the API's field names that snake_case does not turn
// into the provider's attribute names, and back.
var nameExceptions = map[string]string{
	"diskGiB":   "disk_gib",
	"nodePools": "node_pool",
}

// attrName is the provider's attribute name of an API field.
func attrName(field string) string {
	if n, ok := nameExceptions[field]; ok {
		return n
	}
	return snakeCase(field)
}

// snakeCase is camelCase in snake_case.
func snakeCase(field string) string {
	var b strings.Builder
	for i, r := range field {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// jsonName is the API's field name of an attribute name.
func jsonName(attribute string) string {
	for f, a := range nameExceptions {
		if a == attribute {
			return f
		}
	}
	parts := strings.Split(attribute, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// attributePath is the attribute of a JSON path as shared/input writes
// them: names joined by dots, [3] for an element of a list, ["key"] for a
// member of a map (autoscaling.minNodes, nodePools[1].zones[0],
// labels["team"]).
func attributePath(field string) (path.Path, error) {
	var p path.Path
	started := false
	rest := field
	for rest != "" {
		switch {
		case rest[0] == '.':
			rest = rest[1:]
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if strings.HasPrefix(rest, `["`) {
				// A quoted key may hold ']': find the closing quote.
				var key string
				dec := json.NewDecoder(strings.NewReader(rest[1:]))
				if err := dec.Decode(&key); err != nil {
					return p, fmt.Errorf("field %q: bad key: %w", field, err)
				}
				end = 1 + int(dec.InputOffset())
				if end >= len(rest) || rest[end] != ']' {
					return p, fmt.Errorf("field %q: unclosed key", field)
				}
				if !started {
					return p, fmt.Errorf("field %q: starts with a key", field)
				}
				p = p.AtMapKey(key)
				rest = rest[end+1:]
				continue
			}
			if end < 0 {
				return p, fmt.Errorf("field %q: unclosed index", field)
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil || !started {
				return p, fmt.Errorf("field %q: bad index", field)
			}
			p = p.AtListIndex(i)
			rest = rest[end+1:]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			name := attrName(rest[:end])
			if started {
				p = p.AtName(name)
			} else {
				p, started = path.Root(name), true
			}
			rest = rest[end:]
		}
	}
	if !started {
		return p, fmt.Errorf("field %q: no name", field)
	}
	return p, nil
}

// validateNodePool checks a node pool resource's configuration with the
// API's decoder of kubernetesNodePools.create.
func validateNodePool(m nodePoolModel) diag.Diagnostics {
	b := newRequestBody()
	b.set(b.fields, "", "tenantId", m.TenantID)
	b.set(b.fields, "", "clusterId", m.ClusterID)
	b.setSpec(b.fields, "", m.specModel)
	return b.validate(func(data []byte) error {
		_, err := input.DecodeCreateNodePool(data)
		return err
	})
}

// validateCluster checks a cluster resource's configuration with the
// API's decoder of kubernetesClusters.create.
func validateCluster(ctx context.Context, m clusterModel) diag.Diagnostics {
	b := newRequestBody()
	b.set(b.fields, "", "tenantId", m.TenantID)
	b.set(b.fields, "", "poolId", m.PoolID)
	b.set(b.fields, "", "name", m.Name)
	if m.Mode.IsNull() {
		// The attribute's default: whether node pools are required
		// depends on it.
		b.fields["mode"] = defaultMode
	} else {
		b.set(b.fields, "", "mode", m.Mode)
	}
	b.set(b.fields, "", "region", m.Region)
	b.set(b.fields, "", "releaseChannel", m.ReleaseChannel)
	b.set(b.fields, "", "labels", m.Labels)
	var diags diag.Diagnostics
	switch {
	case m.NodePools.IsUnknown():
		// A dynamic block over values not known yet.
		b.skipped = append(b.skipped, "nodePools")
	case len(m.NodePools.Elements()) > 0:
		var pools []any
		for i, e := range m.NodePools.Elements() {
			prefix := "nodePools[" + strconv.Itoa(i) + "]"
			o, ok := e.(basetypes.ObjectValue)
			if !ok || o.IsUnknown() || o.IsNull() {
				b.skipped = append(b.skipped, prefix)
				pools = append(pools, map[string]any{})
				continue
			}
			var s specModel
			diags.Append(o.As(ctx, &s, basetypes.ObjectAsOptions{})...)
			obj := map[string]any{}
			b.setSpec(obj, prefix, s)
			pools = append(pools, obj)
		}
		b.fields["nodePools"] = pools
	}
	if diags.HasError() {
		return diags
	}
	return b.validate(func(data []byte) error {
		_, err := input.DecodeCreateCluster(data)
		return err
	})
}
