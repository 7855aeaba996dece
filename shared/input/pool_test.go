package input

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

const goodPool = `{"id": "pool-gpu", "tenantId": "acme", "version": 7, "name": "ignored",
 "policy": {"scheduling": "ignored", "substrate": {"kind": "kubernetes", "account": "acc-gcp",
   "cluster": {"create": {"region": "us-central1", "zones": ["us-central1-a"], "releaseChannel": "regular"}}}},
 "flavors": [{"name": "l4", "machineType": "g2-standard-8", "nodeCount": 1,
              "autoscaling": {"minNodes": 0, "maxNodes": 8}, "spot": true,
              "accelerators": {"type": "nvidia-l4", "count": 1}}]}`

func TestDecodePoolUpdated(t *testing.T) {
	p, err := DecodePoolUpdated([]byte(goodPool))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "pool-gpu" || p.TenantID != "acme" || p.Version != 7 || p.Substrate == nil ||
		p.Substrate.Account != "acc-gcp" || p.Substrate.Create == nil || p.Substrate.Create.Region != "us-central1" ||
		len(p.Flavors) != 1 || p.Flavors[0].Name != "l4" || p.Flavors[0].NodePool.Name != "l4" || p.Flavors[0].NodePool.Accelerators.Type != "nvidia-l4" {
		t.Fatalf("decoded %+v", p)
	}

	for _, tc := range []struct {
		name, data string
		substrate  bool
		fields     []string // broken fields, in any order; nil: valid
	}{
		{"no policy", `{"id": "p", "tenantId": "acme", "version": 1}`, false, nil},
		{"another kind", `{"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "slurm"}}}`, false, nil},
		{"adopt", `{"id": "p", "tenantId": "acme", "version": 2, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {"adopt": {"clusterId": "kcl_01h2xcejqtf2nbrexx3vqjhp41"}}}}, "flavors": [{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}]}`, true, nil},
		{"missing identity", `{"policy": {}}`, false, []string{"id", "tenantId", "version"}},
		{"bad version", `{"id": "p", "tenantId": "acme", "version": 0}`, false, []string{"version"}},
		{"both create and adopt", `{"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {"create": {"region": "us-central1"}, "adopt": {"clusterId": "kcl_01h2xcejqtf2nbrexx3vqjhp41"}}}}, "flavors": [{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}]}`, true,
			[]string{"policy.substrate.cluster.adopt"}},
		{"neither", `{"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {}}}, "flavors": [{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}]}`, true,
			[]string{"policy.substrate.cluster"}},
		{"no flavors", `{"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {"create": {"region": "us-central1"}}}}}`, true, []string{"flavors"}},
		{"bad flavors", `{"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {"create": {"region": "us-central1", "zones": ["x", "x"]}}}},
			"flavors": [{"name": "a-very-long-flavor-name-x", "machineType": "e2-standard-4", "nodeCount": 1},
			            {"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 9, "autoscaling": {"minNodes": 0, "maxNodes": 2}},
			            {"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}]}`, true,
			[]string{"policy.substrate.cluster.create.zones[1]", "flavors[0].name", "flavors[1].nodeCount", "flavors[2].name"}},
		{"flavor labels GKE or Kubernetes manage", `{"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {"create": {"region": "us-central1"}}}},
			"flavors": [{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1, "labels": {"cloud.google.com/gke-nodepool": "x", "team": "ml"}},
			            {"name": "gpu", "machineType": "e2-standard-4", "nodeCount": 1, "labels": {"node-role.kubernetes.io/gpu": ""}}]}`, true,
			[]string{`flavors[0].labels["cloud.google.com/gke-nodepool"]`, `flavors[1].labels["node-role.kubernetes.io/gpu"]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodePoolUpdated([]byte(tc.data))
			if (p.Substrate != nil) != tc.substrate {
				t.Errorf("substrate = %+v, want present %v", p.Substrate, tc.substrate)
			}
			assertFields(t, err, tc.fields)
		})
	}
}

func TestDecodePoolArchived(t *testing.T) {
	p, err := DecodePoolArchived([]byte(`{"id": "pool-gpu", "tenantId": "acme", "version": 8}`))
	if err != nil || p.ID != "pool-gpu" || p.Version != 8 {
		t.Fatalf("got %+v, %v", p, err)
	}
	_, err = DecodePoolArchived([]byte(`{"id": "", "version": "8"}`))
	assertFields(t, err, []string{"id", "tenantId", "version"})
}

func assertFields(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("error %v, want none", err)
		}
		return
	}
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("error %v, want INVALID_INPUT", err)
	}
	got := map[string]bool{}
	for _, f := range e.Fields {
		got[f.Field] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("field %s not reported; got %v", w, e.Fields)
		}
	}
	if len(got) != len(want) {
		var names []string
		for _, f := range e.Fields {
			names = append(names, f.Field+": "+f.Reason)
		}
		t.Errorf("reported %s, want exactly %v", strings.Join(names, "; "), want)
	}
}

// A flavor name that breaks its rule is told the flavor rule (1 to 20
// characters), also when it breaks the wider node pool rule.
func TestFlavorNameReason(t *testing.T) {
	for _, name := range []string{"ñ", "gpu-ñ", "Gpu", "1gpu", "gpu-", "abcdefghijklmnopqrstu", strings.Repeat("a", 41), "gpu_l4", ""} {
		t.Run(name, func(t *testing.T) {
			data := `{"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
				"cluster": {"create": {"region": "us-central1"}}}},
				"flavors": [{"name": ` + strconv.Quote(name) + `, "machineType": "e2-standard-4", "nodeCount": 1}]}`
			_, err := DecodePoolUpdated([]byte(data))
			var e *errs.Error
			if !errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Field != "flavors[0].name" {
				t.Fatalf("DecodePoolUpdated(name %q) = %v, want flavors[0].name broken", name, err)
			}
			if got := e.Fields[0].Reason; got != flavorRule {
				t.Errorf("flavors[0].name %q: reason %q, want %q", name, got, flavorRule)
			}
		})
	}
	if !strings.Contains(flavorRule, "1 to 20 ") {
		t.Errorf("the flavor rule %q does not say 1 to 20", flavorRule)
	}
}
