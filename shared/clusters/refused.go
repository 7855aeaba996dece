package clusters

import (
	"strconv"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/lifecycle"
)

// Refused records that the provider refused the decision's call for a
// reason that is the tenant's (a machine type it does not have, an
// accelerator the machine cannot take): the pool's error, or the
// cluster's for a cluster call, with the provider's message. A refused
// cluster create whose message names some of the cluster's pools (as the
// provider's does: Node pool "gpu": ...) blames those pools, so that the
// next run creates the cluster without them and the cluster's error names
// them. The refusal is shown until the next run retries, at the steady
// pace.
func Refused(d *Decision, msg string, now time.Time) {
	now = now.UTC().Truncate(time.Microsecond)
	c := &d.Cluster
	if d.Action.Pool >= 0 {
		d.Events = append(d.Events, lifecycle.NodePoolError(&d.Pools[d.Action.Pool], msg, now)...)
	} else {
		blamed := false
		for i := range d.Pools {
			np := &d.Pools[i]
			if !np.Spec.Deleting && strings.Contains(msg, strconv.Quote(np.Spec.Name)) {
				d.Events = append(d.Events, lifecycle.NodePoolError(np, msg, now)...)
				blamed = true
			}
		}
		if !blamed {
			d.Events = append(d.Events, lifecycle.ClusterError(c, "the provider refused the cluster: "+msg, now)...)
			d.Converging = false
			return
		}
	}
	events, converging := lifecycle.SettleCluster(c, d.Pools, false, now)
	d.Events = append(d.Events, events...)
	d.Converging = converging
}
