package substrates

import (
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// converged returns when the desired change that a run takes the
// substrate to ready with was asked (its spec's updatedAt): a run that
// applies a generation newer than the one applied before (Status.Applied)
// and leaves the substrate ready converged it. Zero when the run converges
// no desired change: nothing new applied (a steady run, the substrate back
// from its cluster's upgrade), or not ready.
func converged(before, after *model.Substrate) time.Time {
	if after.Status.State != resource.StateReady || after.Status.Applied <= before.Status.Applied {
		return time.Time{}
	}
	return after.Spec.UpdatedAt
}
