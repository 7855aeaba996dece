package cloudrun

import (
	"cmp"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/telemetry"
)

// stdoutInterval is how often TELEMETRY=stdout prints the metrics: often
// enough to watch a change converge, rarely enough to read the logs.
const stdoutInterval = 30 * time.Second

// flushTimeout bounds the export after a watchdog pass.
const flushTimeout = 10 * time.Second

// newTelemetry returns the telemetry cfg asks for (Config.Telemetry),
// printing stdout's on out. Telemetry that cannot start (no Google
// credentials for the Telemetry API) is logged and replaced by none: the
// functions serve without it rather than not at all.
func newTelemetry(cfg Config, out io.Writer, log *slog.Logger) *telemetry.Telemetry {
	service := cmp.Or(cfg.Service, cfg.Function, "functions")
	var t *telemetry.Telemetry
	var err error
	switch cfg.Telemetry {
	case TelemetryCloud:
		t, err = telemetry.NewCloud(context.Background(), telemetry.CloudOptions{Project: cfg.Project, Location: location(cfg)}, telemetry.Resource(service))
	case TelemetryStdout:
		t, err = telemetry.NewStdout(out, stdoutInterval, telemetry.Resource(service))
	default:
		return telemetry.Off()
	}
	if err != nil {
		log.Warn("Telemetry cannot start; serving without it", "telemetry", cfg.Telemetry, "error", err)
		return telemetry.Off()
	}
	return t
}

// location is the region of the instance's metrics: that of the
// reconcile queue, which Terraform puts with the services (var.region);
// empty (global) without one. Read from the configuration rather than
// Cloud Run's metadata server, so that starting costs no call.
func location(cfg Config) string {
	first, _, _ := strings.Cut(cfg.TasksQueue, ",")
	if p := strings.Split(first, "/"); len(p) == 6 && p[2] == "locations" {
		return p[3]
	}
	return ""
}

// serveTraced serves r with h under a server span: a child of the trace
// the request came with (Cloud Run's X-Cloud-Trace-Context, or a
// traceparent), so that the span and the request's logs are one trace,
// and the logs name the span. What the request kicks (a reconcile task)
// links to this span.
func serveTraced(tr trace.Tracer, project string, h http.Handler, w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	in, _ := logging.TraceFromHeader(r.Header, project)
	if parent, ok := spanContextOf(in); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := tr.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	defer span.End()
	if sc := span.SpanContext(); sc.IsValid() && project != "" {
		ctx = logging.ContextWithTrace(ctx, logging.Trace{Project: project, TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), Sampled: sc.IsSampled()})
	}
	sw := &httpapi.StatusWriter{ResponseWriter: w}
	h.ServeHTTP(sw, r.WithContext(ctx))
	span.SetAttributes(attribute.Int("http.response.status_code", sw.Status))
	if sw.Status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(sw.Status))
	}
}

// spanContextOf is the remote span of a request's trace, when it names
// one.
func spanContextOf(t logging.Trace) (trace.SpanContext, bool) {
	tid, err1 := hex.DecodeString(t.TraceID)
	sid, err2 := hex.DecodeString(t.SpanID)
	if err1 != nil || err2 != nil || len(tid) != 16 || len(sid) != 8 {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{Remote: true}
	copy(cfg.TraceID[:], tid)
	copy(cfg.SpanID[:], sid)
	if t.Sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// flushing returns h exporting the telemetry after each request. The
// watchdog's instance has CPU only while it serves (cpu_idle on Cloud
// Run) and serves a minute apart: each pass's measurements leave with it
// rather than wait for a periodic export that may not get to run.
func flushing(h http.Handler, t *telemetry.Telemetry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), flushTimeout)
		defer cancel()
		if err := t.Flush(ctx); err != nil {
			logging.FromContext(ctx).Warn("Exporting the watchdog's telemetry failed; the next pass exports it", "error", err)
		}
	})
}
