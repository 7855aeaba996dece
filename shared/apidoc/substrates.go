package apidoc

import (
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/resource"
)

// substrateRequestSchemas are the schemas of the substrates' request
// bodies (shared/input's SubstrateRef, ListSubstrates, ListSubstrateNodes
// and Join). shared/input.Schemas does not make them yet, so they are
// made here from the members its other schemas share (tenantId, poolId,
// pageToken, the ID pattern) and from the validator tags of the body
// types; the agreement test holds them to the decoders.
func substrateRequestSchemas() map[string]map[string]any {
	in := inputSchemas()
	member := func(schema, name string) map[string]any {
		return maps.Clone(in[schema]["properties"].(map[string]any)[name].(map[string]any))
	}
	tenant := member("ClusterRef", "tenantId")

	substrateID := member("ClusterRef", "clusterId")
	substrateID["pattern"] = substrateIDPattern()
	substrateID["description"] = "The substrate. Must be a substrate ID: " + resource.SubstratePrefix +
		"_ followed by 26 to 52 lowercase Crockford base32 characters (0-9 and a-z without i, l, o, u)."

	pool := member("ListClusters", "poolId")
	pool["description"] = "Only the substrate of this pool (the pools module's pool ID). " + sentenceAfter(pool["description"], "Must be")

	pageToken := member("ListClusters", "pageToken")
	checkTag[input.ListSubstrateNodes]("PageToken", fmt.Sprintf("max=%v", pageToken["maxLength"]))

	lo, hi := 1, 1000
	checkTag[input.ListSubstrateNodes]("PageSize", fmt.Sprintf("between=%d:%d", lo, hi))
	pageSize := map[string]any{"type": "integer", "minimum": lo, "maximum": hi, "default": input.DefaultNodesPageSize, "description": "Nodes per page."}

	checkTag[input.Join]("NodeName", "max=253,nodename")
	nodeName := map[string]any{
		"type": "string", "maxLength": 253, "pattern": nodeNamePattern,
		"description": "The node's name, as its Node is called in the cluster (spec.nodeName of bcd's pod): a Kubernetes Node name, " +
			"lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters.",
	}
	checkTag[input.Join]("ProviderID", "max=1024")
	providerID := map[string]any{"type": "string", "maxLength": 1024,
		"description": "The Node's spec.providerID (gce://project/zone/instance); must be the Node's when the Node has one."}

	object := func(props map[string]any, required ...string) map[string]any {
		req := make([]any, len(required))
		for i, r := range required {
			req[i] = r
		}
		return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
	}
	return map[string]map[string]any{
		"SubstrateRef":       object(map[string]any{"tenantId": tenant, "substrateId": substrateID}, "tenantId", "substrateId"),
		"ListSubstrates":     object(map[string]any{"tenantId": maps.Clone(tenant), "poolId": pool}, "tenantId"),
		"ListSubstrateNodes": object(map[string]any{"tenantId": maps.Clone(tenant), "substrateId": maps.Clone(substrateID), "pageSize": pageSize, "pageToken": pageToken}, "tenantId", "substrateId"),
		"Join":               object(map[string]any{"nodeName": nodeName, "providerId": providerID}, "nodeName", "providerId"),
		"PlanSubstrate":      planSubstrate(tenant),
	}
}

// RuleSamePoolTenant is the x-rule of kubernetesSubstrates.plan's body:
// the pool is the request's tenant's.
const RuleSamePoolTenant = "samePoolTenant"

// planSubstrate is the body of kubernetesSubstrates.plan: the tenant and
// a pool as compute.pool.updated carries it (PoolUpdated).
func planSubstrate(tenant map[string]any) map[string]any {
	return map[string]any{
		"type": "object", "required": []any{"tenantId", "pool"}, "additionalProperties": false,
		"properties": map[string]any{
			"tenantId": maps.Clone(tenant),
			"pool": map[string]any{"$ref": schemaRef("PoolUpdated"),
				"description": "The pool, as the pools module's compute.pool.updated event carries it, checked by the same rules; its fields are named under pool."},
		},
		"x-rules": []any{map[string]any{"id": RuleSamePoolTenant, "description": "pool.tenantId is the request's tenantId"}},
	}
}

// nodeNamePattern is a Kubernetes Node name (a DNS subdomain, RFC 1123):
// the pattern the nodename tag of shared/input checks.
const nodeNamePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

// substrateIDPattern is what shared/input accepts as a substrate ID: the
// cluster ID's pattern with the substrate's prefix.
func substrateIDPattern() string {
	cl := inputSchemas()["ClusterRef"]["properties"].(map[string]any)["clusterId"].(map[string]any)["pattern"].(string)
	rest, ok := strings.CutPrefix(cl, "^"+resource.ClusterPrefix+"_")
	if !ok {
		panic(fmt.Sprintf("apidoc: the cluster ID pattern %q does not start with its prefix", cl))
	}
	return "^" + resource.SubstratePrefix + "_" + rest
}

// inputIDPattern is what shared/input accepts as a cluster ID (26 to 52
// characters), which an adopted cluster's ID in a substrate may be.
func inputIDPattern(prefix string) string {
	if prefix == resource.SubstratePrefix {
		return substrateIDPattern()
	}
	return inputSchemas()["ClusterRef"]["properties"].(map[string]any)["clusterId"].(map[string]any)["pattern"].(string)
}

// sentenceAfter returns the part of a description from the sentence that
// starts with prefix.
func sentenceAfter(desc any, prefix string) string {
	s, _ := desc.(string)
	if i := strings.Index(s, prefix); i >= 0 {
		return s[i:]
	}
	return ""
}

