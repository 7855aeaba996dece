package lifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

var (
	accGCP    = &model.Account{ID: "acc-gcp", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}
	accGlobex = &model.Account{ID: "acc-globex", TenantID: "globex", Provider: "gcp", Project: "g", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}
	accAcme   = &model.Account{ID: "acc-acme", TenantID: "acme", Provider: "gcp", Project: "a", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}
	accMetal  = &model.Account{ID: "acc-metal", Provider: "baremetal", Project: "r", Regions: map[string][]string{"fra": {"fra-1"}}}
)

// creating is version 1 of acme's pool-gpu, whose substrate creates a
// cluster on account in region with a flavor in zones.
func creating(account, region string, zones ...string) model.PoolEvent {
	return model.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 1, Want: &model.SubstrateSpec{
		PoolVersion: 1, AccountID: account, Mode: resource.SubstrateCreate, Region: region,
		Flavors: []model.Flavor{{Name: "cpu", NodePool: model.NodePoolSpec{Name: "bc-pool-gpu-cpu", Zones: zones}}}}}
}

// PoolWant says why an account cannot serve a pool, in the same words
// whether it is another tenant's or does not exist, and that a pool ID
// another tenant owns cannot be used, whatever its account.
func TestPoolWant(t *testing.T) {
	for _, tt := range []struct {
		name             string
		ev               model.PoolEvent
		acc              *model.Account
		owner            model.Pool
		problem, account string
	}{
		{"served", creating("acc-gcp", "us-central1"), accGCP, model.Pool{}, "", "acc-gcp"},
		{"served on the tenant's own account", creating("acc-acme", "us-central1"), accAcme, model.Pool{}, "", "acc-acme"},
		{"the tenant's own pool ID", creating("acc-gcp", "us-central1"), accGCP, model.Pool{ID: "pool-gpu", TenantID: "acme"}, "", "acc-gcp"},
		{"another tenant's account", creating("acc-globex", "us-central1"), accGlobex, model.Pool{}, "account acc-globex cannot be used by tenant acme", ""},
		{"no such account", creating("acc-nope", "us-central1"), nil, model.Pool{}, "account acc-nope cannot be used by tenant acme", ""},
		{"no managed Kubernetes", creating("acc-metal", "fra"), accMetal, model.Pool{}, `the provider "baremetal" of account acc-metal has no managed Kubernetes`, ""},
		{"a region not enabled", creating("acc-gcp", "europe-west1"), accGCP, model.Pool{}, "region europe-west1 is not enabled on account acc-gcp", "acc-gcp"},
		{"a flavor's zone outside the region's", creating("acc-gcp", "us-central1", "us-central1-b"), accGCP, model.Pool{},
			"flavors[0].zones[0] is not a zone of region us-central1 enabled on the account (us-central1-a)", "acc-gcp"},
		{"another tenant's pool ID", creating("acc-gcp", "us-central1"), accGCP, model.Pool{ID: "pool-gpu", TenantID: "globex"},
			"pool ID pool-gpu is another tenant's pool: it cannot be used", "acc-gcp"},
		{"another tenant's pool ID and account", creating("acc-globex", "us-central1"), accGlobex, model.Pool{ID: "pool-gpu", TenantID: "globex"},
			"pool ID pool-gpu is another tenant's pool: it cannot be used", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, account := PoolWant(tt.ev, tt.acc, tt.owner)
			if want.Problem != tt.problem || account != tt.account {
				t.Errorf("PoolWant: problem %q, account %q; want %q, %q", want.Problem, account, tt.problem, tt.account)
			}
			if tt.ev.Want.Problem != "" {
				t.Errorf("PoolWant changed the event it was given: %+v", tt.ev.Want)
			}
		})
	}
	if want, account := PoolWant(model.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 2, Archived: true}, accGCP, model.Pool{}); want != nil || account != "" {
		t.Errorf("PoolWant of an archive = %+v, %q; want no substrate", want, account)
	}
}

