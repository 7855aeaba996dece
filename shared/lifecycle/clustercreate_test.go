package lifecycle

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

// DecideCreate refuses a cluster of an archived pool, of an account that
// is missing, another tenant's or without managed Kubernetes, outside the
// account's regions, under a taken name or over the tenant's quota, and
// otherwise makes its spec on the pool's account and counts it.
func TestDecideCreate(t *testing.T) {
	one := 1
	pool := model.Pool{ID: "pool-gpu", TenantID: "acme", AccountID: "acc-gcp"}
	acc := &model.Account{ID: "acc-gcp", Provider: "gcp", Project: "p", Impersonate: "sa@p", NodeServiceAccount: "nodes@p",
		Regions: map[string][]string{"us-central1": {"us-central1-a", "us-central1-b"}}}
	spec := model.ClusterSpec{Name: "c1", Mode: "standard", Region: "us-central1", ReleaseChannel: "REGULAR", Labels: map[string]string{"a": "b"}}
	with := func(f func(*model.ClusterCreate)) model.ClusterCreate {
		c := model.ClusterCreate{TenantID: "acme", Spec: spec, Pool: pool, Account: acc, Tenant: &model.Tenant{}}
		f(&c)
		return c
	}
	for _, tt := range []struct {
		name string
		in   model.ClusterCreate
		kind errs.Kind // Internal: a plain error
		fail bool
	}{
		{"created", with(func(*model.ClusterCreate) {}), errs.Internal, false},
		{"an archived pool", with(func(c *model.ClusterCreate) { c.Pool.Archived = true }), errs.InvalidState, true},
		{"no account", with(func(c *model.ClusterCreate) { c.Account = nil }), errs.Internal, true},
		{"another tenant's account", with(func(c *model.ClusterCreate) { a := *acc; a.TenantID = "globex"; c.Account = &a }), errs.InvalidState, true},
		{"no managed Kubernetes", with(func(c *model.ClusterCreate) { a := *acc; a.Provider = "baremetal"; c.Account = &a }), errs.Unsupported, true},
		{"a region not the account's", with(func(c *model.ClusterCreate) { c.Spec.Region = "europe-west1" }), errs.Invalid, true},
		{"a node pool zone not the account's", with(func(c *model.ClusterCreate) {
			c.NodePools = []model.NodePoolSpec{{Name: "np", Zones: []string{"us-central1-f"}}}
		}), errs.Invalid, true},
		{"a taken name", with(func(c *model.ClusterCreate) { c.NameTaken = true }), errs.Conflict, true},
		{"over quota", with(func(c *model.ClusterCreate) {
			c.Tenant = &model.Tenant{Quota: model.Quota{Clusters: &one}, ClustersCreated: 1}
		}), errs.Quota, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := *tt.in.Tenant
			got, err := DecideCreate(tt.in)
			if tt.fail {
				if err == nil || errs.KindOf(err) != tt.kind {
					t.Fatalf("DecideCreate = %+v, %v; want a %s error", got, err, tt.kind)
				}
				if *tt.in.Tenant != before {
					t.Errorf("a refused create counted the cluster: %+v", tt.in.Tenant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := model.ClusterSpec{PoolID: "pool-gpu", AccountID: "acc-gcp", Name: "c1", Mode: "standard", Region: "us-central1",
				ReleaseChannel: "REGULAR", Labels: map[string]string{"a": "b"}, Project: "p", Zones: []string{"us-central1-a", "us-central1-b"},
				Impersonate: "sa@p", NodeServiceAccount: "nodes@p"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("DecideCreate (-want +got):\n%s", diff)
			}
			if tt.in.Tenant.ClustersCreated != 1 {
				t.Errorf("the tenant counts %d clusters created, want 1", tt.in.Tenant.ClustersCreated)
			}
		})
	}
}
