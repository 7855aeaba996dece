package telemetry

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/oauth2/google"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/oauth"
)

// Namespace is the service namespace of every process of the control
// plane.
const Namespace = "better-compute"

// CloudInterval is how often metrics go to Cloud Monitoring: a minute is
// the resolution at best worth paying for.
const CloudInterval = time.Minute

// Resource describes one instance of a service (the Cloud Run service, or
// the function it serves): its name, the project's namespace and an ID of
// its own. NewCloud makes them the job and instance of the metrics'
// prometheus_target, so that two instances never write the same time
// series (which Cloud Monitoring refuses).
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

// CloudEndpoint is Google Cloud's Telemetry (OTLP) API, which takes
// OTLP over gRPC and writes the metrics to Cloud Monitoring and the spans
// to Cloud Trace. Google recommends the gRPC exporters for export from an
// SDK, as they refresh the OAuth token on every call
// (https://docs.cloud.google.com/stackdriver/docs/otlp/overview).
const CloudEndpoint = "telemetry.googleapis.com:443"

// cloudScope is the OAuth scope of the Telemetry API's tokens.
const cloudScope = "https://www.googleapis.com/auth/cloud-platform"

// CloudOptions say where NewCloud exports.
type CloudOptions struct {
	// Project is the project the metrics and spans are written to: the
	// Telemetry API reads it from the gcp.project_id resource attribute.
	Project string
	// Location is the region the instance runs in: the location label of
	// the metrics' prometheus_target, which the API requires.
	Location string
	// Endpoint is the OTLP collector's gRPC address, host:port;
	// CloudEndpoint when empty.
	Endpoint string
	// Credentials authorize each export; nil: the process's application
	// default credentials (the service account on Cloud Run).
	Credentials credentials.PerRPCCredentials
	// Insecure dials Endpoint without TLS: a collector on loopback in
	// tests, never Google's.
	Insecure bool
	// Interval is how often the metrics are exported; CloudInterval when
	// zero.
	Interval time.Duration
}

// NewCloud returns telemetry exporting over OTLP to Google Cloud's
// Telemetry API (o.Endpoint): the metrics every CloudInterval, cumulative
// as Cloud Monitoring wants them, and the spans in batches, both in
// o.Project. The API writes each metric as the Managed Service for
// Prometheus does, as prometheus.googleapis.com/<name>/<kind> on a
// prometheus_target (CloudMetricType), whose labels it takes from the
// resource attributes of the same names, when set, before guessing them
// from others (https://docs.cloud.google.com/stackdriver/docs/reference/telemetry/v1.metrics):
// so res is given them explicitly, location (o.Location), namespace (its
// service.namespace), job (its service.name) and instance (its
// service.instance.id), and no two instances ever write the same time
// series. The exporters dial lazily: a collector that is down fails the
// exports (logged by the SDK), not the start.
func NewCloud(ctx context.Context, o CloudOptions, res *resource.Resource) (*Telemetry, error) {
	if o.Project == "" {
		return nil, errors.New("telemetry: no project to export to")
	}
	endpoint := cmp.Or(o.Endpoint, CloudEndpoint)
	creds, headers := o.Credentials, map[string]string{}
	if creds == nil {
		var err error
		creds, headers, err = googleCredentials(ctx, o.Project)
		if err != nil {
			return nil, err
		}
	}
	res, err := cloudResource(o, res)
	if err != nil {
		return nil, err
	}
	mopts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(endpoint), otlpmetricgrpc.WithHeaders(headers),
		otlpmetricgrpc.WithDialOption(grpc.WithPerRPCCredentials(creds))}
	topts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithHeaders(headers),
		otlptracegrpc.WithDialOption(grpc.WithPerRPCCredentials(creds))}
	if o.Insecure {
		mopts = append(mopts, otlpmetricgrpc.WithInsecure())
		topts = append(topts, otlptracegrpc.WithInsecure())
	}
	me, err := otlpmetricgrpc.New(ctx, mopts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP metric exporter for %s: %w", endpoint, err)
	}
	te, err := otlptracegrpc.New(ctx, topts...)
	if err != nil {
		_ = me.Shutdown(context.Background())
		return nil, fmt.Errorf("telemetry: OTLP span exporter for %s: %w", endpoint, err)
	}
	return New(Options{
		Readers:        []sdkmetric.Reader{sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(cmp.Or(o.Interval, CloudInterval)))},
		SpanProcessors: []sdktrace.SpanProcessor{sdktrace.NewBatchSpanProcessor(te)},
		Resource:       res,
	})
}

// Resource attributes the Telemetry API reads.
const (
	// AttrProject is the project the API writes a resource's telemetry to.
	AttrProject = "gcp.project_id"
	// The labels of the metrics' prometheus_target, when set.
	AttrLocation  = "location"
	AttrNamespace = "namespace"
	AttrJob       = "job"
	AttrInstance  = "instance"
)

// cloudResource is res with the attributes the Telemetry API reads.
func cloudResource(o CloudOptions, res *resource.Resource) (*resource.Resource, error) {
	if res == nil {
		res = resource.Default()
	}
	get := func(key string) string {
		v, _ := res.Set().Value(attribute.Key(key))
		return v.AsString()
	}
	out, err := resource.Merge(res, resource.NewSchemaless(
		attribute.String(AttrProject, o.Project),
		attribute.String(AttrLocation, cmp.Or(o.Location, "global")),
		attribute.String(AttrNamespace, get("service.namespace")),
		attribute.String(AttrJob, get("service.name")),
		attribute.String(AttrInstance, get("service.instance.id")),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return out, nil
}

// googleCredentials are the process's application default credentials,
// as per-call OAuth tokens. A user's credentials (a developer's gcloud
// login) carry no project of their own: the calls name the project to
// charge in x-goog-user-project, as Google documents for the Telemetry
// API (https://docs.cloud.google.com/stackdriver/docs/reference/telemetry/authentication);
// a service account's are charged to its own project.
func googleCredentials(ctx context.Context, project string) (credentials.PerRPCCredentials, map[string]string, error) {
	c, err := google.FindDefaultCredentials(ctx, cloudScope)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: application default credentials: %w", err)
	}
	headers := map[string]string{}
	var file struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(c.JSON, &file) == nil && file.Type == "authorized_user" {
		headers["x-goog-user-project"] = project
	}
	return oauth.TokenSource{TokenSource: c.TokenSource}, headers, nil
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