// DecidePoolEvent applies the versions of a pool in order, once archived
// never again, records a pool ID for the tenant that first names it on a
// usable account, and changes nothing of another tenant's pool.
func TestDecidePoolEvent(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	ev := func(version int64) model.PoolEvent {
		e := creating("acc-gcp", "us-central1")
		e.Version, e.Want.PoolVersion = version, version
		return e
	}
	archive := func(version int64) model.PoolEvent {
		return model.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: version, Archived: true}
	}
	cur := &model.Substrate{ID: "ksb_1", TenantID: "acme", PoolID: "pool-gpu", Active: true, Spec: model.SubstrateSpec{PoolVersion: 2, AccountID: "acc-gcp",
		Mode: resource.SubstrateCreate, Region: "us-central1", Generation: 2, UpdatedAt: t0}}
	at2 := model.PoolIndex{Version: 2, SubstrateID: "ksb_1", Last: "ksb_1"}
	mine := model.Pool{ID: "pool-gpu", TenantID: "acme", AccountID: "acc-gcp"}
	newSub := func(e model.PoolEvent, after string) *model.Substrate {
		spec := *e.Want
		spec.After, spec.Generation, spec.UpdatedAt = after, 1, now
		return &model.Substrate{ID: "ksb_new", TenantID: "acme", PoolID: "pool-gpu", CreatedAt: now, Active: true, Spec: spec,
			Status: model.SubstrateStatus{State: resource.StatePending}}
	}
	respec := func(f func(*model.SubstrateSpec)) *model.SubstrateSpec {
		s := cur.Spec
		f(&s)
		s.Generation, s.UpdatedAt = 3, now
		return &s
	}
	for _, tt := range []struct {
		name string
		ev   model.PoolEvent
		st   model.PoolState
		out  model.PoolDecision
	}{
		{"a first event records the pool and its substrate", ev(1), model.PoolState{Account: accGCP}, model.PoolDecision{
			Index: model.PoolIndex{Version: 1, SubstrateID: "ksb_new", Last: "ksb_new"},
			Pool:  &mine, New: newSub(ev(1), ""), Outcome: "substrate ksb_new recorded"}},
		{"an older version", ev(1), model.PoolState{Index: at2, Owner: mine, Account: accGCP, Current: cur},
			model.PoolDecision{Ignored: "ignored: not newer than the version applied"}},
		{"the same version again", ev(2), model.PoolState{Index: at2, Owner: mine, Account: accGCP, Current: cur},
			model.PoolDecision{Ignored: "ignored: not newer than the version applied"}},
		{"an archived pool", ev(9), model.PoolState{Index: model.PoolIndex{Version: 3, Archived: true}, Owner: mine, Account: accGCP},
			model.PoolDecision{Ignored: "ignored: the pool is archived, and archival is final"}},
		{"a newer version of the same choice", ev(3), model.PoolState{Index: at2, Owner: mine, Account: accGCP, Current: cur}, model.PoolDecision{
			Index: model.PoolIndex{Version: 3, SubstrateID: "ksb_1", Last: "ksb_1"},
			Next:  respec(func(s *model.SubstrateSpec) { *s = *ev(3).Want }), Outcome: "substrate ksb_1 changed"}},
		{"an archive at the version applied", archive(2), model.PoolState{Index: at2, Owner: mine, Current: cur}, model.PoolDecision{
			Index:       model.PoolIndex{Version: 2, Last: "ksb_1", Archived: true},
			ArchivePool: true,
			Next:        respec(func(s *model.SubstrateSpec) { s.Deleting = true }),
			Outcome:     "substrate ksb_1 torn down"}},
		{"an archive of a pool with no substrate", archive(1), model.PoolState{}, model.PoolDecision{
			Index: model.PoolIndex{Version: 1, Archived: true}, Outcome: "no substrate asked for"}},
		{"the pool ID is another tenant's", ev(1), model.PoolState{Owner: model.Pool{ID: "pool-gpu", TenantID: "globex", AccountID: "acc-gcp"}, Account: accGCP},
			model.PoolDecision{
				Index:   model.PoolIndex{Version: 1, SubstrateID: "ksb_new", Last: "ksb_new"},
				Foreign: "globex",
				New: func() *model.Substrate {
					s := newSub(ev(1), "")
					s.Spec.Problem = ForeignPool("pool-gpu")
					return s
				}(),
				Outcome: "substrate ksb_new recorded"}},
		{"an archive names another tenant's pool ID", archive(1), model.PoolState{Owner: model.Pool{ID: "pool-gpu", TenantID: "globex"}},
			model.PoolDecision{Index: model.PoolIndex{Version: 1, Archived: true}, Foreign: "globex", Outcome: "no substrate asked for"}},
		{"an account the tenant may not use records no pool", func() model.PoolEvent {
			e := creating("acc-globex", "us-central1")
			return e
		}(), model.PoolState{Account: accGlobex}, model.PoolDecision{
			Index: model.PoolIndex{Version: 1, SubstrateID: "ksb_new", Last: "ksb_new"},
			New: func() *model.Substrate {
				s := newSub(creating("acc-globex", "us-central1"), "")
				s.Spec.Problem = Unusable("acc-globex", "acme")
				return s
			}(),
			Outcome: "substrate ksb_new recorded"}},
		{"an archived record of the pool is recorded again", ev(3), model.PoolState{Index: at2, Owner: model.Pool{ID: "pool-gpu", TenantID: "acme", AccountID: "acc-gcp", Archived: true},
			Account: accGCP, Current: cur}, model.PoolDecision{
			Index: model.PoolIndex{Version: 3, SubstrateID: "ksb_1", Last: "ksb_1"},
			Pool:  &mine,
			Next:  respec(func(s *model.SubstrateSpec) { *s = *ev(3).Want }), Outcome: "substrate ksb_1 changed"}},
		{"another choice tears the substrate down and waits for it", func() model.PoolEvent {
			e := ev(3)
			e.Want.Region = "europe-west1"
			return e
		}(), model.PoolState{Index: at2, Owner: mine, Account: &model.Account{ID: "acc-gcp", Provider: "gcp", Regions: map[string][]string{"europe-west1": {"europe-west1-b"}}}, Current: cur},
			model.PoolDecision{
				Index: model.PoolIndex{Version: 3, SubstrateID: "ksb_new", Last: "ksb_new"},
				Next:  respec(func(s *model.SubstrateSpec) { s.Deleting, s.PoolVersion = true, 3 }),
				New: func() *model.Substrate {
					e := ev(3)
					e.Want.Region = "europe-west1"
					return newSub(e, "ksb_1")
				}(),
				Outcome: "substrate ksb_1 torn down; substrate ksb_new recorded"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := DecidePoolEvent(tt.ev, tt.st, "ksb_new", now)
			if diff := cmp.Diff(tt.out, got); diff != "" {
				t.Errorf("DecidePoolEvent (-want +got):\n%s", diff)
			}
		})
	}
}

