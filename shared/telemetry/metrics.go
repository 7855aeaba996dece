package telemetry

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The instruments' names. The Telemetry API writes each to Cloud
// Monitoring as the metric type CloudMetricType(name), with its
// attributes as labels; infra/telemetry.tf charts and alerts on them by
// those types.
const (
	// ReconcileLag (histogram, seconds; kind): from a desired change (the
	// spec's updatedAt) to the run that finds the subject ready with it.
	ReconcileLag = "reconcile.lag"
	// ReconcileRuns (counter; kind, outcome): reconcile runs by how they
	// ended.
	ReconcileRuns = "reconcile.runs"
	// ProviderCalls (counter; method, code): GKE calls by method and gRPC
	// code ("OK" for a success).
	ProviderCalls = "provider.calls"
	// ProviderBudgetUsed (counter; project): GKE calls charged to each
	// provider project's request budget.
	ProviderBudgetUsed = "provider.budget.used"
	// OutboxBacklog (gauge; no attribute): the outbox events older than
	// the drain age that the last watchdog pass found (at most the
	// drain's limit).
	OutboxBacklog = "outbox.backlog"
	// OutboxOldestAge (gauge, seconds; no attribute): the age of the
	// oldest of them, 0 when there was none.
	OutboxOldestAge = "outbox.oldest_age"
	// WatchdogRestarts (counter; kind): dead reconcile chains the
	// watchdog restarted.
	WatchdogRestarts = "watchdog.restarts"
	// JoinCalls (counter; result): kubernetesSubstrates.join calls by
	// result (ok, unauthenticated, denied, error).
	JoinCalls = "join.calls"
)

// Attribute keys.
const (
	KeyKind    = "kind"
	KeyOutcome = "outcome"
	KeyMethod  = "method"
	KeyCode    = "code"
	KeyProject = "project"
	KeyResult  = "result"
)

// Attributes are the attribute keys of each instrument: all the labels its
// time series have.
var Attributes = map[string][]string{
	ReconcileLag:       {KeyKind},
	ReconcileRuns:      {KeyKind, KeyOutcome},
	ProviderCalls:      {KeyMethod, KeyCode},
	ProviderBudgetUsed: {KeyProject},
	OutboxBacklog:      {},
	OutboxOldestAge:    {},
	WatchdogRestarts:   {KeyKind},
	JoinCalls:          {KeyResult},
}

// Kinds of metric, as the Telemetry API names them in a metric type:
// counter for a monotonic sum, gauge for a gauge, histogram for a
// histogram.
const (
	KindCounter   = "counter"
	KindGauge     = "gauge"
	KindHistogram = "histogram"
)

// Kinds are the kind of each instrument.
var Kinds = map[string]string{
	ReconcileLag:       KindHistogram,
	ReconcileRuns:      KindCounter,
	ProviderCalls:      KindCounter,
	ProviderBudgetUsed: KindCounter,
	OutboxBacklog:      KindGauge,
	OutboxOldestAge:    KindGauge,
	WatchdogRestarts:   KindCounter,
	JoinCalls:          KindCounter,
}

// CloudMetricType is the Cloud Monitoring metric type of the named
// instrument, exported over OTLP: the Telemetry API writes metrics as
// Google Cloud Managed Service for Prometheus does, as
// prometheus.googleapis.com/<name>/<kind> on a prometheus_target, the
// name kept as it is, dots and all
// (https://docs.cloud.google.com/stackdriver/docs/reference/telemetry/v1.metrics,
// https://docs.cloud.google.com/stackdriver/docs/otlp-metrics/overview).
func CloudMetricType(name string) string {
	return "prometheus.googleapis.com/" + name + "/" + Kinds[name]
}

// lagBuckets are the reconcile lag's histogram boundaries, in seconds:
// from a change that converges in one run (under a second) to one that
// waits behind hours of provider operations.
var lagBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}

