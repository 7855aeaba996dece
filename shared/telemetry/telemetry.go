// Package telemetry is the operator's view of the control plane: the
// OpenTelemetry metrics and traces of one process, exported over OTLP to
// Google Cloud's Telemetry API, which writes them to Cloud Monitoring and
// Cloud Trace, in production (NewCloud), printed in the devstack
// (NewStdout), read with a ManualReader and a span recorder in
// tests (New), or dropped (Off).
//
// Nothing here is global: a Telemetry is built at the edge (the
// composition root) and handed to the code it observes, which declares the
// small interface it records through (chain.Metrics, outbox.Metrics, ...)
// and which Metrics implements. Two Telemetry values in one process (two
// devstacks in parallel tests) never see each other's measurements.
//
// The instruments and their attributes are listed in metrics.go; every
// attribute takes a few values (kinds, outcomes, methods, gRPC codes,
// provider projects), so that each metric has a bounded number of time
// series. Tenants and resource IDs go on spans, never on metrics.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every meter and tracer the
// package makes.
const ScopeName = "github.com/better-compute/kubernetes"

// Options are what New builds a Telemetry from.
type Options struct {
	// Readers collect the metrics: a periodic reader of an exporter, or
	// an sdkmetric.ManualReader in tests. None: metrics are dropped.
	Readers []sdkmetric.Reader
	// SpanProcessors receive the ended spans: a batcher of an exporter,
	// or a tracetest.SpanRecorder in tests. None: spans are not recorded.
	SpanProcessors []sdktrace.SpanProcessor
	// Resource describes the process (Resource); nil is the SDK's
	// default.
	Resource *resource.Resource
}

// Telemetry is one process's meter and tracer providers and the
// instruments made from them.
type Telemetry struct {
	tracer  trace.Tracer
	metrics *Metrics
	// flush and shutdown are the SDK providers' (none for Off).
	flush    []func(context.Context) error
	shutdown []func(context.Context) error

	shutOnce sync.Once
	shutErr  error
}

// New returns telemetry recording into o's readers and span processors.
// Every span is sampled: a reconcile run's span must be kept for its link
// to the tenant's call to be followed, whatever the platform decided for
// the request that carried it.
func New(o Options) (*Telemetry, error) {
	t := &Telemetry{}
	var mp metric.MeterProvider = metricnoop.NewMeterProvider()
	if len(o.Readers) > 0 {
		opts := []sdkmetric.Option{}
		if o.Resource != nil {
			opts = append(opts, sdkmetric.WithResource(o.Resource))
		}
		for _, r := range o.Readers {
			opts = append(opts, sdkmetric.WithReader(r))
		}
		p := sdkmetric.NewMeterProvider(opts...)
		mp = p
		t.flush = append(t.flush, p.ForceFlush)
		t.shutdown = append(t.shutdown, p.Shutdown)
	}
	var tp trace.TracerProvider = tracenoop.NewTracerProvider()
	if len(o.SpanProcessors) > 0 {
		opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sdktrace.AlwaysSample())}
		if o.Resource != nil {
			opts = append(opts, sdktrace.WithResource(o.Resource))
		}
		for _, sp := range o.SpanProcessors {
			opts = append(opts, sdktrace.WithSpanProcessor(sp))
		}
		p := sdktrace.NewTracerProvider(opts...)
		tp = p
		t.flush = append(t.flush, p.ForceFlush)
		t.shutdown = append(t.shutdown, p.Shutdown)
	}
	m, err := newMetrics(mp.Meter(ScopeName))
	if err != nil {
		return nil, fmt.Errorf("telemetry: instruments: %w", err)
	}
	t.metrics = m
	t.tracer = tp.Tracer(ScopeName)
	return t, nil
}

// Off returns telemetry that records nothing.
func Off() *Telemetry {
	t, err := New(Options{})
	if err != nil {
		// The no-op meter makes every instrument without error.
		panic(err)
	}
	return t
}

// Tracer is the tracer of the process's spans.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// Metrics are the process's instruments.
func (t *Telemetry) Metrics() *Metrics { return t.metrics }

// Flush exports what was recorded so far, within ctx: the watchdog, whose
// instance has no CPU between its passes on Cloud Run, calls it after
// each pass.
func (t *Telemetry) Flush(ctx context.Context) error {
	var errList []error
	for _, f := range t.flush {
		if err := f(ctx); err != nil {
			errList = append(errList, err)
		}
	}
	if err := errors.Join(errList...); err != nil {
		return fmt.Errorf("telemetry: flush: %w", err)
	}
	return nil
}

// Shutdown exports what is left and stops the exporters, within ctx.
// Later calls return the first one's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.shutOnce.Do(func() {
		var errList []error
		for _, f := range t.shutdown {
			if err := f(ctx); err != nil {
				errList = append(errList, err)
			}
		}
		if err := errors.Join(errList...); err != nil {
			t.shutErr = fmt.Errorf("telemetry: shutdown: %w", err)
		}
	})
	return t.shutErr
}