// DecideRefusal puts the current substrate in error only for a version
// newer than the one applied, of a pool not archived that has one.
func TestDecideRefusal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	cur := &model.Substrate{ID: "ksb_1", Spec: model.SubstrateSpec{PoolVersion: 2, AccountID: "acc-gcp", Generation: 2, UpdatedAt: t0}}
	at2 := model.PoolIndex{Version: 2, SubstrateID: "ksb_1", Last: "ksb_1"}
	for _, tt := range []struct {
		name    string
		idx     model.PoolIndex
		cur     *model.Substrate
		version int64
		refused bool
	}{
		{"a newer version", at2, cur, 3, true},
		{"the version applied", at2, cur, 2, false},
		{"an older version", at2, cur, 1, false},
		{"an archived pool", model.PoolIndex{Version: 2, SubstrateID: "ksb_1", Archived: true}, cur, 3, false},
		{"no substrate", model.PoolIndex{Version: 2}, nil, 3, false},
		{"its substrate gone", at2, nil, 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec, idx := DecideRefusal(tt.idx, tt.cur, tt.version, "bad", now)
			if !tt.refused {
				if spec != nil || idx != tt.idx {
					t.Errorf("DecideRefusal = %+v, %+v; want nothing changed", spec, idx)
				}
				return
			}
			want := cur.Spec
			want.Problem, want.Generation, want.UpdatedAt = "bad", 3, now
			if diff := cmp.Diff(&want, spec); diff != "" {
				t.Errorf("DecideRefusal spec (-want +got):\n%s", diff)
			}
			if idx.Version != tt.version || idx.SubstrateID != "ksb_1" {
				t.Errorf("DecideRefusal index = %+v, want at version %d", idx, tt.version)
			}
		})
	}
}

func TestChangePool(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	cur := &model.SubstrateSpec{PoolVersion: 3, AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "us-central1",
		Flavors: []model.Flavor{{Name: "cpu"}}, After: "ksb_0", Generation: 4, UpdatedAt: t0}
	same := &model.SubstrateSpec{PoolVersion: 5, AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "us-central1",
		Flavors: []model.Flavor{{Name: "cpu"}, {Name: "gpu"}}}
	other := &model.SubstrateSpec{PoolVersion: 5, AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "europe-west1"}
	with := func(s model.SubstrateSpec, f func(*model.SubstrateSpec)) *model.SubstrateSpec { f(&s); return &s }
	for _, tt := range []struct {
		name      string
		cur, want *model.SubstrateSpec
		out       PoolChange
	}{
		{"first substrate", nil, same, PoolChange{
			New: with(*same, func(s *model.SubstrateSpec) { s.After, s.Generation, s.UpdatedAt = "ksb_last", 1, now })}},
		{"nothing asked, nothing had", nil, nil, PoolChange{}},
		{"the same choice changed", cur, same, PoolChange{
			Next: with(*same, func(s *model.SubstrateSpec) { s.After, s.Generation, s.UpdatedAt = "ksb_0", 5, now })}},
		{"another choice", cur, other, PoolChange{
			Next: with(*cur, func(s *model.SubstrateSpec) { s.Deleting, s.PoolVersion, s.Generation, s.UpdatedAt = true, 5, 5, now }),
			New:  with(*other, func(s *model.SubstrateSpec) { s.After, s.Generation, s.UpdatedAt = "ksb_last", 1, now })}},
		{"no substrate asked any more", cur, nil, PoolChange{
			Next: with(*cur, func(s *model.SubstrateSpec) { s.Deleting, s.PoolVersion, s.Generation, s.UpdatedAt = true, 5, 5, now })}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ChangePool(tt.cur, tt.want, 5, "ksb_last", now)
			if diff := cmp.Diff(tt.out, got); diff != "" {
				t.Errorf("ChangePool (-want +got):\n%s", diff)
			}
		})
	}
}
