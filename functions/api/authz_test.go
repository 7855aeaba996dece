package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/resource"
)

// target is what one call of the matrix acts on: a fresh cluster with one
// pool, in the tenant the call names.
type target struct {
	tenantID, poolID, clusterID, nodePoolID string
}

// methodBody returns a valid body of method on the target.
func methodBody(method string, tg target, n int) obj {
	switch method {
	case "kubernetesNodePools/create":
		return obj{"tenantId": tg.tenantID, "clusterId": tg.clusterID, "name": fmt.Sprintf("np%d", n), "machineType": "e2-standard-4", "nodeCount": 1}
	case "kubernetesNodePools/update":
		return obj{"tenantId": tg.tenantID, "clusterId": tg.clusterID, "nodePoolId": tg.nodePoolID, "nodeCount": 2}
	case "kubernetesNodePools/delete":
		return obj{"tenantId": tg.tenantID, "clusterId": tg.clusterID, "nodePoolId": tg.nodePoolID}
	case "kubernetesClusters/create":
		return obj{"tenantId": tg.tenantID, "poolId": tg.poolID, "name": fmt.Sprintf("new%d", n), "mode": "autopilot", "region": "us-central1"}
	case "kubernetesClusters/list":
		return obj{"tenantId": tg.tenantID}
	}
	// kubernetesNodePools/list, kubernetesClusters/get and /delete
	return obj{"tenantId": tg.tenantID, "clusterId": tg.clusterID}
}

// TestAuthorizationMatrix calls every method as every kind of caller, on
// its own tenant and on another, and checks API.md §3's decision.
func TestAuthorizationMatrix(t *testing.T) {
	tn := newTenant(t)
	elsewhere := newCluster(t, tn)
	// carol is an editor of another cluster only; sam, of the target
	// cluster only (bound per call below).
	bind(t, auth.Binding{TenantID: tn.ID, Principal: scoped, Role: auth.RoleEditor, Resource: elsewhere.ID})
	const scopedHere = "sam"

	const ok, denied = http.StatusOK, http.StatusForbidden
	methods := []string{
		"kubernetesNodePools/create", "kubernetesNodePools/list", "kubernetesNodePools/update", "kubernetesNodePools/delete",
		"kubernetesClusters/create", "kubernetesClusters/get", "kubernetesClusters/list", "kubernetesClusters/delete",
	}
	// want[method][principal] on the caller's own tenant.
	want := map[string]map[string]int{
		"kubernetesNodePools/create": {admin: ok, editor: ok, viewer: denied, scoped: denied, scopedHere: ok, nobody: denied},
		"kubernetesNodePools/list":   {admin: ok, editor: ok, viewer: ok, scoped: denied, scopedHere: ok, nobody: denied},
		"kubernetesNodePools/update": {admin: ok, editor: ok, viewer: denied, scoped: denied, scopedHere: ok, nobody: denied},
		"kubernetesNodePools/delete": {admin: ok, editor: ok, viewer: denied, scoped: denied, scopedHere: ok, nobody: denied},
		"kubernetesClusters/create":  {admin: ok, editor: denied, viewer: denied, scoped: denied, scopedHere: denied, nobody: denied},
		"kubernetesClusters/get":     {admin: ok, editor: ok, viewer: ok, scoped: denied, scopedHere: ok, nobody: denied},
		"kubernetesClusters/list":    {admin: ok, editor: ok, viewer: ok, scoped: ok, scopedHere: ok, nobody: denied},
		"kubernetesClusters/delete":  {admin: ok, editor: denied, viewer: denied, scoped: denied, scopedHere: denied, nobody: denied},
	}
	principals := []string{admin, editor, viewer, scoped, scopedHere, nobody}
	n := 0
	for _, method := range methods {
		for _, p := range principals {
			for _, other := range []bool{false, true} {
				n++
				name := fmt.Sprintf("%s/%s/own", method, p)
				if other {
					name = fmt.Sprintf("%s/%s/other tenant", method, p)
				}
				t.Run(name, func(t *testing.T) {
					var tg target
					if other {
						// The other tenant's own cluster, made by its admin.
						var c resource.Cluster
						call(t, foreign, "kubernetesClusters/create", with(standardCluster(tn, fmt.Sprintf("o%d", n)), "tenantId", tn.Other, "poolId", tn.OtherPool)).decode(t, &c)
						var l poolList
						call(t, foreign, "kubernetesNodePools/list", obj{"tenantId": tn.Other, "clusterId": c.ID}).decode(t, &l)
						tg = target{tenantID: tn.Other, poolID: tn.OtherPool, clusterID: c.ID, nodePoolID: l.NodePools[0].ID}
					} else {
						c := newCluster(t, tn)
						tg = target{tenantID: tn.ID, poolID: tn.Pool, clusterID: c.ID, nodePoolID: listPools(t, tn, c.ID)[0].ID}
						bind(t, auth.Binding{TenantID: tn.ID, Principal: scopedHere, Role: auth.RoleEditor, Resource: c.ID})
					}
					r := call(t, p, method, methodBody(method, tg, n))
					status := want[method][p]
					if other {
						status = denied // no binding in the other tenant: 403, nothing learnt
					}
					if status == ok {
						if r.Status != ok {
							t.Fatalf("answer %v, want 200", r)
						}
						return
					}
					wantError(t, r, status, "PERMISSION_DENIED")
				})
			}
		}
	}
}

