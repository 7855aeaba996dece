package lifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/kubernetes/shared/resource"
)

var (
	accGCP    = &Account{ID: "acc-gcp", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}
	accGlobex = &Account{ID: "acc-globex", TenantID: "globex", Provider: "gcp", Project: "g", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}
	accAcme   = &Account{ID: "acc-acme", TenantID: "acme", Provider: "gcp", Project: "a", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}
	accMetal  = &Account{ID: "acc-metal", Provider: "baremetal", Project: "r", Regions: map[string][]string{"fra": {"fra-1"}}}
)

// creating is version 1 of acme's pool-gpu, whose substrate creates a
// cluster on account in region with a flavor in zones.
func creating(account, region string, zones ...string) PoolEvent {
	return PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 1, Want: &SubstrateSpec{
		PoolVersion: 1, AccountID: account, Mode: resource.SubstrateCreate, Region: region,
		Flavors: []Flavor{{Name: "cpu", NodePool: NodePoolSpec{Name: "bc-pool-gpu-cpu", Zones: zones}}}}}
}

// PoolWant says why an account cannot serve a pool, in the same words
// whether it is another tenant's or does not exist, and that a pool ID
// another tenant owns cannot be used, whatever its account.
func TestPoolWant(t *testing.T) {
	for _, tt := range []struct {
		name             string
		ev               PoolEvent
		acc              *Account
		owner            Pool
		problem, account string
	}{
		{"served", creating("acc-gcp", "us-central1"), accGCP, Pool{}, "", "acc-gcp"},
		{"served on the tenant's own account", creating("acc-acme", "us-central1"), accAcme, Pool{}, "", "acc-acme"},
		{"the tenant's own pool ID", creating("acc-gcp", "us-central1"), accGCP, Pool{ID: "pool-gpu", TenantID: "acme"}, "", "acc-gcp"},
		{"another tenant's account", creating("acc-globex", "us-central1"), accGlobex, Pool{}, "account acc-globex cannot be used by tenant acme", ""},
		{"no such account", creating("acc-nope", "us-central1"), nil, Pool{}, "account acc-nope cannot be used by tenant acme", ""},
		{"no managed Kubernetes", creating("acc-metal", "fra"), accMetal, Pool{}, `the provider "baremetal" of account acc-metal has no managed Kubernetes`, ""},
		{"a region not enabled", creating("acc-gcp", "europe-west1"), accGCP, Pool{}, "region europe-west1 is not enabled on account acc-gcp", "acc-gcp"},
		{"a flavor's zone outside the region's", creating("acc-gcp", "us-central1", "us-central1-b"), accGCP, Pool{},
			"flavors[0].zones[0] is not a zone of region us-central1 enabled on the account (us-central1-a)", "acc-gcp"},
		{"another tenant's pool ID", creating("acc-gcp", "us-central1"), accGCP, Pool{ID: "pool-gpu", TenantID: "globex"},
			"pool ID pool-gpu is another tenant's pool: it cannot be used", "acc-gcp"},
		{"another tenant's pool ID and account", creating("acc-globex", "us-central1"), accGlobex, Pool{ID: "pool-gpu", TenantID: "globex"},
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
	if want, account := PoolWant(PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 2, Archived: true}, accGCP, Pool{}); want != nil || account != "" {
		t.Errorf("PoolWant of an archive = %+v, %q; want no substrate", want, account)
	}
}

// DecidePoolEvent applies the versions of a pool in order, once archived
// never again, records a pool ID for the tenant that first names it on a
// usable account, and changes nothing of another tenant's pool.
func TestDecidePoolEvent(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	ev := func(version int64) PoolEvent {
		e := creating("acc-gcp", "us-central1")
		e.Version, e.Want.PoolVersion = version, version
		return e
	}
	archive := func(version int64) PoolEvent {
		return PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: version, Archived: true}
	}
	cur := &Substrate{ID: "ksb_1", TenantID: "acme", PoolID: "pool-gpu", Active: true, Spec: SubstrateSpec{PoolVersion: 2, AccountID: "acc-gcp",
		Mode: resource.SubstrateCreate, Region: "us-central1", Generation: 2, UpdatedAt: t0}}
	at2 := PoolIndex{Version: 2, SubstrateID: "ksb_1", Last: "ksb_1"}
	mine := Pool{ID: "pool-gpu", TenantID: "acme", AccountID: "acc-gcp"}
	newSub := func(e PoolEvent, after string) *Substrate {
		spec := *e.Want
		spec.After, spec.Generation, spec.UpdatedAt = after, 1, now
		return &Substrate{ID: "ksb_new", TenantID: "acme", PoolID: "pool-gpu", CreatedAt: now, Active: true, Spec: spec,
			Status: SubstrateStatus{State: resource.StatePending}}
	}
	respec := func(f func(*SubstrateSpec)) *SubstrateSpec {
		s := cur.Spec
		f(&s)
		s.Generation, s.UpdatedAt = 3, now
		return &s
	}
	for _, tt := range []struct {
		name string
		ev   PoolEvent
		st   PoolState
		out  PoolDecision
	}{
		{"a first event records the pool and its substrate", ev(1), PoolState{Account: accGCP}, PoolDecision{
			Index: PoolIndex{Version: 1, SubstrateID: "ksb_new", Last: "ksb_new"},
			Pool:  &mine, New: newSub(ev(1), ""), Outcome: "substrate ksb_new recorded"}},
		{"an older version", ev(1), PoolState{Index: at2, Owner: mine, Account: accGCP, Current: cur},
			PoolDecision{Ignored: "ignored: not newer than the version applied"}},
		{"the same version again", ev(2), PoolState{Index: at2, Owner: mine, Account: accGCP, Current: cur},
			PoolDecision{Ignored: "ignored: not newer than the version applied"}},
		{"an archived pool", ev(9), PoolState{Index: PoolIndex{Version: 3, Archived: true}, Owner: mine, Account: accGCP},
			PoolDecision{Ignored: "ignored: the pool is archived, and archival is final"}},
		{"a newer version of the same choice", ev(3), PoolState{Index: at2, Owner: mine, Account: accGCP, Current: cur}, PoolDecision{
			Index: PoolIndex{Version: 3, SubstrateID: "ksb_1", Last: "ksb_1"},
			Next:  respec(func(s *SubstrateSpec) { *s = *ev(3).Want }), Outcome: "substrate ksb_1 changed"}},
		{"an archive at the version applied", archive(2), PoolState{Index: at2, Owner: mine, Current: cur}, PoolDecision{
			Index:       PoolIndex{Version: 2, Last: "ksb_1", Archived: true},
			ArchivePool: true,
			Next:        respec(func(s *SubstrateSpec) { s.Deleting = true }),
			Outcome:     "substrate ksb_1 torn down"}},
		{"an archive of a pool with no substrate", archive(1), PoolState{}, PoolDecision{
			Index: PoolIndex{Version: 1, Archived: true}, Outcome: "no substrate asked for"}},
		{"the pool ID is another tenant's", ev(1), PoolState{Owner: Pool{ID: "pool-gpu", TenantID: "globex", AccountID: "acc-gcp"}, Account: accGCP},
			PoolDecision{
				Index:   PoolIndex{Version: 1, SubstrateID: "ksb_new", Last: "ksb_new"},
				Foreign: "globex",
				New: func() *Substrate {
					s := newSub(ev(1), "")
					s.Spec.Problem = ForeignPool("pool-gpu")
					return s
				}(),
				Outcome: "substrate ksb_new recorded"}},
		{"an archive names another tenant's pool ID", archive(1), PoolState{Owner: Pool{ID: "pool-gpu", TenantID: "globex"}},
			PoolDecision{Index: PoolIndex{Version: 1, Archived: true}, Foreign: "globex", Outcome: "no substrate asked for"}},
		{"an account the tenant may not use records no pool", func() PoolEvent {
			e := creating("acc-globex", "us-central1")
			return e
		}(), PoolState{Account: accGlobex}, PoolDecision{
			Index: PoolIndex{Version: 1, SubstrateID: "ksb_new", Last: "ksb_new"},
			New: func() *Substrate {
				s := newSub(creating("acc-globex", "us-central1"), "")
				s.Spec.Problem = Unusable("acc-globex", "acme")
				return s
			}(),
			Outcome: "substrate ksb_new recorded"}},
		{"an archived record of the pool is recorded again", ev(3), PoolState{Index: at2, Owner: Pool{ID: "pool-gpu", TenantID: "acme", AccountID: "acc-gcp", Archived: true},
			Account: accGCP, Current: cur}, PoolDecision{
			Index: PoolIndex{Version: 3, SubstrateID: "ksb_1", Last: "ksb_1"},
			Pool:  &mine,
			Next:  respec(func(s *SubstrateSpec) { *s = *ev(3).Want }), Outcome: "substrate ksb_1 changed"}},
		{"another choice tears the substrate down and waits for it", func() PoolEvent {
			e := ev(3)
			e.Want.Region = "europe-west1"
			return e
		}(), PoolState{Index: at2, Owner: mine, Account: &Account{ID: "acc-gcp", Provider: "gcp", Regions: map[string][]string{"europe-west1": {"europe-west1-b"}}}, Current: cur},
			PoolDecision{
				Index: PoolIndex{Version: 3, SubstrateID: "ksb_new", Last: "ksb_new"},
				Next:  respec(func(s *SubstrateSpec) { s.Deleting, s.PoolVersion = true, 3 }),
				New: func() *Substrate {
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
	cur := &Substrate{ID: "ksb_1", Spec: SubstrateSpec{PoolVersion: 2, AccountID: "acc-gcp", Generation: 2, UpdatedAt: t0}}
	at2 := PoolIndex{Version: 2, SubstrateID: "ksb_1", Last: "ksb_1"}
	for _, tt := range []struct {
		name    string
		idx     PoolIndex
		cur     *Substrate
		version int64
		refused bool
	}{
		{"a newer version", at2, cur, 3, true},
		{"the version applied", at2, cur, 2, false},
		{"an older version", at2, cur, 1, false},
		{"an archived pool", PoolIndex{Version: 2, SubstrateID: "ksb_1", Archived: true}, cur, 3, false},
		{"no substrate", PoolIndex{Version: 2}, nil, 3, false},
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
