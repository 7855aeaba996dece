package apidoc

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// eventSummaries say when each event type is published (API.md §7).
var eventSummaries = map[string]string{
	outbox.NodePoolCreated: "A node pool was created (kubernetesNodePools.create, or with its cluster).",
	outbox.NodePoolReady:   "A node pool reached ready: after its creation and after each resize.",
	outbox.NodePoolError:   "A node pool entered error (the provider refused it); message says why.",
	outbox.NodePoolDeleted: "A node pool was deleted at the provider. Published once.",
	outbox.ClusterCreated:  "A cluster was created (kubernetesClusters.create).",
	outbox.ClusterReady:    "A cluster was ready for the first time.",
	outbox.ClusterUpdated:  "A cluster was ready again after a change, or the provider moved its version.",
	outbox.ClusterError:    "A cluster entered error (itself or one of its node pools); message says why.",
	outbox.ClusterDeleted:  "A cluster was deleted at the provider. Published once.",
}

// IsNodePoolEvent reports whether events of type typ carry a node pool
// (and a nodePoolId attribute); the others carry a cluster.
func IsNodePoolEvent(typ string) bool { return strings.HasPrefix(typ, "kubernetes.nodepool.") }

var (
	asyncAPIOnce sync.Once
	asyncAPIJSON []byte
)

// AsyncAPI returns the AsyncAPI 3.0 document of every event type: its
// Pub/Sub topic, its attributes (CloudEvents 1.0 in binary mode) and its
// data, as JSON. The caller must not change the slice.
func AsyncAPI() []byte {
	asyncAPIOnce.Do(func() { asyncAPIJSON = mustJSON(asyncAPI()) })
	return asyncAPIJSON
}

// messageName is the component name of an event type's message.
func messageName(typ string) string { return typ }

