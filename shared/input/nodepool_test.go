package input

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// createPool is a valid kubernetesNodePools.create body with only the
// required members.
var createPool = obj{
	"tenantId":    "acme",
	"clusterId":   clusterID,
	"name":        "gpu-l4",
	"machineType": "g2-standard-8",
	"nodeCount":   2,
}

func TestDecodeCreateNodePoolFields(t *testing.T) {
	tests := []struct {
		name string
		set  obj
		want []string // broken paths; none when valid
	}{
		{"minimal", nil, nil},
		{"everything", obj{
			"autoscaling": obj{"minNodes": 1, "maxNodes": 4}, "diskGiB": 200, "diskType": "pd-balanced",
			"spot": true, "accelerators": obj{"type": "nvidia-l4", "count": 1}, "zones": []any{"us-central1-a"},
			"labels": obj{"team": "ml"}, "taints": []any{obj{"key": "gpu", "value": "true", "effect": "NoSchedule"}},
			"idempotencyKey": "req-1",
		}, nil},

		{"tenantId 128", obj{"tenantId": rep("a", 128)}, nil},
		{"tenantId 129", obj{"tenantId": rep("a", 129)}, sorted("tenantId")},
		{"tenantId punctuation", obj{"tenantId": "a.b_c:d-e"}, nil},
		{"tenantId space", obj{"tenantId": "a b"}, sorted("tenantId")},
		{"tenantId empty", obj{"tenantId": ""}, sorted("tenantId")},
		{"tenantId missing", obj{"tenantId": deleteMember}, sorted("tenantId")},

		{"clusterId 26", obj{"clusterId": "kcl_" + rep("0", 26)}, nil},
		{"clusterId 25", obj{"clusterId": "kcl_" + rep("0", 25)}, sorted("clusterId")},
		{"clusterId 52", obj{"clusterId": "kcl_" + rep("z", 52)}, nil},
		{"clusterId 53", obj{"clusterId": "kcl_" + rep("z", 53)}, sorted("clusterId")},
		{"clusterId letter u", obj{"clusterId": "kcl_" + rep("u", 26)}, sorted("clusterId")},
		{"clusterId uppercase", obj{"clusterId": "kcl_" + rep("A", 26)}, sorted("clusterId")},
		{"clusterId node pool prefix", obj{"clusterId": nodePoolID}, sorted("clusterId")},

		{"name 1", obj{"name": "a"}, nil},
		{"name 40", obj{"name": "a" + rep("b", 39)}, nil},
		{"name 41", obj{"name": "a" + rep("b", 40)}, sorted("name")},
		{"name dash inside", obj{"name": "a-1"}, nil},
		{"name trailing dash", obj{"name": "a-"}, sorted("name")},
		{"name leading digit", obj{"name": "1a"}, sorted("name")},
		{"name uppercase", obj{"name": "Gpu"}, sorted("name")},
		{"name empty", obj{"name": ""}, sorted("name")},

		{"machineType 63", obj{"machineType": "e" + rep("2", 62)}, nil},
		{"machineType 64", obj{"machineType": "e" + rep("2", 63)}, sorted("machineType")},
		{"machineType dots", obj{"machineType": "n1.standard-4"}, nil},
		{"machineType leading dash", obj{"machineType": "-e2"}, sorted("machineType")},
		{"machineType uppercase", obj{"machineType": "E2-standard-4"}, sorted("machineType")},

		{"nodeCount -1", obj{"nodeCount": -1}, sorted("nodeCount")},
		{"nodeCount 0", obj{"nodeCount": 0}, nil},
		{"nodeCount 1000", obj{"nodeCount": 1000}, nil},
		{"nodeCount 1001", obj{"nodeCount": 1001}, sorted("nodeCount")},
		{"nodeCount huge", obj{"nodeCount": raw("123456789012345678901234567890")}, sorted("nodeCount")},
		{"nodeCount huge negative", obj{"nodeCount": raw("-123456789012345678901234567890")}, sorted("nodeCount")},
		{"nodeCount minus zero", obj{"nodeCount": raw("-0")}, nil},

		{"autoscaling minNodes -1", obj{"nodeCount": 0, "autoscaling": obj{"minNodes": -1, "maxNodes": 1}}, sorted("autoscaling.minNodes")},
		{"autoscaling minNodes 0", obj{"nodeCount": 0, "autoscaling": obj{"minNodes": 0, "maxNodes": 1}}, nil},
		{"autoscaling minNodes 1000", obj{"nodeCount": 1000, "autoscaling": obj{"minNodes": 1000, "maxNodes": 1000}}, nil},
		{"autoscaling minNodes 1001", obj{"nodeCount": 1000, "autoscaling": obj{"minNodes": 1001, "maxNodes": 1000}}, sorted("autoscaling.minNodes")},
		{"autoscaling maxNodes 0", obj{"nodeCount": 0, "autoscaling": obj{"minNodes": 0, "maxNodes": 0}}, sorted("autoscaling.maxNodes")},
		{"autoscaling maxNodes 1", obj{"nodeCount": 1, "autoscaling": obj{"minNodes": 0, "maxNodes": 1}}, nil},
		{"autoscaling maxNodes 1001", obj{"nodeCount": 1, "autoscaling": obj{"minNodes": 0, "maxNodes": 1001}}, sorted("autoscaling.maxNodes")},
		{"autoscaling min above max", obj{"nodeCount": 3, "autoscaling": obj{"minNodes": 4, "maxNodes": 3}}, sorted("autoscaling.minNodes")},
		{"autoscaling min equals max", obj{"nodeCount": 3, "autoscaling": obj{"minNodes": 3, "maxNodes": 3}}, nil},
		{"nodeCount below minNodes", obj{"nodeCount": 0, "autoscaling": obj{"minNodes": 1, "maxNodes": 3}}, sorted("nodeCount")},
		{"nodeCount above maxNodes", obj{"nodeCount": 4, "autoscaling": obj{"minNodes": 1, "maxNodes": 3}}, sorted("nodeCount")},
		{"autoscaling both bad, no cross check", obj{"nodeCount": 4, "autoscaling": obj{"minNodes": -1, "maxNodes": 0}}, sorted("autoscaling.minNodes", "autoscaling.maxNodes")},
		{"autoscaling missing members", obj{"autoscaling": obj{}}, sorted("autoscaling.minNodes", "autoscaling.maxNodes")},
		{"autoscaling unknown member", obj{"autoscaling": obj{"minNodes": 1, "maxNodes": 3, "target": 2}}, sorted("autoscaling.target")},
		{"autoscaling null", obj{"autoscaling": nil}, sorted("autoscaling")},
		{"autoscaling not an object", obj{"autoscaling": "on"}, sorted("autoscaling")},

		{"diskGiB 9", obj{"diskGiB": 9}, sorted("diskGiB")},
		{"diskGiB 10", obj{"diskGiB": 10}, nil},
		{"diskGiB 65536", obj{"diskGiB": 65536}, nil},
		{"diskGiB 65537", obj{"diskGiB": 65537}, sorted("diskGiB")},
		{"diskGiB 0", obj{"diskGiB": 0}, sorted("diskGiB")},

		{"diskType 2", obj{"diskType": "pd"}, nil},
		{"diskType 1", obj{"diskType": "p"}, sorted("diskType")},
		{"diskType 41", obj{"diskType": "p" + rep("d", 40)}, nil},
		{"diskType 42", obj{"diskType": "p" + rep("d", 41)}, sorted("diskType")},
		{"diskType leading digit", obj{"diskType": "1pd"}, sorted("diskType")},
		{"diskType empty", obj{"diskType": ""}, sorted("diskType")},

		{"spot false", obj{"spot": false}, nil},
		{"spot string", obj{"spot": "true"}, sorted("spot")},
		{"spot number", obj{"spot": 1}, sorted("spot")},
		{"spot null", obj{"spot": nil}, sorted("spot")},

		{"accelerators count 0", obj{"accelerators": obj{"type": "nvidia-l4", "count": 0}}, sorted("accelerators.count")},
		{"accelerators count 1", obj{"accelerators": obj{"type": "nvidia-l4", "count": 1}}, nil},
		{"accelerators count 16", obj{"accelerators": obj{"type": "nvidia-l4", "count": 16}}, nil},
		{"accelerators count 17", obj{"accelerators": obj{"type": "nvidia-l4", "count": 17}}, sorted("accelerators.count")},
		{"accelerators type 63", obj{"accelerators": obj{"type": rep("a", 63), "count": 1}}, nil},
		{"accelerators type 64", obj{"accelerators": obj{"type": rep("a", 64), "count": 1}}, sorted("accelerators.type")},
		{"accelerators type leading dash", obj{"accelerators": obj{"type": "-l4", "count": 1}}, sorted("accelerators.type")},
		{"accelerators missing members", obj{"accelerators": obj{}}, sorted("accelerators.type", "accelerators.count")},
		{"accelerators unknown member", obj{"accelerators": obj{"type": "nvidia-l4", "count": 1, "kind": "gpu"}}, sorted("accelerators.kind")},

		{"zones 10", obj{"zones": list(10, func(i int) string { return "us-central1-" + string(rune('a'+i)) })}, nil},
		{"zones 11", obj{"zones": list(11, func(i int) string { return "us-central1-" + string(rune('a'+i)) })}, sorted("zones")},
		{"zones empty", obj{"zones": []any{}}, nil},
		{"zone repeated", obj{"zones": []any{"us-central1-a", "us-central1-b", "us-central1-a"}}, sorted("zones[2]")},
		{"zone of another provider", obj{"zones": []any{"fra-1"}}, nil},
		{"zone uppercase", obj{"zones": []any{"us-central1-a", "US-CENTRAL1-A"}}, sorted("zones[1]")},
		{"zone trailing dash", obj{"zones": []any{"us-"}}, sorted("zones[0]")},
		{"zone not a string", obj{"zones": []any{"us-central1-a", 3}}, sorted("zones[1]")},
		{"zones not an array", obj{"zones": "us-central1-a"}, sorted("zones")},

		{"labels 32", obj{"labels": labelsN(32)}, nil},
		{"labels 33", obj{"labels": labelsN(33)}, sorted("labels")},
		{"label key with prefix", obj{"labels": obj{"example.com/team": "ml"}}, nil},
		{"label key leading dash", obj{"labels": obj{"-bad": "x"}}, sorted(`labels["-bad"]`)},
		{"label key empty", obj{"labels": obj{"": "x"}}, sorted(`labels[""]`)},
		{"label key 63", obj{"labels": obj{rep("k", 63): "x"}}, nil},
		{"label key 64", obj{"labels": obj{rep("k", 64): "x"}}, sorted(`labels["` + rep("k", 64) + `"]`)},
		{"label key two slashes", obj{"labels": obj{"a/b/c": "x"}}, sorted(`labels["a/b/c"]`)},
		{"label key reserved", obj{"labels": obj{"kubernetes.io/role": "x"}}, sorted(`labels["kubernetes.io/role"]`)},
		{"label key reserved subdomain", obj{"labels": obj{"node.k8s.io/x": "x"}}, sorted(`labels["node.k8s.io/x"]`)},
		{"label key look-alike domain", obj{"labels": obj{"notkubernetes.io/x": "x"}}, nil},
		{"label key node-role", obj{"labels": obj{"node-role.kubernetes.io/x": "x"}}, sorted(`labels["node-role.kubernetes.io/x"]`)},
		{"label key k8s.io subdomain", obj{"labels": obj{"foo.k8s.io/y": "y"}}, sorted(`labels["foo.k8s.io/y"]`)},
		{"label key GKE node pool", obj{"labels": obj{"cloud.google.com/gke-nodepool": "bc-pool-gpu-l4"}}, sorted(`labels["cloud.google.com/gke-nodepool"]`)},
		{"label key GKE compute class", obj{"labels": obj{"cloud.google.com/compute-class": "x"}}, sorted(`labels["cloud.google.com/compute-class"]`)},
		{"label key GKE subdomain", obj{"labels": obj{"node.cloud.google.com/x": "x"}}, sorted(`labels["node.cloud.google.com/x"]`)},
		{"label key GKE look-alike domain", obj{"labels": obj{"notcloud.google.com/x": "x", "google.com/x": "x", "cloud.google.com": "x"}}, nil},
		{"label keys reserved, all named", obj{"labels": obj{"cloud.google.com/gke-spot": "true", "kubernetes.io/arch": "amd64", "team": "ml"}},
			sorted(`labels["cloud.google.com/gke-spot"]`, `labels["kubernetes.io/arch"]`)},
		{"label value empty", obj{"labels": obj{"team": ""}}, nil},
		{"label value 63", obj{"labels": obj{"team": rep("v", 63)}}, nil},
		{"label value 64", obj{"labels": obj{"team": rep("v", 64)}}, sorted(`labels["team"]`)},
		{"label value space", obj{"labels": obj{"team": "m l"}}, sorted(`labels["team"]`)},
		{"label value number", obj{"labels": obj{"team": 1}}, sorted(`labels["team"]`)},
		{"labels array", obj{"labels": []any{"team"}}, sorted("labels")},

		{"taints 32", obj{"taints": taintsN(32)}, nil},
		{"taints 33", obj{"taints": taintsN(33)}, sorted("taints")},
		{"taint PreferNoSchedule", obj{"taints": []any{obj{"key": "a", "effect": "PreferNoSchedule"}}}, nil},
		{"taint NoExecute", obj{"taints": []any{obj{"key": "a", "effect": "NoExecute"}}}, nil},
		{"taint effect lowercase", obj{"taints": []any{obj{"key": "a", "effect": "noschedule"}}}, sorted("taints[0].effect")},
		{"taint effect missing", obj{"taints": []any{obj{"key": "a"}}}, sorted("taints[0].effect")},
		{"taint key missing", obj{"taints": []any{obj{"effect": "NoSchedule"}}}, sorted("taints[0].key")},
		{"taint key with prefix", obj{"taints": []any{obj{"key": "nvidia.com/gpu", "effect": "NoSchedule"}}}, nil},
		{"taint key leading dash", obj{"taints": []any{obj{"key": "-a", "effect": "NoSchedule"}}}, sorted("taints[0].key")},
		{"taint value 63", obj{"taints": []any{obj{"key": "a", "value": rep("v", 63), "effect": "NoSchedule"}}}, nil},
		{"taint value 64", obj{"taints": []any{obj{"key": "a", "value": rep("v", 64), "effect": "NoSchedule"}}}, sorted("taints[0].value")},
		{"taint value empty", obj{"taints": []any{obj{"key": "a", "value": "", "effect": "NoSchedule"}}}, nil},
		{"taint repeated key and effect", obj{"taints": []any{
			obj{"key": "a", "effect": "NoSchedule"}, obj{"key": "a", "effect": "NoExecute"}, obj{"key": "a", "value": "x", "effect": "NoSchedule"},
		}}, sorted("taints[2]")},
		{"taint unknown member", obj{"taints": []any{obj{"key": "a", "effect": "NoSchedule", "operator": "Equal"}}}, sorted("taints[0].operator")},
		{"taint not an object", obj{"taints": []any{obj{"key": "a", "effect": "NoSchedule"}, "a=b:NoSchedule"}}, sorted("taints[1]")},

		{"idempotencyKey 128", obj{"idempotencyKey": rep("k", 128)}, nil},
		{"idempotencyKey 129", obj{"idempotencyKey": rep("k", 129)}, sorted("idempotencyKey")},
		{"idempotencyKey empty", obj{"idempotencyKey": ""}, sorted("idempotencyKey")},
		{"idempotencyKey slash", obj{"idempotencyKey": "a/b"}, sorted("idempotencyKey")},

		{"nodeCount fraction", obj{"nodeCount": raw("1.5")}, sorted("nodeCount")},
		{"nodeCount integral fraction", obj{"nodeCount": raw("1.0")}, sorted("nodeCount")},
		{"nodeCount exponent", obj{"nodeCount": raw("1e2")}, sorted("nodeCount")},
		{"nodeCount string", obj{"nodeCount": "3"}, sorted("nodeCount")},
		{"nodeCount null", obj{"nodeCount": nil}, sorted("nodeCount")},
		{"nodeCount bool", obj{"nodeCount": true}, sorted("nodeCount")},
		{"name number", obj{"name": 5}, sorted("name")},
		{"name null", obj{"name": nil}, sorted("name")},
		{"unknown member", obj{"nodepoolName": "x"}, sorted("nodepoolName")},
		{"unknown member with odd name", obj{"a.b": 1}, sorted(`["a.b"]`)},
		{"state is not input", obj{"state": "ready"}, sorted("state")},
		{"everything missing", obj{"tenantId": deleteMember, "clusterId": deleteMember, "name": deleteMember, "machineType": deleteMember, "nodeCount": deleteMember},
			sorted("tenantId", "clusterId", "name", "machineType", "nodeCount")},
		{"many broken at once", obj{
			"tenantId": "", "name": "Bad", "nodeCount": 5, "autoscaling": obj{"minNodes": 1, "maxNodes": 3},
			"diskGiB": 9, "zones": []any{"us-central1-a", 7}, "labels": obj{"team": "ml", "-x": "y"},
			"taints": []any{obj{"key": "a", "effect": "NoSchedule"}, obj{"key": "b", "effect": "Never"}, obj{"key": "c", "effect": "NoExecute"}, obj{"key": "d"}},
			"extra":  true,
		}, sorted("tenantId", "name", "nodeCount", "diskGiB", "zones[1]", `labels["-x"]`, "taints[1].effect", "taints[3].effect", "extra")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := marshal(t, with(createPool, tt.set))
			c, err := DecodeCreateNodePool(body)
			if got := paths(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("DecodeCreateNodePool(%s) broken fields = %q, want %q (err %v)", body, got, tt.want, err)
			}
			if (c == nil) == (tt.want == nil) {
				t.Errorf("DecodeCreateNodePool(%s) = %v, %v: want a request exactly when valid", body, c, err)
			}
		})
	}
}

