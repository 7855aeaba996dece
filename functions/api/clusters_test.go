package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/resource"
)

// clusterList is the answer of kubernetesClusters.list.
type clusterList struct {
	Clusters      []resource.Cluster `json:"clusters"`
	NextPageToken string             `json:"nextPageToken"`
}

func listClusters(t testing.TB, principal string, body obj) clusterList {
	t.Helper()
	var l clusterList
	call(t, principal, "kubernetesClusters/list", body).decode(t, &l)
	return l
}

// markClusterDeleted does what the reconciler does once the provider has
// deleted a cluster: deleted and inactive, its name free.
func markClusterDeleted(t testing.TB, tenantID string, c resource.Cluster) {
	t.Helper()
	err := h.fs.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
		if err := tx.Update(h.store.ClusterRef(tenantID, c.ID), []firestore.Update{
			{Path: "state", Value: string(resource.StateDeleted)}, {Path: "active", Value: false},
		}); err != nil {
			return err
		}
		return tx.Delete(h.fs.Collection("tenants").Doc(tenantID).Collection("clusterNames").Doc(c.Name))
	})
	if err != nil {
		t.Fatalf("mark cluster %s deleted: %v", c.ID, err)
	}
}

func poolsN(n int) []any {
	var out []any
	for i := range n {
		out = append(out, poolSpec(fmt.Sprintf("np%d", i)))
	}
	return out
}

