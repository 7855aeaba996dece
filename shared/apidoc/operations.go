// Package apidoc describes the public API for its users: an OpenAPI 3.1
// document of every method (OpenAPI), an AsyncAPI 3.0 document of every
// event (AsyncAPI), and Handler, which serves both (GET /openapi.json and
// GET /asyncapi.json) in the devstack and behind the production entry.
//
// Nothing here is written twice. Request bodies are the schemas of
// shared/input, made from the validator tags and patterns its decoders
// check; responses and event data are made from the json tags of
// shared/resource; the error codes from shared/errs; the event types and
// their attributes from shared/outbox. What remains (summaries, which
// errors a method may answer, examples) is the table below, one entry per
// method, whose list the tests hold equal to functions/api's.
//
// The substrates' methods (API.md §9) are entries of operations like the
// others; their bodies' schemas are made here (substrates.go) from the
// pieces of shared/input's, until shared/input makes them itself, and the
// agreement test holds them to the decoders as it holds the others.
package apidoc

import "github.com/better-compute/kubernetes/shared/errs"

// Operation is one documented method, POST /api/compute/{Resource}/{Verb}.
type Operation struct {
	Resource    string // kubernetesNodePools, kubernetesClusters, kubernetesSubstrates
	Verb        string // create, get, list, update, delete, listNodes, plan, join
	Summary     string
	Description string
	// Permission is the permission the method needs, on the cluster
	// (API.md §3) unless OnTenant; On, when set, says on what instead.
	// Empty for a method that takes no user's token (JoinToken).
	Permission string
	OnTenant   bool
	On         string
	// JoinToken: the method authenticates with a substrate's join token
	// (the joinToken security scheme), not a user's JWT. Such a method is
	// bcd's, not the tenants'.
	JoinToken bool
	// Request and Response name the schemas of the body and of the 200
	// answer (components/schemas).
	Request  string
	Response string
	// Errors are the error codes the method may answer beside those of
	// every method (INVALID_INPUT, UNAUTHENTICATED, PERMISSION_DENIED,
	// NOT_FOUND, INTERNAL, UNAVAILABLE); Without, those of every method
	// that it never answers.
	Errors  []errs.Kind
	Without []errs.Kind
	// Examples are valid bodies, by name; the agreement test derives its
	// corpus from them.
	Examples map[string]string
}

// ID is the operation's id: kubernetesNodePools.create.
func (o Operation) ID() string { return o.Resource + "." + o.Verb }

// Path is where the method is served.
func (o Operation) Path() string { return "/api/compute/" + o.Resource + "/" + o.Verb }

const (
	clusterID   = "kcl_01jd8x4k2m9q7v3w5y6z0a1b2c"
	nodePoolID  = "knp_01jd8x4k2m9q7v3w5y6z0a1b2d"
	substrateID = "ksb_01jd8x4k2m9q7v3w5y6z0a1b2e"
)

