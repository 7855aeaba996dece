package lifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/kubernetes/shared/resource"
)

func TestChangePool(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	cur := &SubstrateSpec{PoolVersion: 3, AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "us-central1",
		Flavors: []Flavor{{Name: "cpu"}}, After: "ksb_0", Generation: 4, UpdatedAt: t0}
	same := &SubstrateSpec{PoolVersion: 5, AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "us-central1",
		Flavors: []Flavor{{Name: "cpu"}, {Name: "gpu"}}}
	other := &SubstrateSpec{PoolVersion: 5, AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "europe-west1"}
	with := func(s SubstrateSpec, f func(*SubstrateSpec)) *SubstrateSpec { f(&s); return &s }
	for _, tt := range []struct {
		name      string
		cur, want *SubstrateSpec
		out       PoolChange
	}{
		{"first substrate", nil, same, PoolChange{
			New: with(*same, func(s *SubstrateSpec) { s.After, s.Generation, s.UpdatedAt = "ksb_last", 1, now })}},
		{"nothing asked, nothing had", nil, nil, PoolChange{}},
		{"the same choice changed", cur, same, PoolChange{
			Next: with(*same, func(s *SubstrateSpec) { s.After, s.Generation, s.UpdatedAt = "ksb_0", 5, now })}},
		{"another choice", cur, other, PoolChange{
			Next: with(*cur, func(s *SubstrateSpec) { s.Deleting, s.PoolVersion, s.Generation, s.UpdatedAt = true, 5, 5, now }),
			New:  with(*other, func(s *SubstrateSpec) { s.After, s.Generation, s.UpdatedAt = "ksb_last", 1, now })}},
		{"no substrate asked any more", cur, nil, PoolChange{
			Next: with(*cur, func(s *SubstrateSpec) { s.Deleting, s.PoolVersion, s.Generation, s.UpdatedAt = true, 5, 5, now })}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ChangePool(tt.cur, tt.want, 5, "ksb_last", now)
			if diff := cmp.Diff(tt.out, got); diff != "" {
				t.Errorf("ChangePool (-want +got):\n%s", diff)
			}
		})
	}
}