func TestDecodeCreateNodePoolValues(t *testing.T) {
	body := marshal(t, with(createPool, obj{
		"autoscaling": obj{"minNodes": 1, "maxNodes": 4}, "diskGiB": 200, "diskType": "pd-balanced",
		"spot": true, "accelerators": obj{"type": "nvidia-l4", "count": 1}, "zones": []any{"us-central1-b", "us-central1-a"},
		"labels": obj{"team": "ml"}, "taints": []any{obj{"key": "gpu", "value": "true", "effect": "NoSchedule"}, obj{"key": "x", "effect": "NoExecute"}},
		"idempotencyKey": "req-1",
	}))
	got, err := DecodeCreateNodePool(body)
	if err != nil {
		t.Fatalf("DecodeCreateNodePool(%s): %v", body, err)
	}
	want := model.NodePoolSpec{
		Name: "gpu-l4", MachineType: "g2-standard-8", NodeCount: 2,
		Autoscaling: &resource.Autoscaling{MinNodes: 1, MaxNodes: 4}, DiskGiB: 200, DiskType: "pd-balanced", Spot: true,
		Accelerators: &resource.Accelerators{Type: "nvidia-l4", Count: 1}, Zones: []string{"us-central1-b", "us-central1-a"},
		Labels: map[string]string{"team": "ml"},
		Taints: []resource.Taint{{Key: "gpu", Value: "true", Effect: "NoSchedule"}, {Key: "x", Effect: "NoExecute"}},
	}
	if got.TenantID != "acme" || got.ClusterID != clusterID || got.IdempotencyKey != "req-1" || !reflect.DeepEqual(got.Spec, want) {
		t.Errorf("DecodeCreateNodePool(%s) = %+v, want tenant acme, cluster %s, key req-1 and spec %+v", body, got, clusterID, want)
	}
}

