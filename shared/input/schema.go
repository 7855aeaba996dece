package input

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/better-compute/kubernetes/shared/resource"
)

// Schemas returns the JSON Schema (draft 2020-12, the dialect of OpenAPI
// 3.1) of every request body and of the parts they share, by name:
// CreateNodePool, UpdateNodePool, NodePoolRef, ClusterRef, CreateCluster,
// ListClusters, NodePoolSpec, Autoscaling, Accelerators, Taint, Labels,
// LabelValue. A schema refers to another as ref(name).
//
// The constraints of each field are read from the validator tags and the
// pattern table the decoders check (validate.go), so the two cannot drift;
// what the decoders check by hand (which members are required, Kubernetes'
// label rules, uniqueness, the mode's node pools, update's "at least one")
// is written here beside them, and the agreement test of shared/apidoc
// proves the whole against the decoders. Rules across fields that JSON
// Schema cannot state (minNodes not above maxNodes, nodeCount within the
// bounds, unique taints and node pool names) are listed under "x-rules" of
// the schema they concern, each with an id and a description.
//
// Each call returns new maps: callers may change them.
func Schemas(ref func(name string) string) map[string]map[string]any {
	g := schemaGen{ref: ref}
	autoscaling := g.object(reflect.TypeFor[Autoscaling](), "minNodes", "maxNodes")
	autoscaling["description"] = "Bounds of the node count per zone; nodeCount is then the initial count."
	autoscaling["x-rules"] = []any{rule(RuleAutoscalingOrder, "autoscaling.minNodes is not above autoscaling.maxNodes")}

	accelerators := g.object(reflect.TypeFor[accelerators](), "type", "count")
	accelerators["description"] = "GPUs attached to each node (count per node)."

	taint := g.object(reflect.TypeFor[taint](), "key", "effect")
	taint["description"] = "A Kubernetes taint put on every node of the pool."
	props(taint)["key"] = labelKeySchema("Taint key: a Kubernetes qualified name, with an optional DNS subdomain prefix.")
	props(taint)["value"] = map[string]any{"$ref": ref("LabelValue")}

	spec := g.object(reflect.TypeFor[nodePoolSpec](), nodePoolSpecRequired...)
	spec["description"] = "A node pool as a tenant asks for it (a node pool create body without tenantId, clusterId and idempotencyKey)."
	spec["x-rules"] = nodePoolRules()

	create := g.object(reflect.TypeFor[createNodePoolBody](), append([]string{"tenantId", "clusterId"}, nodePoolSpecRequired...)...)
	create["x-rules"] = nodePoolRules()

	update := g.object(reflect.TypeFor[UpdateNodePool](), "tenantId", "clusterId", "nodePoolId")
	props(update)["autoscaling"] = map[string]any{
		"description": "New autoscaling bounds; null turns autoscaling off.",
		"oneOf":       []any{map[string]any{"$ref": ref("Autoscaling")}, map[string]any{"type": "null"}},
	}
	update["anyOf"] = []any{
		map[string]any{"required": []any{"nodeCount"}},
		map[string]any{"required": []any{"autoscaling"}},
	}
	update["description"] = "A resize: at least one of nodeCount and autoscaling. Every other field of a node pool never changes (INVALID_INPUT)."
	update["x-rules"] = []any{rule(RuleNodeCountInBounds, "when both are given, nodeCount lies within autoscaling.minNodes and autoscaling.maxNodes")}

	cluster := g.object(reflect.TypeFor[createClusterBody](), "tenantId", "poolId", "name", "mode", "region")
	cp := props(cluster)
	cp["releaseChannel"].(map[string]any)["default"] = DefaultReleaseChannel
	cp["nodePools"].(map[string]any)["description"] = fmt.Sprintf("A standard cluster's first node pools: 1 to %d (required); an autopilot cluster takes none.", resource.MaxNodePools)
	cluster["allOf"] = []any{
		map[string]any{
			"if":   map[string]any{"required": []any{"mode"}, "properties": map[string]any{"mode": map[string]any{"const": resource.ModeStandard}}},
			"then": map[string]any{"required": []any{"nodePools"}, "properties": map[string]any{"nodePools": map[string]any{"minItems": 1, "maxItems": resource.MaxNodePools}}},
		},
		map[string]any{
			"if":   map[string]any{"required": []any{"mode"}, "properties": map[string]any{"mode": map[string]any{"const": resource.ModeAutopilot}}},
			"then": map[string]any{"properties": map[string]any{"nodePools": map[string]any{"maxItems": 0}}},
		},
	}
	cluster["x-rules"] = []any{rule(RuleUniquePoolNames, "node pool names are unique among nodePools")}

	list := g.object(reflect.TypeFor[ListClusters](), "tenantId")
	props(list)["pageSize"].(map[string]any)["default"] = DefaultPageSize
	props(list)["pageToken"].(map[string]any)["description"] = "The nextPageToken of the previous page; omit (or \"\") for the first."

	return map[string]map[string]any{
		"Autoscaling":    autoscaling,
		"Accelerators":   accelerators,
		"Taint":          taint,
		"Labels":         labelsSchema(ref),
		"LabelValue":     labelValueSchema(),
		"NodePoolSpec":   spec,
		"CreateNodePool": create,
		"UpdateNodePool": update,
		"NodePoolRef":    g.object(reflect.TypeFor[NodePoolRef](), "tenantId", "clusterId", "nodePoolId"),
		"ClusterRef":     g.object(reflect.TypeFor[ClusterRef](), "tenantId", "clusterId"),
		"CreateCluster":  cluster,
		"ListClusters":   list,
	}
}

