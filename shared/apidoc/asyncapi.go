package apidoc

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// eventSummaries say when each event type is published (API.md §7, §9).
var eventSummaries = map[string]string{
	event.NodePoolCreated:     "A node pool was created (kubernetesNodePools.create, or with its cluster).",
	event.NodePoolReady:       "A node pool reached ready: after its creation and after each resize.",
	event.NodePoolError:       "A node pool entered error (the provider refused it); message says why.",
	event.NodePoolDeleted:     "A node pool was deleted at the provider. Published once.",
	event.ClusterCreated:      "A cluster was created (kubernetesClusters.create).",
	event.ClusterReady:        "A cluster was ready for the first time.",
	event.ClusterUpdated:      "A cluster was ready again after a change, or the provider moved its version.",
	event.ClusterError:        "A cluster entered error (itself or one of its node pools); message says why.",
	event.ClusterDeleted:      "A cluster was deleted at the provider. Published once.",
	event.SubstrateReady:      "A pool's substrate was ready for the first time: its cluster and node pools ready, bcd applied in the cluster.",
	event.SubstrateUpdated:    "A substrate was ready again after a change of its pool (flavors added, resized or removed).",
	event.SubstrateError:      "A substrate entered error (a policy it cannot serve, a node pool's error, an object in the cluster that is not its own); message says why.",
	event.SubstrateDeleted:    "A substrate was torn down (its pool archived, its policy without substrate, another account or cluster chosen). Published once.",
	event.SubstrateNodeJoined: "A node joined its substrate (bcd on it called kubernetesSubstrates.join). Published once per node.",
	event.SubstrateNodeLeft:   "A joined node left its substrate: its Node is gone from the cluster, or the substrate is torn down.",
}

// consumedSummaries say what this project does with each event type it
// receives from the pools module (API.md §9).
var consumedSummaries = map[string]string{
	event.PoolUpdated: "A pool changed. kubernetesSubstrates-poolEvents records the substrate its policy asks for (or its teardown) in one transaction and kicks its reconciler. " +
		"An event whose version is not above the last applied for the pool is acknowledged and ignored; a malformed one is acknowledged, logged, and puts the pool's substrate, if any, in error.",
	event.PoolArchived: "A pool was archived: its substrate, if any, is torn down.",
}

// IsNodePoolEvent reports whether events of type typ carry a node pool
// (and a nodePoolId attribute).
func IsNodePoolEvent(typ string) bool { return strings.HasPrefix(typ, "kubernetes.nodepool.") }

// IsSubstrateEvent reports whether events of type typ are a substrate's
// (and carry substrateId and poolId attributes): their data is the
// substrate, or for IsSubstrateNodeEvent types one of its nodes.
func IsSubstrateEvent(typ string) bool { return strings.HasPrefix(typ, "kubernetes.substrate.") }

// IsSubstrateNodeEvent reports whether events of type typ carry a node of
// a substrate (kubernetes.substrate.node.joined, .left).
func IsSubstrateNodeEvent(typ string) bool {
	return strings.HasPrefix(typ, "kubernetes.substrate.node.")
}

