package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

var nodePoolID = regexp.MustCompile(`^knp_[0-9a-hjkmnp-tv-z]{26}$`)

// labelsN returns n valid labels.
func labelsN(n int) obj {
	m := obj{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

// taintsN returns n valid taints with distinct keys.
func taintsN(n int) []any {
	var out []any
	for i := range n {
		out = append(out, obj{"key": fmt.Sprintf("k%d", i), "value": "v", "effect": "NoSchedule"})
	}
	return out
}

// zonesN returns n distinct zone names of us-central1, the first three of
// which are enabled on acc-gcp.
func zonesN(n int) []any {
	var out []any
	for i := range n {
		out = append(out, fmt.Sprintf("us-central1-%c", 'a'+i))
	}
	return out
}

// TestCreateNodePoolInput checks every rule of the seed's create table and
// API.md §5 on both sides of each boundary: accepted bodies create a pool,
// rejected ones name exactly the broken fields and write nothing.
func TestCreateNodePoolInput(t *testing.T) {
	tn := newTenant(t)
	shared := newCluster(t, tn) // rejections only: nothing may be written to it
	before := clusterDoc(t, tn.ID, shared.ID)
	name40 := "a" + repeat("b", 39)
	tests := []inputCase{
		// nodeCount
		{"nodeCount -1", []any{"nodeCount", -1}, []string{"nodeCount"}},
		{"nodeCount 0", []any{"nodeCount", 0}, nil},
		{"nodeCount 1000", []any{"nodeCount", 1000}, nil},
		{"nodeCount 1001", []any{"nodeCount", 1001}, []string{"nodeCount"}},
		{"nodeCount fraction", []any{"nodeCount", 1.5}, []string{"nodeCount"}},
		{"nodeCount exponent", []any{"nodeCount", json.RawMessage("1e2")}, []string{"nodeCount"}},
		{"nodeCount string", []any{"nodeCount", "3"}, []string{"nodeCount"}},
		{"nodeCount null", []any{"nodeCount", jsonNull}, []string{"nodeCount"}},
		{"nodeCount huge", []any{"nodeCount", json.RawMessage("99999999999999999999999")}, []string{"nodeCount"}},
		{"nodeCount missing", []any{"nodeCount", nil}, []string{"nodeCount"}},
		// name
		{"name 1 char", []any{"name", "a"}, nil},
		{"name 40 chars", []any{"name", name40}, nil},
		{"name 41 chars", []any{"name", name40 + "c"}, []string{"name"}},
		{"name empty", []any{"name", ""}, []string{"name"}},
		{"name starts with digit", []any{"name", "1pool"}, []string{"name"}},
		{"name ends with dash", []any{"name", "pool-"}, []string{"name"}},
		{"name uppercase", []any{"name", "Pool"}, []string{"name"}},
		{"name underscore", []any{"name", "my_pool"}, []string{"name"}},
		{"name with digits and dashes", []any{"name", "gpu-l4-2"}, nil},
		{"name missing", []any{"name", nil}, []string{"name"}},
		{"name number", []any{"name", 7}, []string{"name"}},
		// machineType
		{"machineType 63 chars", []any{"machineType", "e" + repeat("2", 62)}, nil},
		{"machineType 64 chars", []any{"machineType", "e" + repeat("2", 63)}, []string{"machineType"}},
		{"machineType uppercase", []any{"machineType", "E2-standard-4"}, []string{"machineType"}},
		{"machineType empty", []any{"machineType", ""}, []string{"machineType"}},
		{"machineType missing", []any{"machineType", nil}, []string{"machineType"}},
		// autoscaling
		{"autoscaling 0..1", []any{"nodeCount", 0, "autoscaling", obj{"minNodes": 0, "maxNodes": 1}}, nil},
		{"autoscaling 1000..1000", []any{"nodeCount", 1000, "autoscaling", obj{"minNodes": 1000, "maxNodes": 1000}}, nil},
		{"autoscaling minNodes -1", []any{"autoscaling", obj{"minNodes": -1, "maxNodes": 4}}, []string{"autoscaling.minNodes"}},
		{"autoscaling minNodes 1001", []any{"autoscaling", obj{"minNodes": 1001, "maxNodes": 1000}}, []string{"autoscaling.minNodes"}},
		{"autoscaling maxNodes 0", []any{"nodeCount", 0, "autoscaling", obj{"minNodes": 0, "maxNodes": 0}}, []string{"autoscaling.maxNodes"}},
		{"autoscaling maxNodes 1001", []any{"autoscaling", obj{"minNodes": 1, "maxNodes": 1001}}, []string{"autoscaling.maxNodes"}},
		{"autoscaling min above max", []any{"nodeCount", 4, "autoscaling", obj{"minNodes": 5, "maxNodes": 4}}, []string{"autoscaling.minNodes"}},
		{"nodeCount above maxNodes", []any{"nodeCount", 5, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}}, []string{"nodeCount"}},
		{"nodeCount below minNodes", []any{"nodeCount", 0, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}}, []string{"nodeCount"}},
		{"nodeCount at bounds", []any{"nodeCount", 4, "autoscaling", obj{"minNodes": 4, "maxNodes": 4}}, nil},
		{"autoscaling maxNodes missing", []any{"autoscaling", obj{"minNodes": 1}}, []string{"autoscaling.maxNodes"}},
		{"autoscaling unknown member", []any{"autoscaling", obj{"minNodes": 1, "maxNodes": 2, "max": 3}}, []string{"autoscaling.max"}},
		{"autoscaling null", []any{"autoscaling", jsonNull}, []string{"autoscaling"}},
		{"autoscaling not an object", []any{"autoscaling", []any{1, 2}}, []string{"autoscaling"}},
		// disks
		{"diskGiB 9", []any{"diskGiB", 9}, []string{"diskGiB"}},
		{"diskGiB 10", []any{"diskGiB", 10}, nil},
		{"diskGiB 65536", []any{"diskGiB", 65536}, nil},
		{"diskGiB 65537", []any{"diskGiB", 65537}, []string{"diskGiB"}},
		{"diskType pd-balanced", []any{"diskType", "pd-balanced"}, nil},
		{"diskType one char", []any{"diskType", "p"}, []string{"diskType"}},
		{"diskType uppercase", []any{"diskType", "PD-SSD"}, []string{"diskType"}},
		{"diskType empty", []any{"diskType", ""}, []string{"diskType"}},
		{"diskType 42 chars", []any{"diskType", "p" + repeat("d", 41)}, []string{"diskType"}},
		{"diskType 41 chars", []any{"diskType", "p" + repeat("d", 40)}, nil},
		// spot
		{"spot true", []any{"spot", true}, nil},
		{"spot string", []any{"spot", "yes"}, []string{"spot"}},
		// accelerators
		{"accelerators count 0", []any{"accelerators", obj{"type": "nvidia-l4", "count": 0}}, []string{"accelerators.count"}},
		{"accelerators count 1", []any{"machineType", "g2-standard-8", "accelerators", obj{"type": "nvidia-l4", "count": 1}}, nil},
		{"accelerators count 16", []any{"machineType", "g2-standard-96", "accelerators", obj{"type": "nvidia-l4", "count": 16}}, nil},
		{"accelerators count 17", []any{"accelerators", obj{"type": "nvidia-l4", "count": 17}}, []string{"accelerators.count"}},
		{"accelerators type uppercase", []any{"accelerators", obj{"type": "NVIDIA-L4", "count": 1}}, []string{"accelerators.type"}},
		{"accelerators type missing", []any{"accelerators", obj{"count": 1}}, []string{"accelerators.type"}},
		{"accelerators unknown member", []any{"accelerators", obj{"type": "nvidia-l4", "count": 1, "kind": "gpu"}}, []string{"accelerators.kind"}},
		// zones
		{"zones one enabled", []any{"zones", []any{"us-central1-b"}}, nil},
		{"zones all enabled", []any{"zones", zonesN(3)}, nil},
		{"zones 10", []any{"zones", zonesN(10)}, []string{"zones[3]", "zones[4]", "zones[5]", "zones[6]", "zones[7]", "zones[8]", "zones[9]"}},
		{"zones 11", []any{"zones", zonesN(11)}, []string{"zones"}},
		{"zone of another region", []any{"zones", []any{"us-central1-a", "europe-west4-a"}}, []string{"zones[1]"}},
		{"zone not enabled on the account", []any{"zones", []any{"us-central1-f"}}, []string{"zones[0]"}},
		{"zone twice", []any{"zones", []any{"us-central1-a", "us-central1-a"}}, []string{"zones[1]"}},
		{"zone malformed", []any{"zones", []any{"US_CENTRAL1"}}, []string{"zones[0]"}},
		{"zones not an array", []any{"zones", "us-central1-a"}, []string{"zones"}},
		// labels
		{"labels 32", []any{"labels", labelsN(32)}, nil},
		{"labels 33", []any{"labels", labelsN(33)}, []string{"labels"}},
		{"label key with prefix", []any{"labels", obj{"example.com/team": "ml"}}, nil},
		{"label key invalid", []any{"labels", obj{"Bad Key": "v"}}, []string{`labels["Bad Key"]`}},
		{"label key reserved prefix", []any{"labels", obj{"kubernetes.io/role": "x"}}, []string{`labels["kubernetes.io/role"]`}},
		{"label key node-role", []any{"labels", obj{"node-role.kubernetes.io/x": "x"}}, []string{`labels["node-role.kubernetes.io/x"]`}},
		{"label key k8s.io subdomain", []any{"labels", obj{"foo.k8s.io/y": "y"}}, []string{`labels["foo.k8s.io/y"]`}},
		{"label key GKE node pool", []any{"labels", obj{"cloud.google.com/gke-nodepool": "bc-pool-gpu-l4", "team": "ml"}}, []string{`labels["cloud.google.com/gke-nodepool"]`}},
		{"label key GKE compute class", []any{"labels", obj{"cloud.google.com/compute-class": "x"}}, []string{`labels["cloud.google.com/compute-class"]`}},
		{"label key GKE look-alike", []any{"labels", obj{"notcloud.google.com/x": "x"}}, nil},
		{"label value 63", []any{"labels", obj{"team": "a" + repeat("b", 62)}}, nil},
		{"label value 64", []any{"labels", obj{"team": "a" + repeat("b", 63)}}, []string{`labels["team"]`}},
		{"label value invalid", []any{"labels", obj{"team": "-ml"}}, []string{`labels["team"]`}},
		{"label value empty", []any{"labels", obj{"team": ""}}, nil},
		{"label value number", []any{"labels", obj{"team": 1}}, []string{`labels["team"]`}},
		// taints
		{"taints 32", []any{"taints", taintsN(32)}, nil},
		{"taints 33", []any{"taints", taintsN(33)}, []string{"taints"}},
		{"taint effects", []any{"taints", []any{
			obj{"key": "a", "effect": "NoSchedule"}, obj{"key": "a", "effect": "PreferNoSchedule"}, obj{"key": "a", "effect": "NoExecute"},
		}}, nil},
		{"taint effect unknown", []any{"taints", []any{obj{"key": "gpu", "effect": "NoScheduling"}}}, []string{"taints[0].effect"}},
		{"taint effect missing", []any{"taints", []any{obj{"key": "gpu"}}}, []string{"taints[0].effect"}},
		{"taint key missing", []any{"taints", []any{obj{"effect": "NoSchedule"}}}, []string{"taints[0].key"}},
		{"taint key invalid", []any{"taints", []any{obj{"key": "bad key", "effect": "NoSchedule"}}}, []string{"taints[0].key"}},
		{"taint value 64", []any{"taints", []any{obj{"key": "gpu", "value": repeat("v", 64), "effect": "NoSchedule"}}}, []string{"taints[0].value"}},
		{"taint duplicate", []any{"taints", []any{
			obj{"key": "gpu", "effect": "NoSchedule"}, obj{"key": "gpu", "value": "x", "effect": "NoSchedule"},
		}}, []string{"taints[1]"}},
		{"taint unknown member", []any{"taints", []any{obj{"key": "gpu", "effect": "NoSchedule", "operator": "Equal"}}}, []string{"taints[0].operator"}},
		// idempotencyKey and IDs
		{"idempotencyKey 128", []any{"idempotencyKey", repeat("k", 128)}, nil},
		{"idempotencyKey 129", []any{"idempotencyKey", repeat("k", 129)}, []string{"idempotencyKey"}},
		{"idempotencyKey space", []any{"idempotencyKey", "a b"}, []string{"idempotencyKey"}},
		{"idempotencyKey empty", []any{"idempotencyKey", ""}, []string{"idempotencyKey"}},
		{"tenantId missing", []any{"tenantId", nil}, []string{"tenantId"}},
		{"tenantId 129", []any{"tenantId", repeat("t", 129)}, []string{"tenantId"}},
		{"clusterId missing", []any{"clusterId", nil}, []string{"clusterId"}},
		{"clusterId of a node pool", []any{"clusterId", unknownNodePool()}, []string{"clusterId"}},
		{"clusterId uppercase", []any{"clusterId", strings.ToUpper(shared.ID)}, []string{"clusterId"}},
		{"clusterId 25 chars", []any{"clusterId", "kcl_" + repeat("0", 25)}, []string{"clusterId"}},
		{"clusterId 53 chars", []any{"clusterId", "kcl_" + repeat("0", 53)}, []string{"clusterId"}},
		{"clusterId with u", []any{"clusterId", "kcl_" + repeat("u", 26)}, []string{"clusterId"}},
		// shape
		{"unknown field", []any{"nodeCout", 3}, []string{"nodeCout"}},
		{"state is not input", []any{"state", "ready"}, []string{"state"}},
		{"every broken field", []any{
			"nodeCount", -1, "name", "Bad", "diskGiB", 9, "spot", 1, "extra", true,
			"taints", []any{obj{"key": "gpu", "effect": "Never"}}, "labels", obj{"-x": "y"},
		}, []string{"nodeCount", "name", "diskGiB", "spot", "extra", "taints[0].effect", `labels["-x"]`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clusterID := shared.ID
			if tc.fields == nil {
				clusterID = newCluster(t, tn).ID
			}
			body := with(createBody(tn, clusterID, "np"), tc.mods...)
			r := call(t, admin, "kubernetesNodePools/create", body)
			if tc.fields != nil {
				wantError(t, r, http.StatusBadRequest, "INVALID_INPUT", tc.fields...)
				return
			}
			var p resource.NodePool
			r.decode(t, &p)
			if p.State != resource.StatePending || p.Name != body["name"] || p.Version != 1 {
				t.Errorf("create = %+v, want pending %q at version 1", p, body["name"])
			}
		})
	}
	if n := poolDocs(t, tn.ID, shared.ID); n != 1 {
		t.Errorf("node pool documents of the cluster = %d after rejections, want 1", n)
	}
	// Only the accepted creates with an idempotency key wrote a record.
	if got, want := len(tenantDocs(t, tn.ID, "idempotency")), countAccepted(tests); got != want {
		t.Errorf("idempotency records = %d, want %d", got, want)
	}
	after := clusterDoc(t, tn.ID, shared.ID)
	if after.Version != before.Version || after.ActivePoolCount != 1 || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("cluster after rejections: version %d, activePoolCount %d, updatedAt %v; want %d, 1, %v",
			after.Version, after.ActivePoolCount, after.UpdatedAt, before.Version, before.UpdatedAt)
	}
}