// TestCreateClusterInput checks create's input and placement rules.
func TestCreateClusterInput(t *testing.T) {
	tn := newTenant(t)
	base := standardCluster(tn, "prod")
	tests := []struct {
		name   string
		mods   []any
		status int
		code   string
		fields []string
	}{
		{"standard with 1 pool", nil, 200, "", nil},
		{"standard with 10 pools", []any{"nodePools", poolsN(10)}, 200, "", nil},
		{"standard with 11 pools", []any{"nodePools", poolsN(11)}, 400, "INVALID_INPUT", []string{"nodePools"}},
		{"standard without pools", []any{"nodePools", nil}, 400, "INVALID_INPUT", []string{"nodePools"}},
		{"standard with empty pools", []any{"nodePools", []any{}}, 400, "INVALID_INPUT", []string{"nodePools"}},
		{"autopilot", []any{"mode", "autopilot", "nodePools", nil}, 200, "", nil},
		{"autopilot with pools", []any{"mode", "autopilot"}, 400, "INVALID_INPUT", []string{"nodePools"}},
		{"mode unknown", []any{"mode", "hybrid"}, 400, "INVALID_INPUT", []string{"mode"}},
		{"mode missing", []any{"mode", nil}, 400, "INVALID_INPUT", []string{"mode"}},
		{"region of the account, other zones", []any{"region", "europe-west4", "nodePools", []any{with(poolSpec("a"), "zones", []any{"europe-west4-b"})}}, 200, "", nil},
		{"region not the account's", []any{"region", "asia-east1"}, 400, "INVALID_INPUT", []string{"region"}},
		{"region malformed", []any{"region", "US-Central1"}, 400, "INVALID_INPUT", []string{"region"}},
		{"region missing", []any{"region", nil}, 400, "INVALID_INPUT", []string{"region"}},
		{"pool zone of another region", []any{"nodePools", []any{poolSpec("a"), with(poolSpec("b"), "zones", []any{"us-central1-a", "europe-west4-a"})}}, 400, "INVALID_INPUT", []string{"nodePools[1].zones[1]"}},
		{"pool zone not enabled", []any{"nodePools", []any{with(poolSpec("a"), "zones", []any{"us-central1-f"})}}, 400, "INVALID_INPUT", []string{"nodePools[0].zones[0]"}},
		{"pool names twice", []any{"nodePools", []any{poolSpec("a"), poolSpec("a")}}, 400, "INVALID_INPUT", []string{"nodePools[1].name"}},
		{"pool label GKE manages", []any{"nodePools", []any{poolSpec("a"), with(poolSpec("b"), "labels", obj{"cloud.google.com/gke-nodepool": "bc-x-y"})}}, 400, "INVALID_INPUT", []string{`nodePools[1].labels["cloud.google.com/gke-nodepool"]`}},
		{"pool label Kubernetes manages", []any{"nodePools", []any{with(poolSpec("a"), "labels", obj{"node-role.kubernetes.io/x": ""})}}, 400, "INVALID_INPUT", []string{`nodePools[0].labels["node-role.kubernetes.io/x"]`}},
		{"pool with tenantId", []any{"nodePools", []any{with(poolSpec("a"), "tenantId", tn.ID)}}, 400, "INVALID_INPUT", []string{"nodePools[0].tenantId"}},
		{"pool with clusterId", []any{"nodePools", []any{with(poolSpec("a"), "clusterId", unknownCluster())}}, 400, "INVALID_INPUT", []string{"nodePools[0].clusterId"}},
		{"pool with idempotencyKey", []any{"nodePools", []any{with(poolSpec("a"), "idempotencyKey", "k")}}, 400, "INVALID_INPUT", []string{"nodePools[0].idempotencyKey"}},
		{"pool broken fields", []any{"nodePools", []any{poolSpec("a"), with(poolSpec("b"), "nodeCount", 1001, "diskGiB", 9, "taints", []any{obj{"key": "k", "effect": "x"}})}}, 400, "INVALID_INPUT", []string{"nodePools[1].nodeCount", "nodePools[1].diskGiB", "nodePools[1].taints[0].effect"}},
		{"pool not an object", []any{"nodePools", []any{"a"}}, 400, "INVALID_INPUT", []string{"nodePools[0]"}},
		{"releaseChannel rapid", []any{"releaseChannel", "rapid"}, 200, "", nil},
		{"releaseChannel stable", []any{"releaseChannel", "stable"}, 200, "", nil},
		{"releaseChannel regular", []any{"releaseChannel", "regular"}, 200, "", nil},
		{"releaseChannel unknown", []any{"releaseChannel", "beta"}, 400, "INVALID_INPUT", []string{"releaseChannel"}},
		{"name 40", []any{"name", "a" + repeat("b", 39)}, 200, "", nil},
		{"name 41", []any{"name", "a" + repeat("b", 40)}, 400, "INVALID_INPUT", []string{"name"}},
		{"name uppercase", []any{"name", "Prod"}, 400, "INVALID_INPUT", []string{"name"}},
		{"labels", []any{"labels", obj{"env": "prod", "example.com/team": "ml"}}, 200, "", nil},
		{"labels 33", []any{"labels", labelsN(33)}, 400, "INVALID_INPUT", []string{"labels"}},
		{"label invalid", []any{"labels", obj{"env": "pro d"}}, 400, "INVALID_INPUT", []string{`labels["env"]`}},
		{"label GKE manages", []any{"labels", obj{"cloud.google.com/x": "y"}}, 400, "INVALID_INPUT", []string{`labels["cloud.google.com/x"]`}},
		{"poolId missing", []any{"poolId", nil}, 400, "INVALID_INPUT", []string{"poolId"}},
		{"unknown field", []any{"zone", "us-central1-a"}, 400, "INVALID_INPUT", []string{"zone"}},
		{"pool unknown", []any{"poolId", "no-such-pool"}, 404, "NOT_FOUND", nil},
		{"pool of another tenant", []any{"poolId", tn.OtherPool}, 404, "NOT_FOUND", nil},
		{"pool without managed Kubernetes", []any{"poolId", tn.MetalPool, "region", "fra", "nodePools", []any{with(poolSpec("a"), "zones", []any{"fra-1"})}}, 422, "UNSUPPORTED", nil},
		{"pool without managed Kubernetes, autopilot", []any{"poolId", tn.MetalPool, "region", "fra", "mode", "autopilot", "nodePools", nil}, 422, "UNSUPPORTED", nil},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := with(base, "name", fmt.Sprintf("c%d", i))
			body = with(body, tc.mods...)
			before := tenantDocs(t, tn.ID, "clusters")
			r := call(t, admin, "kubernetesClusters/create", body)
			if tc.status != 200 {
				wantError(t, r, tc.status, tc.code, tc.fields...)
				if after := tenantDocs(t, tn.ID, "clusters"); len(after) != len(before) {
					t.Errorf("clusters = %d after a refusal, want %d", len(after), len(before))
				}
				return
			}
			var c resource.Cluster
			r.decode(t, &c)
			wantPools, _ := body["nodePools"].([]any)
			pools := listPools(t, tn, c.ID)
			if len(pools) != len(wantPools) {
				t.Fatalf("cluster has %d node pools, want %d", len(pools), len(wantPools))
			}
			for i, p := range pools {
				if want := wantPools[i].(obj)["name"]; p.Name != want || p.State != resource.StatePending || p.ClusterID != c.ID {
					t.Errorf("pool %d = %+v, want %q pending in %s", i, p, want, c.ID)
				}
			}
			wantChannel, _ := body["releaseChannel"].(string)
			if wantChannel == "" {
				wantChannel = "regular"
			}
			if c.ReleaseChannel != wantChannel || c.Mode != body["mode"] || c.Region != body["region"] || c.Name != body["name"] {
				t.Errorf("cluster = %+v, want the request's mode, region, name and channel %q", c, wantChannel)
			}
			if got := clusterDoc(t, tn.ID, c.ID).ActivePoolCount; got != len(wantPools) {
				t.Errorf("activePoolCount = %d, want %d", got, len(wantPools))
			}
			if ks := h.kicker.kicksOf(c.ID); len(ks) != 1 {
				t.Errorf("kicks = %+v, want one", ks)
			}
		})
	}
}

