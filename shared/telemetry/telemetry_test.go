package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/telemetry"
	"github.com/better-compute/kubernetes/shared/telemetry/telemetrytest"
)

func TestInstruments(t *testing.T) {
	rec := telemetrytest.New(t)
	m := rec.Metrics()
	ctx := context.Background()
	m.RunDone(ctx, "clusters", "changed")
	m.RunDone(ctx, "clusters", "changed")
	m.RunDone(ctx, "substrates", "steady")
	m.Converged(ctx, "clusters", 3*time.Second)
	m.Converged(ctx, "clusters", 5*time.Second)
	m.ChainRestarted(ctx, "clusters")
	m.OutboxBacklog(ctx, 7, 90*time.Second)
	m.OutboxBacklog(ctx, 2, 30*time.Second) // the last pass's count wins
	m.BudgetSpent(ctx, "bc-platform-1")
	m.JoinCall(ctx, "denied")
	m.ProviderCall(ctx, "GetCluster", "OK")

	s := rec.Collect(t)
	for _, c := range []struct {
		name  string
		attrs telemetrytest.Attrs
		want  float64
	}{
		{telemetry.ReconcileRuns, telemetrytest.Attrs{"kind": "clusters", "outcome": "changed"}, 2},
		{telemetry.ReconcileRuns, telemetrytest.Attrs{"kind": "substrates"}, 1},
		{telemetry.WatchdogRestarts, telemetrytest.Attrs{"kind": "clusters"}, 1},
		{telemetry.OutboxBacklog, nil, 2},
		{telemetry.OutboxOldestAge, nil, 30},
		{telemetry.ProviderBudgetUsed, telemetrytest.Attrs{"project": "bc-platform-1"}, 1},
		{telemetry.JoinCalls, telemetrytest.Attrs{"result": "denied"}, 1},
		{telemetry.ProviderCalls, telemetrytest.Attrs{"method": "GetCluster", "code": "OK"}, 1},
	} {
		if got := s.Sum(c.name, c.attrs); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.attrs, got, c.want)
		}
	}
	h := s.Histogram(telemetry.ReconcileLag, telemetrytest.Attrs{"kind": "clusters"})
	if h.Count != 2 || h.Sum != 8 || h.Min != 3 || h.Max != 5 {
		t.Errorf("%s{kind=clusters} = count %d sum %v min %v max %v, want 2, 8, 3, 5", telemetry.ReconcileLag, h.Count, h.Sum, h.Min, h.Max)
	}
	// Every instrument is recorded, its kind and attributes the ones
	// listed.
	if got, want := len(s.Names()), len(telemetry.Attributes); got != want {
		t.Errorf("%d metrics recorded (%v), want every one of telemetry.Attributes' %d", got, s.Names(), want)
	}
	for _, name := range s.Names() {
		keys, ok := telemetry.Attributes[name]
		if !ok {
			t.Errorf("metric %s is not in telemetry.Attributes", name)
			continue
		}
		for _, p := range s.Points(name, nil) {
			if p.Kind != telemetry.Kinds[name] {
				t.Errorf("%s is a %s, telemetry.Kinds says %q", name, p.Kind, telemetry.Kinds[name])
			}
			if len(p.Attrs) != len(keys) {
				t.Errorf("%s has attributes %v, want the keys %v", name, p.Attrs, keys)
			}
			for _, k := range keys {
				if _, ok := p.Attrs[k]; !ok {
					t.Errorf("%s point %v lacks %q", name, p.Attrs, k)
				}
			}
		}
	}
}

func TestProviderCalls(t *testing.T) {
	rec := telemetrytest.New(t)
	icpt := rec.ProviderCalls()
	ctx, parent := rec.Tracer().Start(context.Background(), "run")
	for _, err := range []error{nil, status.Error(codes.Unavailable, "down"), nil} {
		invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return err }
		if got := icpt(ctx, "/google.container.v1.ClusterManager/GetCluster", nil, nil, nil, invoke); !errors.Is(got, err) {
			t.Fatalf("interceptor returned %v, want the call's %v", got, err)
		}
	}
	parent.End()
	s := rec.Collect(t)
	if got := s.Sum(telemetry.ProviderCalls, telemetrytest.Attrs{"method": "GetCluster", "code": "OK"}); got != 2 {
		t.Errorf("GetCluster OK = %v, want 2", got)
	}
	if got := s.Sum(telemetry.ProviderCalls, telemetrytest.Attrs{"method": "GetCluster", "code": "Unavailable"}); got != 1 {
		t.Errorf("GetCluster Unavailable = %v, want 1", got)
	}
	var calls int
	for _, sp := range rec.Spans.Ended() {
		if sp.Name() == "gke.GetCluster" {
			calls++
			if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("span %s has parent %s, want the run's %s", sp.Name(), sp.Parent().SpanID(), parent.SpanContext().SpanID())
			}
		}
	}
	if calls != 3 {
		t.Errorf("%d gke.GetCluster spans, want 3", calls)
	}
}

func TestStdout(t *testing.T) {
	var buf syncBuffer
	tel, err := telemetry.NewStdout(&buf, time.Hour, telemetry.Resource("devstack"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tel.Metrics().RunDone(ctx, "clusters", "steady")
	_, span := tel.Tracer().Start(ctx, "reconcile clusters")
	span.End()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{telemetry.ReconcileRuns, `"reconcile clusters"`, "devstack"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout output lacks %s:\n%s", want, out)
		}
	}
}

func TestOffRecordsNothing(t *testing.T) {
	tel := telemetry.Off()
	ctx := context.Background()
	tel.Metrics().RunDone(ctx, "clusters", "steady")
	_, span := tel.Tracer().Start(ctx, "x")
	if span.SpanContext().IsValid() {
		t.Error("Off made a real span")
	}
	span.End()
	if err := tel.Flush(ctx); err != nil {
		t.Error(err)
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Error(err)
	}
}

// syncBuffer is written by the exporters' goroutines and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
