package input

import "testing"

// kubernetesSubstrates.plan checks its pool by the pool events' rules,
// naming every broken field under pool.
func TestDecodePlanSubstrate(t *testing.T) {
	p, err := DecodePlanSubstrate([]byte(`{"tenantId": "acme", "pool": ` + goodPool + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.TenantID != "acme" || p.Pool.ID != "pool-gpu" || p.Pool.Substrate == nil || len(p.Pool.Flavors) != 1 || p.Pool.Flavors[0].Name != "l4" {
		t.Fatalf("decoded %+v", p)
	}
	for _, tc := range []struct {
		name, body string
		fields     []string
	}{
		{"no pool", `{"tenantId": "acme"}`, []string{"pool"}},
		{"not an object", `{"tenantId": "acme", "pool": 7}`, []string{"pool"}},
		{"unknown member", `{"tenantId": "acme", "pool": {"id": "p", "tenantId": "acme", "version": 1}, "dryRun": true}`, []string{"dryRun"}},
		{"another tenant's pool", `{"tenantId": "acme", "pool": {"id": "p", "tenantId": "globex", "version": 1}}`, []string{"pool.tenantId"}},
		{"every broken field", `{"tenantId": "acme", "pool": {"id": "p", "version": 0, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {"create": {"region": "us-central1", "zones": ["x", "x"]}}}},
			"flavors": [{"name": "a-very-long-flavor-name-x", "machineType": "e2-standard-4", "nodeCount": 1},
			            {"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 9, "autoscaling": {"minNodes": 0, "maxNodes": 2}},
			            {"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}]}}`,
			[]string{"pool.tenantId", "pool.version", "pool.policy.substrate.cluster.create.zones[1]", "pool.flavors[0].name",
				"pool.flavors[1].nodeCount", "pool.flavors[2].name"}},
		{"no flavors", `{"tenantId": "acme", "pool": {"id": "p", "tenantId": "acme", "version": 1, "policy": {"substrate": {"kind": "kubernetes", "account": "a",
			"cluster": {"create": {"region": "us-central1"}}}}}}`, []string{"pool.flavors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodePlanSubstrate([]byte(tc.body))
			assertFields(t, err, tc.fields)
		})
	}
}