// TestClusterShape checks the cluster JSON of API.md §4 and that get
// returns what create did.
func TestClusterShape(t *testing.T) {
	tn := newTenant(t)
	r := call(t, admin, "kubernetesClusters/create", standardCluster(tn, "prod"))
	var c resource.Cluster
	r.decode(t, &c)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "tenantId", "poolId", "accountId", "name", "mode", "region", "releaseChannel",
		"kubernetesVersion", "endpoint", "providerName", "labels", "state", "message", "version", "createdAt", "updatedAt"} {
		if _, ok := m[k]; !ok {
			t.Errorf("member %q missing from %s", k, r.Body)
		}
	}
	want := resource.Cluster{
		ID: c.ID, TenantID: tn.ID, PoolID: tn.Pool, AccountID: "acc-gcp", Name: "prod", Mode: "standard",
		Region: "us-central1", ReleaseChannel: "regular", ProviderName: strings.ReplaceAll(c.ID, "_", "-"),
		Labels: map[string]string{}, State: resource.StatePending, Version: 1, CreatedAt: c.CreatedAt, UpdatedAt: c.CreatedAt,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("create = %+v, want %+v", c, want)
	}
	if !strings.HasPrefix(c.ID, "kcl_") || len(c.ID) != 30 {
		t.Errorf("id = %q, want kcl_ and 26 characters", c.ID)
	}
	if string(m["labels"]) != "{}" {
		t.Errorf("labels = %s, want {}", m["labels"])
	}
	var got resource.Cluster
	call(t, viewer, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &got)
	if !reflect.DeepEqual(got, c) {
		t.Errorf("get = %+v, want %+v", got, c)
	}
	deleted := newCluster(t, tn)
	markClusterDeleted(t, tn.ID, deleted)
	for _, tc := range []struct {
		name   string
		body   obj
		status int
		code   string
		fields []string
	}{
		{"unknown", obj{"tenantId": tn.ID, "clusterId": unknownCluster()}, 404, "NOT_FOUND", nil},
		{"deleted", obj{"tenantId": tn.ID, "clusterId": deleted.ID}, 404, "NOT_FOUND", nil},
		{"node pool ID", obj{"tenantId": tn.ID, "clusterId": unknownNodePool()}, 400, "INVALID_INPUT", []string{"clusterId"}},
		{"unknown field", obj{"tenantId": tn.ID, "clusterId": c.ID, "view": "full"}, 400, "INVALID_INPUT", []string{"view"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, call(t, viewer, "kubernetesClusters/get", tc.body), tc.status, tc.code, tc.fields...)
		})
	}
}

