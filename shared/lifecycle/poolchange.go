package lifecycle

import (
	"fmt"
	"time"
)

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
