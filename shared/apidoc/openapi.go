package apidoc

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Version is the version of the API the documents describe.
const Version = "1.0.0"

// schemaRef is where both documents keep their schemas.
func schemaRef(name string) string { return "#/components/schemas/" + name }

// commonErrors are the codes every method may answer.
var commonErrors = []errs.Kind{errs.Invalid, errs.Unauthenticated, errs.PermissionDenied, errs.NotFound, errs.Internal, errs.Unavailable}

// allKinds is every error kind, in the order of API.md §2.
var allKinds = []errs.Kind{errs.Invalid, errs.Unauthenticated, errs.PermissionDenied, errs.NotFound, errs.Conflict,
	errs.InvalidState, errs.Quota, errs.Unsupported, errs.Unavailable, errs.Internal}

var (
	openAPIOnce sync.Once
	openAPIJSON []byte
)

// OpenAPI returns the OpenAPI 3.1 document of every public method, as
// JSON. The caller must not change the slice.
func OpenAPI() []byte {
	openAPIOnce.Do(func() { openAPIJSON = mustJSON(openAPI()) })
	return openAPIJSON
}

func openAPI() map[string]any {
	schemas := map[string]any{}
	for name, s := range input.Schemas(schemaRef) {
		schemas[name] = s
	}
	for name, s := range resourceSchemas() {
		schemas[name] = s
	}
	for name, s := range substrateRequestSchemas() {
		schemas[name] = s
	}
	// kubernetesSubstrates.plan takes a pool as its event carries it (an
	// archived pool's event is no method's body).
	for name, s := range poolSchemas() {
		if name != "PoolArchived" {
			schemas[name] = s
		}
	}
	schemas["Error"] = errorSchema()

	paths := map[string]any{}
	for _, op := range operations {
		paths[op.Path()] = map[string]any{"post": operation(op)}
	}
	return map[string]any{
		// No jsonSchemaDialect: the default, OAS 3.1's base dialect, is
		// what the schemas are; naming it makes validators that do not
		// resolve it (Prism) skip every body check.
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "Better Compute Kubernetes API",
			"version": Version,
			"summary": "Managed Kubernetes clusters, their node pools, and pools' substrates.",
			"description": "Every method is `POST /api/compute/{resource}/{method}` with a JSON object body of at most 1 MiB (413 above), " +
				"sent with `Content-Type: application/json` (any other type, or none, is 415). " +
				"Decoding is strict: an unknown member, a member given twice, an integer written with a fraction or an exponent (`2.0`, `2e0`) " +
				"or `null` where a value is required is INVALID_INPUT, and a refusal lists every broken field by its JSON path " +
				"(`autoscaling.minNodes`, `taints[3].effect`, `labels[\"team\"]`). Rules across fields that JSON Schema cannot state are listed " +
				"under `x-rules` of the schema they concern. Every answer carries `X-Request-Id` (the request's own when given). " +
				"Calls record what the tenant wants and answer at once; a reconciler converges the provider and moves `state`. " +
				"Events: see /asyncapi.json.",
		},
		"servers":  []any{map[string]any{"url": "/", "description": "the API's own host (the devstack: http://127.0.0.1:8080)"}},
		"security": []any{map[string]any{"bearer": []any{}}},
		"tags": []any{
			map[string]any{"name": "kubernetesNodePools", "description": "Node pools: the groups of worker nodes of a standard cluster."},
			map[string]any{"name": "kubernetesClusters", "description": "Managed Kubernetes clusters (GKE Standard and Autopilot) on a provider account."},
			map[string]any{"name": "kubernetesSubstrates", "description": "Pool substrates: the managed cluster and node pools behind a pool whose policy asks for one " +
				"(made by the pools module's events, read here), and the join of their nodes."},
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{
					"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
					"description": "A JWT (RS256 or ES256) of the configured issuer, checked against its JWKS (iss, aud, exp, nbf); the caller is its `sub`. " +
						"The devstack mints one at POST /dev/token {\"sub\": \"alice\"}.",
				},
				"joinToken": map[string]any{
					"type": "http", "scheme": "bearer", "bearerFormat": "bcj_...",
					"description": "A substrate's join token (bcj_ and at least 256 random bits), minted by the substrate's reconciler and written only " +
						"into the Secret bcd-join of its cluster; the API stores only its hash and never returns it. " +
						"Revoked at teardown, or when the Secret is found missing and a new one is minted. Only kubernetesSubstrates.join takes it.",
				},
			},
			"headers": map[string]any{
				"X-Request-Id": map[string]any{"description": "The request's ID: the request's own X-Request-Id when given (up to 128 characters), else a new one. On every answer.",
					"required": true, "schema": map[string]any{"type": "string", "minLength": 1}},
				"Retry-After": map[string]any{"description": "Seconds to wait before retrying.", "required": true, "schema": map[string]any{"type": "integer", "minimum": 0}},
				"WWW-Authenticate": map[string]any{"description": "The Bearer challenge (RFC 6750 §3): `Bearer`, with `error=\"invalid_token\"` when a token was given and refused.",
					"required": true, "schema": map[string]any{"type": "string", "pattern": "^Bearer( |$)"}, "examples": map[string]any{
						"noToken": map[string]any{"value": "Bearer"}, "refused": map[string]any{"value": `Bearer error="invalid_token"`}}},
				"Accept": map[string]any{"description": "The one media type a request body may have.", "required": true,
					"schema": map[string]any{"type": "string", "const": "application/json"}},
			},
		},
	}
}

