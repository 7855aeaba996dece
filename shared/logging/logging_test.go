package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decode parses every JSON line written to buf.
func decode(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("Unmarshal(%q) = %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestSeverity(t *testing.T) {
	tests := []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug - 4, "DEBUG"},
		{slog.LevelDebug, "DEBUG"},
		{slog.LevelInfo, "INFO"},
		{slog.LevelInfo + 2, "INFO"},
		{slog.LevelWarn, "WARNING"},
		{slog.LevelError, "ERROR"},
		{slog.LevelError + 4, "ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			New(&buf, slog.LevelDebug-4).Log(context.Background(), tt.level, "hello")
			entries := decode(t, &buf)
			if len(entries) != 1 {
				t.Fatalf("got %d entries, want 1", len(entries))
			}
			if got := entries[0][KeySeverity]; got != tt.want {
				t.Errorf("severity for %v = %v, want %v", tt.level, got, tt.want)
			}
			if got := Severity(tt.level); got != tt.want {
				t.Errorf("Severity(%v) = %v, want %v", tt.level, got, tt.want)
			}
		})
	}
}

func TestEntryShape(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, slog.LevelInfo).Info("Deleting node pool", "tenantId", "acme")
	e := decode(t, &buf)[0]

	if got, want := e[KeyMessage], "Deleting node pool"; got != want {
		t.Errorf("message = %v, want %v", got, want)
	}
	for _, k := range []string{"msg", "level", "source"} {
		if v, ok := e[k]; ok {
			t.Errorf("entry has slog key %q = %v, want it renamed", k, v)
		}
	}
	if got := e["tenantId"]; got != "acme" {
		t.Errorf("tenantId = %v, want acme", got)
	}
	ts, _ := e[KeyTime].(string)
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("time %q is not RFC 3339: %v", ts, err)
	}
	src, ok := e[KeySourceLocation].(map[string]any)
	if !ok {
		t.Fatalf("%s = %v, want an object", KeySourceLocation, e[KeySourceLocation])
	}
	if f, _ := src["file"].(string); !strings.HasSuffix(f, "logging_test.go") {
		t.Errorf("sourceLocation.file = %q, want this file", f)
	}
	if l, _ := src["line"].(string); l == "" || l == "0" {
		t.Errorf("sourceLocation.line = %q, want a line number as a string", l)
	}
	if fn, _ := src["function"].(string); !strings.HasSuffix(fn, "TestEntryShape") {
		t.Errorf("sourceLocation.function = %q, want TestEntryShape", fn)
	}
}

func TestLevelFilter(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewHandler(&buf, &Options{Level: slog.LevelWarn}))
	l.Info("dropped")
	l.Warn("kept")
	entries := decode(t, &buf)
	if len(entries) != 1 || entries[0][KeyMessage] != "kept" {
		t.Errorf("entries = %v, want only the warning", entries)
	}
	if _, ok := entries[0][KeySourceLocation]; ok {
		t.Errorf("sourceLocation present without AddSource")
	}
}

func TestGroupedUserKeysUntouched(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, slog.LevelInfo).Info("m", slog.Group("req", "level", "x", "msg", "y"))
	req, _ := decode(t, &buf)[0]["req"].(map[string]any)
	want := map[string]any{"level": "x", "msg": "y"}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("req = %v, want %v", req, want)
	}
}