// ConsumedTypes are the event types of another module that this project
// receives (the pools module's, API.md §9), each on the topic of its name.
func ConsumedTypes() []string { return slices.Clone(event.Consumed) }

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
	schemas["NodePoolEventAttributes"] = attributesSchema(nodePoolEvents)
	schemas["ClusterEventAttributes"] = attributesSchema(clusterEvents)
	schemas["SubstrateEventAttributes"] = attributesSchema(substrateEvents)
	schemas["PoolEventAttributes"] = poolAttributesSchema()
	for name, s := range poolSchemas() {
		schemas[name] = s
	}

	channels := map[string]any{}
	operations := map[string]any{}
	messages := map[string]any{}
	message := func(typ, summary, payload, attrs, orderingKey string) {
		messages[messageName(typ)] = map[string]any{
			"name":        typ,
			"title":       typ,
			"summary":     summary,
			"contentType": "application/json",
			"headers": map[string]any{"type": "object", "allOf": []any{
				map[string]any{"$ref": schemaRef(attrs)},
				map[string]any{"properties": map[string]any{"ce-type": map[string]any{"const": typ}}},
			}},
			"payload": map[string]any{"$ref": schemaRef(payload)},
			"bindings": map[string]any{"googlepubsub": map[string]any{
				"bindingVersion": "0.2.0",
				"orderingKey":    orderingKey,
				"attributes":     map[string]any{"$ref": schemaRef(attrs)},
			}},
		}
	}
	// A channel has no googlepubsub binding: the binding's schema
	// requires schemaSettings, the Pub/Sub schema of a topic, and these
	// topics have none (the data's schema is the message's payload). The
	// topic's retention, the one other thing the binding would say, is in
	// the description.
	channel := func(typ, description string) {
		channels[typ] = map[string]any{
			"address":     typ,
			"title":       "Topic " + typ,
			"description": description,
			"messages":    map[string]any{"event": map[string]any{"$ref": "#/components/messages/" + messageName(typ)}},
		}
	}
	operation := func(action, typ, summary, description string) {
		operations[action+"."+typ] = map[string]any{
			"action":      action,
			"channel":     map[string]any{"$ref": "#/channels/" + escapePointer(typ)},
			"summary":     summary,
			"description": description,
			"messages":    []any{map[string]any{"$ref": "#/channels/" + escapePointer(typ) + "/messages/event"}},
		}
	}
	for _, typ := range event.Types {
		payload, attrs, key := "Cluster", "ClusterEventAttributes", "the cluster ID"
		switch {
		case IsNodePoolEvent(typ):
			payload, attrs = "NodePool", "NodePoolEventAttributes"
		case IsSubstrateNodeEvent(typ):
			payload, attrs, key = "SubstrateNode", "SubstrateEventAttributes", "the substrate's cluster ID (the substrate ID while it has none)"
		case IsSubstrateEvent(typ):
			payload, attrs, key = "Substrate", "SubstrateEventAttributes", "the substrate's cluster ID (the substrate ID while it has none)"
		}
		message(typ, eventSummaries[typ], payload, attrs, key)
		channel(typ, "The Pub/Sub topic projects/{project}/topics/"+typ+" (the devstack's project is bc-dev). "+
			"It keeps messages 7 days (messageRetentionDuration 604800s), so a subscription created late, or one that fell behind, can seek back.")
		operation("send", typ, eventSummaries[typ], "The outbox relay publishes the event, written in the transaction of the change, "+
			"with the ordering key "+key+", at least once: deduplicate by ce-id and order by ce-sequence.")
	}
	for _, typ := range ConsumedTypes() {
		payload := "PoolUpdated"
		if typ == event.PoolArchived {
			payload = "PoolArchived"
		}
		message(typ, consumedSummaries[typ], payload, "PoolEventAttributes", "none needed: the consumer orders by the pool's version")
		channel(typ, "The pools module's Pub/Sub topic projects/{pools project}/topics/"+typ+", which it owns and publishes to; "+
			"this project's subscription pushes it to kubernetesSubstrates-poolEvents and keeps an unacknowledged message 7 days "+
			"(the devstack: POST "+devPoolPath(typ)+" publishes one, project bc-dev).")
		operation("receive", typ, consumedSummaries[typ], "Pushed by this project's subscription to kubernetesSubstrates-poolEvents, "+
			"which acknowledges the message once the change is recorded (or the event is ignored or refused); any other answer has it redelivered.")
	}
	return map[string]any{
		"asyncapi": "3.0.0",
		"info": map[string]any{
			"title":   "Better Compute Kubernetes events",
			"version": Version,
			"tags": []any{
				map[string]any{"name": "kubernetes", "description": "The kubernetes.* events this project sends: its clusters', node pools' and substrates'."},
				map[string]any{"name": "pools", "description": "The pools module's compute.pool.* events this project receives."},
			},
			"description": "CloudEvents 1.0 in Pub/Sub binary mode: the CloudEvents attributes are Pub/Sub message attributes " +
				"(`ce-id`, `ce-type`, ...), the data is the message body. One topic per event type, named exactly as the type. " +
				"The application described is this project: it sends the kubernetes.* events and receives the pools module's compute.pool.* events. " +
				"The ordering key of the kubernetes.* events is the cluster ID; `ce-subject` is the cluster ID, also for node pool events, " +
				"and for substrate events the substrate's cluster ID (its substrate ID while it has none). " +
				"Delivery is at least once and no event is ever lost (a transactional outbox): a redelivery keeps its `ce-id`, so deduplicate by it. " +
				"Pub/Sub keeps an ordering key's order only among one publisher's messages, and many instances publish: order by `ce-sequence` " +
				"(the CloudEvents sequence extension), the event's place in its chain, per cluster for cluster and node pool events " +
				"(keyed by `clusterId`) and per substrate for substrate events (keyed by `substrateId`): twenty decimal digits, " +
				"zero-padded, starting at 00000000000000000001, one more for each event with no gaps, assigned in the transaction " +
				"that writes the event, so a redelivery carries the same number. Hold an event until its predecessor came; " +
				"one below the last handed on is a redelivery. " +
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

func devPoolPath(typ string) string {
	if typ == event.PoolArchived {
		return "/dev/pools/archive"
	}
	return "/dev/pools/put"
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// resourceSchemasWithParts are the resource schemas and the input schemas
// they refer to (Autoscaling, Labels, ...), so the document stands alone.
func resourceSchemasWithParts() map[string]map[string]any {
	out := resourceSchemas()
	for _, list := range []string{"NodePoolList", "ClusterList", "SubstrateList", "SubstrateNodeList", "JoinResult", "SubstratePlan", "PlannedSubstrate", "PlanAction"} {
		delete(out, list)
	}
	in := inputSchemas()
	for _, name := range []string{"Autoscaling", "Accelerators", "Taint", "Labels", "LabelValue", "NodePoolSpec"} {
		out[name] = in[name]
	}
	return out
}

// The kinds of events, by what they carry.
type eventKind int

const (
	clusterEvents eventKind = iota
	nodePoolEvents
	substrateEvents
)

// attributesSchema is the schema of an event's Pub/Sub attributes, with
// the attribute names event.Event.Message sets.
func attributesSchema(kind eventKind) map[string]any {
	var sample event.Event
	subject := map[string]any{"type": "string", "pattern": idPattern(resource.ClusterPrefix), "description": "The cluster ID."}
	desc := "Pub/Sub attributes of a cluster event."
	switch kind {
	case clusterEvents:
		sample = event.ForCluster(event.ClusterCreated, resource.Cluster{ID: "kcl_x", TenantID: "t"}, time.Unix(0, 0))
	case nodePoolEvents:
		sample = event.ForNodePool(event.NodePoolCreated, resource.NodePool{ID: "knp_x", ClusterID: "kcl_x", TenantID: "t"}, time.Unix(0, 0))
		desc = "Pub/Sub attributes of a node pool event."
	case substrateEvents:
		sample = event.ForSubstrate(event.SubstrateReady, resource.Substrate{ID: "ksb_x", ClusterID: "kcl_x", TenantID: "t", PoolID: "p"}, time.Unix(0, 0))
		// An adopted cluster's ID is the pool's (26 to 52 characters); a
		// substrate without a cluster yet is its own subject.
		subject = map[string]any{"type": "string", "description": "The substrate's cluster ID, or the substrate ID while it has none.",
			"anyOf": []any{map[string]any{"pattern": inputIDPattern(resource.ClusterPrefix)}, map[string]any{"pattern": idPattern(resource.SubstratePrefix)}}}
		desc = "Pub/Sub attributes of a substrate event (kubernetes.substrate.*)."
	}
	chain := "its cluster's (clusterId): a node pool's events count among its cluster's"
	if kind == substrateEvents {
		chain = "its substrate's (substrateId), apart from its cluster's events"
	}
	sample.Sequence = 1 // every event written is numbered
	names := slices.Sorted(maps.Keys(outbox.Message(sample).Attributes))
	source := outbox.Source("TENANT")
	tenant := inputSchemas()["ClusterRef"]["properties"].(map[string]any)["tenantId"].(map[string]any)["pattern"].(string)
	known := map[string]map[string]any{
		"ce-specversion": {"const": "1.0"},
		"ce-id":          {"type": "string", "pattern": "^evt_[0-9a-hjkmnp-tv-z]{26}$", "description": "Stable: a redelivery of the same event has the same id."},
		"ce-type":        {"type": "string", "enum": anySlice(event.Types)},
		"ce-source": {"type": "string", "pattern": "^" + regexp.QuoteMeta(strings.TrimSuffix(source, "TENANT")) + strings.Trim(tenant, "^$") + "$",
			"description": "//compute.better-compute.dev/tenants/{tenantId}"},
		"ce-subject": subject,
		"ce-time":    {"type": "string", "format": "date-time"},
		"ce-sequence": {"type": "string", "pattern": "^[0-9]{20}$",
			"description": "The CloudEvents sequence extension: the event's place in the sequence of " + chain + ". " +
				"Twenty decimal digits, zero-padded (string order is numeric order), from 00000000000000000001, " +
				"one more for each event with no gaps; a redelivery carries the same number."},
		"content-type": {"const": "application/json"},
		"tenantId":     {"type": "string", "pattern": tenant},
		"clusterId":    maps.Clone(subject),
		"nodePoolId":   {"type": "string", "pattern": idPattern(resource.NodePoolPrefix)},
		"substrateId":  {"type": "string", "pattern": idPattern(resource.SubstratePrefix)},
		"poolId":       {"type": "string", "pattern": tenant, "description": "The pools module's pool of the substrate."},
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
