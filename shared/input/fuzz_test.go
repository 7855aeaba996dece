package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// checkRejection fails unless err is an INVALID_INPUT *errs.Error that says
// what is wrong, in a field or in its message.
func checkRejection(t *testing.T, body []byte, err error) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("Decode(%q) = %v (%T), want an INVALID_INPUT *errs.Error", body, err, err)
	}
	if len(e.Fields) == 0 && e.Message == "" {
		t.Fatalf("Decode(%q) = %v: neither a field nor a message", body, err)
	}
	if len(e.Fields) > MaxFieldErrors {
		t.Fatalf("Decode(%q) lists %d fields, more than %d", body, len(e.Fields), MaxFieldErrors)
	}
	for _, f := range e.Fields {
		if f.Field == "" || f.Reason == "" {
			t.Fatalf("Decode(%q) field error %+v lacks a path or a reason", body, f)
		}
	}
}

func seed(f *testing.F, bodies ...obj) {
	for _, b := range bodies {
		f.Add(marshalF(f, b))
	}
	for _, s := range []string{"", "{}", "null", "[]", `{"a":1,"a":2}`, `{"nodeCount":1e2}`, `{"labels":{"x":1}}`, "{} {}"} {
		f.Add([]byte(s))
	}
}

func marshalF(f *testing.F, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		f.Fatalf("json.Marshal(%v): %v", v, err)
	}
	return b
}

func FuzzDecodeCreateNodePool(f *testing.F) {
	seed(f, createPool, with(createPool, obj{
		"autoscaling": obj{"minNodes": 1, "maxNodes": 4}, "diskGiB": 200, "diskType": "pd-balanced",
		"spot": true, "accelerators": obj{"type": "nvidia-l4", "count": 1}, "zones": []any{"us-central1-a"},
		"labels": obj{"example.com/team": "ml"}, "taints": []any{obj{"key": "gpu", "value": "true", "effect": "NoSchedule"}},
		"idempotencyKey": "req-1",
	}), with(createPool, obj{"taints": []any{obj{"key": "-", "effect": "x"}, 3}, "nodeCount": raw("1.5")}))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := DecodeCreateNodePool(body)
		if err != nil {
			checkRejection(t, body, err)
			return
		}
		again, err := DecodeCreateNodePool(c.Canonical())
		if err != nil || !bytes.Equal(again.Canonical(), c.Canonical()) {
			t.Fatalf("DecodeCreateNodePool(Canonical %s) = %v, %v; want the same request", c.Canonical(), again, err)
		}
		if c.Spec.Name == "" || c.Spec.Zones == nil || c.Spec.Labels == nil || c.Spec.Taints == nil {
			t.Fatalf("DecodeCreateNodePool(%q).Spec = %+v, want a name and empty collections rather than nil", body, c.Spec)
		}
	})
}

func FuzzDecodeUpdateNodePool(f *testing.F) {
	seed(f, with(updatePool, obj{"nodeCount": 3}), with(updatePool, obj{"autoscaling": nil}),
		with(updatePool, obj{"autoscaling": obj{"minNodes": 1, "maxNodes": 2}, "nodeCount": 2}),
		with(updatePool, obj{"zones": []any{}}))
	stored := model.NodePoolSpec{NodeCount: 3, Autoscaling: &resource.Autoscaling{MinNodes: 2, MaxNodes: 4}}
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := DecodeUpdateNodePool(body)
		if err != nil {
			checkRejection(t, body, err)
			return
		}
		if u.NodeCount == nil && !u.SetAutoscaling {
			t.Fatalf("DecodeUpdateNodePool(%q) = %+v: nothing to change", body, u)
		}
		p, err := u.Apply(stored)
		if err != nil {
			checkRejection(t, body, err)
			return
		}
		if a := p.Autoscaling; a != nil && (p.NodeCount < a.MinNodes || p.NodeCount > a.MaxNodes) {
			t.Fatalf("Apply(%q) = %+v: nodeCount outside the bounds", body, p)
		}
	})
}

func FuzzDecodeCreateCluster(f *testing.F) {
	seed(f, createCluster, with(createCluster, obj{"mode": "autopilot", "nodePools": deleteMember, "labels": obj{"a": "b"}}),
		with(createCluster, obj{"nodePools": []any{clusterPool, with(clusterPool, obj{"zones": []any{"us-central1-a"}})}}))
	regions := map[string][]string{"us-central1": {"us-central1-a"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := DecodeCreateCluster(body)
		if err != nil {
			checkRejection(t, body, err)
			return
		}
		again, err := DecodeCreateCluster(c.Canonical())
		if err != nil || !bytes.Equal(again.Canonical(), c.Canonical()) {
			t.Fatalf("DecodeCreateCluster(Canonical %s) = %v, %v; want the same request", c.Canonical(), again, err)
		}
		if _, err := lifecycle.ClusterZones(regions, &c.Spec, c.NodePools); err != nil {
			checkRejection(t, body, err)
		}
		if (c.Spec.Mode == resource.ModeStandard) != (len(c.NodePools) > 0) {
			t.Fatalf("DecodeCreateCluster(%q) = mode %s with %d node pools", body, c.Spec.Mode, len(c.NodePools))
		}
	})
}

