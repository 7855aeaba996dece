package devstack_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/telemetry"
	"github.com/better-compute/kubernetes/shared/telemetry/telemetrytest"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestTelemetry creates a cluster, waits for it to be ready, then reads
// the metrics the functions recorded: the reconcile lag of the create, at
// least the simulated operation's time; the runs by outcome; the GKE calls
// by method and code and the budget they were charged to; the outbox as
// the watchdog saw it. The traces follow the tenant's call: the runs that
// converge the cluster link to the API request's span, and the GKE calls
// are spans of those runs.
func TestTelemetry(t *testing.T) {
	rec := telemetrytest.New(t)
	cfg := fastConfig()
	// Long enough to tell a measured lag from none.
	cfg.GKEOperationTime = 400 * time.Millisecond
	cfg.Telemetry = rec.Telemetry
	e := startEnv(t, cfg)

	start := time.Now()
	cl := e.api.createCluster(t, "watched", poolSpec("default", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	took := time.Since(start)

	clusters := telemetrytest.Attrs{telemetry.KeyKind: "clusters"}
	// The run that saved ready records the lag as it ends, just after its
	// save made the cluster ready.
	var s telemetrytest.Snapshot
	wait.For(t, "the reconcile lag recorded", func() (bool, string) {
		s = rec.Collect(t)
		h := s.Histogram(telemetry.ReconcileLag, clusters)
		return h.Count > 0, fmt.Sprintf("metrics %v", s.Names())
	})
	lag := s.Histogram(telemetry.ReconcileLag, clusters)
	t.Logf("reconcile lag of the create: %.3fs (operation %v, waited %v)", lag.Max, cfg.GKEOperationTime, took)
	if lag.Count != 1 {
		t.Errorf("%s{kind=clusters} has %d values, want 1: the one change asked (the create)", telemetry.ReconcileLag, lag.Count)
	}
	// From the create's commit to the run that found the cluster ready:
	// the provider's operation at least, and no more than the test waited.
	if min := cfg.GKEOperationTime.Seconds(); lag.Min < min || lag.Max > took.Seconds()+1 {
		t.Errorf("%s = %.3fs (min) to %.3fs (max), want between the operation's %.3fs and the %.3fs waited", telemetry.ReconcileLag, lag.Min, lag.Max, min, took.Seconds())
	}

	outcomes := []string{chain.OutcomeChanged, chain.OutcomeSteady, chain.OutcomeRetry, chain.OutcomeDeferred,
		chain.OutcomeBusy, chain.OutcomeStale, chain.OutcomeError, chain.OutcomeDone}
	for _, p := range s.Points(telemetry.ReconcileRuns, nil) {
		if !slices.Contains(outcomes, p.Attrs[telemetry.KeyOutcome]) {
			t.Errorf("%s%v: unknown outcome", telemetry.ReconcileRuns, p.Attrs)
		}
	}
	// At least the run that called CreateCluster and the one that saw it
	// ready saved a change.
	if n := s.Sum(telemetry.ReconcileRuns, telemetrytest.Attrs{telemetry.KeyKind: "clusters", telemetry.KeyOutcome: chain.OutcomeChanged}); n < 2 {
		t.Errorf("%s{kind=clusters,outcome=changed} = %v, want at least 2", telemetry.ReconcileRuns, n)
	}
	calls := func(method string) float64 {
		return s.Sum(telemetry.ProviderCalls, telemetrytest.Attrs{telemetry.KeyMethod: method, telemetry.KeyCode: "OK"})
	}
	if calls("CreateCluster") != 1 || calls("GetCluster") < 1 || calls("GetOperation") < 1 {
		t.Errorf("%s OK: CreateCluster %v, GetCluster %v, GetOperation %v; want 1, at least 1, at least 1", telemetry.ProviderCalls,
			calls("CreateCluster"), calls("GetCluster"), calls("GetOperation"))
	}
	if s.Sum(telemetry.ProviderBudgetUsed, nil) < 3 || len(s.Points(telemetry.ProviderBudgetUsed, nil)) != 1 {
		t.Errorf("%s = %+v, want the calls charged to the one provider project", telemetry.ProviderBudgetUsed, s.Points(telemetry.ProviderBudgetUsed, nil))
	}
	// The watchdog passes every 300ms; each records the outbox it found:
	// nothing older than the grace on a healthy stack.
	for _, name := range []string{telemetry.OutboxBacklog, telemetry.OutboxOldestAge} {
		if ps := s.Points(name, nil); len(ps) != 1 || ps[0].Value != 0 {
			t.Errorf("%s = %+v, want one point at 0", name, ps)
		}
	}

	// Traces: the API call's span, and the runs of the cluster.
	var call sdktrace.ReadOnlySpan
	var runs []sdktrace.ReadOnlySpan
	wait.For(t, "the spans of the call and of the runs", func() (bool, string) {
		call, runs = nil, nil
		for _, sp := range rec.Spans.Ended() {
			switch {
			case sp.Name() == "POST /api/compute/kubernetesClusters/create":
				call = sp
			case sp.Name() == "reconcile clusters" && attr(sp, "reconcile.subject") == cl.ID:
				runs = append(runs, sp)
			}
		}
		return call != nil && slices.ContainsFunc(runs, func(r sdktrace.ReadOnlySpan) bool { return attr(r, "reconcile.lag_seconds") != "" }),
			fmt.Sprintf("call span %v, %d runs", call != nil, len(runs))
	})
	slices.SortFunc(runs, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	linked := func(r sdktrace.ReadOnlySpan) bool {
		for _, l := range r.Links() {
			if l.SpanContext.TraceID() == call.SpanContext().TraceID() && l.SpanContext.SpanID() == call.SpanContext().SpanID() {
				return true
			}
		}
		return false
	}
	byOutcome := map[string]float64{}
	for _, p := range s.Points(telemetry.ReconcileRuns, clusters) {
		byOutcome[p.Attrs[telemetry.KeyOutcome]] = p.Value
	}
	t.Logf("%d runs of the cluster traced; %s by outcome: %v", len(runs), telemetry.ReconcileRuns, byOutcome)
	// Every run until the one that found the cluster ready converged the
	// tenant's call, and links to it; none is its child.
	for i, r := range runs {
		if !linked(r) {
			t.Errorf("run %d of %d (%s, %s) does not link to the call's span %s", i+1, len(runs), attr(r, "reconcile.outcome"), r.StartTime().Format(time.StampMilli), call.SpanContext().SpanID())
		}
		if r.SpanContext().TraceID() == call.SpanContext().TraceID() {
			t.Errorf("run %d is in the call's trace, want a trace of its own linked to it", i+1)
		}
		if attr(r, "reconcile.lag_seconds") != "" {
			break
		}
	}
	// The GKE calls are spans of the runs.
	var create sdktrace.ReadOnlySpan
	for _, sp := range rec.Spans.Ended() {
		if sp.Name() == "gke.CreateCluster" {
			create = sp
		}
	}
	if create == nil || !slices.ContainsFunc(runs, func(r sdktrace.ReadOnlySpan) bool { return r.SpanContext().SpanID() == create.Parent().SpanID() }) {
		t.Errorf("gke.CreateCluster span %v, want one under a run of the cluster", create)
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if a.Key == attribute.Key(key) {
			return a.Value.Emit()
		}
	}
	return ""
}
