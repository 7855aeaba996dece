package input

import (
	"reflect"
	"slices"
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

var updatePool = obj{"tenantId": "acme", "clusterId": clusterID, "nodePoolId": nodePoolID}

func TestDecodeUpdateNodePool(t *testing.T) {
	one, three, five, six := 1, 3, 5, 6
	tests := []struct {
		name string
		set  obj
		want *UpdateNodePool // when valid
		bad  []string        // broken paths when invalid
	}{
		{"nodeCount only", obj{"nodeCount": 3}, &UpdateNodePool{NodeCount: &three}, nil},
		{"nodeCount 0", obj{"nodeCount": 0}, &UpdateNodePool{NodeCount: new(int)}, nil},
		{"nodeCount -1", obj{"nodeCount": -1}, nil, sorted("nodeCount")},
		{"nodeCount 1001", obj{"nodeCount": 1001}, nil, sorted("nodeCount")},
		{"nodeCount 1e2", obj{"nodeCount": raw("1e2")}, nil, sorted("nodeCount")},
		{"nodeCount null", obj{"nodeCount": nil}, nil, sorted("nodeCount")},
		{"autoscaling object", obj{"autoscaling": obj{"minNodes": 1, "maxNodes": 5}},
			&UpdateNodePool{Autoscaling: &Autoscaling{MinNodes: 1, MaxNodes: 5}, SetAutoscaling: true}, nil},
		{"autoscaling null turns it off", obj{"autoscaling": nil}, &UpdateNodePool{SetAutoscaling: true}, nil},
		{"both", obj{"nodeCount": 5, "autoscaling": obj{"minNodes": 1, "maxNodes": 5}},
			&UpdateNodePool{NodeCount: &five, Autoscaling: &Autoscaling{MinNodes: 1, MaxNodes: 5}, SetAutoscaling: true}, nil},
		{"both, nodeCount outside", obj{"nodeCount": 6, "autoscaling": obj{"minNodes": 1, "maxNodes": 5}}, nil, sorted("nodeCount")},
		{"nodeCount with autoscaling off", obj{"nodeCount": 6, "autoscaling": nil},
			&UpdateNodePool{NodeCount: &six, SetAutoscaling: true}, nil},
		{"autoscaling min above max", obj{"autoscaling": obj{"minNodes": 5, "maxNodes": 4}}, nil, sorted("autoscaling.minNodes")},
		{"autoscaling maxNodes 0", obj{"autoscaling": obj{"minNodes": 0, "maxNodes": 0}}, nil, sorted("autoscaling.maxNodes")},
		{"autoscaling empty object", obj{"autoscaling": obj{}}, nil, sorted("autoscaling.minNodes", "autoscaling.maxNodes")},
		{"autoscaling not an object", obj{"autoscaling": true}, nil, sorted("autoscaling")},
		{"nothing to change", nil, nil, sorted("nodeCount")},
		{"machineType", obj{"nodeCount": 1, "machineType": "e2-standard-4"}, nil, sorted("machineType")},
		{"every immutable field", obj{"name": "x", "machineType": "e2", "diskGiB": 10, "diskType": "pd-ssd", "spot": true,
			"accelerators": obj{}, "zones": []any{}, "labels": obj{}, "taints": []any{}},
			nil, sorted("nodeCount", "name", "machineType", "diskGiB", "diskType", "spot", "accelerators", "zones", "labels", "taints")},
		{"unknown field", obj{"nodeCount": 1, "size": 3}, nil, sorted("size")},
		{"idempotencyKey is not taken", obj{"nodeCount": 1, "idempotencyKey": "k"}, nil, sorted("idempotencyKey")},
		{"nodePoolId 53", obj{"nodeCount": 1, "nodePoolId": "knp_" + rep("0", 53)}, nil, sorted("nodePoolId")},
		{"nodePoolId 52", obj{"nodeCount": 1, "nodePoolId": "knp_" + rep("0", 52)}, &UpdateNodePool{NodeCount: &one}, nil},
		{"ids missing", obj{"nodeCount": 1, "tenantId": deleteMember, "clusterId": deleteMember, "nodePoolId": deleteMember},
			nil, sorted("tenantId", "clusterId", "nodePoolId")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := marshal(t, with(updatePool, tt.set))
			got, err := DecodeUpdateNodePool(body)
			if p := paths(t, err); !slices.Equal(p, tt.bad) {
				t.Fatalf("DecodeUpdateNodePool(%s) broken fields = %q, want %q (err %v)", body, p, tt.bad, err)
			}
			if tt.bad != nil {
				if got != nil {
					t.Errorf("DecodeUpdateNodePool(%s) = %+v with an error", body, got)
				}
				return
			}
			want := *tt.want
			want.TenantID, want.ClusterID, want.NodePoolID = "acme", clusterID, updatePool["nodePoolId"].(string)
			if id, ok := tt.set["nodePoolId"].(string); ok {
				want.NodePoolID = id
			}
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("DecodeUpdateNodePool(%s) = %+v, want %+v", body, got, &want)
			}
		})
	}
}

