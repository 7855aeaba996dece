package telemetry_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/better-compute/kubernetes/shared/telemetry"
)

// collector is an OTLP collector in the test's process, as the Telemetry
// API would receive the exports: what each call carried and its
// metadata.
type collector struct {
	colmetrics.UnimplementedMetricsServiceServer

	mu      sync.Mutex
	metrics []*colmetrics.ExportMetricsServiceRequest
	spans   []*coltrace.ExportTraceServiceRequest
	md      []metadata.MD
}

func (c *collector) Export(ctx context.Context, req *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.metrics = append(c.metrics, req)
	c.md = append(c.md, md)
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

// traceServer is the collector's trace service (its method has the
// metric service's name).
type traceServer struct {
	coltrace.UnimplementedTraceServiceServer
	c *collector
}

func (t traceServer) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.c.spans = append(t.c.spans, req)
	t.c.md = append(t.c.md, md)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	srv := grpc.NewServer()
	colmetrics.RegisterMetricsServiceServer(srv, c)
	coltrace.RegisterTraceServiceServer(srv, traceServer{c: c})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return c, lis.Addr().String()
}

// token is a bearer token on every call, over a plain connection to the
// collector on loopback.
type token string

func (tk token) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(tk)}, nil
}

func (token) RequireTransportSecurity() bool { return false }

// NewCloud exports every metric and the spans over OTLP to the configured
// endpoint, with the resource attributes the Telemetry API maps to the
// project and to the prometheus_target's labels, and the credentials on
// each call.
func TestCloudExportsOverOTLP(t *testing.T) {
	c, addr := startCollector(t)
	ctx := context.Background()
	res := telemetry.Resource("bc-reconcile")
	tel, err := telemetry.NewCloud(ctx, telemetry.CloudOptions{
		Project: "bc-prod", Location: "europe-west1", Endpoint: addr,
		Credentials: token("t0k3n"), Insecure: true, Interval: time.Hour,
	}, res)
	if err != nil {
		t.Fatal(err)
	}
	m := tel.Metrics()
	m.RunDone(ctx, "clusters", "changed")
	m.Converged(ctx, "clusters", 3*time.Second)
	m.ChainRestarted(ctx, "clusters")
	m.OutboxBacklog(ctx, 2, 30*time.Second)
	m.BudgetSpent(ctx, "bc-platform-1")
	m.JoinCall(ctx, "ok")
	m.ProviderCall(ctx, "GetCluster", "OK")
	_, span := tel.Tracer().Start(ctx, "reconcile clusters")
	span.End()
	// Flush exports and waits for the collector's answers: what it has
	// then is all there is.
	if err := tel.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(ctx) })

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.metrics) == 0 || len(c.spans) == 0 {
		t.Fatalf("the collector got %d metric and %d span exports, want both", len(c.metrics), len(c.spans))
	}
	instance, _ := res.Set().Value("service.instance.id")
	wantRes := map[string]string{
		"gcp.project_id": "bc-prod",
		"location":       "europe-west1",
		"namespace":      telemetry.Namespace,
		"job":            "bc-reconcile",
		"instance":       instance.AsString(),
		"service.name":   "bc-reconcile",
	}
	checkResource := func(what string, r *resourcepb.Resource) {
		t.Helper()
		got := attrs(r.GetAttributes())
		for k, v := range wantRes {
			if got[k] != v {
				t.Errorf("%s resource %s = %q, want %q", what, k, got[k], v)
			}
		}
	}

	kinds := map[string]string{}
	for _, req := range c.metrics {
		for _, rm := range req.GetResourceMetrics() {
			checkResource("metrics", rm.GetResource())
			for _, sm := range rm.GetScopeMetrics() {
				for _, mt := range sm.GetMetrics() {
					kind, points := kindOf(mt)
					kinds[mt.GetName()] = kind
					for _, p := range points {
						keys := make([]string, 0, len(p))
						for _, kv := range p {
							keys = append(keys, kv.GetKey())
						}
						slices.Sort(keys)
						want := slices.Sorted(slices.Values(telemetry.Attributes[mt.GetName()]))
						if !slices.Equal(keys, want) {
							t.Errorf("%s point has attributes %v, want %v", mt.GetName(), keys, want)
						}
					}
				}
			}
		}
	}
	for name, want := range telemetry.Kinds {
		if kinds[name] != want {
			t.Errorf("metric %s exported as %q, want a %s (%s)", name, kinds[name], want, telemetry.CloudMetricType(name))
		}
	}

	var spans []string
	for _, req := range c.spans {
		for _, rs := range req.GetResourceSpans() {
			checkResource("spans", rs.GetResource())
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans = append(spans, s.GetName())
				}
			}
		}
	}
	if !slices.Contains(spans, "reconcile clusters") {
		t.Errorf("spans exported %v, want reconcile clusters", spans)
	}
	for _, md := range c.md {
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer t0k3n" {
			t.Errorf("export authorized by %v, want the credentials' bearer token", got)
		}
	}
}

func TestCloudNeedsAProject(t *testing.T) {
	if _, err := telemetry.NewCloud(context.Background(), telemetry.CloudOptions{Credentials: token("x")}, nil); err == nil {
		t.Error("NewCloud without a project succeeded")
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return out
}

// kindOf is the kind a metric is written as (telemetry.Kinds) and the
// attributes of its points.
func kindOf(m *metricspb.Metric) (string, [][]*commonpb.KeyValue) {
	var points [][]*commonpb.KeyValue
	switch d := m.GetData().(type) {
	case *metricspb.Metric_Sum:
		for _, p := range d.Sum.GetDataPoints() {
			points = append(points, p.GetAttributes())
		}
		if d.Sum.GetIsMonotonic() && d.Sum.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
			return telemetry.KindCounter, points
		}
		return "non-cumulative or non-monotonic sum", points
	case *metricspb.Metric_Gauge:
		for _, p := range d.Gauge.GetDataPoints() {
			points = append(points, p.GetAttributes())
		}
		return telemetry.KindGauge, points
	case *metricspb.Metric_Histogram:
		for _, p := range d.Histogram.GetDataPoints() {
			points = append(points, p.GetAttributes())
		}
		if d.Histogram.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
			return telemetry.KindHistogram, points
		}
		return "delta histogram", points
	}
	return "unknown", points
}
