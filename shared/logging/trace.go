package logging

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
)

// Trace identifies the trace and span of a request, as Cloud Trace and the
// W3C Trace Context header carry them.
type Trace struct {
	Project string // Google Cloud project that owns the trace
	TraceID string // 32 lowercase hex digits
	SpanID  string // 16 lowercase hex digits; empty if the header had none
	Sampled bool
}

// Name is the trace's resource name, projects/P/traces/T, the form
// logging.googleapis.com/trace takes. It is empty without a project.
func (t Trace) Name() string {
	if t.Project == "" || t.TraceID == "" {
		return ""
	}
	return "projects/" + t.Project + "/traces/" + t.TraceID
}

// attrs are the top-level Cloud Logging keys for the trace; none without a
// project, since Cloud Logging ignores a trace ID it cannot place.
func (t Trace) attrs() []slog.Attr {
	name := t.Name()
	if name == "" {
		return nil
	}
	attrs := []slog.Attr{slog.String(KeyTrace, name)}
	if t.SpanID != "" {
		attrs = append(attrs, slog.String(KeySpanID, t.SpanID))
	}
	return append(attrs, slog.Bool(KeyTraceSampled, t.Sampled))
}

// ParseTraceparent parses a W3C traceparent header
// ("00-<32 hex trace>-<16 hex span>-<2 hex flags>"). It reports false for
// a malformed value, an all-zero trace or span ID, or version ff.
func ParseTraceparent(v string) (Trace, bool) {
	parts := strings.Split(strings.TrimSpace(v), "-")
	if len(parts) < 4 {
		return Trace{}, false
	}
	version, traceID, spanID, flags := parts[0], parts[1], parts[2], parts[3]
	// Version 00 has exactly four fields; later versions may append more.
	if !isHex(version, 2) || version == "ff" || (version == "00" && len(parts) != 4) {
		return Trace{}, false
	}
	if !isHex(traceID, 32) || isZero(traceID) || !isHex(spanID, 16) || isZero(spanID) || !isHex(flags, 2) {
		return Trace{}, false
	}
	f, _ := strconv.ParseUint(flags, 16, 8)
	return Trace{TraceID: traceID, SpanID: spanID, Sampled: f&1 == 1}, true
}

// ParseCloudTraceContext parses an X-Cloud-Trace-Context header
// ("TRACE_ID/SPAN_ID;o=1", span and options optional). The span ID, decimal
// in this header, is returned as 16 hex digits as Cloud Logging wants it.
func ParseCloudTraceContext(v string) (Trace, bool) {
	v = strings.TrimSpace(v)
	v, opts, _ := strings.Cut(v, ";")
	traceID, span, hasSpan := strings.Cut(v, "/")
	traceID = strings.ToLower(traceID)
	if !isHex(traceID, 32) || isZero(traceID) {
		return Trace{}, false
	}
	t := Trace{TraceID: traceID}
	if hasSpan && span != "" {
		n, err := strconv.ParseUint(span, 10, 64)
		if err != nil {
			return Trace{}, false
		}
		if n != 0 {
			t.SpanID = strconv.FormatUint(n, 16)
			t.SpanID = strings.Repeat("0", 16-len(t.SpanID)) + t.SpanID
		}
	}
	t.Sampled = strings.TrimSpace(opts) == "o=1"
	return t, true
}

// TraceFromHeader returns the trace of a request from its traceparent
// header, or failing that its X-Cloud-Trace-Context header, owned by
// project.
func TraceFromHeader(h http.Header, project string) (Trace, bool) {
	t, ok := ParseTraceparent(h.Get("Traceparent"))
	if !ok {
		t, ok = ParseCloudTraceContext(h.Get("X-Cloud-Trace-Context"))
	}
	t.Project = project
	return t, ok
}

type traceKey struct{}

// WithTrace returns a copy of ctx carrying the trace of the request headers
// h (TraceFromHeader) in project, so that records logged under it carry
// logging.googleapis.com/trace and spanId. Without a valid header, or with
// an empty project, ctx is returned unchanged.
func WithTrace(ctx context.Context, h http.Header, project string) context.Context {
	t, ok := TraceFromHeader(h, project)
	if !ok || project == "" {
		return ctx
	}
	return ContextWithTrace(ctx, t)
}

// ContextWithTrace returns a copy of ctx carrying t.
func ContextWithTrace(ctx context.Context, t Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) (Trace, bool) {
	if ctx == nil {
		return Trace{}, false
	}
	t, ok := ctx.Value(traceKey{}).(Trace)
	return t, ok
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func isZero(s string) bool {
	return strings.Trim(s, "0") == ""
}
