package store

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
)

// The fleet's GKE request budget (clusters.Budget) is kept per provider
// project and clock minute, split into shards so that no document is
// written more than about once a second (budgetShardRef; the minute is
// yyyymmddhhmm in UTC). A shard's document is created by the first lease
// of its minute and carries an expireAt an hour on, for the TTL policy: a
// past minute is never read again. Beside the shard's count it keeps what
// each tenant took of it and when each last asked, so that the domain can
// divide the shard fairly in the same transaction (no other document is
// read or written).

// budgetShardTTL is how long a minute's shard is kept after the minute.
const budgetShardTTL = time.Hour

// budgetShard is one shard of a project's minute: how many of its tokens
// instances have taken, and of those, each tenant's; and when each tenant
// last asked for some.
type budgetShard struct {
	Taken    int                  `firestore:"taken"`
	Tenants  map[string]int       `firestore:"tenants,omitempty"`
	Asks     map[string]time.Time `firestore:"asks,omitempty"`
	ExpireAt time.Time            `firestore:"expireAt"`
}

// BudgetShard is one shard of a project's minute as a lease finds it.
type BudgetShard struct {
	// Taken is the shard's tokens taken, by every tenant.
	Taken int
	// Tenants is each tenant's part of Taken.
	Tenants map[string]int
	// Asks is when each tenant last asked for tokens of the shard.
	Asks map[string]time.Time
}

// BudgetGrant is what a lease decides on a shard: Got tokens for its
// tenant, and whether to record the tenant's ask (at the lease's time)
// even when it gets none.
type BudgetGrant struct {
	Got int
	Ask bool
}

// LeaseBudget decides, in one transaction, a lease of tenant on shard of
// project's clock minute (the minute that contains minute): decide is
// given the shard as it is and returns how many tokens tenant takes and
// whether its ask is recorded at at. A grant of tokens records the ask as
// well. It returns the shard as the lease left it; it writes nothing when
// decide grants nothing and asks nothing to be recorded. A lease of no
// tenant ("") counts in the shard's Taken only. decide may be
// called more than once (a transaction retried) and must not keep state.
func (s *Store) LeaseBudget(ctx context.Context, project, tenant string, minute time.Time, shard int, at time.Time, decide func(BudgetShard) BudgetGrant) (BudgetShard, error) {
	minute = minute.UTC().Truncate(time.Minute)
	ref := s.budgetShardRef(project, minute, shard)
	var out BudgetShard
	err := s.transact(ctx, "", func(ctx context.Context, tx *firestore.Transaction) error {
		var sh budgetShard
		snap, err := tx.Get(ref)
		switch {
		case isNotFound(err):
		case err != nil:
			return err
		default:
			if err := snap.DataTo(&sh); err != nil {
				return fmt.Errorf("decode: %w", err)
			}
		}
		if sh.Tenants == nil {
			sh.Tenants = map[string]int{}
		}
		if sh.Asks == nil {
			sh.Asks = map[string]time.Time{}
		}
		g := decide(BudgetShard{Taken: sh.Taken, Tenants: copyInts(sh.Tenants), Asks: copyTimes(sh.Asks)})
		g.Got = max(0, g.Got)
		// A lease of no tenant ("") is counted in the shard's total only.
		sh.Taken += g.Got
		if g.Got > 0 && tenant != "" {
			sh.Tenants[tenant] += g.Got
		}
		if (g.Got > 0 || g.Ask) && tenant != "" {
			sh.Asks[tenant] = at.UTC()
		}
		out = BudgetShard{Taken: sh.Taken, Tenants: copyInts(sh.Tenants), Asks: copyTimes(sh.Asks)}
		if g.Got == 0 && !g.Ask {
			return unchanged
		}
		sh.ExpireAt = minute.Add(time.Minute + budgetShardTTL)
		return tx.Set(ref, sh)
	})
	if err != nil {
		return BudgetShard{}, fmt.Errorf("lease %s's budget at %s (shard %d) for %s: %w", project, minute.Format("15:04"), shard, tenant, err)
	}
	return out, nil
}

func copyInts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyTimes(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
