package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/resource"
)

// planPool is a pool of the tenant asking for a created cluster with one
// flavor.
func planPool(tn tenant, id string) obj {
	return obj{"id": id, "tenantId": tn.ID, "version": 1,
		"policy": obj{"substrate": obj{"kind": "kubernetes", "account": "acc-gcp",
			"cluster": obj{"create": obj{"region": "us-central1", "zones": []string{"us-central1-a", "us-central1-b"}}}}},
		"flavors": []obj{{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 2}}}
}

func planKinds(p resource.SubstratePlan) []string {
	var out []string
	for _, a := range p.Actions {
		out = append(out, a.Action)
	}
	return out
}

// kubernetesSubstrates.plan answers what a new pool's substrate would do,
// and writes nothing.
func TestPlanSubstrate(t *testing.T) {
	tn := newTenant(t)
	id := tn.ID + "-gpu"
	r := call(t, viewer, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": planPool(tn, id)})
	var p resource.SubstratePlan
	r.decode(t, &p)
	if got := planKinds(p); !slices.Equal(got, []string{resource.PlanCreateCluster, resource.PlanApplyObjects}) {
		t.Fatalf("actions %v: %s", got, r.Body)
	}
	s := p.Substrate
	if s == nil || s.ID != "" || s.PoolID != id || s.State != resource.StateReady || s.JoinedNodes != 4 ||
		len(s.NodePools) != 1 || s.NodePools[0].Name != "bc-"+id+"-cpu" {
		t.Errorf("planned substrate %s", r.Body)
	}
	if strings.Contains(string(r.Body), `"id":`) {
		t.Errorf("a substrate that does not exist has an id: %s", r.Body)
	}
	var list struct {
		Substrates []resource.Substrate `json:"substrates"`
	}
	call(t, viewer, "kubernetesSubstrates/list", obj{"tenantId": tn.ID}).decode(t, &list)
	if len(list.Substrates) != 0 {
		t.Errorf("plan recorded substrates: %+v", list.Substrates)
	}

	// No substrate asked for, none there.
	r = call(t, viewer, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": obj{"id": id, "tenantId": tn.ID, "version": 2}})
	p = resource.SubstratePlan{}
	r.decode(t, &p)
	if got := planKinds(p); !slices.Equal(got, []string{resource.PlanNone}) || p.Substrate != nil {
		t.Errorf("plan of a pool asking for nothing = %s", r.Body)
	}

	// A policy that cannot be served: the error the substrate would show.
	bad := planPool(tn, id)
	bad["policy"].(obj)["substrate"].(obj)["account"] = "acc-metal"
	r = call(t, viewer, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": bad})
	p = resource.SubstratePlan{}
	r.decode(t, &p)
	if got := planKinds(p); !slices.Equal(got, []string{resource.PlanNone}) || !strings.Contains(p.Actions[0].Reason, "no managed Kubernetes") ||
		p.Substrate == nil || p.Substrate.State != resource.StateError {
		t.Errorf("plan on an account without managed Kubernetes = %s", r.Body)
	}
}

// A malformed pool is INVALID_INPUT naming every broken field; the
// contract's auth order holds.
func TestPlanSubstrateRefusals(t *testing.T) {
	tn := newTenant(t)
	pool := planPool(tn, tn.ID+"-gpu")
	pool["version"] = 0
	pool["flavors"] = []obj{{"name": "CPU", "machineType": "e2-standard-4", "nodeCount": 2},
		{"name": "mem", "machineType": "e2-standard-4", "nodeCount": 5, "autoscaling": obj{"minNodes": 0, "maxNodes": 2}}}
	r := call(t, viewer, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": pool})
	wantError(t, r, http.StatusBadRequest, "INVALID_INPUT", "pool.version", "pool.flavors[0].name", "pool.flavors[1].nodeCount")

	r = call(t, viewer, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": planPool(tn, "p"), "apply": true})
	wantError(t, r, http.StatusBadRequest, "INVALID_INPUT", "apply")
	other := planPool(tn, "p")
	other["tenantId"] = tn.Other
	r = call(t, viewer, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": other})
	wantError(t, r, http.StatusBadRequest, "INVALID_INPUT", "pool.tenantId")

	r = call(t, "", "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": planPool(tn, "p")})
	wantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
	r = call(t, foreign, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": planPool(tn, "p")})
	wantError(t, r, http.StatusForbidden, "PERMISSION_DENIED")

	// Another tenant's pool ID cannot be used: the plan says so.
	r = call(t, viewer, "kubernetesSubstrates/plan", obj{"tenantId": tn.ID, "pool": planPool(tn, tn.OtherPool)})
	var p resource.SubstratePlan
	r.decode(t, &p)
	if len(p.Actions) != 1 || p.Actions[0].Action != resource.PlanNone || !strings.Contains(p.Actions[0].Reason, "another tenant's pool") {
		t.Errorf("plan of another tenant's pool ID = %s", r.Body)
	}
}