func FuzzDecodeListClusters(f *testing.F) {
	seed(f, obj{"tenantId": "acme"}, obj{"tenantId": "acme", "poolId": "pool-dev", "pageSize": 10, "pageToken": "x"},
		obj{"tenantId": ".."}, obj{"tenantId": "__x__", "poolId": "."})
	f.Fuzz(func(t *testing.T, body []byte) {
		l, err := DecodeListClusters(body)
		if err != nil {
			checkRejection(t, body, err)
			return
		}
		if l.PageSize < 1 || l.PageSize > MaxPageSize {
			t.Fatalf("DecodeListClusters(%q) = page size %d", body, l.PageSize)
		}
	})
}

func FuzzDecodeRefs(f *testing.F) {
	seed(f, updatePool, obj{"tenantId": "acme", "clusterId": clusterID})
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := DecodeClusterRef(body); err != nil {
			checkRejection(t, body, err)
		}
		if _, err := DecodeNodePoolRef(body); err != nil {
			checkRejection(t, body, err)
		}
	})
}

// FuzzDecodePoolUpdated: any data is either a pool event whose every
// flavor passes the node pool rules, or an INVALID_INPUT that says why,
// never a panic; the identity read is kept either way.
func FuzzDecodePoolUpdated(f *testing.F) {
	f.Add([]byte(goodPool))
	seed(f, obj{"id": "p", "tenantId": "acme", "version": 2, "policy": obj{"substrate": obj{"kind": "kubernetes", "account": "a",
		"cluster": obj{"adopt": obj{"clusterId": "kcl_01h2xcejqtf2nbrexx3vqjhp41"}}}},
		"flavors": []any{obj{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}}})
	// IDs the patterns accept that Firestore cannot take as they are, and
	// flavor names that break the node pool rule too.
	for _, id := range []string{".", "..", "__x__", "__t__"} {
		f.Add(marshalF(f, obj{"id": id, "tenantId": id, "version": 1, "policy": obj{"substrate": obj{"kind": "kubernetes", "account": id,
			"cluster": obj{"create": obj{"region": "us-central1"}}}},
			"flavors": []any{obj{"name": "gpu-ñ", "machineType": "e2-standard-4", "nodeCount": 1}}}))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodePoolUpdated(body)
		if p == nil {
			t.Fatalf("DecodePoolUpdated(%q) returned no event", body)
		}
		if err != nil {
			checkRejection(t, body, err)
			var e *errs.Error
			errors.As(err, &e)
			for _, fe := range e.Fields {
				if strings.HasPrefix(fe.Field, "flavors[") && strings.HasSuffix(fe.Field, "].name") && fe.Reason == patterns["name"].reason {
					t.Fatalf("DecodePoolUpdated(%q): %s told the node pool rule, not the flavor rule", body, fe.Field)
				}
			}
			return
		}
		if p.ID == "" || p.TenantID == "" || p.Version < 1 {
			t.Fatalf("DecodePoolUpdated(%q) accepted %+v without its identity", body, p)
		}
		if p.Substrate == nil {
			return
		}
		if (p.Substrate.Create == nil) == (p.Substrate.Adopt == nil) {
			t.Fatalf("DecodePoolUpdated(%q) accepted a policy with create %v and adopt %v", body, p.Substrate.Create, p.Substrate.Adopt)
		}
		if len(p.Flavors) < 1 || len(p.Flavors) > MaxFlavors {
			t.Fatalf("DecodePoolUpdated(%q) accepted %d flavors", body, len(p.Flavors))
		}
		seen := map[string]bool{}
		for _, fl := range p.Flavors {
			if !flavorName.MatchString(fl.Name) || seen[fl.Name] {
				t.Fatalf("DecodePoolUpdated(%q) accepted flavor name %q", body, fl.Name)
			}
			seen[fl.Name] = true
		}
	})
}

func FuzzDecodeJoin(f *testing.F) {
	seed(f, obj{"nodeName": "gke-c-pool-1234abcd-x1y2", "providerId": "gce://p/us-central1-a/gke-c-pool-1234abcd-x1y2"})
	f.Fuzz(func(t *testing.T, body []byte) {
		j, err := DecodeJoin(body)
		if err != nil {
			checkRejection(t, body, err)
			return
		}
		if j.NodeName == "" || len(j.NodeName) > 253 || j.ProviderID == "" {
			t.Fatalf("DecodeJoin(%q) accepted %+v", body, j)
		}
	})
}
