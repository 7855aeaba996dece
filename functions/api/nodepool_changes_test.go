package api_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/resource"
)

// poolList is the answer of kubernetesNodePools.list.
type poolList struct {
	NodePools []resource.NodePool `json:"nodePools"`
}

func listPools(t testing.TB, tn tenant, clusterID string) []resource.NodePool {
	t.Helper()
	var l poolList
	call(t, viewer, "kubernetesNodePools/list", obj{"tenantId": tn.ID, "clusterId": clusterID}).decode(t, &l)
	return l.NodePools
}

func poolRef(tn tenant, clusterID, nodePoolID string) obj {
	return obj{"tenantId": tn.ID, "clusterId": clusterID, "nodePoolId": nodePoolID}
}

// TestCreateNodePoolIdempotency checks API.md §5's idempotency: a retry
// returns the same pool, another request under the key is CONFLICT, and
// keys are scoped to the caller and the cluster.
func TestCreateNodePoolIdempotency(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	body := with(createBody(tn, c.ID, "idem"), "idempotencyKey", "key-1", "labels", obj{"b": "2", "a": "1"})

	var first, again resource.NodePool
	call(t, admin, "kubernetesNodePools/create", body).decode(t, &first)
	kicks := len(h.kicker.kicksOf(c.ID))
	version := clusterDoc(t, tn.ID, c.ID).Version
	call(t, admin, "kubernetesNodePools/create", body).decode(t, &again)
	if !reflect.DeepEqual(again, first) {
		t.Errorf("retry = %+v, want %+v", again, first)
	}
	// The same request written differently (defaults spelled out, members
	// reordered) is the same request.
	same := with(body, "spot", false, "labels", obj{"a": "1", "b": "2"}, "zones", []any{}, "taints", []any{})
	call(t, admin, "kubernetesNodePools/create", same).decode(t, &again)
	if again.ID != first.ID {
		t.Errorf("retry with defaults spelled out created %s, want %s", again.ID, first.ID)
	}
	if n := poolDocs(t, tn.ID, c.ID); n != 2 {
		t.Errorf("node pool documents = %d after retries, want 2", n)
	}
	if got := len(h.kicker.kicksOf(c.ID)); got != kicks {
		t.Errorf("kicks after retries = %d, want %d (a retry changes nothing)", got, kicks)
	}
	if got := clusterDoc(t, tn.ID, c.ID).Version; got != version {
		t.Errorf("cluster version after retries = %d, want %d", got, version)
	}

	tests := []struct {
		name      string
		principal string
		body      obj
		status    int
		code      string
		newPool   bool
	}{
		{"other nodeCount", admin, with(body, "nodeCount", 2), 409, "CONFLICT", false},
		{"other name", admin, with(body, "name", "idem-2"), 409, "CONFLICT", false},
		{"spot set", admin, with(body, "spot", true), 409, "CONFLICT", false},
		{"without the key", admin, with(body, "idempotencyKey", nil), 409, "CONFLICT", false}, // the name is taken
		{"other caller, same key", editor, with(body, "name", "idem-editor"), 200, "", true},
		{"other key", admin, with(body, "name", "idem-3", "idempotencyKey", "key-2"), 200, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, tc.principal, "kubernetesNodePools/create", tc.body)
			if tc.status != 200 {
				wantError(t, r, tc.status, tc.code)
				return
			}
			var p resource.NodePool
			r.decode(t, &p)
			if p.ID == first.ID || p.Name != tc.body["name"] {
				t.Errorf("create = %s %q, want a new pool %q", p.ID, p.Name, tc.body["name"])
			}
		})
	}

	t.Run("other cluster, same key", func(t *testing.T) {
		other := newCluster(t, tn)
		var p resource.NodePool
		call(t, admin, "kubernetesNodePools/create", with(body, "clusterId", other.ID)).decode(t, &p)
		if p.ID == first.ID || p.ClusterID != other.ID {
			t.Errorf("create in another cluster = %+v, want a new pool there", p)
		}
	})

	t.Run("retry returns the current state", func(t *testing.T) {
		var updated, replay resource.NodePool
		call(t, admin, "kubernetesNodePools/update", with(poolRef(tn, c.ID, first.ID), "nodeCount", 3)).decode(t, &updated)
		call(t, admin, "kubernetesNodePools/create", body).decode(t, &replay)
		if !reflect.DeepEqual(replay, updated) {
			t.Errorf("retry after update = %+v, want %+v", replay, updated)
		}
	})
}

