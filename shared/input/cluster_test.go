package input

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// clusterPool is a valid node pool of a cluster create body.
var clusterPool = obj{"name": "default", "machineType": "e2-standard-4", "nodeCount": 1}

var createCluster = obj{
	"tenantId":  "acme",
	"poolId":    "pool-dev",
	"name":      "prod",
	"mode":      "standard",
	"region":    "us-central1",
	"nodePools": []any{clusterPool},
}

// pools returns n valid cluster node pools named p0, p1, ...
func pools(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = with(clusterPool, obj{"name": "p" + strconv.Itoa(i)})
	}
	return out
}

func TestDecodeCreateCluster(t *testing.T) {
	tests := []struct {
		name string
		set  obj
		want []string
	}{
		{"standard", nil, nil},
		{"autopilot", obj{"mode": "autopilot", "nodePools": deleteMember}, nil},
		{"autopilot empty pools", obj{"mode": "autopilot", "nodePools": []any{}}, nil},
		{"autopilot with pools", obj{"mode": "autopilot"}, sorted("nodePools")},
		{"standard without pools", obj{"nodePools": deleteMember}, sorted("nodePools")},
		{"standard empty pools", obj{"nodePools": []any{}}, sorted("nodePools")},
		{"standard 10 pools", obj{"nodePools": pools(10)}, nil},
		{"standard 11 pools", obj{"nodePools": pools(11)}, sorted("nodePools")},
		{"mode unknown", obj{"mode": "Standard"}, sorted("mode")},
		{"mode missing", obj{"mode": deleteMember}, sorted("mode")},
		{"releaseChannel rapid", obj{"releaseChannel": "rapid"}, nil},
		{"releaseChannel stable", obj{"releaseChannel": "stable"}, nil},
		{"releaseChannel unknown", obj{"releaseChannel": "beta"}, sorted("releaseChannel")},
		{"releaseChannel empty", obj{"releaseChannel": ""}, sorted("releaseChannel")},
		{"releaseChannel null", obj{"releaseChannel": nil}, sorted("releaseChannel")},
		{"region of another provider", obj{"region": "fra"}, nil},
		{"region uppercase", obj{"region": "US-CENTRAL1"}, sorted("region")},
		{"region empty", obj{"region": ""}, sorted("region")},
		{"name 40", obj{"name": "a" + rep("b", 39)}, nil},
		{"name 41", obj{"name": "a" + rep("b", 40)}, sorted("name")},
		{"poolId 128", obj{"poolId": rep("p", 128)}, nil},
		{"poolId 129", obj{"poolId": rep("p", 129)}, sorted("poolId")},
		{"poolId slash", obj{"poolId": "pools/dev"}, sorted("poolId")},
		{"labels", obj{"labels": obj{"env": "prod", "example.com/team": "ml"}}, nil},
		{"labels 33", obj{"labels": labelsN(33)}, sorted("labels")},
		{"label bad", obj{"labels": obj{"env": "prod!"}}, sorted(`labels["env"]`)},
		{"idempotencyKey", obj{"idempotencyKey": "k1"}, nil},
		{"idempotencyKey empty", obj{"idempotencyKey": ""}, sorted("idempotencyKey")},
		{"unknown", obj{"version": "1.33"}, sorted("version")},
		{"pool zone bad", obj{"nodePools": []any{clusterPool, with(clusterPool, obj{"name": "b", "zones": []any{"Zone A"}})}},
			sorted("nodePools[1].zones[0]")},
		{"pool names repeated", obj{"nodePools": []any{clusterPool, with(clusterPool, obj{"name": "b"}), clusterPool}},
			sorted("nodePools[2].name")},
		{"pool broken deep", obj{"nodePools": []any{with(clusterPool, obj{
			"autoscaling": obj{"minNodes": 2, "maxNodes": 1}, "taints": []any{obj{"key": "a", "effect": "Sometimes"}},
			"labels": obj{"team": "a b"},
		})}}, sorted("nodePools[0].autoscaling.minNodes", "nodePools[0].taints[0].effect", `nodePools[0].labels["team"]`)},
		{"pool takes no cluster fields", obj{"nodePools": []any{with(clusterPool, obj{"tenantId": "acme", "clusterId": clusterID, "idempotencyKey": "k"})}},
			sorted("nodePools[0].tenantId", "nodePools[0].clusterId", "nodePools[0].idempotencyKey")},
		{"pool unknown", obj{"nodePools": []any{with(clusterPool, obj{"size": 1})}}, sorted("nodePools[0].size")},
		{"pool not an object", obj{"nodePools": []any{clusterPool, "small"}}, sorted("nodePools[1]")},
		{"pools not an array", obj{"nodePools": clusterPool}, sorted("nodePools")},
		{"pool missing fields", obj{"nodePools": []any{obj{}}}, sorted("nodePools[0].name", "nodePools[0].machineType", "nodePools[0].nodeCount")},
		{"everything wrong", obj{"tenantId": 1, "poolId": nil, "name": "-", "mode": "x", "region": "?", "nodePools": []any{obj{"name": "a", "machineType": "e2", "nodeCount": -1}}},
			sorted("tenantId", "poolId", "name", "mode", "region", "nodePools[0].nodeCount")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := marshal(t, with(createCluster, tt.set))
			c, err := DecodeCreateCluster(body)
			if got := paths(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("DecodeCreateCluster(%s) broken fields = %q, want %q (err %v)", body, got, tt.want, err)
			}
			if (c == nil) == (tt.want == nil) {
				t.Errorf("DecodeCreateCluster(%s) = %v, %v: want a request exactly when valid", body, c, err)
			}
		})
	}
}