func operation(op Operation) map[string]any {
	on := "the cluster"
	switch {
	case op.On != "":
		on = op.On
	case op.OnTenant:
		on = "the tenant"
	}
	responses := map[string]any{
		"200": map[string]any{
			"description": "Success.",
			"headers":     map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/X-Request-Id"}},
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": schemaRef(op.Response)}}},
		},
	}
	byStatus := map[int][]errs.Kind{}
	for _, k := range append(slices.Clone(commonErrors), op.Errors...) {
		if slices.Contains(op.Without, k) {
			continue
		}
		byStatus[httpapi.Status(k)] = append(byStatus[httpapi.Status(k)], k)
	}
	byStatus[http.StatusRequestEntityTooLarge] = []errs.Kind{errs.Invalid}
	byStatus[http.StatusUnsupportedMediaType] = []errs.Kind{errs.Invalid}
	for status, kinds := range byStatus {
		codes := make([]string, len(kinds))
		for i, k := range kinds {
			codes[i] = k.Code()
		}
		desc := strings.Join(codes, " or ")
		headers := map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/X-Request-Id"}}
		switch status {
		case http.StatusRequestEntityTooLarge:
			desc = "INVALID_INPUT: the body is over 1 MiB."
		case http.StatusUnsupportedMediaType:
			desc = "INVALID_INPUT: the body is not declared `Content-Type: application/json` (a form type, as `curl -d` sends, or none); Accept names the one type taken."
			headers["Accept"] = map[string]any{"$ref": "#/components/headers/Accept"}
		case http.StatusUnauthorized:
			desc += ": no, malformed, expired or badly signed token; WWW-Authenticate names the Bearer scheme. Checked before the body is read."
			headers["WWW-Authenticate"] = map[string]any{"$ref": "#/components/headers/WWW-Authenticate"}
		case http.StatusServiceUnavailable:
			headers["Retry-After"] = map[string]any{"$ref": "#/components/headers/Retry-After"}
			desc += ": a backing service is down; safe to retry after Retry-After. A mutation whose storage answer was lost learns whether it was stored before it answers: stored, it answers 200; only when that cannot be learned is it this, with the detail OUTCOME_UNKNOWN."
		}
		responses[strconv.Itoa(status)] = map[string]any{
			"description": desc,
			"headers":     headers,
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": schemaRef("Error")}}},
		}
	}
	examples := map[string]any{}
	for name, body := range op.Examples {
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			panic(fmt.Sprintf("apidoc: example %s of %s: %v", name, op.ID(), err))
		}
		examples[name] = map[string]any{"value": v}
	}
	o := map[string]any{
		"operationId": op.ID(),
		"tags":        []any{op.Resource},
		"summary":     op.Summary,
		"requestBody": map[string]any{
			"required": true,
			"content": map[string]any{"application/json": map[string]any{
				"schema":   map[string]any{"$ref": schemaRef(op.Request)},
				"examples": examples,
			}},
		},
		"responses": responses,
	}
	if op.JoinToken {
		// No user's token: the join token is its own authorization.
		o["security"] = []any{map[string]any{"joinToken": []any{}}}
		o["description"] = op.Description + "\n\nAuthorization: the substrate's join token (`Authorization: Bearer bcj_...`); no user's JWT is accepted."
		return o
	}
	o["description"] = op.Description + "\n\nPermission: `" + op.Permission + "` on " + on + "."
	o["x-permission"] = map[string]any{"permission": op.Permission, "on": strings.TrimPrefix(on, "the ")}
	return o
}

// errorSchema is the error envelope of API.md §2.
func errorSchema() map[string]any {
	codes := make([]any, len(allKinds))
	for i, k := range allKinds {
		codes[i] = k.Code()
	}
	return map[string]any{
		"type":     "object",
		"required": []any{"error"},
		"properties": map[string]any{
			"error": map[string]any{
				"type":     "object",
				"required": []any{"code", "message"},
				"properties": map[string]any{
					"code":    map[string]any{"type": "string", "enum": codes},
					"message": map[string]any{"type": "string", "description": "Safe to show; never leaks internals."},
					"details": map[string]any{
						"type":        "array",
						"description": "Every broken input field (INVALID_INPUT), by its JSON path; or, for UNAVAILABLE, the one detail `{\"reason\": \"OUTCOME_UNKNOWN\"}` when a mutation's storage answer was lost and whether it was stored could not be learned: a retry with the same idempotencyKey is safe and returns the one result.",
						"items": map[string]any{
							"type":     "object",
							"required": []any{"reason"},
							"properties": map[string]any{
								"field":  map[string]any{"type": "string", "examples": []any{"autoscaling.minNodes", "taints[3].effect", `labels["team"]`}},
								"reason": map[string]any{"type": "string"},
							},
						},
					},
				},
			},
		},
	}
}