// TestListNodePools checks list: creation order, deleting pools included,
// deleted ones excluded, an empty list as [].
func TestListNodePools(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	var want []string
	want = append(want, "default")
	for _, n := range []string{"zeta", "alpha", "mid", "beta"} {
		createPool(t, tn, c.ID, poolSpec(n))
		want = append(want, n)
	}
	names := func(pools []resource.NodePool) []string {
		var out []string
		for _, p := range pools {
			out = append(out, p.Name)
		}
		return out
	}
	pools := listPools(t, tn, c.ID)
	if got := names(pools); !reflect.DeepEqual(got, want) {
		t.Fatalf("list = %q, want %q (creation order)", got, want)
	}
	for i := 1; i < len(pools); i++ {
		if pools[i].CreatedAt.Before(pools[i-1].CreatedAt) {
			t.Errorf("pools[%d].createdAt %v before pools[%d].createdAt %v", i, pools[i].CreatedAt, i-1, pools[i-1].CreatedAt)
		}
	}

	var deleting resource.NodePool
	call(t, admin, "kubernetesNodePools/delete", poolRef(tn, c.ID, pools[1].ID)).decode(t, &deleting)
	markPoolDeleted(t, tn.ID, c.ID, pools[3])
	var del resource.NodePool
	call(t, admin, "kubernetesNodePools/delete", poolRef(tn, c.ID, pools[2].ID)).decode(t, &del)
	got := listPools(t, tn, c.ID)
	if g, w := names(got), []string{"default", "zeta", "alpha", "beta"}; !reflect.DeepEqual(g, w) {
		t.Errorf("list after deletes = %q, want %q (deleting included, deleted excluded)", g, w)
	}
	if got[1].State != resource.StateDeleting {
		t.Errorf("list[1].state = %s, want deleting", got[1].State)
	}

	t.Run("empty", func(t *testing.T) {
		auto := createCluster(t, obj{"tenantId": tn.ID, "poolId": tn.Pool, "name": "auto", "mode": "autopilot", "region": "us-central1"})
		r := call(t, viewer, "kubernetesNodePools/list", obj{"tenantId": tn.ID, "clusterId": auto.ID})
		if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"nodePools":[]}` {
			t.Errorf("list of a cluster without pools = %v, want 200 {\"nodePools\":[]}", r)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		deleted := newCluster(t, tn)
		setState(t, h.store.ClusterRef(tn.ID, deleted.ID), resource.StateDeleted, "")
		tests := []struct {
			name   string
			body   any
			status int
			code   string
			fields []string
		}{
			{"deleted cluster", obj{"tenantId": tn.ID, "clusterId": deleted.ID}, 404, "NOT_FOUND", nil},
			{"unknown cluster", obj{"tenantId": tn.ID, "clusterId": unknownCluster()}, 404, "NOT_FOUND", nil},
			{"clusterId missing", obj{"tenantId": tn.ID}, 400, "INVALID_INPUT", []string{"clusterId"}},
			{"clusterId malformed", obj{"tenantId": tn.ID, "clusterId": "prod"}, 400, "INVALID_INPUT", []string{"clusterId"}},
			{"unknown field", obj{"tenantId": tn.ID, "clusterId": c.ID, "pageSize": 10}, 400, "INVALID_INPUT", []string{"pageSize"}},
			{"tenantId empty", obj{"tenantId": "", "clusterId": c.ID}, 400, "INVALID_INPUT", []string{"tenantId"}},
			{"tenantId with slash", obj{"tenantId": "a/b", "clusterId": c.ID}, 400, "INVALID_INPUT", []string{"tenantId"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				wantError(t, call(t, viewer, "kubernetesNodePools/list", tc.body), tc.status, tc.code, tc.fields...)
			})
		}
	})
}

// TestUpdateNodePool checks update's input, resizing and state rules.
func TestUpdateNodePool(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	scaled := createPool(t, tn, c.ID, with(poolSpec("scaled"), "nodeCount", 2, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}))
	fixed := createPool(t, tn, c.ID, with(poolSpec("fixed"), "nodeCount", 3))

	refusals := []struct {
		name   string
		pool   resource.NodePool
		mods   []any
		fields []string
	}{
		{"nothing to change", fixed, nil, []string{"nodeCount"}},
		{"nodeCount -1", fixed, []any{"nodeCount", -1}, []string{"nodeCount"}},
		{"nodeCount 1001", fixed, []any{"nodeCount", 1001}, []string{"nodeCount"}},
		{"nodeCount string", fixed, []any{"nodeCount", "3"}, []string{"nodeCount"}},
		{"nodeCount null", fixed, []any{"nodeCount", jsonNull}, []string{"nodeCount"}},
		{"nodeCount above the pool's maxNodes", scaled, []any{"nodeCount", 5}, []string{"nodeCount"}},
		{"nodeCount below the pool's minNodes", scaled, []any{"nodeCount", 0}, []string{"nodeCount"}},
		{"autoscaling above the pool's nodeCount", scaled, []any{"autoscaling", obj{"minNodes": 3, "maxNodes": 5}}, []string{"autoscaling.minNodes"}},
		{"autoscaling below the pool's nodeCount", scaled, []any{"autoscaling", obj{"minNodes": 0, "maxNodes": 1}}, []string{"autoscaling.maxNodes"}},
		{"autoscaling turned on around another count", fixed, []any{"autoscaling", obj{"minNodes": 0, "maxNodes": 2}}, []string{"autoscaling.maxNodes"}},
		{"both, count outside", fixed, []any{"nodeCount", 5, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}}, []string{"nodeCount"}},
		{"autoscaling min above max", fixed, []any{"autoscaling", obj{"minNodes": 5, "maxNodes": 4}}, []string{"autoscaling.minNodes"}},
		{"autoscaling maxNodes 0", fixed, []any{"nodeCount", 0, "autoscaling", obj{"minNodes": 0, "maxNodes": 0}}, []string{"autoscaling.maxNodes"}},
		{"autoscaling maxNodes 1001", fixed, []any{"autoscaling", obj{"minNodes": 0, "maxNodes": 1001}}, []string{"autoscaling.maxNodes"}},
		{"autoscaling minNodes missing", fixed, []any{"autoscaling", obj{"maxNodes": 4}}, []string{"autoscaling.minNodes"}},
		{"autoscaling not an object", fixed, []any{"autoscaling", 3}, []string{"autoscaling"}},
		{"name", fixed, []any{"nodeCount", 2, "name", "renamed"}, []string{"name"}},
		{"machineType", fixed, []any{"nodeCount", 2, "machineType", "e2-standard-8"}, []string{"machineType"}},
		{"zones", fixed, []any{"nodeCount", 2, "zones", []any{"us-central1-a"}}, []string{"zones"}},
		{"labels", fixed, []any{"nodeCount", 2, "labels", obj{"a": "b"}}, []string{"labels"}},
		{"taints", fixed, []any{"nodeCount", 2, "taints", []any{}}, []string{"taints"}},
		{"diskGiB", fixed, []any{"nodeCount", 2, "diskGiB", 100}, []string{"diskGiB"}},
		{"diskType", fixed, []any{"nodeCount", 2, "diskType", "pd-ssd"}, []string{"diskType"}},
		{"spot", fixed, []any{"nodeCount", 2, "spot", true}, []string{"spot"}},
		{"accelerators", fixed, []any{"nodeCount", 2, "accelerators", obj{"type": "nvidia-l4", "count": 1}}, []string{"accelerators"}},
		{"state", fixed, []any{"nodeCount", 2, "state", "ready"}, []string{"state"}},
		{"unknown field", fixed, []any{"nodeCount", 2, "size", 2}, []string{"size"}},
		{"nodePoolId missing", fixed, []any{"nodeCount", 2, "nodePoolId", nil}, []string{"nodePoolId"}},
		{"nodePoolId of a cluster", fixed, []any{"nodeCount", 2, "nodePoolId", unknownCluster()}, []string{"nodePoolId"}},
		{"every broken field", fixed, []any{"nodeCount", -1, "machineType", "x", "clusterId", "kcl_x"}, []string{"nodeCount", "machineType", "clusterId"}},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, c.ID, tc.pool.ID), tc.mods...))
			wantError(t, r, http.StatusBadRequest, "INVALID_INPUT", tc.fields...)
		})
	}
	if got := listPools(t, tn, c.ID); !reflect.DeepEqual(got[1:], []resource.NodePool{scaled, fixed}) {
		t.Fatalf("pools after refused updates = %+v, want unchanged %+v", got[1:], []resource.NodePool{scaled, fixed})
	}

	resizes := []struct {
		name  string
		spec  obj // the pool before
		mods  []any
		count int
		auto  *resource.Autoscaling
	}{
		{"nodeCount", with(poolSpec("p"), "nodeCount", 3), []any{"nodeCount", 5}, 5, nil},
		{"nodeCount 0", with(poolSpec("p"), "nodeCount", 3), []any{"nodeCount", 0}, 0, nil},
		{"nodeCount 1000", with(poolSpec("p"), "nodeCount", 3), []any{"nodeCount", 1000}, 1000, nil},
		{"same nodeCount", with(poolSpec("p"), "nodeCount", 3), []any{"nodeCount", 3}, 3, nil},
		{"nodeCount within bounds", with(poolSpec("p"), "nodeCount", 2, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}), []any{"nodeCount", 4}, 4, &resource.Autoscaling{MinNodes: 1, MaxNodes: 4}},
		{"autoscaling off", with(poolSpec("p"), "nodeCount", 2, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}), []any{"autoscaling", jsonNull}, 2, nil},
		{"autoscaling off with count", with(poolSpec("p"), "nodeCount", 2, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}), []any{"autoscaling", jsonNull, "nodeCount", 9}, 9, nil},
		{"autoscaling replaced", with(poolSpec("p"), "nodeCount", 2, "autoscaling", obj{"minNodes": 1, "maxNodes": 4}), []any{"autoscaling", obj{"minNodes": 2, "maxNodes": 8}}, 2, &resource.Autoscaling{MinNodes: 2, MaxNodes: 8}},
		{"autoscaling on", with(poolSpec("p"), "nodeCount", 3), []any{"autoscaling", obj{"minNodes": 0, "maxNodes": 1000}}, 3, &resource.Autoscaling{MinNodes: 0, MaxNodes: 1000}},
		{"both", with(poolSpec("p"), "nodeCount", 3), []any{"nodeCount", 6, "autoscaling", obj{"minNodes": 5, "maxNodes": 7}}, 6, &resource.Autoscaling{MinNodes: 5, MaxNodes: 7}},
	}
	for _, tc := range resizes {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, tn)
			p := createPool(t, tn, cl.ID, tc.spec)
			var got resource.NodePool
			call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, cl.ID, p.ID), tc.mods...)).decode(t, &got)
			want := p
			want.NodeCount, want.Autoscaling = tc.count, tc.auto
			want.Version = 2
			want.UpdatedAt = got.UpdatedAt
			if !reflect.DeepEqual(got, want) {
				t.Errorf("update = %+v, want %+v", got, want)
			}
			if !got.UpdatedAt.After(p.UpdatedAt) {
				t.Errorf("updatedAt %v not after %v", got.UpdatedAt, p.UpdatedAt)
			}
			if l := listPools(t, tn, cl.ID); !reflect.DeepEqual(l[1], got) {
				t.Errorf("list after update has %+v, want %+v", l[1], got)
			}
		})
	}

	t.Run("states", func(t *testing.T) {
		tests := []struct {
			pool, cluster         resource.State
			wantPool, wantCluster resource.State
		}{
			{resource.StatePending, resource.StatePending, resource.StatePending, resource.StatePending},
			{resource.StatePending, resource.StateProvisioning, resource.StatePending, resource.StateProvisioning},
			{resource.StateReady, resource.StateReady, resource.StateUpdating, resource.StateUpdating},
			{resource.StateUpdating, resource.StateUpdating, resource.StateUpdating, resource.StateUpdating},
			{resource.StateError, resource.StateError, resource.StateUpdating, resource.StateUpdating},
		}
		for _, tc := range tests {
			t.Run(string(tc.pool)+"/"+string(tc.cluster), func(t *testing.T) {
				cl := newCluster(t, tn)
				p := listPools(t, tn, cl.ID)[0]
				setState(t, h.store.ClusterRef(tn.ID, cl.ID), tc.cluster, "")
				setState(t, h.store.NodePoolRef(tn.ID, cl.ID, p.ID), tc.pool, "was")
				before := clusterDoc(t, tn.ID, cl.ID)
				var got resource.NodePool
				call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, cl.ID, p.ID), "nodeCount", 4)).decode(t, &got)
				after := clusterDoc(t, tn.ID, cl.ID)
				if got.State != tc.wantPool || got.Version != p.Version+1 || got.Message != "" {
					t.Errorf("pool after update: %s v%d %q, want %s v%d with no message", got.State, got.Version, got.Message, tc.wantPool, p.Version+1)
				}
				if after.State != tc.wantCluster || after.Version != before.Version+1 || !after.Changed {
					t.Errorf("cluster after update: %s v%d changed=%v, want %s v%d changed", after.State, after.Version, after.Changed, tc.wantCluster, before.Version+1)
				}
			})
		}
	})

	t.Run("refused states", func(t *testing.T) {
		cl := newCluster(t, tn)
		p := createPool(t, tn, cl.ID, poolSpec("doomed"))
		var d resource.NodePool
		call(t, admin, "kubernetesNodePools/delete", poolRef(tn, cl.ID, p.ID)).decode(t, &d)
		wantError(t, call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, cl.ID, p.ID), "nodeCount", 2)), http.StatusConflict, "INVALID_STATE")

		other := listPools(t, tn, cl.ID)[0] // "default", pending
		setState(t, h.store.ClusterRef(tn.ID, cl.ID), resource.StateDeleting, "")
		wantError(t, call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, cl.ID, other.ID), "nodeCount", 2)), http.StatusConflict, "INVALID_STATE")

		markPoolDeleted(t, tn.ID, cl.ID, d)
		wantError(t, call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, cl.ID, p.ID), "nodeCount", 2)), http.StatusNotFound, "NOT_FOUND")
		wantError(t, call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, cl.ID, unknownNodePool()), "nodeCount", 2)), http.StatusNotFound, "NOT_FOUND")
		wantError(t, call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, unknownCluster(), other.ID), "nodeCount", 2)), http.StatusNotFound, "NOT_FOUND")
		// A pool of another cluster is not found under this one.
		wantError(t, call(t, editor, "kubernetesNodePools/update", with(poolRef(tn, c.ID, other.ID), "nodeCount", 2)), http.StatusNotFound, "NOT_FOUND")
		if got := listPools(t, tn, cl.ID)[0]; got.Version != 1 || got.NodeCount != 1 {
			t.Errorf("pool after refused updates = %+v, want version 1 with 1 node", got)
		}
	})
}

// TestDeleteNodePool checks delete: the pool goes deleting, a second delete
// changes nothing, deleted and unknown pools are NOT_FOUND.
func TestDeleteNodePool(t *testing.T) {
	tn := newTenant(t)
	for _, from := range []resource.State{resource.StatePending, resource.StateReady, resource.StateUpdating, resource.StateError} {
		t.Run(string(from), func(t *testing.T) {
			c := newCluster(t, tn)
			p := createPool(t, tn, c.ID, poolSpec("np"))
			setState(t, h.store.NodePoolRef(tn.ID, c.ID, p.ID), from, "m")
			setState(t, h.store.ClusterRef(tn.ID, c.ID), resource.StateReady, "")
			before := clusterDoc(t, tn.ID, c.ID)
			var d resource.NodePool
			call(t, editor, "kubernetesNodePools/delete", poolRef(tn, c.ID, p.ID)).decode(t, &d)
			if d.State != resource.StateDeleting || d.Message != "" || d.ID != p.ID || !d.UpdatedAt.After(p.UpdatedAt) {
				t.Errorf("delete = %+v, want %s deleting with a later updatedAt", d, p.ID)
			}
			after := clusterDoc(t, tn.ID, c.ID)
			if after.State != resource.StateUpdating || after.Version != before.Version+1 || after.ActivePoolCount != 2 {
				t.Errorf("cluster after delete: %s v%d %d pools, want updating v%d 2 pools", after.State, after.Version, after.ActivePoolCount, before.Version+1)
			}
			kicks := len(h.kicker.kicksOf(c.ID))

			var again resource.NodePool
			call(t, editor, "kubernetesNodePools/delete", poolRef(tn, c.ID, p.ID)).decode(t, &again)
			if !reflect.DeepEqual(again, d) {
				t.Errorf("second delete = %+v, want unchanged %+v", again, d)
			}
			if got := clusterDoc(t, tn.ID, c.ID); got.Version != after.Version || !got.UpdatedAt.Equal(after.UpdatedAt) {
				t.Errorf("cluster after second delete: v%d %v, want unchanged v%d %v", got.Version, got.UpdatedAt, after.Version, after.UpdatedAt)
			}
			if got := len(h.kicker.kicksOf(c.ID)); got != kicks {
				t.Errorf("kicks after second delete = %d, want %d", got, kicks)
			}

			markPoolDeleted(t, tn.ID, c.ID, d)
			wantError(t, call(t, editor, "kubernetesNodePools/delete", poolRef(tn, c.ID, p.ID)), http.StatusNotFound, "NOT_FOUND")
		})
	}
	t.Run("refusals", func(t *testing.T) {
		c := newCluster(t, tn)
		p := listPools(t, tn, c.ID)[0]
		tests := []struct {
			name   string
			body   obj
			status int
			code   string
			fields []string
		}{
			{"unknown pool", poolRef(tn, c.ID, unknownNodePool()), 404, "NOT_FOUND", nil},
			{"unknown cluster", poolRef(tn, unknownCluster(), p.ID), 404, "NOT_FOUND", nil},
			{"nodePoolId missing", with(poolRef(tn, c.ID, p.ID), "nodePoolId", nil), 400, "INVALID_INPUT", []string{"nodePoolId"}},
			{"nodePoolId 53 chars", poolRef(tn, c.ID, "knp_"+repeat("0", 53)), 400, "INVALID_INPUT", []string{"nodePoolId"}},
			{"nodePoolId 52 chars names nothing", poolRef(tn, c.ID, "knp_"+repeat("0", 52)), 404, "NOT_FOUND", nil},
			{"unknown field", with(poolRef(tn, c.ID, p.ID), "force", true), 400, "INVALID_INPUT", []string{"force"}},
			{"nodeCount is not a delete field", with(poolRef(tn, c.ID, p.ID), "nodeCount", 0), 400, "INVALID_INPUT", []string{"nodeCount"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				wantError(t, call(t, editor, "kubernetesNodePools/delete", tc.body), tc.status, tc.code, tc.fields...)
			})
		}
		if got := listPools(t, tn, c.ID)[0]; !reflect.DeepEqual(got, p) {
			t.Errorf("pool after refused deletes = %+v, want %+v", got, p)
		}
	})
}
