package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// Tenant IDs the tenantId pattern accepts and principals identity
// providers issue, which Firestore cannot take as document IDs as they
// stand (API.md §3).
var (
	hostileTenants  = []string{".", "..", "__x__", "__acme__"}
	hostileSubjects = []string{"a/b", "..", "__x__", "alice/../bob", "~YS9i"}
)

// allMethods is every API method.
var allMethods = []string{
	"kubernetesNodePools/create", "kubernetesNodePools/list", "kubernetesNodePools/update", "kubernetesNodePools/delete",
	"kubernetesClusters/create", "kubernetesClusters/get", "kubernetesClusters/list", "kubernetesClusters/delete",
	"kubernetesSubstrates/get", "kubernetesSubstrates/list", "kubernetesSubstrates/listNodes", "kubernetesSubstrates/plan",
	"kubernetesSubstrates/join",
}

// unknownSubstrate is a well-formed substrate ID that names nothing.
const unknownSubstrate = "ksb_01jd0000000000000000000000"

// anyMethodBody is a valid body of any method on the target.
func anyMethodBody(method string, tg target, n int) obj {
	switch method {
	case "kubernetesSubstrates/get":
		return obj{"tenantId": tg.tenantID, "substrateId": unknownSubstrate}
	case "kubernetesSubstrates/list":
		return obj{"tenantId": tg.tenantID}
	case "kubernetesSubstrates/listNodes":
		return obj{"tenantId": tg.tenantID, "substrateId": unknownSubstrate, "pageSize": 10}
	case "kubernetesSubstrates/plan":
		return obj{"tenantId": tg.tenantID, "pool": obj{"id": "pool-x", "tenantId": tg.tenantID, "version": 1}}
	case "kubernetesSubstrates/join":
		return obj{"nodeName": "node-1", "providerId": "gce://p/us-central1-a/node-1"}
	}
	return methodBody(method, tg, n)
}

// wantDenied fails unless r is the answer to a caller with no binding:
// 403, or 401 on join, which takes a join token and no user's.
func wantDenied(t *testing.T, method string, r response) {
	t.Helper()
	if method == "kubernetesSubstrates/join" {
		wantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		return
	}
	wantError(t, r, http.StatusForbidden, "PERMISSION_DENIED")
}

// Every method named with a tenant ID Firestore cannot store as it is
// answers a caller with no binding there 403, as for any other tenant.
func TestHostileTenantIDs(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	p := listPools(t, tn, c.ID)[0]
	n := 0
	for _, tenantID := range hostileTenants {
		for _, method := range allMethods {
			n++
			t.Run(fmt.Sprintf("%s/%q", method, tenantID), func(t *testing.T) {
				tg := target{tenantID: tenantID, poolID: tn.Pool, clusterID: c.ID, nodePoolID: p.ID}
				wantDenied(t, method, call(t, admin, method, anyMethodBody(method, tg, n)))
			})
		}
	}
}

