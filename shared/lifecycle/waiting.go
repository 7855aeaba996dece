package lifecycle

import (
	"fmt"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// RetryShownAfter is how long a cluster's runs fail transiently before the
// cluster and its changing pools say so in their message (API.md §4):
// shorter failures pass unseen, as the backoff's first retries do.
const RetryShownAfter = time.Minute

// NodePoolWaiting says in the pool's message what its change waits for
// (msg; "" says nothing is in the way), its state unchanged. A pool in
// error keeps its error's message, and a deleted one has none. The status
// changes only when the message does, so that a wait costs a write when it
// starts and when it ends, not at every run.
func NodePoolWaiting(p *model.NodePool, msg string, now time.Time) {
	s := &p.Status
	if s.State == resource.StateError || s.State == resource.StateDeleted || s.Message == msg {
		return
	}
	s.Message, s.UpdatedAt = msg, now
}

// ClusterWaiting is NodePoolWaiting for the cluster. A cluster being
// deleted shows no message.
func ClusterWaiting(c *model.Cluster, msg string, now time.Time) {
	s := &c.Status
	if s.State == resource.StateError || s.State == resource.StateDeleted || c.Spec.Deleting || s.Message == msg {
		return
	}
	s.Message, s.UpdatedAt = msg, now
}

// RunFailed records a run of the cluster that failed transiently for
// reason: the failures' start (prev's, or now for the first) is kept, and
// once they have lasted more than RetryShownAfter the cluster and its
// pools that wait for a change (pending, updating, deleting) say
// "retrying since <time>: <reason>", their states unchanged.
func RunFailed(c *model.Cluster, pools []model.NodePool, prev *model.Retry, reason string, now time.Time) {
	r := model.Retry{Since: now, Reason: reason}
	if prev != nil {
		r.Since = prev.Since
	}
	c.Status.Retrying = &r
	if now.Sub(r.Since) <= RetryShownAfter {
		return
	}
	msg := RetryMessage(r)
	ClusterWaiting(c, msg, now)
	for i := range pools {
		switch pools[i].Status.State {
		case resource.StatePending, resource.StateUpdating, resource.StateDeleting:
			NodePoolWaiting(&pools[i], msg, now)
		}
	}
}

// RetryMessage is the message of failures r.
func RetryMessage(r model.Retry) string {
	return fmt.Sprintf("retrying since %s: %s", r.Since.UTC().Format(time.RFC3339), r.Reason)
}