func TestDecodeReasons(t *testing.T) {
	tests := []struct {
		set        obj
		path, want string
	}{
		{obj{"nodeCount": 1001}, "nodeCount", "must be between 0 and 1000"},
		{obj{"nodeCount": raw("1.5")}, "nodeCount", "must be an integer, without a fraction or an exponent"},
		{obj{"nodeCount": "3"}, "nodeCount", "must be an integer, not a string"},
		{obj{"nodeCount": nil}, "nodeCount", "must be an integer, not null"},
		{obj{"nodeCount": deleteMember}, "nodeCount", "is required"},
		{obj{"extra": 1}, "extra", "unknown field"},
		{obj{"zones": list(11, func(i int) string { return "z" + strconv.Itoa(i) })}, "zones", "must have at most 10 items"},
		{obj{"labels": labelsN(33)}, "labels", "must have at most 32 labels"},
		{obj{"taints": []any{obj{"key": "a", "effect": "x"}}}, "taints[0].effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute"},
		{obj{"diskType": ""}, "diskType", "must not be empty: omit the field instead"},
		{obj{"labels": obj{"cloud.google.com/gke-nodepool": "x"}}, `labels["cloud.google.com/gke-nodepool"]`,
			`key prefix cloud.google.com is managed by GKE: labels under cloud.google.com/ (and its subdomains) cannot be set (GKE: "Node labels with key "cloud.google.com/gke-nodepool" are managed by GKE or Kubernetes and must not be manually specified.")`},
		{obj{"labels": obj{"node-role.kubernetes.io/x": "x"}}, `labels["node-role.kubernetes.io/x"]`,
			`key prefix node-role.kubernetes.io is managed by Kubernetes: labels under kubernetes.io/ and k8s.io/ (and their subdomains) cannot be set (GKE: "Applying kubernetes label is not allowed: node-role.kubernetes.io/x.")`},
	}
	for _, tt := range tests {
		body := marshal(t, with(createPool, tt.set))
		_, err := DecodeCreateNodePool(body)
		if got := reasonOf(err, tt.path); got != tt.want {
			t.Errorf("DecodeCreateNodePool(%s) reason for %s = %q, want %q", body, tt.path, got, tt.want)
		}
	}
}

