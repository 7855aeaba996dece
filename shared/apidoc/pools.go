package apidoc

import (
	"maps"

	"github.com/better-compute/kubernetes/shared/input"
)

// The pools module's events are another module's data (API.md §9): their
// schemas state what this project reads of them (shared/input's
// DecodePoolUpdated and DecodePoolArchived) and allow every member it
// does not read, since the pools module may add its own.

// flavorNamePattern is a flavor's name: a node pool name of at most 20
// characters, so that bc-<pool>-<flavor> is rarely cut.
const flavorNamePattern = `^[a-z]([-a-z0-9]{0,18}[a-z0-9])?$`

// maxPoolVersion is the largest version a pool event may carry: the
// largest integer a JSON number holds exactly.
const maxPoolVersion = 1<<53 - 1

// RuleUniqueFlavorNames is the x-rule of a pool's flavors: their names
// are unique.
const RuleUniqueFlavorNames = "uniqueFlavorNames"

// poolSchemas are the data of compute.pool.updated (PoolUpdated) and
// compute.pool.archived (PoolArchived), with their parts.
func poolSchemas() map[string]map[string]any {
	in := inputSchemas()
	member := func(schema, name string) map[string]any {
		return maps.Clone(in[schema]["properties"].(map[string]any)[name].(map[string]any))
	}
	token := func(desc string) map[string]any {
		s := member("ClusterRef", "tenantId")
		s["description"] = desc
		return s
	}
	version := map[string]any{"type": "integer", "minimum": 1, "maximum": maxPoolVersion,
		"description": "The pool's version, raised by the pools module on every change: an event not above the last applied is ignored."}

	create := map[string]any{
		"type":                 "object",
		"description":          "Create a standard cluster bc-<pool> in the pool's tenant, with one node pool per flavor.",
		"required":             []any{"region"},
		"additionalProperties": false,
		"properties": map[string]any{
			"region":         member("CreateCluster", "region"),
			"zones":          member("NodePoolSpec", "zones"),
			"releaseChannel": member("CreateCluster", "releaseChannel"),
		},
	}
	adopt := map[string]any{
		"type":                 "object",
		"description":          "Add one node pool per flavor to the tenant's standard cluster on the same account, and touch nothing else of it.",
		"required":             []any{"clusterId"},
		"additionalProperties": false,
		"properties":           map[string]any{"clusterId": member("ClusterRef", "clusterId")},
	}
	cluster := map[string]any{
		"type":                 "object",
		"description":          "create or adopt, not both.",
		"additionalProperties": false,
		"properties":           map[string]any{"create": map[string]any{"$ref": schemaRef("PoolClusterCreate")}, "adopt": map[string]any{"$ref": schemaRef("PoolClusterAdopt")}},
		"oneOf":                []any{map[string]any{"required": []any{"create"}}, map[string]any{"required": []any{"adopt"}}},
	}
	substrate := map[string]any{
		"type": "object",
		"description": "The substrate the pool asks for. Of another kind than kubernetes (or absent) it asks for none, and an existing one is torn down; " +
			"of kind kubernetes it needs account and cluster, and the pool needs flavors.",
		"properties": map[string]any{
			"kind":    map[string]any{"type": "string", "description": "kubernetes: a managed Kubernetes cluster of this project. Other kinds are not this project's."},
			"account": token("The account whose provider runs the cluster: it must offer managed Kubernetes (else the substrate is in error)."),
			"cluster": map[string]any{"$ref": schemaRef("PoolCluster")},
		},
		"required": []any{"kind"},
		"if":       map[string]any{"properties": map[string]any{"kind": map[string]any{"const": "kubernetes"}}},
		"then":     map[string]any{"required": []any{"account", "cluster"}},
	}
	flavor := map[string]any{
		"description": "A flavor: a node pool of the substrate, named bc-<pool>-<flavor>, with the fields and rules of a node pool (NodePoolSpec).",
		"allOf": []any{
			map[string]any{"$ref": schemaRef("NodePoolSpec")},
			map[string]any{"properties": map[string]any{"name": map[string]any{"type": "string", "pattern": flavorNamePattern,
				"description": "1 to 20 lowercase letters, digits or '-', starting with a letter and not ending with '-'; unique in the pool."}}},
		},
	}
	updated := map[string]any{
		"type": "object",
		"description": "The pool, as far as this project reads it (members it does not read are allowed and ignored). " +
			"A policy without a kubernetes substrate means no substrate.",
		"required": []any{"id", "tenantId", "version"},
		"properties": map[string]any{
			"id":       token("The pool."),
			"tenantId": token("The pool's tenant: its substrate's cluster is the tenant's."),
			"version":  version,
			"policy": map[string]any{"type": "object", "description": "The pool's policy; this project reads its substrate.",
				"properties": map[string]any{"substrate": map[string]any{"$ref": schemaRef("PoolSubstrate")}}},
			"flavors": map[string]any{"type": "array", "minItems": 1, "maxItems": input.MaxFlavors,
				"description": "The node pools of a kubernetes substrate: required by one.",
				"items":       map[string]any{"$ref": schemaRef("PoolFlavor")}},
		},
		"if": map[string]any{
			"required":   []any{"policy"},
			"properties": map[string]any{"policy": map[string]any{"required": []any{"substrate"}, "properties": map[string]any{"substrate": map[string]any{"properties": map[string]any{"kind": map[string]any{"const": "kubernetes"}}}}}},
		},
		"then":    map[string]any{"required": []any{"flavors"}},
		"x-rules": []any{map[string]any{"id": RuleUniqueFlavorNames, "description": "flavor names are unique among flavors"}},
	}
	archived := map[string]any{
		"type":        "object",
		"description": "The archived pool: its substrate, if any, is torn down.",
		"required":    []any{"id", "tenantId", "version"},
		"properties": map[string]any{
			"id":       token("The pool."),
			"tenantId": token("The pool's tenant."),
			"version":  maps.Clone(version),
		},
	}
	return map[string]map[string]any{
		"PoolUpdated":       updated,
		"PoolArchived":      archived,
		"PoolSubstrate":     substrate,
		"PoolCluster":       cluster,
		"PoolClusterCreate": create,
		"PoolClusterAdopt":  adopt,
		"PoolFlavor":        flavor,
	}
}

// poolAttributesSchema is the schema of a pool event's Pub/Sub attributes:
// CloudEvents binary mode as in API.md §7, ce-subject the pool ID. This
// project reads ce-type; the rest is for tracing.
func poolAttributesSchema() map[string]any {
	tenant := inputSchemas()["ClusterRef"]["properties"].(map[string]any)["tenantId"].(map[string]any)["pattern"].(string)
	return map[string]any{
		"type":        "object",
		"description": "Pub/Sub attributes of a pools module's event. Other attributes are allowed.",
		"required":    []any{"ce-specversion", "ce-id", "ce-type", "ce-source"},
		"properties": map[string]any{
			"ce-specversion": map[string]any{"const": "1.0"},
			"ce-id":          map[string]any{"type": "string", "minLength": 1},
			"ce-type":        map[string]any{"type": "string", "enum": anySlice(ConsumedTypes())},
			"ce-source":      map[string]any{"type": "string", "minLength": 1, "description": "//compute.better-compute.dev/tenants/{tenantId}"},
			"ce-subject":     map[string]any{"type": "string", "description": "The pool ID."},
			"ce-time":        map[string]any{"type": "string", "format": "date-time"},
			"content-type":   map[string]any{"const": "application/json"},
			"tenantId":       map[string]any{"type": "string", "pattern": tenant},
		},
	}
}
