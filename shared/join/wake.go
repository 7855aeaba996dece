package join

import (
	"context"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/logging"
)

// A substrate's chain is woken by what its runs read changing (the store
// wakes it in the transaction that records the change: its cluster's run,
// a node's join, its previous substrate's deletion), so that no phase
// waits for its next run. The chain runner sends the kicks of a run's
// save; the join sends its own (WithKicks).

// WithKicks makes the joiner send the kick of a substrate that a join
// wakes (store.RecordJoin) to k. Without it the woken chain's run is the
// watchdog's to start.
func WithKicks(k chain.Kicker) Option { return func(j *Joiner) { j.kick = k } }

// wake sends the kick of the substrate a join woke, if any.
func (j *Joiner) wake(ctx context.Context, k *chain.Kick) {
	if k == nil || j.kick == nil {
		return
	}
	if err := j.kick.Kick(ctx, *k); err != nil {
		logging.FromContext(ctx).Warn("Substrate kick failed; the watchdog will restart its chain", "error", err)
	}
}
