package lifecycle

import (
	"fmt"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/resource"
)

// The rules of the pools module's events (API.md §9), in one place: what
// an event asks of its pool's substrate (PoolWant), and what applying it
// writes (DecidePoolEvent, DecideRefusal). The store reads what they need
// in its transaction and writes what they decide; the preview of
// kubernetesSubstrates.plan runs the same rules.

// PoolEvent is what one event of the pools module asks of its pool's
// substrate, as decoded at the edge.
type PoolEvent struct {
	TenantID string
	PoolID   string
	Version  int64
	// Want is the substrate the pool asks for, its flavors' node pools
	// named; nil when it asks for none (archived, or no substrate in its
	// policy). Its Generation, UpdatedAt and After are set when it is
	// recorded, by the rule of ChangePool.
	Want *SubstrateSpec
	// Archived: the event archives the pool (Want is nil). An archive at
	// the version of the last update applied is applied too, so that
	// even a pool at the greatest version can be archived.
	Archived bool
}

// PoolIndex is what the project knows of a pool of the pools module, at
// tenants/{tenantId}/substratePools/{poolId}: the last version applied and
// the substrate the pool asks for now.
type PoolIndex struct {
	Version     int64  `firestore:"version"`
	SubstrateID string `firestore:"substrateId"` // "" when the pool asks for none
	// Last is the pool's latest substrate, deleting or not: a new one
	// waits for it to be deleted.
	Last string `firestore:"last"`
	// Archived: an archive event was applied. Archival is final: no
	// later event of the pool changes anything.
	Archived bool `firestore:"archived,omitempty"`
}

// stale is why an event of version, an archive or not, changes nothing of
// the pool at idx; "" when it is to be applied. Versions apply in order,
// and archival is final.
func (idx PoolIndex) stale(version int64, archive bool) string {
	switch {
	case idx.Archived:
		return "ignored: the pool is archived, and archival is final"
	case version < idx.Version, version == idx.Version && !archive:
		return "ignored: not newer than the version applied"
	}
	return ""
}

// Pool is a provider pool of a tenant, on one account, stored at
// pools/{poolId}: a pool ID belongs to the tenant that first announced it
// (seeded, or by an event).
type Pool struct {
	ID        string `firestore:"id" json:"id"`
	TenantID  string `firestore:"tenantId" json:"tenantId"`
	AccountID string `firestore:"accountId" json:"accountId"`
	// Archived: the pools module archived the pool. Its clusters stay
	// their tenant's, and manageable; it takes no new cluster.
	Archived bool `firestore:"archived,omitempty" json:"archived,omitempty"`
}

// ForeignTo reports whether the pool's ID is owned by a tenant other
// than tenantID: the one rule of a pool ID's ownership. A pool not
// recorded yet (zero) is no one's.
func (p Pool) ForeignTo(tenantID string) bool {
	return p.TenantID != "" && p.TenantID != tenantID
}