func TestParseTraceparent(t *testing.T) {
	tests := []struct {
		in     string
		want   Trace
		wantOK bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Sampled: true}, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
			Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}, true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
			Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Sampled: true}, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", Trace{}, false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Trace{}, false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", Trace{}, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", Trace{}, false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", Trace{}, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01", Trace{}, false},
		{"", Trace{}, false},
		{"garbage", Trace{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseTraceparent(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseTraceparent(%q) = %+v, %v, want %+v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseCloudTraceContext(t *testing.T) {
	const id = "105445aa7843bc8bf206b12000100000"
	tests := []struct {
		in     string
		want   Trace
		wantOK bool
	}{
		{id + "/1;o=1", Trace{TraceID: id, SpanID: "0000000000000001", Sampled: true}, true},
		{id + "/18446744073709551615;o=0", Trace{TraceID: id, SpanID: "ffffffffffffffff"}, true},
		{id + "/255", Trace{TraceID: id, SpanID: "00000000000000ff"}, true},
		{strings.ToUpper(id), Trace{TraceID: id}, true},
		{id + "/0;o=1", Trace{TraceID: id, Sampled: true}, true},
		{id + "/abc;o=1", Trace{}, false},
		{"xyz/1;o=1", Trace{}, false},
		{"", Trace{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseCloudTraceContext(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseCloudTraceContext(%q) = %+v, %v, want %+v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestTraceInEntries(t *testing.T) {
	const (
		traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		cloudTrace  = "105445aa7843bc8bf206b12000100000/1;o=0"
	)
	tests := []struct {
		name        string
		header      http.Header
		project     string
		log         func(ctx context.Context, l *slog.Logger)
		wantTrace   any
		wantSpan    any
		wantSampled any
	}{
		{
			name:        "traceparent, context method",
			header:      http.Header{"Traceparent": {traceparent}},
			project:     "bc-dev",
			log:         func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m") },
			wantTrace:   "projects/bc-dev/traces/4bf92f3577b34da6a3ce929d0e0e4736",
			wantSpan:    "00f067aa0ba902b7",
			wantSampled: true,
		},
		{
			name:        "cloud trace header, logger from context without context method",
			header:      http.Header{"X-Cloud-Trace-Context": {cloudTrace}},
			project:     "bc-dev",
			log:         func(ctx context.Context, _ *slog.Logger) { FromContext(ctx).Info("m") },
			wantTrace:   "projects/bc-dev/traces/105445aa7843bc8bf206b12000100000",
			wantSpan:    "0000000000000001",
			wantSampled: false,
		},
		{
			name:    "traceparent wins over the cloud header",
			header:  http.Header{"Traceparent": {traceparent}, "X-Cloud-Trace-Context": {cloudTrace}},
			project: "p",
			log: func(ctx context.Context, _ *slog.Logger) {
				FromContext(With(ctx, "tenantId", "acme")).Info("m")
			},
			wantTrace:   "projects/p/traces/4bf92f3577b34da6a3ce929d0e0e4736",
			wantSpan:    "00f067aa0ba902b7",
			wantSampled: true,
		},
		{
			name:    "inside a group the trace stays at the top level",
			header:  http.Header{"Traceparent": {traceparent}},
			project: "p",
			log: func(ctx context.Context, l *slog.Logger) {
				l.With("a", 1).WithGroup("g").With("b", 2).WithGroup("h").InfoContext(ctx, "m", "c", 3)
			},
			wantTrace:   "projects/p/traces/4bf92f3577b34da6a3ce929d0e0e4736",
			wantSpan:    "00f067aa0ba902b7",
			wantSampled: true,
		},
		{
			name:    "no project, no trace",
			header:  http.Header{"Traceparent": {traceparent}},
			project: "",
			log:     func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m") },
		},
		{
			name:    "no header",
			header:  http.Header{},
			project: "p",
			log:     func(ctx context.Context, l *slog.Logger) { FromContext(ctx).InfoContext(ctx, "m") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := New(&buf, slog.LevelInfo)
			ctx := NewContext(context.Background(), l)
			ctx = WithTrace(ctx, tt.header, tt.project)
			tt.log(ctx, l)
			e := decode(t, &buf)[0]
			if got := e[KeyTrace]; got != tt.wantTrace {
				t.Errorf("%s = %v, want %v", KeyTrace, got, tt.wantTrace)
			}
			if got := e[KeySpanID]; got != tt.wantSpan {
				t.Errorf("%s = %v, want %v", KeySpanID, got, tt.wantSpan)
			}
			if got := e[KeyTraceSampled]; got != tt.wantSampled {
				t.Errorf("%s = %v, want %v", KeyTraceSampled, got, tt.wantSampled)
			}
		})
	}
}

func TestGroupsNestedAroundRecordAttrs(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, slog.LevelInfo)
	ctx := ContextWithTrace(context.Background(), Trace{Project: "p", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	l.With("a", 1).WithGroup("g").With("b", 2).WithGroup("h").InfoContext(ctx, "m", "c", 3)
	e := decode(t, &buf)[0]
	got := map[string]any{"a": e["a"], "g": e["g"]}
	want := map[string]any{
		"a": 1.0,
		"g": map[string]any{"b": 2.0, "h": map[string]any{"c": 3.0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attrs = %v, want %v", got, want)
	}
}

func TestFromContextDefault(t *testing.T) {
	if got := FromContext(context.Background()); got != slog.Default() {
		t.Errorf("FromContext(empty) = %v, want slog.Default()", got)
	}
}

func TestWithAttachesKeysOnce(t *testing.T) {
	var buf bytes.Buffer
	ctx := NewContext(context.Background(), New(&buf, slog.LevelInfo))
	ctx = With(ctx, "tenantId", "acme", "clusterId", "kcl_1")
	FromContext(ctx).Info("first")
	FromContext(ctx).Warn("second")
	for i, e := range decode(t, &buf) {
		if e["tenantId"] != "acme" || e["clusterId"] != "kcl_1" {
			t.Errorf("entry %d = %v, want tenantId and clusterId", i, e)
		}
	}
}

// A request's context, as the edge makes it: the process's logger and the
// request's trace, which every line logged from it then carries.
func TestRequestContext(t *testing.T) {
	var buf bytes.Buffer
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Header.Set("X-Cloud-Trace-Context", "105445aa7843bc8bf206b12000100000/2;o=1")
	ctx := WithTrace(NewContext(req.Context(), New(&buf, slog.LevelInfo)), req.Header, "bc-dev")
	FromContext(ctx).Info("handled")
	e := decode(t, &buf)[0]
	if got, want := e[KeyTrace], "projects/bc-dev/traces/105445aa7843bc8bf206b12000100000"; got != want {
		t.Errorf("%s = %v, want %v", KeyTrace, got, want)
	}
	if got, want := e[KeyMessage], "handled"; got != want {
		t.Errorf("message = %v, want %v", got, want)
	}
}