// TestDecodeBody covers bodies that are not one JSON object: they are
// INVALID_INPUT with a message and no field.
func TestDecodeBody(t *testing.T) {
	valid := string(marshal(t, createPool))
	// Closed, so only the depth bound can refuse it as a whole.
	deep := rep("[", 40) + rep("]", 40) + "}"
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"blank", " \n\t"},
		{"null", "null"},
		{"array", "[]"},
		{"string", `"x"`},
		{"number", "1"},
		{"malformed", `{"tenantId": "acme",}`},
		{"unterminated", `{"tenantId": "acme"`},
		{"single quotes", `{'tenantId': 'acme'}`},
		{"trailing object", valid + "{}"},
		{"trailing garbage", valid + " x"},
		{"two objects", valid + valid},
		{"too deep", `{"labels":` + deep},
		{"too large", `{"name":"` + rep("a", MaxBodyBytes) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeCreateNodePool([]byte(tt.body))
			var e *errs.Error
			if c != nil || !errors.As(err, &e) || e.Kind != errs.Invalid || e.Message == "" || len(e.Fields) != 0 {
				t.Fatalf("DecodeCreateNodePool(%.60q) = %v, %v; want INVALID_INPUT with a message and no fields", tt.body, c, err)
			}
		})
	}
	if _, err := DecodeCreateNodePool([]byte(" \n" + valid + "\n ")); err != nil {
		t.Errorf("DecodeCreateNodePool(valid body with surrounding space) = %v, want nil", err)
	}
}