// PoolWant is what well-formed event ev asks of its pool's substrate,
// given the account its Want names (nil when there is none) and the
// record of its pool ID (zero when none): Want with the reason it cannot
// be served, if any, as its Problem, and the account the pool is on when
// it is one the tenant may use with managed Kubernetes ("" otherwise).
// ev.Want is not changed.
func PoolWant(ev PoolEvent, acc *Account, owner Pool) (*SubstrateSpec, string) {
	if ev.Want == nil {
		return nil, ""
	}
	s := *ev.Want
	accountID := ""
	switch {
	case acc == nil || !acc.UsableBy(ev.TenantID):
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
	if owner.ForeignTo(ev.TenantID) {
		s.Problem = ForeignPool(ev.PoolID)
	}
	return &s, accountID
}

// PoolState is what the store holds of an event's pool when the event is
// applied.
type PoolState struct {
	Index PoolIndex
	// Owner is the record of the pool's ID (pools/{poolId}); zero when
	// there is none.
	Owner Pool
	// Account is the account the event's Want names; nil when there is
	// none, or the event wants no substrate.
	Account *Account
	// Current is the substrate the pool asks for now (Index.SubstrateID);
	// nil when there is none.
	Current *Substrate
}

// PoolDecision is what applying an event writes.
type PoolDecision struct {
	// Ignored, when set, says why nothing is written.
	Ignored string
	// Index is the pool's index to write.
	Index PoolIndex
	// Pool, when set, is the record of the pool ID to write: the tenant's
	// pool, on the account its substrate uses.
	Pool *Pool
	// ArchivePool: mark the tenant's record of the pool ID archived. Its
	// clusters stay the tenant's, and manageable; it takes no new one.
	ArchivePool bool
	// Next replaces Current's spec (PoolChange.Next).
	Next *SubstrateSpec
	// New is the substrate to make, pending (PoolChange.New).
	New *Substrate
	// Foreign, when set, is the tenant that owns the pool's ID: the
	// event named it for another tenant, and nothing of the owner's
	// changes.
	Foreign string
	// Outcome says what became of the pool's substrates, for the log.
	Outcome string
}

// DecidePoolEvent is what well-formed event ev does to its pool in state
// st at now: nothing (Ignored) unless it is newer than the version
// applied and the pool is not archived; otherwise the pool's index at
// ev's version, the record of its pool ID, and its substrates' change
// (ChangePool), a new substrate taking newID. A pool ID belongs to the
// tenant that first announced it: an event naming it for another tenant
// changes nothing of the owner's, and that tenant's substrate shows the
// conflict as its problem (PoolWant).
func DecidePoolEvent(ev PoolEvent, st PoolState, newID string, now time.Time) PoolDecision {
	if why := st.Index.stale(ev.Version, ev.Archived); why != "" {
		return PoolDecision{Ignored: why}
	}
	d := PoolDecision{Index: st.Index}
	want, accountID := PoolWant(ev, st.Account, st.Owner)
	if st.Owner.ForeignTo(ev.TenantID) {
		d.Foreign = st.Owner.TenantID
	} else {
		d.Pool, d.ArchivePool = poolRecord(ev, st.Owner, want != nil, accountID)
	}
	d.Index.Archived, d.Index.Version = ev.Archived, ev.Version
	var cur *SubstrateSpec
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
		d.New = &Substrate{ID: newID, TenantID: ev.TenantID, PoolID: ev.PoolID, CreatedAt: now, Active: true, Spec: *change.New,
			Status: SubstrateStatus{State: resource.StatePending}}
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
func poolRecord(ev PoolEvent, owner Pool, wants bool, accountID string) (write *Pool, archive bool) {
	switch {
	case wants && accountID != "" && (owner.AccountID != accountID || owner.Archived):
		return &Pool{ID: ev.PoolID, TenantID: ev.TenantID, AccountID: accountID}, false
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
func DecideRefusal(idx PoolIndex, cur *Substrate, version int64, problem string, now time.Time) (*SubstrateSpec, PoolIndex) {
	if idx.SubstrateID == "" || cur == nil || idx.stale(version, false) != "" {
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
	Next *SubstrateSpec
	// New is the spec of the substrate to make; nil when none is.
	New *SubstrateSpec
}

// ChangePool is the one rule of what an event of a pool, at version,
// asks of its substrates. cur is the current substrate's spec (nil: the
// pool has none); want what the event asks for (nil: no substrate); last
// the pool's latest substrate, deleting or not, which a new one waits
// for. A spec that replaces another is a new generation of its substrate
// (Respec); a new substrate starts at generation 1.
func ChangePool(cur, want *SubstrateSpec, version int64, last string, now time.Time) PoolChange {
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
func Respec(cur, next SubstrateSpec, now time.Time) SubstrateSpec {
	next.Generation = cur.Generation + 1
	next.UpdatedAt = now
	return next
}

// ForeignPool is the problem of a substrate whose pool ID another tenant
// owns: a pool ID belongs to the tenant that first announced it.
func ForeignPool(poolID string) string {
	return fmt.Sprintf("pool ID %s is another tenant's pool: it cannot be used", poolID)
}