func TestDecodeUpdateNodePoolImmutableReason(t *testing.T) {
	body := marshal(t, with(updatePool, obj{"nodeCount": 1, "zones": []any{"us-central1-a"}, "colour": "red"}))
	_, err := DecodeUpdateNodePool(body)
	if got := reasonOf(err, "zones"); got != immutable {
		t.Errorf("DecodeUpdateNodePool(%s) reason for zones = %q, want %q", body, got, immutable)
	}
	if got := reasonOf(err, "colour"); got != "unknown field" {
		t.Errorf("DecodeUpdateNodePool(%s) reason for colour = %q, want %q", body, got, "unknown field")
	}
}

func TestUpdateNodePoolApply(t *testing.T) {
	stored := model.NodePoolSpec{
		Name: "gpu", MachineType: "g2-standard-8",
		NodeCount: 3, Autoscaling: &resource.Autoscaling{MinNodes: 2, MaxNodes: 4},
		Zones: []string{"us-central1-a"}, Labels: map[string]string{"team": "ml"}, Taints: []resource.Taint{},
		Version: 4, Generation: 5,
	}
	manual := stored
	manual.Autoscaling = nil
	tests := []struct {
		name       string
		pool       model.NodePoolSpec
		body       obj
		wantCount  int
		wantScale  *resource.Autoscaling
		wantBroken []string
	}{
		{"nodeCount within", stored, obj{"nodeCount": 4}, 4, &resource.Autoscaling{MinNodes: 2, MaxNodes: 4}, nil},
		{"nodeCount above max", stored, obj{"nodeCount": 5}, 0, nil, sorted("nodeCount")},
		{"nodeCount below min", stored, obj{"nodeCount": 1}, 0, nil, sorted("nodeCount")},
		{"autoscaling off keeps count", stored, obj{"autoscaling": nil}, 3, nil, nil},
		{"autoscaling off and count", stored, obj{"autoscaling": nil, "nodeCount": 9}, 9, nil, nil},
		{"new bounds around count", stored, obj{"autoscaling": obj{"minNodes": 0, "maxNodes": 10}}, 3, &resource.Autoscaling{MaxNodes: 10}, nil},
		{"new min above count", stored, obj{"autoscaling": obj{"minNodes": 4, "maxNodes": 10}}, 0, nil, sorted("autoscaling.minNodes")},
		{"new max below count", stored, obj{"autoscaling": obj{"minNodes": 0, "maxNodes": 2}}, 0, nil, sorted("autoscaling.maxNodes")},
		{"new bounds and count", stored, obj{"nodeCount": 7, "autoscaling": obj{"minNodes": 6, "maxNodes": 8}}, 7, &resource.Autoscaling{MinNodes: 6, MaxNodes: 8}, nil},
		{"manual pool resized", manual, obj{"nodeCount": 1000}, 1000, nil, nil},
		{"manual pool gets autoscaling", manual, obj{"autoscaling": obj{"minNodes": 1, "maxNodes": 3}}, 3, &resource.Autoscaling{MinNodes: 1, MaxNodes: 3}, nil},
		{"manual pool gets autoscaling below count", manual, obj{"autoscaling": obj{"minNodes": 1, "maxNodes": 2}}, 0, nil, sorted("autoscaling.maxNodes")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := marshal(t, with(updatePool, tt.body))
			u, err := DecodeUpdateNodePool(body)
			if err != nil {
				t.Fatalf("DecodeUpdateNodePool(%s): %v", body, err)
			}
			got, err := u.Apply(tt.pool)
			if p := paths(t, err); !slices.Equal(p, tt.wantBroken) {
				t.Fatalf("Apply(%s) broken fields = %q, want %q (err %v)", body, p, tt.wantBroken, err)
			}
			if tt.wantBroken != nil {
				return
			}
			want := tt.pool
			want.NodeCount, want.Autoscaling = tt.wantCount, tt.wantScale
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Apply(%s) = %+v, want %+v", body, got, want)
			}
			got.Labels["team"] = "changed"
			got.Zones[0] = "changed"
			if tt.pool.Labels["team"] != "ml" || tt.pool.Zones[0] != "us-central1-a" {
				t.Errorf("Apply(%s) result shares memory with the stored pool", body)
			}
		})
	}
	if stored.Autoscaling.MinNodes != 2 || stored.NodeCount != 3 {
		t.Errorf("Apply changed the stored pool: %+v", stored)
	}
}