// Every method called with a token whose subject Firestore cannot store
// as it is answers 403 when the subject has no binding.
func TestHostileSubjects(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	p := listPools(t, tn, c.ID)[0]
	// "~YS9i" is the stored form of "a/b": binding one binds not the other.
	bind(t, auth.Binding{TenantID: tn.ID, Principal: store.DocID("a/b"), Role: auth.RoleAdmin})
	n := 0
	for _, sub := range hostileSubjects {
		if sub == store.DocID("a/b") {
			continue
		}
		for _, method := range allMethods {
			n++
			t.Run(fmt.Sprintf("%s/%q", method, sub), func(t *testing.T) {
				tg := target{tenantID: tn.ID, poolID: tn.Pool, clusterID: c.ID, nodePoolID: p.ID}
				wantDenied(t, method, call(t, sub, method, anyMethodBody(method, tg, n)))
			})
		}
	}
	bind(t, auth.Binding{TenantID: tn.ID, Principal: "a/b", Role: auth.RoleViewer})
	var l struct {
		Clusters      []resource.Cluster `json:"clusters"`
		NextPageToken string             `json:"nextPageToken"`
	}
	call(t, "a/b", "kubernetesClusters/list", obj{"tenantId": tn.ID}).decode(t, &l)
	wantError(t, call(t, "a/b", "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}), http.StatusForbidden, "PERMISSION_DENIED")
}

// A principal Firestore cannot store as it is, once bound, works end to
// end; so does a member of a tenant whose ID it cannot store.
func TestHostileIDsServed(t *testing.T) {
	tn := newTenant(t)
	const sub = "alice/../bob"
	bind(t, auth.Binding{TenantID: tn.ID, Principal: sub, Role: auth.RoleAdmin})

	var c resource.Cluster
	call(t, sub, "kubernetesClusters/create", with(standardCluster(tn, "hostile"), "idempotencyKey", "__k__")).decode(t, &c)
	var again resource.Cluster
	call(t, sub, "kubernetesClusters/create", with(standardCluster(tn, "hostile"), "idempotencyKey", "__k__")).decode(t, &again)
	if again.ID != c.ID {
		t.Fatalf("the retried create made cluster %s, want %s", again.ID, c.ID)
	}
	call(t, sub, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &again)
	var np resource.NodePool
	call(t, sub, "kubernetesNodePools/create", with(createBody(tn, c.ID, "extra"), "idempotencyKey", "..")).decode(t, &np)
	call(t, sub, "kubernetesNodePools/update", obj{"tenantId": tn.ID, "clusterId": c.ID, "nodePoolId": np.ID, "nodeCount": 3}).decode(t, &np)
	if np.NodeCount != 3 {
		t.Errorf("updated pool has %d nodes, want 3", np.NodeCount)
	}
	if pools := listPools(t, tn, c.ID); len(pools) != 2 {
		t.Errorf("the cluster has %d pools, want 2", len(pools))
	}
	call(t, sub, "kubernetesNodePools/delete", obj{"tenantId": tn.ID, "clusterId": c.ID, "nodePoolId": np.ID}).decode(t, &np)
	call(t, sub, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &c)
	if c.State != resource.StateDeleting {
		t.Errorf("deleted cluster is %s, want deleting", c.State)
	}
	// Its neighbours in the path are other principals.
	for _, other := range []string{"alice/..", "alice/../bob/", "alice/../bo", "~" + sub, store.DocID(sub)} {
		wantError(t, call(t, other, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}), http.StatusForbidden, "PERMISSION_DENIED")
	}

	// A tenant and pools of IDs Firestore cannot store as they are.
	n := h.seq.Add(1)
	tenantID := fmt.Sprintf("__hostile-%d__", n)
	metal := fmt.Sprintf("__metal-%d__", n)
	gcp := fmt.Sprintf("__gcp-%d__", n)
	if err := h.store.LoadSeed(t.Context(), &store.Seed{
		Pools: []store.Pool{
			{ID: metal, TenantID: tenantID, AccountID: "acc-metal"},
			{ID: gcp, TenantID: tenantID, AccountID: "acc-gcp"},
		},
		RoleBindings: []auth.Binding{{TenantID: tenantID, Principal: "a/b", Role: auth.RoleAdmin}},
	}); err != nil {
		t.Fatalf("LoadSeed: %v", err)
	}
	var l struct {
		Clusters      []resource.Cluster `json:"clusters"`
		NextPageToken string             `json:"nextPageToken"`
	}
	call(t, "a/b", "kubernetesClusters/list", obj{"tenantId": tenantID}).decode(t, &l)
	if len(l.Clusters) != 0 {
		t.Errorf("a new tenant lists %d clusters", len(l.Clusters))
	}
	ref := obj{"tenantId": tenantID, "clusterId": "kcl_01jd0000000000000000000000"}
	wantError(t, call(t, "a/b", "kubernetesClusters/get", ref), http.StatusNotFound, "NOT_FOUND")
	wantError(t, call(t, "a/b", "kubernetesNodePools/list", ref), http.StatusNotFound, "NOT_FOUND")
	autopilot := obj{"tenantId": tenantID, "poolId": metal, "name": "c", "mode": "autopilot", "region": "fra", "idempotencyKey": "k"}
	wantError(t, call(t, "a/b", "kubernetesClusters/create", autopilot), http.StatusUnprocessableEntity, "UNSUPPORTED")
	// A create there writes its documents and its outbox event under the
	// tenant's stored ID.
	hostile := tenant{ID: tenantID, Pool: gcp}
	var hc resource.Cluster
	call(t, "a/b", "kubernetesClusters/create", standardCluster(hostile, "c")).decode(t, &hc)
	call(t, "a/b", "kubernetesNodePools/create", createBody(hostile, hc.ID, "extra")).decode(t, &np)
	var pools struct {
		NodePools []resource.NodePool `json:"nodePools"`
	}
	call(t, "a/b", "kubernetesNodePools/list", obj{"tenantId": tenantID, "clusterId": hc.ID}).decode(t, &pools)
	if len(pools.NodePools) != 2 {
		t.Errorf("the hostile tenant's cluster has %d pools, want 2", len(pools.NodePools))
	}
	// Another tenant's pool is not found from here.
	wantError(t, call(t, "a/b", "kubernetesClusters/create", with(autopilot, "poolId", tn.Pool)), http.StatusNotFound, "NOT_FOUND")
	wantError(t, call(t, admin, "kubernetesClusters/list", obj{"tenantId": tenantID}), http.StatusForbidden, "PERMISSION_DENIED")
}