// The ids of the rules across fields (x-rules) that the decoders check
// and JSON Schema cannot state.
const (
	RuleAutoscalingOrder  = "autoscalingOrder"
	RuleNodeCountInBounds = "nodeCountInBounds"
	RuleUniqueTaints      = "uniqueTaints"
	RuleUniquePoolNames   = "uniquePoolNames"
)

// nodePoolSpecRequired are the members decodeSpec requires.
var nodePoolSpecRequired = []string{"name", "machineType", "nodeCount"}

func nodePoolRules() []any {
	return []any{
		rule(RuleNodeCountInBounds, "with autoscaling, nodeCount lies within autoscaling.minNodes and autoscaling.maxNodes"),
		rule(RuleUniqueTaints, "no two taints have the same key and effect"),
	}
}

func rule(id, description string) map[string]any {
	return map[string]any{"id": id, "description": description}
}

func props(s map[string]any) map[string]any { return s["properties"].(map[string]any) }

// Kubernetes' label rules (k8s.io/apimachinery's IsLabelKey and
// IsLabelValue, which the decoders call), as patterns.
const (
	labelNameFmt  = `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
	dnsLabelFmt   = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	labelKeyFmt   = `^(` + dnsLabelFmt + `(\.` + dnsLabelFmt + `)*/)?` + labelNameFmt + `$`
	labelValueFmt = `^(` + labelNameFmt + `)?$`
)

// labelKeySchema is a label or taint key: an optional DNS subdomain
// prefix of at most 253 characters and '/', then a name of at most 63.
func labelKeySchema(description string) map[string]any {
	return map[string]any{
		"type":        "string",
		"description": description,
		"allOf": []any{
			map[string]any{"pattern": labelKeyFmt},
			map[string]any{"pattern": `^([^/]{1,253}/)?[^/]{1,63}$`},
		},
	}
}

func labelValueSchema() map[string]any {
	return map[string]any{
		"type":        "string",
		"description": "A Kubernetes label value: empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit.",
		"maxLength":   63,
		"pattern":     labelValueFmt,
	}
}

func labelsSchema(ref func(string) string) map[string]any {
	key := labelKeySchema("Label key: a Kubernetes qualified name; the prefixes kubernetes.io and k8s.io, which Kubernetes manages, " +
		"and cloud.google.com, which GKE manages (and their subdomains), are refused, as GKE refuses them on nodes.")
	var reserved []string
	for _, d := range append(slices.Clone(reservedLabelDomains), gkeLabelDomain) {
		reserved = append(reserved, strings.ReplaceAll(d, ".", `\.`))
	}
	key["not"] = map[string]any{"pattern": `^([^/]*\.)?(` + strings.Join(reserved, "|") + `)/`}
	return map[string]any{
		"type":                 "object",
		"description":          fmt.Sprintf("Kubernetes labels: at most %d.", MaxLabels),
		"maxProperties":        MaxLabels,
		"propertyNames":        key,
		"additionalProperties": map[string]any{"$ref": ref("LabelValue")},
	}
}

// schemaGen makes the schema of a body struct from its json and validate
// tags.
type schemaGen struct {
	ref func(name string) string
}

// object returns the schema of the struct t: one property per JSON
// member (embedded structs' members inline), no other member allowed.
func (g schemaGen) object(t reflect.Type, required ...string) map[string]any {
	p := map[string]any{}
	g.fields(t, p)
	for _, r := range required {
		if _, ok := p[r]; !ok {
			panic(fmt.Sprintf("input: schema of %s: required %q is no member", t.Name(), r))
		}
	}
	req := make([]any, len(required))
	for i, r := range required {
		req[i] = r
	}
	return map[string]any{"type": "object", "properties": p, "required": req, "additionalProperties": false}
}

func (g schemaGen) fields(t reflect.Type, p map[string]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			g.fields(f.Type, p)
			continue
		}
		fs := g.field(f.Type, f.Tag.Get("validate"))
		if doc, ok := fieldDocs[name]; ok {
			if d, ok := fs["description"].(string); ok {
				doc += " " + d
			}
			fs["description"] = doc
		}
		p[name] = fs
	}
}

// fieldDocs say what each member is, before its constraints.
var fieldDocs = map[string]string{
	"tenantId":       "The tenant.",
	"clusterId":      "The cluster.",
	"nodePoolId":     "The node pool.",
	"poolId":         "The provider pool: its account hosts the cluster.",
	"name":           "Unique among the cluster's (or, for a cluster, the tenant's) that are not deleted; a node pool's name is also its provider-side name.",
	"machineType":    "The provider's machine type.",
	"nodeCount":      "Nodes per zone; with autoscaling, the initial count.",
	"minNodes":       "Fewest nodes per zone.",
	"maxNodes":       "Most nodes per zone.",
	"diskGiB":        "Boot disk size of each node, in GiB.",
	"diskType":       "Boot disk type.",
	"spot":           "Spot VMs.",
	"type":           "Accelerator type.",
	"count":          "Accelerators per node.",
	"zones":          "Zones of the cluster's region enabled on the account (checked against stored data: INVALID_INPUT); none: the provider's default.",
	"taints":         "Kubernetes taints put on every node.",
	"effect":         "The taint's effect.",
	"idempotencyKey": "Makes a retry return the same resource; scoped to the tenant, the caller (and for a node pool, the cluster), kept at least 24 hours; the same key with another request is CONFLICT.",
	"mode":           "standard (node pools of the tenant's) or autopilot (the provider runs the nodes).",
	"region":         "A region of the pool's account (checked against stored data: INVALID_INPUT).",
	"releaseChannel": "The provider's release channel.",
	"pageSize":       "Clusters per page.",
}

// field is the schema of a member of Go type t under the validate tag.
func (g schemaGen) field(t reflect.Type, tag string) map[string]any {
	own, elem, _ := strings.Cut(tag, ",dive")
	elem = strings.TrimPrefix(elem, ",")
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s map[string]any
	switch t.Kind() {
	case reflect.String:
		s = map[string]any{"type": "string"}
	case reflect.Int:
		s = map[string]any{"type": "integer"}
	case reflect.Bool:
		s = map[string]any{"type": "boolean", "default": false}
	case reflect.Slice:
		s = map[string]any{"type": "array", "items": g.field(t.Elem(), elem)}
	case reflect.Map:
		return map[string]any{"$ref": g.ref("Labels")}
	case reflect.Struct:
		// Schemas are named as the API documents them, whether or not
		// the Go type is exported.
		name := t.Name()
		return map[string]any{"$ref": g.ref(strings.ToUpper(name[:1]) + name[1:])}
	default:
		panic(fmt.Sprintf("input: no schema for %v", t))
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String {
		s["uniqueItems"] = true // checkUnique
	}
	for _, part := range strings.Split(own, ",") {
		g.constrain(s, t, part)
	}
	return s
}

// constrain adds the constraint of one validator tag to s.
func (g schemaGen) constrain(s map[string]any, t reflect.Type, tag string) {
	name, param, _ := strings.Cut(tag, "=")
	if p, ok := patterns[name]; ok {
		s["pattern"] = p.re.String()
		s["description"] = strings.ToUpper(p.reason[:1]) + p.reason[1:] + "."
		return
	}
	switch name {
	case "", "omitempty", "-":
	case "between":
		lo, hi := bounds(param)
		s["minimum"], s["maximum"] = lo, hi
	case "oneof":
		var enum []any
		for _, v := range strings.Fields(param) {
			enum = append(enum, v)
		}
		s["enum"] = enum
	case "max":
		n, err := strconv.Atoi(param)
		if err != nil {
			panic(fmt.Sprintf("input: bad max %q", param))
		}
		if t.Kind() == reflect.Slice {
			s["maxItems"] = n
		} else {
			s["maxLength"] = n
		}
	default:
		panic(fmt.Sprintf("input: no schema for the validator tag %q", tag))
	}
}