func TestDecodeRefs(t *testing.T) {
	tests := []struct {
		name string
		body obj
		bad  []string
	}{
		{"ok", obj{"tenantId": "acme", "clusterId": clusterID}, nil},
		{"missing", obj{}, sorted("tenantId", "clusterId")},
		{"bad cluster id", obj{"tenantId": "acme", "clusterId": "prod"}, sorted("clusterId")},
		{"unknown", obj{"tenantId": "acme", "clusterId": clusterID, "name": "prod"}, sorted("name")},
		{"null", obj{"tenantId": nil, "clusterId": clusterID}, sorted("tenantId")},
	}
	for _, tt := range tests {
		body := marshal(t, tt.body)
		c, err := DecodeClusterRef(body)
		if p := paths(t, err); !slices.Equal(p, tt.bad) {
			t.Errorf("DecodeClusterRef(%s) broken fields = %q, want %q", body, p, tt.bad)
		}
		if err == nil && (c.TenantID != "acme" || c.ClusterID != clusterID) {
			t.Errorf("DecodeClusterRef(%s) = %+v", body, c)
		}
	}

	poolTests := []struct {
		name string
		body obj
		bad  []string
	}{
		{"ok", updatePool, nil},
		{"missing", obj{}, sorted("tenantId", "clusterId", "nodePoolId")},
		{"cluster id as pool id", with(updatePool, obj{"nodePoolId": clusterID}), sorted("nodePoolId")},
		{"pool id 25", with(updatePool, obj{"nodePoolId": "knp_" + rep("0", 25)}), sorted("nodePoolId")},
		{"unknown", with(updatePool, obj{"force": true}), sorted("force")},
	}
	for _, tt := range poolTests {
		body := marshal(t, tt.body)
		n, err := DecodeNodePoolRef(body)
		if p := paths(t, err); !slices.Equal(p, tt.bad) {
			t.Errorf("DecodeNodePoolRef(%s) broken fields = %q, want %q", body, p, tt.bad)
		}
		if err == nil && (n.TenantID != "acme" || n.ClusterID != clusterID || n.NodePoolID != nodePoolID) {
			t.Errorf("DecodeNodePoolRef(%s) = %+v", body, n)
		}
	}
}
