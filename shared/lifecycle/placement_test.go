package lifecycle

import (
	"errors"
	"slices"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// fields returns the broken fields of an INVALID_INPUT error, sorted, and
// nil for nil.
func fields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("error %v (%T) is not an INVALID_INPUT *errs.Error", err, err)
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

func TestCheckZones(t *testing.T) {
	allowed := []string{"us-central1-a", "us-central1-b"}
	tests := []struct {
		zones []string
		want  []string
	}{
		{nil, nil},
		{[]string{"us-central1-a", "us-central1-b"}, nil},
		{[]string{"us-central1-a", "us-central1-c", "europe-west4-a"}, []string{"zones[1]", "zones[2]"}},
	}
	for _, tt := range tests {
		var got []string
		for _, fe := range CheckZones("zones", tt.zones, "us-central1", allowed) {
			got = append(got, fe.Field)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("CheckZones(%q) broken fields = %q, want %q", tt.zones, got, tt.want)
		}
	}
	got := CheckZones("nodePools[1].zones", []string{"x"}, "r", nil)
	if len(got) != 1 || got[0].Field != "nodePools[1].zones[0]" ||
		got[0].Reason != "is not a zone of region r enabled on the account (none)" {
		t.Errorf("CheckZones(nodePools[1].zones, [x], none allowed) = %v, want one error at nodePools[1].zones[0]", got)
	}
	got = CheckZones("zones", []string{"x"}, "us-central1", allowed)
	if want := "is not a zone of region us-central1 enabled on the account (us-central1-a, us-central1-b)"; len(got) != 1 || got[0].Reason != want {
		t.Errorf("CheckZones(zones, [x]) = %v, want the reason %q", got, want)
	}
}

func TestAddNodePoolZones(t *testing.T) {
	tests := []struct {
		name   string
		zones  []string
		change func(*model.Cluster)
		want   []string  // broken fields
		kind   errs.Kind // 0: accepted, or INVALID_INPUT when want is set
	}{
		{name: "no zones"},
		{name: "the cluster's zones", zones: []string{"us-central1-b", "us-central1-a"}},
		{name: "outside the cluster's zones", zones: []string{"us-central1-a", "us-central1-c", "europe-west4-a"}, want: []string{"zones[1]", "zones[2]"}},
		{name: "a deleting cluster first", zones: []string{"europe-west4-a"}, change: func(c *model.Cluster) { c.Spec.Deleting = true }, kind: errs.InvalidState},
		{name: "the quota first", zones: []string{"europe-west4-a"}, change: func(c *model.Cluster) { c.Spec.PoolsCreated = resource.MaxNodePools }, kind: errs.Quota},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(ready, 1, 1)
			c.Spec.Region, c.Spec.Zones = "us-central1", []string{"us-central1-a", "us-central1-b"}
			if tt.change != nil {
				tt.change(&c)
			}
			err := AddNodePool(&c, &model.NodePoolSpec{Name: "np", Zones: tt.zones}, false, t0)
			if tt.kind != 0 {
				if !errs.Is(err, tt.kind) {
					t.Fatalf("AddNodePool = %v, want %s", err, tt.kind.Code())
				}
				return
			}
			if got := fields(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("AddNodePool(zones %q) broken fields = %q, want %q", tt.zones, got, tt.want)
			}
		})
	}
}

func TestClusterZones(t *testing.T) {
	regions := map[string][]string{
		"us-central1":  {"us-central1-a", "us-central1-b"},
		"europe-west4": {"europe-west4-a"},
	}
	pool := func(zones ...string) model.NodePoolSpec { return model.NodePoolSpec{Name: "p", Zones: zones} }
	tests := []struct {
		name   string
		region string
		zones  []string // the cluster's own, if any
		pools  []model.NodePoolSpec
		want   []string // the cluster's zones
		broken []string
	}{
		{"no zones", "us-central1", nil, []model.NodePoolSpec{pool()}, []string{"us-central1-a", "us-central1-b"}, nil},
		{"zones of the region", "us-central1", nil, []model.NodePoolSpec{pool("us-central1-b", "us-central1-a")}, []string{"us-central1-a", "us-central1-b"}, nil},
		{"region not the account's", "asia-east1", nil, []model.NodePoolSpec{pool()}, nil, []string{"region"}},
		{"zones elsewhere", "us-central1", nil, []model.NodePoolSpec{pool(), pool("us-central1-a", "europe-west4-a", "us-central1-c")},
			nil, []string{"nodePools[1].zones[1]", "nodePools[1].zones[2]"}},
		{"the cluster's own zones", "us-central1", []string{"us-central1-b"}, []model.NodePoolSpec{pool("us-central1-b")}, []string{"us-central1-b"}, nil},
		{"outside the cluster's own zones", "us-central1", []string{"us-central1-b"}, []model.NodePoolSpec{pool("us-central1-a")}, nil, []string{"nodePools[0].zones[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClusterZones(regions, &model.ClusterSpec{Region: tt.region, Zones: tt.zones}, tt.pools)
			if broken := fields(t, err); !slices.Equal(broken, tt.broken) {
				t.Fatalf("ClusterZones broken fields = %q, want %q", broken, tt.broken)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ClusterZones = %q, want %q", got, tt.want)
			}
		})
	}
	_, err := ClusterZones(regions, &model.ClusterSpec{Region: "asia-east1"}, nil)
	var e *errs.Error
	if want := "is not a region of the pool's account (europe-west4, us-central1)"; !errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Reason != want {
		t.Errorf("ClusterZones(asia-east1) = %v, want the reason %q", err, want)
	}
}
