package chain_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/kubernetes/shared/chain"
)

// metrics records what the chain reports.
type metrics struct {
	mu        sync.Mutex
	runs      []string // kind/outcome
	lags      []time.Duration
	restarted []string
}

func (m *metrics) RunDone(_ context.Context, kind, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs = append(m.runs, kind+"/"+outcome)
}

func (m *metrics) Converged(_ context.Context, _ string, lag time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lags = append(m.lags, lag)
}

func (m *metrics) ChainRestarted(_ context.Context, kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.restarted = append(m.restarted, kind)
}

// traceparent returns a span context of its own as a W3C traceparent.
func traceparent(t *testing.T, tp trace.TracerProvider) (trace.SpanContext, string) {
	t.Helper()
	ctx, span := tp.Tracer("test").Start(context.Background(), "tenant call")
	span.End()
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return span.SpanContext(), c["traceparent"]
}

// Each run is counted by its outcome, linked to the span that asked for
// the chain's work, and passes that link on to its successor while the
// subject converges; a run whose save finds a change converged records
// the reconcile lag from the change.
func TestRunTelemetry(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		state     chain.State
		kick      string // the kick's token; "tok" unless set
		out       chain.Outcome
		acts      bool // the run asks for the lease
		err       error
		converged time.Duration // before now; 0: none
		want      string
		wantLag   time.Duration // 0: none recorded
		keepsLink bool          // the successor carries the link
	}{
		{name: "converging", out: chain.Outcome{Changed: true, Next: chain.Converging}, want: chain.OutcomeChanged, keepsLink: true},
		{name: "converged", out: chain.Outcome{Changed: true}, converged: 90 * time.Second, want: chain.OutcomeChanged, wantLag: 90 * time.Second},
		{name: "steady", out: chain.Outcome{}, want: chain.OutcomeSteady},
		{name: "retry", out: chain.Outcome{Changed: true, Next: chain.Retry}, want: chain.OutcomeRetry, keepsLink: true},
		{name: "failed step", err: errors.New("provider down"), want: chain.OutcomeRetry, keepsLink: true},
		{name: "deferred", out: chain.Outcome{Next: chain.Deferred, After: time.Minute}, want: chain.OutcomeDeferred, keepsLink: true},
		{name: "done", out: chain.Outcome{Changed: true, Next: chain.Done}, converged: time.Second, want: chain.OutcomeDone, wantLag: time.Second},
		{name: "stale", kick: "old", want: chain.OutcomeStale},
		{name: "busy", state: chain.State{LeaseOwner: "other", LeaseExpiry: time.Date(2026, 1, 2, 3, 4, 20, 0, time.UTC)}, acts: true, want: chain.OutcomeBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() { _ = tp.Shutdown(ctx) })
			m := &metrics{}
			e := newEnv(t)
			e.cfg.Tracer, e.cfg.Metrics = tp.Tracer("chain"), m
			runner, err := chain.NewRunner(e.st, e.rec, e.rec, e.cfg, e.sub)
			if err != nil {
				t.Fatal(err)
			}
			out := tt.out
			if tt.converged > 0 {
				out.Converged = e.clk.Now().Add(-tt.converged)
			}
			e.sub.step = func(_ context.Context, l *chain.Lease) (chain.Outcome, error) {
				if l == nil && !tt.acts {
					return out, tt.err
				}
				return needLease()
			}
			k := e.put(t, "t1", tt.state)
			if tt.kick != "" {
				k.Token = tt.kick
			}
			call, link := traceparent(t, tp)
			k.Link = link
			_ = runner.Run(ctx, k, "task-1")

			if len(m.runs) != 1 || m.runs[0] != "things/"+tt.want {
				t.Errorf("runs counted %v, want [things/%s]", m.runs, tt.want)
			}
			switch {
			case tt.wantLag == 0 && len(m.lags) != 0:
				t.Errorf("lags %v, want none", m.lags)
			case tt.wantLag != 0 && (len(m.lags) != 1 || m.lags[0] != tt.wantLag):
				t.Errorf("lags %v, want [%v]", m.lags, tt.wantLag)
			}
			var run sdktrace.ReadOnlySpan
			for _, s := range spans.Ended() {
				if s.Name() == "reconcile things" {
					run = s
				}
			}
			if run == nil {
				t.Fatal("no span of the run")
			}
			if l := run.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != call.SpanID() || l[0].SpanContext.TraceID() != call.TraceID() {
				t.Errorf("run span links %+v, want one to the call's span %s", l, call.SpanID())
			}
			if len(e.rec.scheduled) == 1 {
				if got := e.rec.scheduled[0].k.Link; (got == link) != tt.keepsLink {
					t.Errorf("successor's link %q, want the call's: %v", got, tt.keepsLink)
				}
			}
		})
	}
}

func TestWatchdogCountsRestarts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ref := e.fs.Collection("tenants").Doc("acme").Collection("things").Doc("dead")
	if _, err := ref.Set(ctx, thing{Active: true, Reconcile: chain.State{Token: "old", NextAt: e.clk.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	m := &metrics{}
	w := &chain.Watchdog{Store: e.st, Kinds: []string{"things"}, Kicker: &fakeKicker{}, Events: &fakeDrainer{}, Grace: time.Minute, Clock: e.clk, Metrics: m}
	if _, err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if len(m.restarted) != 1 || m.restarted[0] != "things" {
		t.Errorf("restarts counted %v, want [things]", m.restarted)
	}
}