// Metrics are the instruments of one Telemetry. Its methods implement the
// interfaces the observed packages declare; each is safe for concurrent
// use.
type Metrics struct {
	lag       metric.Float64Histogram
	runs      metric.Int64Counter
	calls     metric.Int64Counter
	budget    metric.Int64Counter
	backlog   metric.Int64Gauge
	oldest    metric.Float64Gauge
	restarts  metric.Int64Counter
	joinCalls metric.Int64Counter
}

func newMetrics(m metric.Meter) (*Metrics, error) {
	var x Metrics
	var errList []error
	keep := func(err error) {
		if err != nil {
			errList = append(errList, err)
		}
	}
	var err error
	x.lag, err = m.Float64Histogram(ReconcileLag, metric.WithUnit("s"),
		metric.WithDescription("Time from a desired change (the spec's updatedAt) to the reconcile run that finds it converged, by kind of subject."),
		metric.WithExplicitBucketBoundaries(lagBuckets...))
	keep(err)
	x.runs, err = m.Int64Counter(ReconcileRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Reconcile runs by kind of subject and outcome."))
	keep(err)
	x.calls, err = m.Int64Counter(ProviderCalls, metric.WithUnit("{call}"),
		metric.WithDescription("GKE calls by method and gRPC code (OK for a success)."))
	keep(err)
	x.budget, err = m.Int64Counter(ProviderBudgetUsed, metric.WithUnit("{call}"),
		metric.WithDescription("GKE calls charged to each provider project's request budget."))
	keep(err)
	x.backlog, err = m.Int64Gauge(OutboxBacklog, metric.WithUnit("{event}"),
		metric.WithDescription("Outbox events older than the drain age found by the last watchdog pass (at most its limit)."))
	keep(err)
	x.oldest, err = m.Float64Gauge(OutboxOldestAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest outbox event the last watchdog pass found; 0 when none."))
	keep(err)
	x.restarts, err = m.Int64Counter(WatchdogRestarts, metric.WithUnit("{chain}"),
		metric.WithDescription("Dead reconcile chains the watchdog restarted, by kind of subject."))
	keep(err)
	x.joinCalls, err = m.Int64Counter(JoinCalls, metric.WithUnit("{call}"),
		metric.WithDescription("kubernetesSubstrates.join calls by result: ok, unauthenticated, denied, error."))
	keep(err)
	return &x, errors.Join(errList...)
}

// RunDone counts a reconcile run of a subject of kind that ended with
// outcome (chain.Metrics).
func (m *Metrics) RunDone(ctx context.Context, kind, outcome string) {
	m.runs.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyKind, kind), attribute.String(KeyOutcome, outcome)))
}

// Converged records the reconcile lag of a desired change of a subject of
// kind that a run found converged (chain.Metrics).
func (m *Metrics) Converged(ctx context.Context, kind string, lag time.Duration) {
	m.lag.Record(ctx, max(lag, 0).Seconds(), metric.WithAttributes(attribute.String(KeyKind, kind)))
}

// ChainRestarted counts a dead chain of a subject of kind that the
// watchdog restarted (chain.Metrics).
func (m *Metrics) ChainRestarted(ctx context.Context, kind string) {
	m.restarts.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyKind, kind)))
}

// OutboxBacklog records what a watchdog pass found in the outbox: the
// events older than the drain age, and the age of the oldest
// (outbox.Metrics).
func (m *Metrics) OutboxBacklog(ctx context.Context, events int, oldest time.Duration) {
	m.backlog.Record(ctx, int64(events))
	m.oldest.Record(ctx, max(oldest, 0).Seconds())
}

// BudgetSpent counts a GKE call charged to project's request budget
// (clusters.BudgetMetrics).
func (m *Metrics) BudgetSpent(ctx context.Context, project string) {
	m.budget.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyProject, project)))
}

// JoinCall counts a kubernetesSubstrates.join call by result
// (join.Metrics).
func (m *Metrics) JoinCall(ctx context.Context, result string) {
	m.joinCalls.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyResult, result)))
}

// ProviderCall counts a GKE call by method and gRPC code.
func (m *Metrics) ProviderCall(ctx context.Context, method, code string) {
	m.calls.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyMethod, method), attribute.String(KeyCode, code)))
}
