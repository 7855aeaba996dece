package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	mexporter "github.com/GoogleCloudPlatform/opentelemetry-operations-go/exporter/metric"
	texporter "github.com/GoogleCloudPlatform/opentelemetry-operations-go/exporter/trace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Namespace is the service namespace of every process of the control
// plane.
const Namespace = "better-compute"

// CloudInterval is how often metrics go to Cloud Monitoring: its
// resolution for custom metrics is a minute at best worth paying for.
const CloudInterval = time.Minute

// Resource describes one instance of a service (the Cloud Run service, or
// the function it serves): its name, the project's namespace and an ID of
// its own. Cloud Monitoring's exporter writes such a resource as a
// generic_task whose job is the service and whose task_id the instance,
// so that two instances never write the same time series (which Cloud
// Monitoring refuses).
func Resource(service string) *resource.Resource {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	r, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.namespace", Namespace),
		attribute.String("service.instance.id", hex.EncodeToString(b)),
	))
	if err != nil {
		// Default has a schema URL and ours none: they always merge.
		panic(err)
	}
	return r
}

// NewCloud returns telemetry exporting metrics to Cloud Monitoring every
// CloudInterval (as workload.googleapis.com/<name>) and spans to Cloud
// Trace in batches, both in project, with the credentials of the process.
// Their clients are made with a background context, as the functions'
// Google clients are: they live as long as the process.
func NewCloud(project string, res *resource.Resource) (*Telemetry, error) {
	me, err := mexporter.New(mexporter.WithProjectID(project))
	if err != nil {
		return nil, fmt.Errorf("telemetry: Cloud Monitoring exporter: %w", err)
	}
	te, err := texporter.New(texporter.WithProjectID(project))
	if err != nil {
		_ = me.Shutdown(context.Background())
		return nil, fmt.Errorf("telemetry: Cloud Trace exporter: %w", err)
	}
	return New(Options{
		Readers:        []sdkmetric.Reader{sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(CloudInterval))},
		SpanProcessors: []sdktrace.SpanProcessor{sdktrace.NewBatchSpanProcessor(te)},
		Resource:       res,
	})
}

// NewStdout returns telemetry printing the metrics every interval, and
// each span as it ends, as JSON lines on w (the devstack's -telemetry).
func NewStdout(w io.Writer, interval time.Duration, res *resource.Resource) (*Telemetry, error) {
	me, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, fmt.Errorf("telemetry: stdout metric exporter: %w", err)
	}
	te, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, fmt.Errorf("telemetry: stdout span exporter: %w", err)
	}
	return New(Options{
		Readers:        []sdkmetric.Reader{sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(interval))},
		SpanProcessors: []sdktrace.SpanProcessor{sdktrace.NewBatchSpanProcessor(te)},
		Resource:       res,
	})
}