func TestDecodeDuplicateMember(t *testing.T) {
	body := []byte(`{"tenantId":"acme","clusterId":"` + clusterID + `","name":"a","name":"b","machineType":"e2","nodeCount":1,` +
		`"labels":{"team":"x","team":"y"}}`)
	_, err := DecodeCreateNodePool(body)
	if got, want := paths(t, err), sorted("name", `labels["team"]`); !slices.Equal(got, want) {
		t.Fatalf("DecodeCreateNodePool(%s) broken fields = %q, want %q", body, got, want)
	}
}

func TestTooLargeIsTellable(t *testing.T) {
	_, err := DecodeCreateNodePool(bytes.Repeat([]byte(" "), MaxBodyBytes+1))
	if !errs.Is(err, errs.Invalid) || !errors.Is(err, errBodyTooLarge) {
		t.Fatalf("DecodeCreateNodePool(1 MiB + 1) = %v, want INVALID_INPUT wrapping errBodyTooLarge", err)
	}
}

func TestCanonical(t *testing.T) {
	decode := func(set obj) *CreateNodePool {
		t.Helper()
		body := marshal(t, with(createPool, set))
		c, err := DecodeCreateNodePool(body)
		if err != nil {
			t.Fatalf("DecodeCreateNodePool(%s): %v", body, err)
		}
		return c
	}
	base := decode(nil)
	tests := []struct {
		name  string
		set   obj
		equal bool
	}{
		{"same", nil, true},
		{"spot false given", obj{"spot": false}, true},
		{"empty collections given", obj{"zones": []any{}, "labels": obj{}, "taints": []any{}}, true},
		{"idempotency key differs", obj{"idempotencyKey": "other"}, true},
		{"spot true", obj{"spot": true}, false},
		{"nodeCount", obj{"nodeCount": 3}, false},
		{"diskGiB", obj{"diskGiB": 100}, false},
		{"label", obj{"labels": obj{"a": "b"}}, false},
		{"zone", obj{"zones": []any{"us-central1-a"}}, false},
		{"cluster", obj{"clusterId": "kcl_" + rep("1", 26)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bytes.Equal(decode(tt.set).Canonical(), base.Canonical())
			if got != tt.equal {
				t.Errorf("Canonical equal = %v, want %v:\n%s\n%s", got, tt.equal, decode(tt.set).Canonical(), base.Canonical())
			}
		})
	}
	a := decode(obj{"labels": obj{"a": "1", "b": "2", "c": "3"}})
	for range 20 {
		if b := decode(obj{"labels": obj{"c": "3", "a": "1", "b": "2"}}); !bytes.Equal(a.Canonical(), b.Canonical()) {
			t.Fatalf("Canonical depends on label order:\n%s\n%s", a.Canonical(), b.Canonical())
		}
	}
	// The canonical form is itself a valid body for the same request.
	full := decode(obj{"autoscaling": obj{"minNodes": 1, "maxNodes": 4}, "diskGiB": 20, "taints": []any{obj{"key": "a", "effect": "NoSchedule"}}})
	again, err := DecodeCreateNodePool(full.Canonical())
	if err != nil || !bytes.Equal(again.Canonical(), full.Canonical()) {
		t.Errorf("DecodeCreateNodePool(%s) = %v, %v; want the same request", full.Canonical(), again, err)
	}
}