// TestCreateClusterRules checks name uniqueness and idempotency.
func TestCreateClusterRules(t *testing.T) {
	tn := newTenant(t)
	t.Run("name", func(t *testing.T) {
		c := createCluster(t, standardCluster(tn, "prod"))
		wantError(t, call(t, admin, "kubernetesClusters/create", with(standardCluster(tn, "prod"), "poolId", tn.Pool2)), http.StatusConflict, "CONFLICT")
		// Another tenant may use the name.
		var other resource.Cluster
		call(t, foreign, "kubernetesClusters/create", with(standardCluster(tn, "prod"), "tenantId", tn.Other, "poolId", tn.OtherPool)).decode(t, &other)
		// A deleting cluster keeps its name; a deleted one frees it.
		call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &c)
		wantError(t, call(t, admin, "kubernetesClusters/create", standardCluster(tn, "prod")), http.StatusConflict, "CONFLICT")
		markClusterDeleted(t, tn.ID, c)
		again := createCluster(t, standardCluster(tn, "prod"))
		if again.ID == c.ID {
			t.Errorf("create after delete returned the deleted cluster")
		}
	})
	t.Run("idempotency", func(t *testing.T) {
		bind(t, auth.Binding{TenantID: tn.ID, Principal: "dave", Role: auth.RoleAdmin})
		body := with(standardCluster(tn, "idem"), "idempotencyKey", "k1")
		first := createCluster(t, body)
		var again resource.Cluster
		call(t, admin, "kubernetesClusters/create", with(body, "releaseChannel", "regular")).decode(t, &again)
		if !reflect.DeepEqual(again, first) {
			t.Errorf("retry = %+v, want %+v", again, first)
		}
		wantError(t, call(t, admin, "kubernetesClusters/create", with(body, "region", "europe-west4")), http.StatusConflict, "CONFLICT")
		wantError(t, call(t, admin, "kubernetesClusters/create", with(body, "nodePools", poolsN(2))), http.StatusConflict, "CONFLICT")
		var dave resource.Cluster
		call(t, "dave", "kubernetesClusters/create", with(body, "name", "idem-dave")).decode(t, &dave)
		if dave.ID == first.ID {
			t.Errorf("another caller's key returned the first caller's cluster")
		}
		if l := listClusters(t, admin, obj{"tenantId": tn.ID}); len(l.Clusters) != 3 {
			t.Errorf("clusters = %d, want 3 (prod again, idem, idem-dave)", len(l.Clusters))
		}
	})
}