func asyncAPI() map[string]any {
	schemas := map[string]any{}
	all := resourceSchemasWithParts()
	for name, s := range all {
		schemas[name] = s
	}
	schemas["NodePoolEventAttributes"] = attributesSchema(true)
	schemas["ClusterEventAttributes"] = attributesSchema(false)

	channels := map[string]any{}
	operations := map[string]any{}
	messages := map[string]any{}
	for _, typ := range outbox.Types {
		payload, attrs := "Cluster", "ClusterEventAttributes"
		if IsNodePoolEvent(typ) {
			payload, attrs = "NodePool", "NodePoolEventAttributes"
		}
		messages[messageName(typ)] = map[string]any{
			"name":        typ,
			"title":       typ,
			"summary":     eventSummaries[typ],
			"contentType": "application/json",
			"headers": map[string]any{"allOf": []any{
				map[string]any{"$ref": schemaRef(attrs)},
				map[string]any{"properties": map[string]any{"ce-type": map[string]any{"const": typ}}},
			}},
			"payload": map[string]any{"$ref": schemaRef(payload)},
			"bindings": map[string]any{"googlepubsub": map[string]any{
				"bindingVersion": "0.2.0",
				"orderingKey":    "the cluster ID",
				"attributes":     map[string]any{"$ref": schemaRef(attrs)},
			}},
		}
		channels[typ] = map[string]any{
			"address":     typ,
			"title":       "Topic " + typ,
			"description": "The Pub/Sub topic projects/{project}/topics/" + typ + " (the devstack's project is bc-dev).",
			"messages":    map[string]any{"event": map[string]any{"$ref": "#/components/messages/" + messageName(typ)}},
			"bindings": map[string]any{"googlepubsub": map[string]any{
				"bindingVersion":           "0.2.0",
				"messageRetentionDuration": "604800s",
			}},
		}
		operations["receive."+typ] = map[string]any{
			"action":   "receive",
			"channel":  map[string]any{"$ref": "#/channels/" + escapePointer(typ)},
			"summary":  eventSummaries[typ],
			"messages": []any{map[string]any{"$ref": "#/channels/" + escapePointer(typ) + "/messages/event"}},
		}
	}
	return map[string]any{
		"asyncapi": "3.0.0",
		"info": map[string]any{
			"title":   "Better Compute Kubernetes events",
			"version": Version,
			"description": "CloudEvents 1.0 in Pub/Sub binary mode: the CloudEvents attributes are Pub/Sub message attributes " +
				"(`ce-id`, `ce-type`, ...), the data is the message body. One topic per event type, named exactly as the type. " +
				"The ordering key is the cluster ID; `ce-subject` is the cluster ID, also for node pool events. " +
				"Delivery is at least once and no event is ever lost (a transactional outbox): a redelivery keeps its `ce-id`, so deduplicate by it. " +
				"The data is the resource as the API returns it (see /openapi.json).",
		},
		"defaultContentType": "application/json",
		"servers": map[string]any{
			"production": map[string]any{"host": "pubsub.googleapis.com", "protocol": "googlepubsub", "description": "Google Cloud Pub/Sub of the deployment's project."},
			"devstack":   map[string]any{"host": "127.0.0.1:8085", "protocol": "googlepubsub", "description": "The devstack's Pub/Sub emulator (PUBSUB_EMULATOR_HOST), project bc-dev."},
		},
		"channels":   channels,
		"operations": operations,
		"components": map[string]any{"schemas": schemas, "messages": messages},
	}
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// resourceSchemasWithParts are the resource schemas and the input schemas
// they refer to (Autoscaling, Labels, ...), so the document stands alone.
func resourceSchemasWithParts() map[string]map[string]any {
	out := resourceSchemas()
	delete(out, "NodePoolList")
	delete(out, "ClusterList")
	in := inputSchemas()
	for _, name := range []string{"Autoscaling", "Accelerators", "Taint", "Labels", "LabelValue"} {
		out[name] = in[name]
	}
	return out
}

// attributesSchema is the schema of an event's Pub/Sub attributes, with
// the attribute names outbox.Event.Message sets.
func attributesSchema(nodePool bool) map[string]any {
	sample := outbox.ClusterEvent(outbox.ClusterCreated, resource.Cluster{ID: "kcl_x", TenantID: "t"}, time.Unix(0, 0))
	if nodePool {
		sample = outbox.NodePoolEvent(outbox.NodePoolCreated, resource.NodePool{ID: "knp_x", ClusterID: "kcl_x", TenantID: "t"}, time.Unix(0, 0))
	}
	names := slices.Sorted(maps.Keys(sample.Message().Attributes))
	source := outbox.Source("TENANT")
	tenant := inputSchemas()["ClusterRef"]["properties"].(map[string]any)["tenantId"].(map[string]any)["pattern"].(string)
	known := map[string]map[string]any{
		"ce-specversion": {"const": "1.0"},
		"ce-id":          {"type": "string", "pattern": "^evt_[0-9a-hjkmnp-tv-z]{26}$", "description": "Stable: a redelivery of the same event has the same id."},
		"ce-type":        {"type": "string", "enum": anySlice(outbox.Types)},
		"ce-source": {"type": "string", "pattern": "^" + regexp.QuoteMeta(strings.TrimSuffix(source, "TENANT")) + strings.Trim(tenant, "^$") + "$",
			"description": "//compute.better-compute.dev/tenants/{tenantId}"},
		"ce-subject":   {"type": "string", "pattern": idPattern(resource.ClusterPrefix), "description": "The cluster ID."},
		"ce-time":      {"type": "string", "format": "date-time"},
		"content-type": {"const": "application/json"},
		"tenantId":     {"type": "string", "pattern": tenant},
		"clusterId":    {"type": "string", "pattern": idPattern(resource.ClusterPrefix)},
		"nodePoolId":   {"type": "string", "pattern": idPattern(resource.NodePoolPrefix)},
	}
	props := map[string]any{}
	required := []any{}
	for _, n := range names {
		s, ok := known[n]
		if !ok {
			panic(fmt.Sprintf("apidoc: event attribute %q is not documented", n))
		}
		props[n] = s
		required = append(required, n)
	}
	desc := "Pub/Sub attributes of a cluster event."
	if nodePool {
		desc = "Pub/Sub attributes of a node pool event."
	}
	return map[string]any{"type": "object", "description": desc, "properties": props, "required": required, "additionalProperties": false}
}

// inputSchemas are shared/input's schemas, referring to each other where
// both documents keep their schemas.
func inputSchemas() map[string]map[string]any { return input.Schemas(schemaRef) }

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
