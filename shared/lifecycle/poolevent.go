package lifecycle

import (
	"fmt"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// The rules of the pools module's events (API.md §9), in one place: what
// an event asks of its pool's substrate (PoolWant), and what applying it
// writes (DecidePoolEvent, DecideRefusal). The store reads what they need
// in its transaction and writes what they decide; the preview of
// kubernetesSubstrates.plan runs the same rules.

// stale is why an event of version, an archive or not, changes nothing of
// the pool at idx; "" when it is to be applied. Versions apply in order,
// and archival is final.
func stale(idx model.PoolIndex, version int64, archive bool) string {
	switch {
	case idx.Archived:
		return "ignored: the pool is archived, and archival is final"
	case version < idx.Version, version == idx.Version && !archive:
		return "ignored: not newer than the version applied"
	}
	return ""
}

// ForeignTo reports whether the pool's ID is owned by a tenant other
// than tenantID: the one rule of a pool ID's ownership. A pool not
// recorded yet (zero) is no one's.
func ForeignTo(p model.Pool, tenantID string) bool {
	return p.TenantID != "" && p.TenantID != tenantID
}

// PoolWant is what well-formed event ev asks of its pool's substrate,
// given the account its Want names (nil when there is none) and the
// record of its pool ID (zero when none): Want with the reason it cannot
// be served, if any, as its Problem, and the account the pool is on when
// it is one the tenant may use with managed Kubernetes ("" otherwise).
// ev.Want is not changed.
func PoolWant(ev model.PoolEvent, acc *model.Account, owner model.Pool) (*model.SubstrateSpec, string) {
	if ev.Want == nil {
		return nil, ""
	}
	s := *ev.Want
	accountID := ""
	switch {
	case acc == nil || !UsableBy(*acc, ev.TenantID):
		// The same words for both, so that a tenant learns nothing of
		// the accounts of others.
		s.Problem = Unusable(s.AccountID, ev.TenantID)
	case !acc.ManagedKubernetes():
		s.Problem = fmt.Sprintf("the provider %q of account %s has no managed Kubernetes", acc.Provider, acc.ID)
	default:
		if s.Mode == resource.SubstrateCreate {
			s.Problem = Placement(&s, acc.Regions)
		}
		accountID = acc.ID
	}
	if ForeignTo(owner, ev.TenantID) {
		s.Problem = ForeignPool(ev.PoolID)
	}
	return &s, accountID
}

// DecidePoolEvent is what well-formed event ev does to its pool in state
// st at now: nothing (Ignored) unless it is newer than the version
// applied and the pool is not archived; otherwise the pool's index at
// ev's version, the record of its pool ID, and its substrates' change
// (ChangePool), a new substrate taking newID. A pool ID belongs to the
// tenant that first announced it: an event naming it for another tenant
// changes nothing of the owner's, and that tenant's substrate shows the
// conflict as its problem (PoolWant).
func DecidePoolEvent(ev model.PoolEvent, st model.PoolState, newID string, now time.Time) model.PoolDecision {
	if why := stale(st.Index, ev.Version, ev.Archived); why != "" {
		return model.PoolDecision{Ignored: why}
	}
	d := model.PoolDecision{Index: st.Index}
	want, accountID := PoolWant(ev, st.Account, st.Owner)
	if ForeignTo(st.Owner, ev.TenantID) {
		d.Foreign = st.Owner.TenantID
	} else {
		d.Pool, d.ArchivePool = poolRecord(ev, st.Owner, want != nil, accountID)
	}
	d.Index.Archived, d.Index.Version = ev.Archived, ev.Version
	var cur *model.SubstrateSpec
	if st.Current != nil {
		cur = &st.Current.Spec
	}
	change := ChangePool(cur, want, ev.Version, st.Index.Last, now)
	var done []string
	if d.Next = change.Next; d.Next != nil {
		done = append(done, "substrate "+st.Current.ID+" changed")
		if d.Next.Deleting {
			// The pool asks for no substrate, or another one.
			d.Index.SubstrateID = ""
			done[0] = "substrate " + st.Current.ID + " torn down"
		}
	}
	if change.New != nil {
		d.New = &model.Substrate{ID: newID, TenantID: ev.TenantID, PoolID: ev.PoolID, CreatedAt: now, Active: true, Spec: *change.New,
			Status: model.SubstrateStatus{State: resource.StatePending}}
		d.Index.SubstrateID, d.Index.Last = newID, newID
		done = append(done, "substrate "+newID+" recorded")
	}
	d.Outcome = "no substrate asked for"
	if len(done) > 0 {
		d.Outcome = strings.Join(done, "; ")
	}
	return d
}

// poolRecord is what an event of the tenant that owns its pool ID (or of
// the first to name it) writes of the pool ID's record: the pool on the
// account its substrate uses, when it asks for one on an account the
// tenant may use and the record says otherwise; or, for an archive, the
// record archived.
func poolRecord(ev model.PoolEvent, owner model.Pool, wants bool, accountID string) (write *model.Pool, archive bool) {
	switch {
	case wants && accountID != "" && (owner.AccountID != accountID || owner.Archived):
		return &model.Pool{ID: ev.PoolID, TenantID: ev.TenantID, AccountID: accountID}, false
	case ev.Archived && owner.TenantID == ev.TenantID && !owner.Archived:
		return nil, true
	}
	return nil, false
}

// DecideRefusal is the spec that puts the current substrate of a pool at
// idx in error with problem, for a malformed event of version that was
// refused; nil when the event changes nothing (a version as new was
// applied, the pool is archived, or it has no substrate). cur is the
// substrate at idx.SubstrateID (nil when there is none). The index to
// write is idx at version.
func DecideRefusal(idx model.PoolIndex, cur *model.Substrate, version int64, problem string, now time.Time) (*model.SubstrateSpec, model.PoolIndex) {
	if idx.SubstrateID == "" || cur == nil || stale(idx, version, false) != "" {
		return nil, idx
	}
	spec := cur.Spec
	spec.Problem = problem
	spec = Respec(cur.Spec, spec, now)
	idx.Version = version
	return &spec, idx
}

// PoolChange is what one event of a pool does to the pool's substrates:
// the spec that replaces the current substrate's, and the spec of a
// substrate to make. DecidePoolEvent decides it; the preview
// of kubernetesSubstrates.plan runs it.
type PoolChange struct {
	// Next replaces the current substrate's spec; nil when the pool has
	// no current substrate. Next.Deleting: that substrate is torn down,
	// since the pool asks for none or for another choice.
	Next *model.SubstrateSpec
	// New is the spec of the substrate to make; nil when none is.
	New *model.SubstrateSpec
}

// ChangePool is the one rule of what an event of a pool, at version,
// asks of its substrates. cur is the current substrate's spec (nil: the
// pool has none); want what the event asks for (nil: no substrate); last
// the pool's latest substrate, deleting or not, which a new one waits
// for. A spec that replaces another is a new generation of its substrate
// (Respec); a new substrate starts at generation 1.
func ChangePool(cur, want *model.SubstrateSpec, version int64, last string, now time.Time) PoolChange {
	var c PoolChange
	if cur != nil {
		next := *cur
		if want == nil || !SameChoice(*cur, *want) {
			next.Deleting = true
			next.PoolVersion = version
		} else {
			next = *want
			next.After = cur.After
		}
		next = Respec(*cur, next, now)
		c.Next = &next
	}
	if want != nil && (c.Next == nil || c.Next.Deleting) {
		n := *want
		n.After = last
		n.Generation, n.UpdatedAt = 1, now
		c.New = &n
	}
	return c
}

// Respec returns next as the spec that replaces cur at now: the next
// generation of the substrate.
func Respec(cur, next model.SubstrateSpec, now time.Time) model.SubstrateSpec {
	next.Generation = cur.Generation + 1
	next.UpdatedAt = now
	return next
}

// ForeignPool is the problem of a substrate whose pool ID another tenant
// owns: a pool ID belongs to the tenant that first announced it.
func ForeignPool(poolID string) string {
	return fmt.Sprintf("pool ID %s is another tenant's pool: it cannot be used", poolID)
}
