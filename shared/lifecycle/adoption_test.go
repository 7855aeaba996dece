package lifecycle

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

func TestDecideAdoption(t *testing.T) {
	adoptedBy := func(m map[string]string) *model.Cluster {
		c := standard()
		c.AdoptedBy = m
		return c
	}
	active := &model.Substrate{ID: "ksb_1", Active: true}
	deleted := &model.Substrate{ID: "ksb_1"}
	for _, c := range []struct {
		name     string
		cluster  *model.Cluster
		adopters map[string]*model.Substrate
		want     model.Adoption
		err      string // "" for no error; else a part of the INVALID_STATE message
	}{
		{name: "a cluster no one adopted", cluster: standard(), want: model.Adoption{Record: true}},
		{name: "adopted by the substrate already", cluster: adopted("ksb_9", "pool-b"), want: model.Adoption{}},
		{name: "adopted by the substrate for another pool", cluster: adopted("ksb_9", "pool-a"), want: model.Adoption{Record: true}},
		{name: "adopted by another that is active", cluster: adopted("ksb_1", "pool-a"),
			adopters: map[string]*model.Substrate{"ksb_1": active},
			err:      "adopted by substrate ksb_1 of pool pool-a: a cluster serves one pool"},
		{name: "adopted by another that is deleted", cluster: adopted("ksb_1", "pool-a"),
			adopters: map[string]*model.Substrate{"ksb_1": deleted}, want: model.Adoption{Drop: []string{"ksb_1"}, Record: true}},
		{name: "adopted by another that does not exist", cluster: adopted("ksb_1", "pool-a"),
			adopters: map[string]*model.Substrate{"ksb_1": nil}, want: model.Adoption{Drop: []string{"ksb_1"}, Record: true}},
		{name: "adopted by another not read", cluster: adopted("ksb_1", "pool-a"), want: model.Adoption{Drop: []string{"ksb_1"}, Record: true}},
		{name: "gone adopters dropped by ID, the active one refuses", cluster: adoptedBy(map[string]string{"ksb_3": "p3", "ksb_1": "p1", "ksb_2": "p2"}),
			adopters: map[string]*model.Substrate{"ksb_2": active},
			err:      "adopted by substrate ksb_2 of pool p2"},
		{name: "gone adopters dropped by ID, its own kept", cluster: adoptedBy(map[string]string{"ksb_3": "p3", "ksb_9": "pool-b", "ksb_1": "p1"}),
			adopters: map[string]*model.Substrate{"ksb_1": deleted}, want: model.Adoption{Drop: []string{"ksb_1", "ksb_3"}}},
		{name: "a cluster it may not adopt, whoever held it", cluster: func() *model.Cluster { c := adopted("ksb_1", "pool-a"); c.Spec.Deleting = true; return c }(),
			err: "is being deleted"},
		{name: "a cluster of another account", cluster: func() *model.Cluster { c := standard(); c.Spec.AccountID = "acc-2"; return c }(),
			err: "not on the substrate's account acc"},
	} {
		before := maps.Clone(c.cluster.AdoptedBy)
		got, err := DecideAdoption(model.AdoptionRequest{Substrate: "ksb_9", Pool: "pool-b", AccountID: "acc", Cluster: c.cluster, Adopters: c.adopters})
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		case c.err != "" && (!errs.Is(err, errs.InvalidState) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want INVALID_STATE holding %q", c.name, err, c.err)
		case c.err != "" && (got.Changes() || got.Drop != nil):
			t.Errorf("%s: refused, yet writes %+v", c.name, got)
		case c.err == "" && !reflect.DeepEqual(got, c.want):
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if got.Changes() != (len(c.want.Drop) > 0 || c.want.Record) {
			t.Errorf("%s: Changes() = %v for %+v", c.name, got.Changes(), got)
		}
		if !maps.Equal(c.cluster.AdoptedBy, before) {
			t.Errorf("%s: the cluster's adopters changed to %v, from %v", c.name, c.cluster.AdoptedBy, before)
		}
	}
}

func TestAdoptersAndRelease(t *testing.T) {
	c := standard()
	c.AdoptedBy = map[string]string{"ksb_2": "p2", "ksb_1": "p1"}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"others of an adopter", OtherAdopters(c, "ksb_1"), []string{"ksb_2"}},
		{"others of a stranger, by ID", OtherAdopters(c, "ksb_9"), []string{"ksb_1", "ksb_2"}},
		{"others of no adopter", OtherAdopters(standard(), "ksb_9"), []string(nil)},
		{"adopts for its pool", Adopts(c, "ksb_1", "p1"), true},
		{"adopts for another pool", Adopts(c, "ksb_1", "p2"), false},
		{"a stranger adopts", Adopts(c, "ksb_9", "p1"), false},
		{"an adopter releases", Releases(c, "ksb_2"), true},
		{"a stranger releases", Releases(c, "ksb_9"), false},
		{"a release of an unadopted cluster", Releases(standard(), "ksb_1"), false},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