// TestCheckOrder checks the order of API.md §3: token, input, membership,
// lookup, permission, then state and business rules.
func TestCheckOrder(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	p := listPools(t, tn, c.ID)[0]
	auto := createCluster(t, obj{"tenantId": tn.ID, "poolId": tn.Pool, "name": "auto", "mode": "autopilot", "region": "us-central1"})
	deleting := newCluster(t, tn)
	dp := listPools(t, tn, deleting.ID)[0]
	call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": deleting.ID}).decode(t, &deleting)
	var foreignCluster resource.Cluster
	call(t, foreign, "kubernetesClusters/create", with(standardCluster(tn, "theirs"), "tenantId", tn.Other, "poolId", tn.OtherPool)).decode(t, &foreignCluster)
	for i := range 9 {
		createPool(t, tn, c.ID, poolSpec(fmt.Sprintf("fill%d", i)))
	}
	invalid := obj{"tenantId": tn.ID, "clusterId": c.ID, "name": "Bad", "machineType": "e2-standard-4", "nodeCount": -1}
	create := func(clusterID, name string) obj { return createBody(tn, clusterID, name) }

	tests := []struct {
		name      string
		principal string
		method    string
		body      any
		status    int
		code      string
	}{
		{"no token beats invalid input", "", "kubernetesNodePools/create", invalid, 401, "UNAUTHENTICATED"},
		{"no token beats malformed JSON", "", "kubernetesNodePools/create", `{`, 401, "UNAUTHENTICATED"},
		{"invalid input beats no membership", nobody, "kubernetesNodePools/create", invalid, 400, "INVALID_INPUT"},
		{"no membership beats lookup", nobody, "kubernetesNodePools/create", create(unknownCluster(), "x"), 403, "PERMISSION_DENIED"},
		{"no membership beats lookup (cluster create)", nobody, "kubernetesClusters/create", with(standardCluster(tn, "x"), "poolId", "no-such-pool"), 403, "PERMISSION_DENIED"},
		{"no membership beats lookup (get)", nobody, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": unknownCluster()}, 403, "PERMISSION_DENIED"},
		{"member of another tenant", foreign, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": c.ID}, 403, "PERMISSION_DENIED"},
		{"lookup beats permission", viewer, "kubernetesNodePools/create", create(unknownCluster(), "x"), 404, "NOT_FOUND"},
		{"lookup beats permission (pool)", viewer, "kubernetesNodePools/update", with(poolRef(tn, c.ID, unknownNodePool()), "nodeCount", 2), 404, "NOT_FOUND"},
		{"lookup beats permission (cluster create)", viewer, "kubernetesClusters/create", with(standardCluster(tn, "x"), "poolId", "no-such-pool"), 404, "NOT_FOUND"},
		{"lookup beats permission (delete)", editor, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": unknownCluster()}, 404, "NOT_FOUND"},
		{"another tenant's cluster is not found", editor, "kubernetesNodePools/create", create(foreignCluster.ID, "x"), 404, "NOT_FOUND"},
		{"permission beats autopilot", viewer, "kubernetesNodePools/create", create(auto.ID, "x"), 403, "PERMISSION_DENIED"},
		{"permission beats deleting", viewer, "kubernetesNodePools/update", with(poolRef(tn, deleting.ID, dp.ID), "nodeCount", 2), 403, "PERMISSION_DENIED"},
		{"permission beats name conflict", viewer, "kubernetesNodePools/create", create(c.ID, "default"), 403, "PERMISSION_DENIED"},
		{"permission beats quota", viewer, "kubernetesNodePools/create", create(c.ID, "eleventh"), 403, "PERMISSION_DENIED"},
		{"permission beats unsupported", editor, "kubernetesClusters/create", with(standardCluster(tn, "x"), "poolId", tn.MetalPool, "region", "fra"), 403, "PERMISSION_DENIED"},
		{"permission beats placement", editor, "kubernetesClusters/create", with(standardCluster(tn, "x"), "region", "asia-east1"), 403, "PERMISSION_DENIED"},
		{"permission beats zones", viewer, "kubernetesNodePools/create", with(create(auto.ID, "x"), "zones", []any{"europe-west4-a"}), 403, "PERMISSION_DENIED"},
		{"autopilot for an editor", editor, "kubernetesNodePools/create", create(auto.ID, "x"), 409, "INVALID_STATE"},
		{"deleting for an editor", editor, "kubernetesNodePools/update", with(poolRef(tn, deleting.ID, dp.ID), "nodeCount", 2), 409, "INVALID_STATE"},
		{"name conflict for an editor", editor, "kubernetesNodePools/create", create(c.ID, "default"), 409, "CONFLICT"},
		{"quota for an editor", editor, "kubernetesNodePools/create", create(c.ID, "eleventh"), 429, "QUOTA_EXCEEDED"},
		{"editor may update", editor, "kubernetesNodePools/update", with(poolRef(tn, c.ID, p.ID), "nodeCount", 2), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, tc.principal, tc.method, tc.body)
			if tc.status == 200 {
				if r.Status != 200 {
					t.Fatalf("answer %v, want 200", r)
				}
				return
			}
			wantError(t, r, tc.status, tc.code)
		})
	}
}