// inputCase is a body made from a valid one, and the fields it breaks
// (nil: it is accepted).
type inputCase struct {
	name   string
	mods   []any // members to set on a valid body (a nil value deletes)
	fields []string
}

// countAccepted counts the accepted cases that carry an idempotency key.
func countAccepted(tests []inputCase) int {
	n := 0
	for _, tc := range tests {
		if tc.fields == nil && slices.Contains(tc.mods, any("idempotencyKey")) {
			n++
		}
	}
	return n
}

// TestCreateNodePoolBody checks bodies that are not a JSON object, and the
// transport rules of API.md §1.
func TestCreateNodePoolBody(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	valid, err := json.Marshal(createBody(tn, c.ID, "np"))
	if err != nil {
		t.Fatal(err)
	}
	big := append([]byte(`{"tenantId":"`+tn.ID+`","pad":"`), make([]byte, 1<<20)...)
	for i := range big[len(big)-(1<<20):] {
		big[len(big)-(1<<20)+i] = 'x'
	}
	big = append(big, `"}`...)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"malformed", `{"tenantId": "` + tn.ID + `",`, 400, "INVALID_INPUT"},
		{"empty", ``, 400, "INVALID_INPUT"},
		{"null", `null`, 400, "INVALID_INPUT"},
		{"array", `[` + string(valid) + `]`, 400, "INVALID_INPUT"},
		{"two objects", string(valid) + string(valid), 400, "INVALID_INPUT"},
		{"trailing garbage", string(valid) + `x`, 400, "INVALID_INPUT"},
		{"duplicate member", strings.Replace(string(valid), `{`, `{"name":"other",`, 1), 400, "INVALID_INPUT"},
		{"not UTF-8", strings.Replace(string(valid), `"np"`, "\"n\xffp\"", 1), 400, "INVALID_INPUT"},
		{"over 1 MiB", string(big), 413, "INVALID_INPUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, admin, "kubernetesNodePools/create", tc.body)
			wantError(t, r, tc.status, tc.code)
		})
	}
	t.Run("exactly 1 MiB is read", func(t *testing.T) {
		b := append([]byte(nil), valid[:len(valid)-1]...)
		b = append(b, `,"pad":"`...)
		b = append(b, repeat("x", (1<<20)-len(b)-2)...)
		b = append(b, `"}`...)
		if len(b) != 1<<20 {
			t.Fatalf("body of %d bytes, want %d", len(b), 1<<20)
		}
		// Read whole, so the unknown member is what is refused, not the size.
		wantError(t, call(t, admin, "kubernetesNodePools/create", b), 400, "INVALID_INPUT", "pad")
	})
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		t.Run("method "+m, func(t *testing.T) {
			r := do(t, m, "kubernetesNodePools/create", "Bearer "+token(t, admin), valid, nil)
			wantError(t, r, http.StatusMethodNotAllowed, "INVALID_INPUT")
			if got := r.Header.Get("Allow"); got != http.MethodPost {
				t.Errorf("Allow = %q, want POST", got)
			}
		})
	}
	if n := poolDocs(t, tn.ID, c.ID); n != 1 {
		t.Errorf("node pool documents = %d after rejections, want 1", n)
	}
}