func TestCreateNodePoolSpec(t *testing.T) {
	body := marshal(t, with(createPool, obj{
		"autoscaling": obj{"minNodes": 1, "maxNodes": 4}, "diskGiB": 200, "diskType": "pd-balanced",
		"accelerators": obj{"type": "nvidia-l4", "count": 1}, "zones": []any{"us-central1-a"},
		"labels": obj{"team": "ml"}, "taints": []any{obj{"key": "gpu", "value": "true", "effect": "NoSchedule"}},
	}))
	c, err := DecodeCreateNodePool(body)
	if err != nil {
		t.Fatalf("DecodeCreateNodePool(%s): %v", body, err)
	}
	got := c.Spec
	got.Zones[0] = "changed"
	got.Labels["team"] = "changed"
	got.Autoscaling.MinNodes = 0
	if c.body.Zones[0] != "us-central1-a" || c.body.Labels["team"] != "ml" || c.body.Autoscaling.MinNodes != 1 {
		t.Errorf("Spec shares memory with the body: %+v", c.body)
	}

	minimal, err := DecodeCreateNodePool(marshal(t, createPool))
	if err != nil {
		t.Fatalf("DecodeCreateNodePool(minimal): %v", err)
	}
	p := minimal.Spec
	if p.Zones == nil || p.Labels == nil || p.Taints == nil || p.Autoscaling != nil || p.Accelerators != nil || p.DiskGiB != 0 {
		t.Errorf("Spec of a minimal request = %+v, want empty collections and no optional parts", p)
	}
}
