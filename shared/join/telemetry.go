package join

import (
	"context"

	"github.com/better-compute/kubernetes/shared/errs"
)

// Metrics counts kubernetesSubstrates.join calls by result
// (telemetry.Metrics).
type Metrics interface {
	JoinCall(ctx context.Context, result string)
}

// The results of a join call, as Metrics counts them.
const (
	// ResultOK: the node is joined (now, or already).
	ResultOK = "ok"
	// ResultUnauthenticated: no join token, or an unknown or revoked one.
	ResultUnauthenticated = "unauthenticated"
	// ResultDenied: the node is not a Node of the substrate's pools.
	ResultDenied = "denied"
	// ResultError: anything else (the cluster not reachable yet, Firestore
	// unavailable): bcd retries.
	ResultError = "error"
)

// Option configures a Joiner.
type Option func(*Joiner)

// WithMetrics makes the joiner count its calls by result.
func WithMetrics(m Metrics) Option { return func(j *Joiner) { j.metrics = m } }

// count counts a join call that ended with err.
func (j *Joiner) count(ctx context.Context, err error) {
	if j.metrics != nil {
		j.metrics.JoinCall(ctx, joinResult(err))
	}
}

func joinResult(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errs.Is(err, errs.Unauthenticated):
		return ResultUnauthenticated
	case errs.Is(err, errs.PermissionDenied):
		return ResultDenied
	}
	return ResultError
}
