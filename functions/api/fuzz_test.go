package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/resource"
)

// FuzzCreateNodePool sends arbitrary bodies to kubernetesNodePools.create
// with a valid admin token. The placeholders TENANT, CLUSTER and AUTOPILOT
// in a body are replaced by the fuzz tenant, a standard cluster and an
// autopilot cluster of it, so mutated bodies keep reaching the store.
//
// The answer must follow from the body: a body the input package refuses is
// 400 INVALID_INPUT; a well-formed one is 403 for another tenant, 404 for
// an unknown cluster, 409 INVALID_STATE for the autopilot cluster, and
// otherwise 200, 409 CONFLICT (a taken name, a reused key) or 400 naming
// only zones outside the cluster's region. Never 500. Every pool created is
// marked deleted at once, so the quota is never reached (no 429).
func FuzzCreateNodePool(f *testing.F) {
	tn := newTenant(f)
	std := newCluster(f, tn)
	auto := createCluster(f, obj{"tenantId": tn.ID, "poolId": tn.Pool, "name": "auto", "mode": "autopilot", "region": "us-central1"})
	tok := "Bearer " + token(f, admin)

	seeds := []string{
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2-standard-4","nodeCount":1}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"gpu-l4","machineType":"g2-standard-8","nodeCount":2,` +
			`"autoscaling":{"minNodes":1,"maxNodes":4},"diskGiB":200,"diskType":"pd-balanced","spot":true,` +
			`"accelerators":{"type":"nvidia-l4","count":1},"zones":["us-central1-a"],"labels":{"team":"ml"},` +
			`"taints":[{"key":"gpu","value":"true","effect":"NoSchedule"}],"idempotencyKey":"k1"}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"default","machineType":"e2-standard-4","nodeCount":1}`,
		`{"tenantId":"TENANT","clusterId":"AUTOPILOT","name":"np","machineType":"e2-standard-4","nodeCount":1}`,
		`{"tenantId":"TENANT","clusterId":"kcl_01jd00000000000000000000","name":"np","machineType":"e2-standard-4","nodeCount":1}`,
		`{"tenantId":"globex","clusterId":"CLUSTER","name":"np","machineType":"e2-standard-4","nodeCount":1}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2-standard-4","nodeCount":1,"zones":["europe-west4-a","us-central1-z"]}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2-standard-4","nodeCount":5,"autoscaling":{"minNodes":6,"maxNodes":2}}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"Np_1","machineType":"","nodeCount":1.5,"diskGiB":"10","taints":[{"effect":"x"}],"labels":{"a/b/c":"-"}}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","name":"np2","machineType":"e2","nodeCount":1}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2","nodeCount":99999999999999999999999999}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2","nodeCount":-0,"labels":{"\u00e9":"\ud800"}}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2","nodeCount":1,"accelerators":null,"zones":null}`,
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2","nodeCount":1,"taints":[[[[[[[]]]]]]]}`,
		`{"tenantId":"TENANT"`,
		`[]`,
		`null`,
		``,
		"\xff\xfe",
		`{"tenantId":"TENANT","clusterId":"CLUSTER","name":"np","machineType":"e2","nodeCount":1} {}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		body := bytes.ReplaceAll(raw, []byte("AUTOPILOT"), []byte(auto.ID))
		body = bytes.ReplaceAll(body, []byte("CLUSTER"), []byte(std.ID))
		body = bytes.ReplaceAll(body, []byte("TENANT"), []byte(tn.ID))
		r, err := send(http.MethodPost, "kubernetesNodePools/create", tok, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status >= 500 {
			t.Fatalf("create(%q) = %v, want no server error", body, r)
		}
		in, derr := input.DecodeCreateNodePool(body)
		switch {
		case len(body) > input.MaxBodyBytes:
			wantError(t, r, http.StatusRequestEntityTooLarge, "INVALID_INPUT")
		case derr != nil:
			wantError(t, r, http.StatusBadRequest, "INVALID_INPUT")
		case in.TenantID != tn.ID:
			wantError(t, r, http.StatusForbidden, "PERMISSION_DENIED")
		case in.ClusterID == auto.ID:
			wantError(t, r, http.StatusConflict, "INVALID_STATE")
		case in.ClusterID != std.ID:
			wantError(t, r, http.StatusNotFound, "NOT_FOUND")
		case r.Status == http.StatusOK:
			var p resource.NodePool
			dec := json.NewDecoder(bytes.NewReader(r.Body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				t.Fatalf("create(%q) answered 200 with %s: %v", body, r.Body, err)
			}
			replay := in.IdempotencyKey != "" && p.State == resource.StateDeleted
			if p.Name != in.Spec.Name || p.NodeCount != in.Spec.NodeCount || p.ClusterID != std.ID || (p.State != resource.StatePending && !replay) {
				t.Fatalf("create(%q) = %+v, want a pending pool as asked", body, p)
			}
			if !replay {
				markPoolDeleted(t, tn.ID, std.ID, p)
			}
		case r.Status == http.StatusConflict:
			wantError(t, r, http.StatusConflict, "CONFLICT")
		case r.Status == http.StatusBadRequest:
			wantError(t, r, http.StatusBadRequest, "INVALID_INPUT")
			if len(r.Fields) == 0 {
				t.Fatalf("create(%q) = %v, want the zones outside the region named", body, r)
			}
			for _, field := range r.Fields {
				if !strings.HasPrefix(field, "zones[") {
					t.Fatalf("create(%q) = %v: a well-formed body may only be refused for its zones", body, r)
				}
			}
		default:
			t.Fatalf("create(%q) = %v, want 200, 409 CONFLICT or 400 for zones", body, r)
		}
	})
}