// operations is every public method, in the order of API.md.
var operations = []Operation{
	{
		Resource: "kubernetesNodePools", Verb: "create",
		Summary: "Add a node pool to a standard cluster",
		Description: "Records the node pool and returns it `pending`; the reconciler creates it at the provider. " +
			"The cluster goes `updating` (unless still `pending`/`provisioning`). " +
			"An autopilot cluster, or one being deleted, is INVALID_STATE; a name held by a pool that is not deleted is CONFLICT; " +
			"an eleventh pool is QUOTA_EXCEEDED. Zones must be of the cluster's region and enabled on its account (INVALID_INPUT). " +
			"With an idempotencyKey (scoped to the tenant, the caller and the cluster, kept at least 24 hours) a retry returns the same pool; " +
			"the same key with another request is CONFLICT. Publishes kubernetes.nodepool.created.",
		Permission: "compute:kubernetes:update",
		Request:    "CreateNodePool", Response: "NodePool",
		Errors: []errs.Kind{errs.Conflict, errs.InvalidState, errs.Quota},
		Examples: map[string]string{
			"minimal": `{"tenantId":"acme","clusterId":"` + clusterID + `","name":"gpu","machineType":"g2-standard-8","nodeCount":2}`,
			"full": `{"tenantId":"acme","clusterId":"` + clusterID + `","name":"gpu-l4","machineType":"g2-standard-8","nodeCount":2,` +
				`"autoscaling":{"minNodes":1,"maxNodes":4},"diskGiB":200,"diskType":"pd-balanced","spot":true,` +
				`"accelerators":{"type":"nvidia-l4","count":1},"zones":["us-central1-a","us-central1-b"],` +
				`"labels":{"team":"ml","example.com/tier":"gpu"},"taints":[{"key":"gpu","value":"true","effect":"NoSchedule"}],` +
				`"idempotencyKey":"create-gpu-l4-1"}`,
		},
	},
	{
		Resource: "kubernetesNodePools", Verb: "list",
		Summary:     "List a cluster's node pools",
		Description: "Every node pool of the cluster that is not deleted (deleting ones included), oldest first.",
		Permission:  "compute:kubernetes:read",
		Request:     "ClusterRef", Response: "NodePoolList",
		Examples: map[string]string{"minimal": `{"tenantId":"acme","clusterId":"` + clusterID + `"}`},
	},
	{
		Resource: "kubernetesNodePools", Verb: "update",
		Summary: "Resize a node pool",
		Description: "Changes nodeCount and/or autoscaling (null turns it off); the resulting nodeCount must lie within the resulting bounds (INVALID_INPUT). " +
			"Every other field never changes (INVALID_INPUT): delete the pool and create another. " +
			"The pool goes `updating` (a `pending` one stays `pending`) and its version goes up by one; the cluster goes `updating`. " +
			"A pool or cluster being deleted is INVALID_STATE.",
		Permission: "compute:kubernetes:update",
		Request:    "UpdateNodePool", Response: "NodePool",
		Errors: []errs.Kind{errs.InvalidState},
		Examples: map[string]string{
			"resize":       `{"tenantId":"acme","clusterId":"` + clusterID + `","nodePoolId":"` + nodePoolID + `","nodeCount":3}`,
			"autoscaling":  `{"tenantId":"acme","clusterId":"` + clusterID + `","nodePoolId":"` + nodePoolID + `","nodeCount":2,"autoscaling":{"minNodes":1,"maxNodes":5}}`,
			"autoscaleOff": `{"tenantId":"acme","clusterId":"` + clusterID + `","nodePoolId":"` + nodePoolID + `","autoscaling":null}`,
		},
	},
	{
		Resource: "kubernetesNodePools", Verb: "delete",
		Summary: "Delete a node pool",
		Description: "Marks the pool for deletion and returns it `deleting`; the reconciler deletes it at the provider, then it is `deleted`, " +
			"gone from list, and its name is free. Deleting a `deleting` pool returns it unchanged; a `deleted` one is NOT_FOUND.",
		Permission: "compute:kubernetes:update",
		Request:    "NodePoolRef", Response: "NodePool",
		Errors:   []errs.Kind{errs.InvalidState},
		Examples: map[string]string{"minimal": `{"tenantId":"acme","clusterId":"` + clusterID + `","nodePoolId":"` + nodePoolID + `"}`},
	},
	{
		Resource: "kubernetesClusters", Verb: "create",
		Summary: "Create a managed Kubernetes cluster",
		Description: "Records the cluster (and a standard cluster's node pools) and returns it `pending`; the reconciler creates it at the provider. " +
			"The name is unique among the tenant's clusters that are not deleted (CONFLICT). The region must be one of the pool's account (INVALID_INPUT); " +
			"a pool whose account provider has no managed Kubernetes is UNSUPPORTED. " +
			"A tenant with a quota of clusters (quota.clusters) that has that many clusters not deleted gets QUOTA_EXCEEDED naming the quota; " +
			"a deleted cluster frees its place, and a retry with the idempotencyKey of a create that was let in still returns its cluster. " +
			"Publishes kubernetes.cluster.created.",
		Permission: "compute:kubernetes:create", OnTenant: true,
		Request: "CreateCluster", Response: "Cluster",
		Errors: []errs.Kind{errs.Conflict, errs.Quota, errs.Unsupported},
		Examples: map[string]string{
			"standard": `{"tenantId":"acme","poolId":"pool-dev","name":"prod","mode":"standard","region":"us-central1",` +
				`"releaseChannel":"stable","labels":{"env":"prod"},"idempotencyKey":"prod-1",` +
				`"nodePools":[{"name":"default","machineType":"e2-standard-4","nodeCount":1},` +
				`{"name":"gpu","machineType":"g2-standard-8","nodeCount":1,"autoscaling":{"minNodes":0,"maxNodes":3},` +
				`"accelerators":{"type":"nvidia-l4","count":1},"zones":["us-central1-a"],"taints":[{"key":"gpu","effect":"NoSchedule"}]}]}`,
			"autopilot": `{"tenantId":"acme","poolId":"pool-dev","name":"auto","mode":"autopilot","region":"us-central1"}`,
		},
	},
	{
		Resource: "kubernetesClusters", Verb: "get",
		Summary:     "Get a cluster",
		Description: "The cluster, in any state but `deleted` (NOT_FOUND).",
		Permission:  "compute:kubernetes:read",
		Request:     "ClusterRef", Response: "Cluster",
		Examples: map[string]string{"minimal": `{"tenantId":"acme","clusterId":"` + clusterID + `"}`},
	},
	{
		Resource: "kubernetesClusters", Verb: "list",
		Summary:     "List clusters",
		Description: "The tenant's clusters that are not deleted and that the caller may read, newest first, a page at a time.",
		Permission:  "compute:kubernetes:read",
		Request:     "ListClusters", Response: "ClusterList",
		Examples: map[string]string{
			"minimal": `{"tenantId":"acme"}`,
			"page":    `{"tenantId":"acme","poolId":"pool-dev","pageSize":20,"pageToken":"opaque"}`,
		},
	},
	{
		Resource: "kubernetesClusters", Verb: "delete",
		Summary: "Delete a cluster",
		Description: "Marks the cluster and its node pools for deletion and returns it `deleting`; the reconciler deletes them at the provider. " +
			"Deleting a `deleting` cluster returns it unchanged.",
		Permission: "compute:kubernetes:delete",
		Request:    "ClusterRef", Response: "Cluster",
		Errors:   []errs.Kind{errs.InvalidState},
		Examples: map[string]string{"minimal": `{"tenantId":"acme","clusterId":"` + clusterID + `"}`},
	},
	{
		Resource: "kubernetesSubstrates", Verb: "get",
		Summary: "Get a pool's substrate",
		Description: "The managed Kubernetes cluster behind a pool whose policy asks for one, in any state but `deleted` (NOT_FOUND). " +
			"Substrates are made, changed and torn down by the pools module's events (compute.pool.updated, compute.pool.archived), never by a call. " +
			"The join token is never part of it.",
		Permission: "compute:kubernetes:read", On: "the substrate's cluster, or the tenant while it has none",
		Request: "SubstrateRef", Response: "Substrate",
		Examples: map[string]string{"minimal": `{"tenantId":"acme","substrateId":"` + substrateID + `"}`},
	},
	{
		Resource: "kubernetesSubstrates", Verb: "list",
		Summary:     "List the tenant's substrates",
		Description: "The tenant's substrates that are not deleted and that the caller may read, of one pool when poolId is given, oldest first. A pool has at most one.",
		Permission:  "compute:kubernetes:read", On: "each substrate's cluster, or the tenant while it has none (list: only those the caller may read)",
		Request: "ListSubstrates", Response: "SubstrateList",
		Examples: map[string]string{
			"minimal": `{"tenantId":"acme"}`,
			"pool":    `{"tenantId":"acme","poolId":"pool-gpu"}`,
		},
	},
	{
		Resource: "kubernetesSubstrates", Verb: "listNodes",
		Summary: "List the nodes that joined a substrate",
		Description: "The substrate's joined nodes, by name, a page at a time (a substrate may have thousands). " +
			"A node joins when bcd on it calls kubernetesSubstrates.join, and leaves when its Node is gone from the cluster.",
		Permission: "compute:kubernetes:read", On: "the substrate's cluster, or the tenant while it has none",
		Request: "ListSubstrateNodes", Response: "SubstrateNodeList",
		Examples: map[string]string{
			"minimal": `{"tenantId":"acme","substrateId":"` + substrateID + `"}`,
			"page":    `{"tenantId":"acme","substrateId":"` + substrateID + `","pageSize":500,"pageToken":"opaque"}`,
		},
	},
	{
		Resource: "kubernetesSubstrates", Verb: "plan",
		Summary: "Plan what a pool's substrate would do",
		Description: "What the pool's substrate would do if the pool's next compute.pool.updated event carried this pool, action by action, " +
			"computed by the planner the reconciler runs, and the substrate as it would be once converged (no id when none exists yet). Nothing changes. " +
			"Actions: createCluster, adoptCluster, createNodePool, resizeNodePool, replaceNodePool (a field that cannot change in place: " +
			"the new node pool bc-<pool>-<flavor>-<n> is made first and the old one deleted once the new one is ready and its nodes joined), " +
			"deleteNodePool, applyObjects (bcd's objects in the cluster), teardown (the pool asks for no substrate, or for another account or cluster), " +
			"none (nothing to change, or the error the substrate would show, such as a node pool or an object of the same name that is not the substrate's). " +
			"A malformed pool is INVALID_INPUT naming every broken field under pool, by the rules the consumer applies to the event. " +
			"The pool's version is not compared with the last one applied.",
		Permission: "compute:kubernetes:read", On: "the substrate's cluster, or the tenant while it has none",
		Request: "PlanSubstrate", Response: "SubstratePlan",
		Examples: map[string]string{
			"create": `{"tenantId":"acme","pool":{"id":"pool-gpu","tenantId":"acme","version":8,"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp",` +
				`"cluster":{"create":{"region":"us-central1","zones":["us-central1-a"],"releaseChannel":"regular"}}}},` +
				`"flavors":[{"name":"l4","machineType":"g2-standard-8","nodeCount":1,"autoscaling":{"minNodes":0,"maxNodes":8},"spot":true,"accelerators":{"type":"nvidia-l4","count":1}}]}}`,
		},
	},
	{
		Resource: "kubernetesSubstrates", Verb: "join",
		Summary: "Join a node to its substrate (bcd)",
		Description: "Called by bcd, the DaemonSet a substrate runs on its node pools, with the substrate's join token (from the Secret bcd-join), " +
			"not a user's token. The node joins once it is, in the cluster's Kubernetes API, a Node of one of the substrate's node pools " +
			"(its cloud.google.com/gke-nodepool label) with this providerId; otherwise PERMISSION_DENIED. " +
			"An unknown or revoked token is UNAUTHENTICATED; a substrate without a cluster yet is INVALID_STATE; " +
			"a cluster whose Kubernetes API cannot be reached is UNAVAILABLE. Idempotent per node: a node that joined already gets the same answer. " +
			"Publishes kubernetes.substrate.node.joined the first time.",
		JoinToken: true,
		Request:   "Join", Response: "JoinResult",
		Errors:  []errs.Kind{errs.InvalidState},
		Without: []errs.Kind{errs.NotFound},
		Examples: map[string]string{
			"gke": `{"nodeName":"gke-bc-pool-gpu-bc-pool-gpu-l4-1a2b3c4d-x7k2","providerId":"gce://bc-dev/us-central1-a/gke-bc-pool-gpu-bc-pool-gpu-l4-1a2b3c4d-x7k2"}`,
		},
	},
}

// Operations returns every documented method, in the order of API.md:
// the tenants' and bcd's (JoinToken).
func Operations() []Operation {
	out := make([]Operation, len(operations))
	copy(out, operations)
	return out
}
