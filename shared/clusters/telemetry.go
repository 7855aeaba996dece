package clusters

import (
	"context"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// BudgetMetrics counts the provider calls charged to each project's
// budget (telemetry.Metrics).
type BudgetMetrics interface {
	BudgetSpent(ctx context.Context, project string)
}

// spent counts a call charged to project.
func (b *Budget) spent(ctx context.Context, project string) {
	if b.Metrics != nil {
		b.Metrics.BudgetSpent(ctx, project)
	}
}

// converged returns when the desired change that a run takes the cluster
// to ready with was made (its spec's updatedAt, which every change of the
// cluster or of one of its pools moves), or zero when the run converges
// no desired change: the cluster was ready already, does not end ready,
// or only comes back from a state the provider caused (an upgrade, an
// error that cleared), which the spec did not change since. A state the
// reconciler sets (provisioning, updating, error) records when it was
// entered, and a change that the cluster shows updating for keeps the
// time of the state before it (lifecycle.BeginRun), so that a spec newer
// than the status, or a cluster never ready yet, is a change being
// converged.
func converged(before, after *model.Cluster) time.Time {
	was, _ := model.ClusterState(before)
	now, _ := model.ClusterState(after)
	if was == resource.StateReady || now != resource.StateReady {
		return time.Time{}
	}
	if before.Status.Provider.EverReady && !before.Spec.UpdatedAt.After(before.Status.UpdatedAt) {
		return time.Time{}
	}
	return before.Spec.UpdatedAt
}