// TestRequestID checks that every answer carries X-Request-Id, echoed when
// the request has one.
func TestRequestID(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	list := obj{"tenantId": tn.ID, "clusterId": c.ID}
	tests := []struct {
		name   string
		method string
		auth   string
		body   any
		status int
	}{
		{"success", http.MethodPost, "Bearer " + token(t, viewer), list, 200},
		{"invalid", http.MethodPost, "Bearer " + token(t, viewer), obj{"tenantId": tn.ID}, 400},
		{"unauthenticated", http.MethodPost, "", list, 401},
		{"wrong method", http.MethodGet, "", nil, 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, tc.method, "kubernetesNodePools/list", tc.auth, tc.body, http.Header{"X-Request-Id": {"req-" + tc.name}})
			if r.Status != tc.status {
				t.Fatalf("answer %v, want %d", r, tc.status)
			}
			if got := r.Header.Get("X-Request-Id"); got != "req-"+tc.name {
				t.Errorf("X-Request-Id = %q, want %q", got, "req-"+tc.name)
			}
			long := repeat("r", 129)
			if got := do(t, tc.method, "kubernetesNodePools/list", tc.auth, tc.body, http.Header{"X-Request-Id": {long}}).Header.Get("X-Request-Id"); got == "" || got == long {
				t.Errorf("X-Request-Id for a 129-character one = %q, want a generated one", got)
			}
			r1 := do(t, tc.method, "kubernetesNodePools/list", tc.auth, tc.body, nil)
			r2 := do(t, tc.method, "kubernetesNodePools/list", tc.auth, tc.body, nil)
			id1, id2 := r1.Header.Get("X-Request-Id"), r2.Header.Get("X-Request-Id")
			if id1 == "" || id1 == id2 {
				t.Errorf("generated X-Request-Id = %q then %q, want two distinct non-empty IDs", id1, id2)
			}
		})
	}
}