// checkTag panics unless the field of T has the validate tag want: the
// schema above states that tag's constraint, so a changed tag must change
// it too.
func checkTag[T any](field, want string) {
	f, ok := reflect.TypeFor[T]().FieldByName(field)
	if !ok {
		panic(fmt.Sprintf("apidoc: %T has no field %s", *new(T), field))
	}
	if got := f.Tag.Get("validate"); got != want {
		panic(fmt.Sprintf("apidoc: %T.%s is validated %q, the document states %q: update substrateRequestSchemas", *new(T), field, got, want))
	}
}

// substrateStates are a substrate's states (API.md §9): a cluster's.
var substrateStates = clusterStates

// substrateSchemas are the schemas of the substrates' answers, made from
// the json tags of shared/resource.
func substrateSchemas() map[string]map[string]any {
	orEmpty := func(pattern string) string { return "^(" + strings.Trim(pattern, "^$") + ")?$" }

	sub := objectSchema(reflect.TypeFor[resource.Substrate]())
	p := sub["properties"].(map[string]any)
	p["id"].(map[string]any)["pattern"] = idPattern(resource.SubstratePrefix)
	p["state"] = stateSchema(substrateStates)
	p["mode"] = map[string]any{"type": "string", "enum": []any{resource.SubstrateCreate, resource.SubstrateAdopt},
		"description": "create: the substrate made its cluster; adopt: it added its node pools to the tenant's cluster."}
	p["clusterId"] = map[string]any{"type": "string", "pattern": orEmpty(inputIDPattern(resource.ClusterPrefix)),
		"description": "The cluster made (create) or adopted (adopt); empty until a created one is recorded."}
	p["poolVersion"].(map[string]any)["minimum"] = 1
	p["poolVersion"].(map[string]any)["description"] = "The version of the pool's event last applied."
	p["joinedNodes"].(map[string]any)["minimum"] = 0
	p["joinedNodes"].(map[string]any)["description"] = "How many nodes joined (kubernetesSubstrates.listNodes lists them)."
	p["message"].(map[string]any)["description"] = "Why the substrate is in state error: a refused policy, a node pool's error, an object in the cluster that is not the substrate's."
	sub["description"] = "A pool's substrate: the managed Kubernetes cluster and node pools (one per flavor) behind a pool whose policy asks for one. " +
		"Its cluster and node pools show managedBy with its ID."

	np := objectSchema(reflect.TypeFor[resource.SubstrateNodePool]())
	p = np["properties"].(map[string]any)
	p["nodePoolId"] = map[string]any{"type": "string", "pattern": orEmpty(idPattern(resource.NodePoolPrefix)), "description": "Empty until the node pool is made."}
	p["state"] = stateSchema(nodePoolStates)
	p["name"].(map[string]any)["description"] = "bc-<pool>-<flavor>, made a valid node pool name deterministically when it is not one."
	np["description"] = "The node pool of one of the pool's flavors."

	node := objectSchema(reflect.TypeFor[resource.SubstrateNode]())
	node["description"] = "A node that joined the substrate."

	join := objectSchema(reflect.TypeFor[resource.JoinResult]())
	join["properties"].(map[string]any)["substrateId"].(map[string]any)["pattern"] = idPattern(resource.SubstratePrefix)
	join["description"] = "The node's substrate, and the flavor whose node pool it is in."

	planned := maps.Clone(sub)
	pp := maps.Clone(sub["properties"].(map[string]any))
	pp["id"] = map[string]any{"type": "string", "pattern": idPattern(resource.SubstratePrefix), "description": "Absent while the substrate does not exist."}
	planned["properties"] = pp
	var req []any
	for _, r := range sub["required"].([]any) {
		if r != "id" {
			req = append(req, r)
		}
	}
	planned["required"] = req
	planned["description"] = "The substrate as it would be once converged: its node pools, joined nodes (as many as its node pools are made with) and state " +
		"(ready, deleted after a teardown, or error with the message it would show)."

	action := objectSchema(reflect.TypeFor[resource.PlanAction]())
	ap := action["properties"].(map[string]any)
	ap["action"] = map[string]any{"type": "string", "enum": anySlice(resource.PlanActions)}
	ap["nodePool"].(map[string]any)["description"] = "The node pool acted on: made, resized, replaced (the old one) or deleted."
	ap["from"] = map[string]any{"type": "object", "description": "What of the node pool changes, as it is (resize: nodeCount, autoscaling; replace: nodePool and the fields that cannot change in place)."}
	ap["to"] = map[string]any{"type": "object", "description": "What of the node pool changes, as it will be."}
	action["description"] = "One action of a plan, with why it is taken."

	return map[string]map[string]any{
		"PlannedSubstrate": planned,
		"PlanAction":       action,
		"SubstratePlan": {
			"type": "object", "required": []any{"actions"}, "additionalProperties": false,
			"properties": map[string]any{
				"substrate": map[string]any{"$ref": schemaRef("PlannedSubstrate")},
				"actions":   map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"$ref": schemaRef("PlanAction")}},
			},
		},
		"Substrate":         sub,
		"SubstrateNodePool": np,
		"SubstrateNode":     node,
		"JoinResult":        join,
		"SubstrateList": {
			"type": "object", "required": []any{"substrates"}, "additionalProperties": false,
			"properties": map[string]any{"substrates": map[string]any{"type": "array", "items": map[string]any{"$ref": schemaRef("Substrate")}}},
		},
		"SubstrateNodeList": {
			"type": "object", "required": []any{"nodes", "nextPageToken"}, "additionalProperties": false,
			"properties": map[string]any{
				"nodes":         map[string]any{"type": "array", "items": map[string]any{"$ref": schemaRef("SubstrateNode")}},
				"nextPageToken": map[string]any{"type": "string", "description": "Empty on the last page."},
			},
		},
	}
}