func TestDecodeCreateClusterValues(t *testing.T) {
	body := marshal(t, with(createCluster, obj{"labels": obj{"env": "prod"}, "idempotencyKey": "k1"}))
	got, err := DecodeCreateCluster(body)
	if err != nil {
		t.Fatalf("DecodeCreateCluster(%s): %v", body, err)
	}
	spec := model.ClusterSpec{Name: "prod", Mode: "standard", Region: "us-central1", ReleaseChannel: "regular",
		Labels: map[string]string{"env": "prod"}}
	pools := []model.NodePoolSpec{{Name: "default", MachineType: "e2-standard-4", NodeCount: 1,
		Zones: []string{}, Labels: map[string]string{}, Taints: []resource.Taint{}}}
	if got.TenantID != "acme" || got.PoolID != "pool-dev" || got.IdempotencyKey != "k1" ||
		!reflect.DeepEqual(got.Spec, spec) || !reflect.DeepEqual(got.NodePools, pools) {
		t.Errorf("DecodeCreateCluster(%s) = %+v, want tenant acme, pool pool-dev, key k1, spec %+v and node pools %+v", body, got, spec, pools)
	}
}

func TestCreateClusterCanonical(t *testing.T) {
	decode := func(set obj) *CreateCluster {
		t.Helper()
		body := marshal(t, with(createCluster, set))
		c, err := DecodeCreateCluster(body)
		if err != nil {
			t.Fatalf("DecodeCreateCluster(%s): %v", body, err)
		}
		return c
	}
	base := decode(nil)
	tests := []struct {
		name  string
		set   obj
		equal bool
	}{
		{"default channel given", obj{"releaseChannel": "regular"}, true},
		{"empty labels given", obj{"labels": obj{}}, true},
		{"idempotency key", obj{"idempotencyKey": "x"}, true},
		{"pool spot false given", obj{"nodePools": []any{with(clusterPool, obj{"spot": false, "zones": []any{}})}}, true},
		{"other channel", obj{"releaseChannel": "stable"}, false},
		{"other region", obj{"region": "europe-west4"}, false},
		{"other pool", obj{"nodePools": []any{with(clusterPool, obj{"nodeCount": 2})}}, false},
		{"label", obj{"labels": obj{"a": "b"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := decode(tt.set)
			if got := bytes.Equal(other.Canonical(), base.Canonical()); got != tt.equal {
				t.Errorf("Canonical equal = %v, want %v:\n%s\n%s", got, tt.equal, other.Canonical(), base.Canonical())
			}
		})
	}
	again, err := DecodeCreateCluster(base.Canonical())
	if err != nil || !bytes.Equal(again.Canonical(), base.Canonical()) {
		t.Errorf("DecodeCreateCluster(%s) = %v, %v; want the same request", base.Canonical(), again, err)
	}
}

func TestCreateClusterLabels(t *testing.T) {
	c, err := DecodeCreateCluster(marshal(t, createCluster))
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Labels == nil {
		t.Errorf("Spec.Labels of a body without labels = nil, want empty")
	}
	body := marshal(t, with(createCluster, obj{"labels": obj{"env": "prod"}}))
	c, err = DecodeCreateCluster(body)
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Labels["env"] = "changed"
	if c.body.Labels["env"] != "prod" {
		t.Errorf("Spec shares its labels with the body")
	}
}

func TestDecodeListClusters(t *testing.T) {
	tests := []struct {
		name string
		body obj
		want *ListClusters
		bad  []string
	}{
		{"defaults", obj{"tenantId": "acme"}, &ListClusters{TenantID: "acme", PageSize: DefaultPageSize}, nil},
		{"everything", obj{"tenantId": "acme", "poolId": "pool-dev", "pageSize": 10, "pageToken": "abc"},
			&ListClusters{TenantID: "acme", PoolID: "pool-dev", PageSize: 10, PageToken: "abc"}, nil},
		{"empty page token is the first page", obj{"tenantId": "acme", "pageToken": ""}, &ListClusters{TenantID: "acme", PageSize: 50}, nil},
		{"pageSize 1", obj{"tenantId": "acme", "pageSize": 1}, &ListClusters{TenantID: "acme", PageSize: 1}, nil},
		{"pageSize max", obj{"tenantId": "acme", "pageSize": MaxPageSize}, &ListClusters{TenantID: "acme", PageSize: MaxPageSize}, nil},
		{"pageSize 0", obj{"tenantId": "acme", "pageSize": 0}, nil, sorted("pageSize")},
		{"pageSize over max", obj{"tenantId": "acme", "pageSize": MaxPageSize + 1}, nil, sorted("pageSize")},
		{"pageSize string", obj{"tenantId": "acme", "pageSize": "10"}, nil, sorted("pageSize")},
		{"pageSize null", obj{"tenantId": "acme", "pageSize": nil}, nil, sorted("pageSize")},
		{"pageToken longest", obj{"tenantId": "acme", "pageToken": rep("t", MaxPageTokenLen)}, &ListClusters{TenantID: "acme", PageSize: 50, PageToken: rep("t", MaxPageTokenLen)}, nil},
		{"pageToken too long", obj{"tenantId": "acme", "pageToken": rep("t", MaxPageTokenLen+1)}, nil, sorted("pageToken")},
		{"poolId empty", obj{"tenantId": "acme", "poolId": ""}, nil, sorted("poolId")},
		{"poolId bad", obj{"tenantId": "acme", "poolId": "a b"}, nil, sorted("poolId")},
		{"tenant missing", obj{}, nil, sorted("tenantId")},
		{"unknown", obj{"tenantId": "acme", "state": "ready"}, nil, sorted("state")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := marshal(t, tt.body)
			got, err := DecodeListClusters(body)
			if p := paths(t, err); !slices.Equal(p, tt.bad) {
				t.Fatalf("DecodeListClusters(%s) broken fields = %q, want %q (err %v)", body, p, tt.bad, err)
			}
			if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeListClusters(%s) = %+v, want %+v", body, got, tt.want)
			}
		})
	}
}
