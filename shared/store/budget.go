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
// past minute is never read again.

// budgetShardTTL is how long a minute's shard is kept after the minute.
const budgetShardTTL = time.Hour

// budgetShard is one shard of a project's minute: how many of its tokens
// instances have taken.
type budgetShard struct {
	Taken    int       `firestore:"taken"`
	ExpireAt time.Time `firestore:"expireAt"`
}

// LeaseBudget takes, in one transaction, up to want tokens of shard of
// project's clock minute (the minute that contains minute), a shard that
// holds capacity tokens, leaving at least floor of them untaken. It
// returns how many it took (0 when the shard is down to floor, and then
// it writes nothing) and how many the shard has left after.
func (s *Store) LeaseBudget(ctx context.Context, project string, minute time.Time, shard, capacity, want, floor int) (got, left int, err error) {
	minute = minute.UTC().Truncate(time.Minute)
	ref := s.budgetShardRef(project, minute, shard)
	err = s.transact(ctx, "", func(ctx context.Context, tx *firestore.Transaction) error {
		got, left = 0, 0
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
		left = max(0, capacity-sh.Taken)
		got = min(want, left-floor)
		if got <= 0 {
			got = 0
			return unchanged
		}
		left -= got
		return tx.Set(ref, budgetShard{Taken: sh.Taken + got, ExpireAt: minute.Add(time.Minute + budgetShardTTL)})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("lease %d tokens of %s's budget at %s (shard %d): %w", want, project, minute.Format("15:04"), shard, err)
	}
	return got, left, nil
}