// TestListClusters checks order, paging, the poolId filter, deleted
// clusters and per-cluster bindings.
func TestListClusters(t *testing.T) {
	tn := newTenant(t)
	empty := call(t, viewer, "kubernetesClusters/list", obj{"tenantId": tn.ID})
	if empty.Status != 200 || strings.TrimSpace(string(empty.Body)) != `{"clusters":[],"nextPageToken":""}` {
		t.Errorf("list of a tenant without clusters = %v, want {\"clusters\":[],\"nextPageToken\":\"\"}", empty)
	}
	var created []resource.Cluster // oldest first
	for i := range 7 {
		pool := tn.Pool
		if i%3 == 2 {
			pool = tn.Pool2
		}
		created = append(created, createCluster(t, obj{"tenantId": tn.ID, "poolId": pool, "name": fmt.Sprintf("c%d", i), "mode": "autopilot", "region": "us-central1"}))
	}
	ids := func(cs []resource.Cluster) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	newestFirst := ids(created)
	slices.Reverse(newestFirst)

	all := listClusters(t, viewer, obj{"tenantId": tn.ID})
	if got := ids(all.Clusters); !reflect.DeepEqual(got, newestFirst) || all.NextPageToken != "" {
		t.Fatalf("list = %q (next %q), want %q newest first, no next page", got, all.NextPageToken, newestFirst)
	}

	pages := func(t *testing.T, principal string, body obj, size int) []string {
		t.Helper()
		var out []string
		token := ""
		for range 20 {
			l := listClusters(t, principal, with(body, "pageSize", size, "pageToken", token))
			if len(l.Clusters) > size {
				t.Fatalf("page of %d clusters, want at most %d", len(l.Clusters), size)
			}
			out = append(out, ids(l.Clusters)...)
			if l.NextPageToken == "" {
				return out
			}
			if len(l.Clusters) != size {
				t.Fatalf("page of %d clusters with a next page, want %d", len(l.Clusters), size)
			}
			token = l.NextPageToken
		}
		t.Fatal("more than 20 pages")
		return nil
	}
	for _, size := range []int{1, 2, 3, 6, 7, 8, 100} {
		t.Run(fmt.Sprintf("pageSize %d", size), func(t *testing.T) {
			if got := pages(t, viewer, obj{"tenantId": tn.ID}, size); !reflect.DeepEqual(got, newestFirst) {
				t.Errorf("pages = %q, want %q", got, newestFirst)
			}
		})
	}
	t.Run("poolId", func(t *testing.T) {
		var want []string
		for _, c := range slices.Backward(created) {
			if c.PoolID == tn.Pool2 {
				want = append(want, c.ID)
			}
		}
		if got := pages(t, viewer, obj{"tenantId": tn.ID, "poolId": tn.Pool2}, 1); !reflect.DeepEqual(got, want) {
			t.Errorf("pages of %s = %q, want %q", tn.Pool2, got, want)
		}
		l := listClusters(t, viewer, obj{"tenantId": tn.ID, "poolId": "no-such-pool"})
		if len(l.Clusters) != 0 || l.NextPageToken != "" {
			t.Errorf("list of an unknown pool = %+v, want empty", l)
		}
	})
	t.Run("page token of another list", func(t *testing.T) {
		l := listClusters(t, viewer, obj{"tenantId": tn.ID, "pageSize": 1})
		wantError(t, call(t, viewer, "kubernetesClusters/list", obj{"tenantId": tn.ID, "poolId": tn.Pool, "pageToken": l.NextPageToken}), 400, "INVALID_INPUT", "pageToken")
		wantError(t, call(t, viewer, "kubernetesClusters/list", obj{"tenantId": tn.ID, "pageToken": "bm90IGEgdG9rZW4"}), 400, "INVALID_INPUT", "pageToken")
		// A token is bound to its tenant: a caller of two tenants cannot
		// page one tenant's list with the other's token.
		bind(t, auth.Binding{TenantID: tn.Other, Principal: viewer, Role: auth.RoleViewer})
		wantError(t, call(t, viewer, "kubernetesClusters/list", obj{"tenantId": tn.Other, "pageToken": l.NextPageToken}), 400, "INVALID_INPUT", "pageToken")
	})
	t.Run("input", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			body   obj
			fields []string
		}{
			{"pageSize 0", obj{"tenantId": tn.ID, "pageSize": 0}, []string{"pageSize"}},
			{"pageSize 101", obj{"tenantId": tn.ID, "pageSize": 101}, []string{"pageSize"}},
			{"pageSize fraction", obj{"tenantId": tn.ID, "pageSize": 2.5}, []string{"pageSize"}},
			{"pageToken 1025", obj{"tenantId": tn.ID, "pageToken": repeat("a", 1025)}, []string{"pageToken"}},
			{"poolId empty", obj{"tenantId": tn.ID, "poolId": ""}, []string{"poolId"}},
			{"tenantId missing", obj{}, []string{"tenantId"}},
			{"clusterId is not a list field", obj{"tenantId": tn.ID, "clusterId": created[0].ID}, []string{"clusterId"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantError(t, call(t, viewer, "kubernetesClusters/list", tc.body), 400, "INVALID_INPUT", tc.fields...)
			})
		}
	})
	t.Run("deleting included, deleted excluded", func(t *testing.T) {
		var d resource.Cluster
		call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": created[1].ID}).decode(t, &d)
		markClusterDeleted(t, tn.ID, created[4])
		var want []string
		for _, id := range newestFirst {
			if id != created[4].ID {
				want = append(want, id)
			}
		}
		if got := pages(t, viewer, obj{"tenantId": tn.ID}, 2); !reflect.DeepEqual(got, want) {
			t.Errorf("pages = %q, want %q", got, want)
		}
	})
	t.Run("default page size", func(t *testing.T) {
		tn := newTenant(t)
		for i := range 51 {
			createCluster(t, obj{"tenantId": tn.ID, "poolId": tn.Pool, "name": fmt.Sprintf("c%d", i), "mode": "autopilot", "region": "us-central1"})
		}
		l := listClusters(t, viewer, obj{"tenantId": tn.ID})
		if len(l.Clusters) != 50 || l.NextPageToken == "" {
			t.Fatalf("list = %d clusters, next %q; want 50 and a next page", len(l.Clusters), l.NextPageToken)
		}
		rest := listClusters(t, viewer, obj{"tenantId": tn.ID, "pageToken": l.NextPageToken})
		if len(rest.Clusters) != 1 || rest.NextPageToken != "" || rest.Clusters[0].Name != "c0" {
			t.Errorf("second page = %+v, want the oldest cluster c0 alone", rest)
		}
	})
	t.Run("per-cluster binding", func(t *testing.T) {
		visible := []resource.Cluster{created[0], created[5], created[6]}
		var bindings []auth.Binding
		for _, c := range visible {
			bindings = append(bindings, auth.Binding{TenantID: tn.ID, Principal: scoped, Role: auth.RoleViewer, Resource: c.ID})
		}
		bind(t, bindings...)
		want := []string{created[6].ID, created[5].ID, created[0].ID}
		for _, size := range []int{1, 2, 50} {
			if got := pages(t, scoped, obj{"tenantId": tn.ID}, size); !reflect.DeepEqual(got, want) {
				t.Errorf("pages of %d for a per-cluster viewer = %q, want %q", size, got, want)
			}
		}
		var got resource.Cluster
		call(t, scoped, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": created[0].ID}).decode(t, &got)
		wantError(t, call(t, scoped, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": created[2].ID}), 403, "PERMISSION_DENIED")
	})
}

// TestDeleteCluster checks delete: the cluster and its pools go deleting,
// a second delete changes nothing.
func TestDeleteCluster(t *testing.T) {
	tn := newTenant(t)
	c := createCluster(t, with(standardCluster(tn, "prod"), "nodePools", poolsN(3)))
	pools := listPools(t, tn, c.ID)
	var gone resource.NodePool
	call(t, admin, "kubernetesNodePools/delete", poolRef(tn, c.ID, pools[2].ID)).decode(t, &gone)
	setState(t, h.store.ClusterRef(tn.ID, c.ID), resource.StateReady, "")
	setState(t, h.store.NodePoolRef(tn.ID, c.ID, pools[0].ID), resource.StateReady, "")
	before := clusterDoc(t, tn.ID, c.ID)

	var d resource.Cluster
	call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &d)
	if d.State != resource.StateDeleting || d.Version != before.Version+1 || !d.UpdatedAt.After(before.UpdatedAt) {
		t.Errorf("delete = %+v, want deleting at version %d", d, before.Version+1)
	}
	after := listPools(t, tn, c.ID)
	for i, p := range after {
		if p.State != resource.StateDeleting {
			t.Errorf("pool %s after cluster delete: %s, want deleting", p.Name, p.State)
		}
		if i == 2 && !reflect.DeepEqual(p, gone) {
			t.Errorf("pool already deleting changed: %+v, want %+v", p, gone)
		}
	}
	kicks := len(h.kicker.kicksOf(c.ID))

	var again resource.Cluster
	call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &again)
	if !reflect.DeepEqual(again, d) {
		t.Errorf("second delete = %+v, want unchanged %+v", again, d)
	}
	if got := len(h.kicker.kicksOf(c.ID)); got != kicks {
		t.Errorf("kicks after the second delete = %d, want %d", got, kicks)
	}
	var got resource.Cluster
	call(t, viewer, "kubernetesClusters/get", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &got)
	if !reflect.DeepEqual(got, d) {
		t.Errorf("get after delete = %+v, want %+v", got, d)
	}
	markClusterDeleted(t, tn.ID, c)
	wantError(t, call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}), 404, "NOT_FOUND")
	wantError(t, call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": unknownCluster()}), 404, "NOT_FOUND")
	wantError(t, call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID, "force": true}), 400, "INVALID_INPUT", "force")
}
