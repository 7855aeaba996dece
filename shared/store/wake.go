package store

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// A substrate is woken by what its runs read changing in another's
// transaction, in that transaction (chain.State.Wake), as a tenant's
// change restarts its cluster's chain: its cluster's or pools' states
// (SaveClusterRun), a node joining it while it converges (RecordJoin),
// the deletion of the substrate it waits for (SaveSubstrateRun). No
// phase of it waits for its next run.

// usersOf are the substrates whose runs read the cluster: the one that
// made it, and those that adopted it, by ID.
func usersOf(c *model.Cluster) []string {
	var ids []string
	if c.Spec.ManagedBy != "" {
		ids = append(ids, c.Spec.ManagedBy)
	}
	for _, id := range slices.Sorted(maps.Keys(c.AdoptedBy)) {
		if id != c.Spec.ManagedBy {
			ids = append(ids, id)
		}
	}
	return ids
}

// seenChanged reports whether a cluster's run changes what a substrate's
// run reads of the cluster: the public state or message of the cluster or
// of one of its pools, whether one is gone, or how to reach the cluster's
// Kubernetes API. after.Pools are before.Pools, as the run leaves them.
func seenChanged(before, after *ClusterRun) bool {
	b, a := &before.Cluster, &after.Cluster
	bs, bm := model.ClusterState(b)
	as, am := model.ClusterState(a)
	if bs != as || bm != am || b.Active != a.Active || b.Status.Endpoint != a.Status.Endpoint || b.Status.CACertificate != a.Status.CACertificate {
		return true
	}
	for i := range after.Pools {
		bp, ap := &before.Pools[i], &after.Pools[i]
		bs, bm := model.NodePoolState(bp)
		as, am := model.NodePoolState(ap)
		if bs != as || bm != am || bp.Active != ap.Active {
			return true
		}
	}
	return false
}

// wakeSubstrates wakes, in tx, the chains of the substrates whose
// documents snaps are (read in tx before any write), those that are not
// deleted, and returns the kicks to send once tx commits.
func (s *Store) wakeSubstrates(tx *firestore.Transaction, snaps []*firestore.DocumentSnapshot, now time.Time) ([]chain.Kick, error) {
	var kicks []chain.Kick
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		var d substrateDoc
		if err := snap.DataTo(&d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		if !d.Active {
			continue
		}
		k := d.Reconcile.Wake(SubstratesKind, d.TenantID, d.ID, now)
		if k == nil {
			continue
		}
		if err := tx.Update(snap.Ref, []firestore.Update{{Path: chain.Field, Value: d.Reconcile}}); err != nil {
			return nil, err
		}
		kicks = append(kicks, *k)
	}
	return kicks, nil
}

// joinWakes reports whether a node joining the substrate wakes it: while
// it converges, its plan may wait for its nodes (a replacement deletes
// the pool it replaces once the new one's nodes joined); a ready
// substrate's does not.
func joinWakes(s *model.Substrate) bool {
	return s.Active && !s.Spec.Deleting && s.Status.State != resource.StateReady
}
