package chain

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Metrics records what the chains do (telemetry.Metrics).
type Metrics interface {
	// RunDone counts a run of a subject of kind that ended with outcome
	// (one of the Outcome constants).
	RunDone(ctx context.Context, kind, outcome string)
	// Converged records the reconcile lag of a desired change of a
	// subject of kind: from the change to the run whose save found it
	// converged.
	Converged(ctx context.Context, kind string, lag time.Duration)
	// ChainRestarted counts a dead chain of a subject of kind that the
	// watchdog restarted.
	ChainRestarted(ctx context.Context, kind string)
}

// The outcomes of a run, as Metrics.RunDone counts them.
const (
	// OutcomeChanged: the run saved a change (a state, a provider call).
	OutcomeChanged = "changed"
	// OutcomeSteady: the run found nothing to change: a steady refresh,
	// or a look at a provider operation still running.
	OutcomeSteady = "steady"
	// OutcomeRetry: a transient failure (a provider call, a read) was
	// recorded; the next run comes after a backoff.
	OutcomeRetry = "retry"
	// OutcomeDeferred: the run was put off (the provider project's
	// request budget is spent) and did nothing.
	OutcomeDeferred = "deferred"
	// OutcomeBusy: another run holds the subject, or kept changing it;
	// the task is retried.
	OutcomeBusy = "busy"
	// OutcomeStale: the task's chain token is not the subject's; the
	// task ends (having scheduled again the run of the steady chain it
	// handed its subject to, if an earlier attempt of it did).
	OutcomeStale = "stale"
	// OutcomeError: the run failed before it could record anything (a
	// Firestore or Cloud Tasks error, a lost lease); the task is retried.
	OutcomeError = "error"
	// OutcomeDone: the subject is gone; its chain ends.
	OutcomeDone = "done"
)

type noMetrics struct{}

func (noMetrics) RunDone(context.Context, string, string)          {}
func (noMetrics) Converged(context.Context, string, time.Duration) {}
func (noMetrics) ChainRestarted(context.Context, string)           {}

// report is what a run did, for its span and its metrics.
type report struct {
	outcome string
	// lag is the reconcile lag of the change the run's committed save
	// found converged, when converged.
	lag       time.Duration
	converged bool
}

// outcomeOf is the outcome of a run whose step found out.
func outcomeOf(out Outcome) string {
	switch {
	case out.Next == Done:
		return OutcomeDone
	case out.Next == Deferred:
		return OutcomeDeferred
	case out.Next == Retry:
		return OutcomeRetry
	case out.Changed:
		return OutcomeChanged
	}
	return OutcomeSteady
}

// startSpan starts the span of a run of k, linked to the span that asked
// for the chain's work (a run serves whatever calls came before it, so it
// is their link, not their child).
func (r *Runner) startSpan(ctx context.Context, k Kick) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attribute.String("reconcile.kind", k.Kind),
		attribute.String("tenant.id", k.TenantID),
		attribute.String("reconcile.subject", k.ID),
	)}
	if sc := spanContextOf(k.Link); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return r.cfg.Tracer.Start(ctx, "reconcile "+k.Kind, opts...)
}

// record counts the run by its outcome, records the lag it found, and
// notes both on its span.
func (r *Runner) record(ctx context.Context, span trace.Span, kind string, rep report, err error) {
	outcome := rep.outcome
	switch {
	case errors.Is(err, ErrStale):
		outcome = OutcomeStale
	case errors.Is(err, ErrBusy):
		outcome = OutcomeBusy
	case err != nil:
		outcome = OutcomeError
		span.RecordError(err)
		span.SetStatus(codes.Error, "reconcile run failed")
	}
	r.cfg.Metrics.RunDone(ctx, kind, outcome)
	span.SetAttributes(attribute.String("reconcile.outcome", outcome))
	if rep.converged {
		r.cfg.Metrics.Converged(ctx, kind, rep.lag)
		span.SetAttributes(attribute.Float64("reconcile.lag_seconds", rep.lag.Seconds()))
	}
}

// spanContextOf parses a W3C traceparent; the result is invalid when it
// is empty or malformed.
func spanContextOf(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}