// markPoolDeleted records what a reconcile run records when the provider
// no longer has a deleting pool, through the store's own run: the pool is
// deleted, its name free and the cluster counts one pool fewer.
func markPoolDeleted(t testing.TB, tenantID, clusterID string, p resource.NodePool) {
	t.Helper()
	ref := h.store.ClusterRef(tenantID, clusterID)
	err := h.fs.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err != nil {
			return err
		}
		before := store.ClusterRun{}
		if err := snap.DataTo(&before.Cluster); err != nil {
			return err
		}
		before.Pools, err = h.store.LoadNodePools(chain.NewReader(ctx, tx), snap.Ref)
		if err != nil {
			return err
		}
		after := store.ClusterRun{Cluster: before.Cluster.Clone()}
		for _, np := range before.Pools {
			np = np.Clone()
			if np.ID == p.ID {
				lifecycle.NodePoolDeleted(&after.Cluster, &np, time.Now())
			}
			after.Pools = append(after.Pools, np)
		}
		_, _, err = h.store.SaveClusterRun(tx, snap, before, after, nil)
		return err
	})
	if err != nil {
		t.Fatalf("mark pool %s deleted: %v", p.ID, err)
	}
}

// TestCreateNodePoolRules checks the business rules of create: names,
// quota, cluster modes and states, lookups.
func TestCreateNodePoolRules(t *testing.T) {
	tn := newTenant(t)

	t.Run("quota", func(t *testing.T) {
		c := newCluster(t, tn) // has "default"
		for i := 1; i < resource.MaxNodePools; i++ {
			createPool(t, tn, c.ID, poolSpec(fmt.Sprintf("np%d", i)))
		}
		r := call(t, admin, "kubernetesNodePools/create", createBody(tn, c.ID, "eleventh"))
		wantError(t, r, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
		if got := clusterDoc(t, tn.ID, c.ID).ActivePoolCount; got != resource.MaxNodePools {
			t.Errorf("activePoolCount = %d, want %d", got, resource.MaxNodePools)
		}
		// A deleting pool still counts; a deleted one does not.
		var pools struct{ NodePools []resource.NodePool }
		call(t, viewer, "kubernetesNodePools/list", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &pools)
		var deleting resource.NodePool
		call(t, admin, "kubernetesNodePools/delete", obj{"tenantId": tn.ID, "clusterId": c.ID, "nodePoolId": pools.NodePools[1].ID}).decode(t, &deleting)
		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, c.ID, "eleventh")), http.StatusTooManyRequests, "QUOTA_EXCEEDED")
		markPoolDeleted(t, tn.ID, c.ID, deleting)
		createPool(t, tn, c.ID, poolSpec("eleventh"))
		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, c.ID, "twelfth")), http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	})

	t.Run("name conflict and reuse", func(t *testing.T) {
		c := newCluster(t, tn)
		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, c.ID, "default")), http.StatusConflict, "CONFLICT")
		p := createPool(t, tn, c.ID, poolSpec("gpu"))
		wantError(t, call(t, admin, "kubernetesNodePools/create", with(createBody(tn, c.ID, "gpu"), "nodeCount", 3)), http.StatusConflict, "CONFLICT")
		// The same name in another cluster is free.
		other := newCluster(t, tn)
		createPool(t, tn, other.ID, poolSpec("gpu"))
		// A deleting pool still holds its name.
		call(t, admin, "kubernetesNodePools/delete", obj{"tenantId": tn.ID, "clusterId": c.ID, "nodePoolId": p.ID}).decode(t, &p)
		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, c.ID, "gpu")), http.StatusConflict, "CONFLICT")
		// Once deleted, the name is free again, and the old pool is gone.
		markPoolDeleted(t, tn.ID, c.ID, p)
		again := createPool(t, tn, c.ID, poolSpec("gpu"))
		if again.ID == p.ID {
			t.Errorf("create after delete returned the deleted pool %s", p.ID)
		}
		wantError(t, call(t, admin, "kubernetesNodePools/update", obj{"tenantId": tn.ID, "clusterId": c.ID, "nodePoolId": p.ID, "nodeCount": 2}), http.StatusNotFound, "NOT_FOUND")
		wantError(t, call(t, admin, "kubernetesNodePools/delete", obj{"tenantId": tn.ID, "clusterId": c.ID, "nodePoolId": p.ID}), http.StatusNotFound, "NOT_FOUND")
	})

	t.Run("cluster states", func(t *testing.T) {
		autopilot := createCluster(t, obj{"tenantId": tn.ID, "poolId": tn.Pool, "name": "auto", "mode": "autopilot", "region": "us-central1"})
		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, autopilot.ID, "np")), http.StatusConflict, "INVALID_STATE")

		deleting := newCluster(t, tn)
		call(t, admin, "kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": deleting.ID}).decode(t, &deleting)
		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, deleting.ID, "np")), http.StatusConflict, "INVALID_STATE")

		deleted := newCluster(t, tn)
		setState(t, h.store.ClusterRef(tn.ID, deleted.ID), resource.StateDeleted, "")
		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, deleted.ID, "np")), http.StatusNotFound, "NOT_FOUND")

		wantError(t, call(t, admin, "kubernetesNodePools/create", createBody(tn, unknownCluster(), "np")), http.StatusNotFound, "NOT_FOUND")
		for _, id := range []string{autopilot.ID, deleting.ID, deleted.ID} {
			if n := poolDocs(t, tn.ID, id); n != map[bool]int{true: 0, false: 1}[id == autopilot.ID] {
				t.Errorf("node pool documents of %s = %d after refusals", id, n)
			}
		}
	})

	t.Run("cluster goes updating", func(t *testing.T) {
		tests := []struct {
			from, want resource.State
		}{
			{resource.StatePending, resource.StatePending},
			{resource.StateProvisioning, resource.StateProvisioning},
			{resource.StateReady, resource.StateUpdating},
			{resource.StateUpdating, resource.StateUpdating},
			{resource.StateError, resource.StateUpdating},
		}
		for _, tc := range tests {
			t.Run(string(tc.from), func(t *testing.T) {
				c := newCluster(t, tn)
				setState(t, h.store.ClusterRef(tn.ID, c.ID), tc.from, "")
				before := clusterDoc(t, tn.ID, c.ID)
				kicks := len(h.kicker.kicksOf(c.ID))
				createPool(t, tn, c.ID, poolSpec("np"))
				after := clusterDoc(t, tn.ID, c.ID)
				if after.State != tc.want || after.Version != before.Version+1 || after.ActivePoolCount != 2 {
					t.Errorf("cluster after create: state %s, version %d, activePoolCount %d; want %s, %d, 2",
						after.State, after.Version, after.ActivePoolCount, tc.want, before.Version+1)
				}
				ks := h.kicker.kicksOf(c.ID)
				if len(ks) != kicks+1 || ks[len(ks)-1].Token != after.Reconcile.Token {
					t.Errorf("kicks = %+v, want one more carrying the cluster's token %q", ks, after.Reconcile.Token)
				}
			})
		}
	})

	t.Run("a failed kick does not fail the call", func(t *testing.T) {
		c := newCluster(t, tn)
		h.kicker.setFail(tn.ID, true)
		defer h.kicker.setFail(tn.ID, false)
		createPool(t, tn, c.ID, poolSpec("np"))
		if n := poolDocs(t, tn.ID, c.ID); n != 2 {
			t.Errorf("node pool documents = %d, want 2", n)
		}
	})
}

