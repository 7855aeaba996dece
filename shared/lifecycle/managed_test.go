package lifecycle

import (
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

func standard() *model.Cluster {
	return &model.Cluster{ID: "kcl_1", Spec: model.ClusterSpec{Name: "c", Mode: resource.ModeStandard, AccountID: "acc"}}
}

func TestManagedRules(t *testing.T) {
	managed := func() *model.Cluster {
		c := standard()
		c.Spec.ManagedBy, c.Spec.ManagedPool = "ksb_1", "pool-gpu"
		return c
	}
	for _, c := range []struct {
		name string
		err  error
		want string // "" for no error; else a part of the INVALID_STATE message
	}{
		{"a tenant changes its own", MayChange("", "", "", "node pool", "a"), ""},
		{"a substrate changes its own", MayChange("ksb_1", "ksb_1", "pool-gpu", "node pool", "a"), ""},
		{"a tenant changes a substrate's", MayChange("", "ksb_1", "pool-gpu", "node pool", "a"), "managed by substrate ksb_1 of pool pool-gpu"},
		{"a substrate changes another's", MayChange("ksb_2", "ksb_1", "pool-gpu", "node pool", "a"), "managed by substrate ksb_1"},
		{"a substrate changes a tenant's", MayChange("ksb_1", "", "", "node pool", "own"), "node pool own is not managed by substrate ksb_1"},
		{"a tenant adds a pool to its cluster", MayAddNodePool("", standard()), ""},
		{"a substrate adds a pool to its cluster", MayAddNodePool("ksb_1", managed()), ""},
		{"a substrate adds a pool to an adopted cluster", MayAddNodePool("ksb_1", standard()), ""},
		{"a tenant adds a pool to a substrate's cluster", MayAddNodePool("", managed()), "cluster c is managed by substrate ksb_1"},
		{"delete of an unused cluster", MayDeleteCluster(standard(), nil), ""},
		{"delete of an adopted cluster", MayDeleteCluster(standard(), map[string]string{"ksb_2": "p2", "ksb_1": "p1"}),
			"cluster c is used by substrate ksb_1 of pool p1, substrate ksb_2 of pool p2"},
		{"adopt a standard cluster of the account", MayAdopt(standard(), "ksb_9", "acc"), ""},
		{"adopt an autopilot cluster", MayAdopt(&model.Cluster{ID: "kcl_1", Spec: model.ClusterSpec{Mode: resource.ModeAutopilot, AccountID: "acc"}}, "ksb_9", "acc"), "adopts only a standard cluster"},
		{"adopt a cluster of another account", MayAdopt(standard(), "ksb_9", "acc-2"), "not on the substrate's account acc-2"},
		{"adopt a cluster being deleted", MayAdopt(func() *model.Cluster { c := standard(); c.Spec.Deleting = true; return c }(), "ksb_9", "acc"), "is being deleted"},
		{"adopt a substrate's cluster", MayAdopt(managed(), "ksb_9", "acc"), "managed by substrate ksb_1 of pool pool-gpu"},
		{"adopt a cluster adopted by another", MayAdopt(adopted("ksb_1", "pool-a"), "ksb_9", "acc"), "cluster kcl_1 is adopted by substrate ksb_1 of pool pool-a: a cluster serves one pool"},
		{"adopt a cluster it adopted", MayAdopt(adopted("ksb_9", "pool-b"), "ksb_9", "acc"), ""},
	} {
		switch {
		case c.want == "" && c.err != nil:
			t.Errorf("%s: %v, want no error", c.name, c.err)
		case c.want != "" && (!errs.Is(c.err, errs.InvalidState) || !strings.Contains(c.err.Error(), c.want)):
			t.Errorf("%s: %v, want INVALID_STATE holding %q", c.name, c.err, c.want)
		}
	}
}

// adopted is a standard cluster that substrate (of pool) adopted.
func adopted(substrate, pool string) *model.Cluster {
	c := standard()
	c.AdoptedBy = map[string]string{substrate: pool}
	return c
}

func TestCreatesAndJoinsAnnounced(t *testing.T) {
	c := cluster(ready, 1, 1)
	p := pool("a", pending, 0, 1)
	s := model.Substrate{ID: "ksb_1", TenantID: "acme", PoolID: "pool", Joined: 2,
		Status: model.SubstrateStatus{ClusterID: "kcl_1", State: resource.StateReady}}
	n := resource.SubstrateNode{Name: "node-3", JoinedAt: t0}
	cases := []struct {
		name    string
		events  []event.Event
		typ, id string
		data    string // a field of the event's data
	}{
		{"cluster", ClusterCreated(&c, t0), event.ClusterCreated, "kcl_1", `"name":"prod"`},
		{"node pool", NodePoolCreated(&p, t0), event.NodePoolCreated, "kcl_1", `"name":"a"`},
		{"node joined", NodeJoined(&s, n), event.SubstrateNodeJoined, "kcl_1", `"name":"node-3"`},
	}
	for _, tc := range cases {
		if len(tc.events) != 1 || tc.events[0].Type != tc.typ || tc.events[0].ClusterID != tc.id || !tc.events[0].Time.Equal(t0) {
			t.Errorf("%s: events %+v, want one %s of %s at %v", tc.name, tc.events, tc.typ, tc.id, t0)
			continue
		}
		if !strings.Contains(string(tc.events[0].Data), tc.data) {
			t.Errorf("%s: data %s, want %s in it", tc.name, tc.events[0].Data, tc.data)
		}
	}
	if s.Joined != 2 {
		t.Errorf("NodeJoined changed the substrate: joined %d", s.Joined)
	}
}