// Resource states (API.md §4). A node pool is never provisioning.
var (
	clusterStates  = []resource.State{resource.StatePending, resource.StateProvisioning, resource.StateReady, resource.StateUpdating, resource.StateDeleting, resource.StateDeleted, resource.StateError}
	nodePoolStates = slices.DeleteFunc(slices.Clone(clusterStates), func(s resource.State) bool { return s == resource.StateProvisioning })
)

// resourceSchemas are the schemas of the answers, made from the json tags
// of shared/resource: the node pool, the cluster, the substrate and its
// parts, and the lists.
func resourceSchemas() map[string]map[string]any {
	np := objectSchema(reflect.TypeFor[resource.NodePool]())
	p := np["properties"].(map[string]any)
	p["id"].(map[string]any)["pattern"] = idPattern(resource.NodePoolPrefix)
	p["state"] = stateSchema(nodePoolStates)
	p["message"].(map[string]any)["description"] = "Why the node pool is in state error (the provider's message; a stockout names the zones, the machine type and the nodes got of those wanted: \"us-central1-a: no g2-standard-8 available (ZONE_RESOURCE_POOL_EXHAUSTED); 1 of 2 nodes; retried every 5 minutes\"), or what it waits for."
	cnc := p["currentNodeCount"].(map[string]any)
	cnc["minimum"] = 0
	cnc["description"] = "The nodes the provider runs for the pool in all its zones: the running instances of its instance groups, refreshed at every run that looks at the cluster. With autoscaling, the provider's autoscaler owns it within the bounds. Absent until first observed, and while it cannot be read."
	np["description"] = "A node pool. Optional fields that were not given are omitted (autoscaling, accelerators, diskGiB, diskType) or empty (zones, labels, taints)."

	cl := objectSchema(reflect.TypeFor[resource.Cluster]())
	p = cl["properties"].(map[string]any)
	p["id"].(map[string]any)["pattern"] = idPattern(resource.ClusterPrefix)
	p["state"] = stateSchema(clusterStates)
	p["mode"] = map[string]any{"type": "string", "enum": []any{resource.ModeStandard, resource.ModeAutopilot}}
	p["message"].(map[string]any)["description"] = "Why the cluster is in state error; names the failed node pool."
	cl["description"] = "A managed Kubernetes cluster. providerName, derived from the ID, is its provider-side name."

	for _, s := range []map[string]any{np, cl} {
		s["properties"].(map[string]any)["managedBy"] = map[string]any{"type": "string", "pattern": idPattern(resource.SubstratePrefix),
			"description": "The substrate (kubernetesSubstrates) that manages it, if any: the tenant may read it but not update or delete it (INVALID_STATE)."}
	}

	out := map[string]map[string]any{
		"NodePool": np,
		"Cluster":  cl,
		"NodePoolList": {
			"type": "object", "required": []any{"nodePools"}, "additionalProperties": false,
			"properties": map[string]any{"nodePools": map[string]any{"type": "array", "items": map[string]any{"$ref": schemaRef("NodePool")}}},
		},
		"ClusterList": {
			"type": "object", "required": []any{"clusters", "nextPageToken"}, "additionalProperties": false,
			"properties": map[string]any{
				"clusters":      map[string]any{"type": "array", "items": map[string]any{"$ref": schemaRef("Cluster")}},
				"nextPageToken": map[string]any{"type": "string", "description": "Empty on the last page."},
			},
		},
	}
	maps.Copy(out, substrateSchemas())
	return out
}

// idPattern matches the IDs the API makes: a TypeID of 26 characters.
func idPattern(prefix string) string { return "^" + prefix + "_[0-9a-hjkmnp-tv-z]{26}$" }

func stateSchema(states []resource.State) map[string]any {
	enum := make([]any, len(states))
	for i, s := range states {
		enum[i] = string(s)
	}
	return map[string]any{"type": "string", "enum": enum}
}

// objectSchema is the schema of a resource struct's JSON: every member
// without omitempty is always there.
func objectSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []any
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		props[name] = typeSchema(f.Type, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

var timeType = reflect.TypeFor[time.Time]()

func typeSchema(t reflect.Type, name string) map[string]any {
	if t == timeType {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		s := map[string]any{"type": "string"}
		switch name {
		case "id":
			// The resource's own prefix is set by the caller's schema.
		case "clusterId":
			s["pattern"] = idPattern(resource.ClusterPrefix)
		}
		return s
	case reflect.Int, reflect.Int64:
		s := map[string]any{"type": "integer"}
		if name == "version" {
			s["minimum"] = 1
		}
		return s
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem(), "")}
	case reflect.Map:
		return map[string]any{"$ref": schemaRef("Labels")}
	case reflect.Struct:
		return map[string]any{"$ref": schemaRef(t.Name())}
	}
	panic(fmt.Sprintf("apidoc: no schema for %v", t))
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("apidoc: marshal: %v", err))
	}
	return append(b, '\n')
}
