package substrates

import (
	"context"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// JoinMetrics counts kubernetesSubstrates.join calls by result
// (telemetry.Metrics).
type JoinMetrics interface {
	JoinCall(ctx context.Context, result string)
}

// The results of a join call, as JoinMetrics counts them.
const (
	// JoinOK: the node is joined (now, or already).
	JoinOK = "ok"
	// JoinUnauthenticated: no join token, or an unknown or revoked one.
	JoinUnauthenticated = "unauthenticated"
	// JoinDenied: the node is not a Node of the substrate's pools.
	JoinDenied = "denied"
	// JoinError: anything else (the cluster not reachable yet, Firestore
	// unavailable): bcd retries.
	JoinError = "error"
)

// JoinerOption configures a Joiner.
type JoinerOption func(*Joiner)

// WithJoinMetrics makes the joiner count its calls by result.
func WithJoinMetrics(m JoinMetrics) JoinerOption { return func(j *Joiner) { j.metrics = m } }

// count counts a join call that ended with err.
func (j *Joiner) count(ctx context.Context, err error) {
	if j.metrics != nil {
		j.metrics.JoinCall(ctx, joinResult(err))
	}
}

func joinResult(err error) string {
	switch {
	case err == nil:
		return JoinOK
	case errs.Is(err, errs.Unauthenticated):
		return JoinUnauthenticated
	case errs.Is(err, errs.PermissionDenied):
		return JoinDenied
	}
	return JoinError
}

// converged returns when the desired change that a run takes the
// substrate to ready with was asked (its spec's updatedAt): a run that
// applies a generation newer than the one applied before (Status.Applied)
// and leaves the substrate ready converged it. Zero when the run converges
// no desired change: nothing new applied (a steady run, the substrate back
// from its cluster's upgrade), or not ready.
func converged(before, after *lifecycle.Substrate) time.Time {
	if after.Status.State != resource.StateReady || after.Status.Applied <= before.Status.Applied {
		return time.Time{}
	}
	return after.Spec.UpdatedAt
}