// TestNodePoolShape checks the JSON of a node pool (API.md §4): optional
// fields omitted when not given, spot always present, empty collections.
func TestNodePoolShape(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	tests := []struct {
		name    string
		spec    obj
		present []string
		absent  []string
		empty   map[string]string // member → its empty JSON
	}{
		{
			name:    "minimal",
			spec:    poolSpec("minimal"),
			present: []string{"id", "tenantId", "clusterId", "name", "machineType", "nodeCount", "spot", "zones", "labels", "taints", "state", "message", "version", "createdAt", "updatedAt"},
			absent:  []string{"autoscaling", "accelerators", "diskGiB", "diskType"},
			empty:   map[string]string{"zones": "[]", "labels": "{}", "taints": "[]", "spot": "false", "message": `""`},
		},
		{
			name: "full",
			spec: with(poolSpec("full"), "machineType", "g2-standard-8", "nodeCount", 2,
				"autoscaling", obj{"minNodes": 1, "maxNodes": 4}, "diskGiB", 200, "diskType", "pd-balanced", "spot", true,
				"accelerators", obj{"type": "nvidia-l4", "count": 1}, "zones", []any{"us-central1-a"},
				"labels", obj{"team": "ml"}, "taints", []any{obj{"key": "gpu", "value": "true", "effect": "NoSchedule"}}),
			present: []string{"autoscaling", "accelerators", "diskGiB", "diskType", "spot"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, admin, "kubernetesNodePools/create", with(tc.spec, "tenantId", tn.ID, "clusterId", c.ID))
			var p resource.NodePool
			r.decode(t, &p)
			var m map[string]json.RawMessage
			if err := json.Unmarshal(r.Body, &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.present {
				if _, ok := m[k]; !ok {
					t.Errorf("member %q missing from %s", k, r.Body)
				}
			}
			for _, k := range tc.absent {
				if _, ok := m[k]; ok {
					t.Errorf("member %q present in %s, want omitted", k, r.Body)
				}
			}
			for k, want := range tc.empty {
				if got := string(m[k]); got != want {
					t.Errorf("member %q = %s, want %s", k, got, want)
				}
			}
			if !nodePoolID.MatchString(p.ID) || p.TenantID != tn.ID || p.ClusterID != c.ID || p.State != resource.StatePending || p.Version != 1 {
				t.Errorf("pool = %+v, want a knp_ ID in %s/%s, pending at version 1", p, tn.ID, c.ID)
			}
			for _, k := range []string{"createdAt", "updatedAt"} {
				var s string
				if err := json.Unmarshal(m[k], &s); err != nil || !strings.HasSuffix(s, "Z") {
					t.Errorf("%s = %s, want an RFC 3339 UTC time", k, m[k])
				}
			}
			// What list returns equals what create returned.
			var list struct{ NodePools []resource.NodePool }
			call(t, viewer, "kubernetesNodePools/list", obj{"tenantId": tn.ID, "clusterId": c.ID}).decode(t, &list)
			i := slices.IndexFunc(list.NodePools, func(x resource.NodePool) bool { return x.ID == p.ID })
			if i < 0 || !reflect.DeepEqual(list.NodePools[i], p) {
				t.Errorf("list has %+v, want %+v", list.NodePools, p)
			}
		})
	}
}
