package cloudrun

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/telemetry/telemetrytest"
)

func TestLoadConfigTelemetry(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // "" wants an error naming TELEMETRY
	}{
		{"off outside Cloud Run", with(nil), TelemetryOff},
		{"cloud on Cloud Run", with(map[string]string{"K_SERVICE": "compute-reconcile"}), TelemetryCloud},
		{"off on Cloud Run when asked", with(map[string]string{"K_SERVICE": "compute-reconcile", "TELEMETRY": "off"}), TelemetryOff},
		{"stdout", with(map[string]string{"TELEMETRY": "stdout"}), TelemetryStdout},
		{"cloud elsewhere when asked", with(map[string]string{"TELEMETRY": "cloud"}), TelemetryCloud},
		{"unknown", with(map[string]string{"TELEMETRY": "prometheus"}), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := LoadConfig(env(c.env))
			switch {
			case c.want == "" && (err == nil || !strings.Contains(err.Error(), "TELEMETRY:")):
				t.Errorf("LoadConfig = %+v, %v; want an error naming TELEMETRY", cfg.Telemetry, err)
			case c.want != "" && (err != nil || cfg.Telemetry != c.want):
				t.Errorf("LoadConfig: Telemetry = %q, %v; want %q", cfg.Telemetry, err, c.want)
			}
		})
	}
	read, required := Variables("reconcile")
	for _, v := range []string{"TELEMETRY", "K_SERVICE"} {
		if !strings.Contains(strings.Join(read, " "), v) || strings.Contains(strings.Join(required, " "), v) {
			t.Errorf("Variables(reconcile) = read %v, required %v; want %s read, not required", read, required, v)
		}
	}
}

func TestTelemetryLocation(t *testing.T) {
	for _, c := range []struct{ queue, want string }{
		{"projects/bc-prod/locations/europe-west1/queues/reconcile", "europe-west1"},
		{"", ""},
		{"reconcile", ""},
	} {
		if got := location(Config{TasksQueue: c.queue}); got != c.want {
			t.Errorf("location(TasksQueue %q) = %q, want %q", c.queue, got, c.want)
		}
	}
}

// Every request is served under a span in the trace it came with (Cloud
// Run's header), and its logs name that span.
func TestEdgeTracesRequests(t *testing.T) {
	rec := telemetrytest.New(t)
	b := &fakeBuilder{serve: func(name string, w http.ResponseWriter, r *http.Request) {
		logging.FromContext(r.Context()).Info("Serving")
		w.WriteHeader(http.StatusServiceUnavailable)
	}}
	a, logs := newTestApp(t, complete(), b)
	a.tel, a.ownTel = rec.Telemetry, false
	const traceID = "105445aa7843bc8bf206b12000100000"
	call(t, a, "kubernetesClusters-create", "/", http.Header{"X-Cloud-Trace-Context": {traceID + "/1;o=1"}})

	spans := rec.Spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want the request's", len(spans))
	}
	s := spans[0]
	if s.Name() != "POST /" || s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != "0000000000000001" || !s.Parent().IsRemote() {
		t.Errorf("span %q in trace %s under %s, want POST / in %s under the platform's span 0000000000000001", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), traceID)
	}
	if s.Status().Code.String() != "Error" {
		t.Errorf("span status %v, want Error for a 503", s.Status())
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil || e["message"] != "Serving" {
			continue
		}
		found = true
		if e[logging.KeyTrace] != "projects/bc-prod/traces/"+traceID || e[logging.KeySpanID] != s.SpanContext().SpanID().String() {
			t.Errorf("log names trace %v span %v, want trace %s span %s", e[logging.KeyTrace], e[logging.KeySpanID], traceID, s.SpanContext().SpanID())
		}
	}
	if !found {
		t.Errorf("the handler's log line is missing:\n%s", logs)
	}
}
