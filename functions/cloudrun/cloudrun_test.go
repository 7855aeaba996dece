package cloudrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/join"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
	"github.com/better-compute/kubernetes/shared/telemetry"
	"github.com/better-compute/kubernetes/shared/wait"
)

// fakeBuilder fails its first failures builds, then builds handlers that
// run serve.
type fakeBuilder struct {
	mu       sync.Mutex
	failures int
	builds   map[string]int
	closed   int
	serve    func(name string, w http.ResponseWriter, r *http.Request)
}

func (b *fakeBuilder) Handler(ctx context.Context, name string) (http.Handler, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.builds[name]++
	if b.failures > 0 {
		b.failures--
		return nil, errors.New("firestore unreachable")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.serve(name, w, r) }), nil
}

func (b *fakeBuilder) Parts(ctx context.Context) (Parts, error) { return Parts{}, nil }

func (b *fakeBuilder) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed++
	return nil
}

func (b *fakeBuilder) count(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.builds[name]
}

func ok(name string, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"served\":%q}\n", name)
}

// newTestApp returns an app over a complete environment and a fake builder,
// and the buffer its logs go to.
func newTestApp(t *testing.T, environment map[string]string, b *fakeBuilder) (*App, *bytes.Buffer) {
	t.Helper()
	if b.builds == nil {
		b.builds = map[string]int{}
	}
	if b.serve == nil {
		b.serve = ok
	}
	cfg, err := LoadConfig(env(environment))
	if err != nil {
		t.Fatalf("LoadConfig = %v", err)
	}
	logs := &bytes.Buffer{}
	a := newApp(cfg, &syncWriter{w: logs}, Options{}, func(Config, *slog.Logger, *telemetry.Telemetry) builder { return b })
	return a, logs
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// call serves one request to function name of a, and returns the status
// and the error code of the envelope (empty if none).
func call(t *testing.T, a *App, name, path string, header http.Header) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	a.Handler(name).ServeHTTP(rec, req)
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &env)
	return rec.Code, env.Error.Code, rec.Header()
}

func TestFailedBuildAnswers503AndIsRetried(t *testing.T) {
	b := &fakeBuilder{failures: 2}
	a, _ := newTestApp(t, complete(), b)
	const fn = "kubernetesNodePools-create"
	for i := range 2 {
		status, code, h := call(t, a, fn, "/", nil)
		if status != http.StatusServiceUnavailable || code != "UNAVAILABLE" {
			t.Fatalf("request #%d while the build fails = %d %q, want 503 UNAVAILABLE", i+1, status, code)
		}
		if h.Get("Retry-After") == "" {
			t.Errorf("request #%d: no Retry-After on 503", i+1)
		}
	}
	for i := range 3 {
		if status, code, _ := call(t, a, fn, "/", nil); status != http.StatusOK {
			t.Fatalf("request #%d after recovery = %d %q, want 200", i+3, status, code)
		}
	}
	if got := b.count(fn); got != 3 {
		t.Errorf("builds of %s = %d, want 3 (two failures retried, the success kept)", fn, got)
	}
	if got := b.count("reconcile"); got != 0 {
		t.Errorf("builds of reconcile = %d, want 0 (built only on its own first request)", got)
	}
}

// TestNewRefusesABrokenConfiguration checks that a Config made in code is
// held to what LoadConfig holds the environment to, naming each broken
// setting by its variable.
func TestNewRefusesABrokenConfiguration(t *testing.T) {
	good, err := LoadConfig(env(complete()))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // variables the error names; none: accepted
	}{
		{"as loaded", func(*Config) {}, nil},
		{"no queue", func(c *Config) { c.TasksQueue = "" }, []string{"TASKS_QUEUE"}},
		{"zero Config", func(c *Config) { *c = Config{} }, []string{"GOOGLE_CLOUD_PROJECT", "TASKS_QUEUE", "FIRESTORE_DATABASE", "CONVERGING_INTERVAL", "TELEMETRY", "RECONCILE_ISSUER_URL"}},
		{"defaults only", func(c *Config) { *c = Defaults() }, []string{"GOOGLE_CLOUD_PROJECT", "TASKS_QUEUE", "AUTH_AUDIENCE"}},
		{"no tasks audience", func(c *Config) { c.TasksAudience = "" }, []string{"TASKS_AUDIENCE"}},
		{"zero lease", func(c *Config) { c.LeaseTTL = 0 }, []string{"LEASE_TTL"}},
		{"no instances", func(c *Config) { c.ReconcileInstances = 0 }, []string{"RECONCILE_MAX_INSTANCES"}},
		{"share above one", func(c *Config) { c.ProviderQuotaShare = 1.5 }, []string{"PROVIDER_QUOTA_SHARE"}},
		{"no quota", func(c *Config) { c.ProviderQuota = 0 }, nil},
		{"unknown function", func(c *Config) { c.Function = "nothing" }, []string{"FUNCTION_TARGET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.change(&cfg)
			a, err := New(cfg, Options{Log: slog.New(slog.DiscardHandler)})
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("New = %v, want an app", err)
				}
				if err := a.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New = an app, want an error naming %v", tt.want)
			}
			for _, name := range tt.want {
				if !strings.Contains(err.Error(), name+":") {
					t.Errorf("New = %v, want it to name %s", err, name)
				}
			}
		})
	}
}

func TestPaths(t *testing.T) {
	tests := []struct {
		fn, path string
		want     int
	}{
		{"kubernetesClusters-get", "/", http.StatusOK},
		{"kubernetesClusters-get", "/kubernetesClusters-get", http.StatusOK},
		{"kubernetesClusters-get", "/api/compute/kubernetesClusters/get", http.StatusOK},
		{"kubernetesClusters-get", "/api/compute/kubernetesClusters/delete", http.StatusNotFound},
		{"kubernetesClusters-get", "/anything", http.StatusNotFound},
		{"reconcile", "/", http.StatusOK},
		{"reconcile", "/reconcile", http.StatusOK},
		{"reconcile", "/internal/reconcile", http.StatusOK},
		{"watchdog", "/internal/reconcile", http.StatusNotFound},
		{"reconcile", "/api/compute/kubernetesClusters/get", http.StatusNotFound},
		// Where the push subscriptions deliver: the topic in the path, as
		// the Functions Framework reads it.
		{PoolEventsFunction, "/internal/poolEvents", http.StatusOK},
		{PoolEventsFunction, "/projects/bc-pools/topics/compute.pool.updated", http.StatusOK},
		{PoolEventsFunction, "/projects/bc-pools/topics/compute.pool.archived", http.StatusOK},
		{PoolEventsFunction, "/projects/bc-pools/topics/kubernetes.cluster.ready", http.StatusNotFound},
		{PoolEventsFunction, "/projects/bc-pools/topics/compute.pool.updated/x", http.StatusNotFound},
		{"reconcile", "/projects/bc-pools/topics/compute.pool.updated", http.StatusNotFound},
	}
	a, _ := newTestApp(t, complete(), &fakeBuilder{})
	for _, tt := range tests {
		t.Run(tt.fn+tt.path, func(t *testing.T) {
			if status, code, _ := call(t, a, tt.fn, tt.path, nil); status != tt.want {
				t.Errorf("POST %s to %s = %d %q, want %d", tt.path, tt.fn, status, code, tt.want)
			}
		})
	}
}

func TestPanicIsRecoveredAtTheEdge(t *testing.T) {
	b := &fakeBuilder{serve: func(string, http.ResponseWriter, *http.Request) { panic("boom") }}
	a, logs := newTestApp(t, complete(), b)
	status, code, _ := call(t, a, "reconcile", "/", nil)
	if status != http.StatusInternalServerError || code != "INTERNAL" {
		t.Errorf("panicking function = %d %q, want 500 INTERNAL", status, code)
	}
	if !strings.Contains(logs.String(), "Panic serving request") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("logs lack the panic and its stack:\n%s", logs)
	}
}

func TestLogsCarryTheTrace(t *testing.T) {
	b := &fakeBuilder{serve: func(name string, w http.ResponseWriter, r *http.Request) {
		logging.FromContext(r.Context()).Info("inside")
		ok(name, w, r)
	}}
	a, logs := newTestApp(t, complete(), b)
	h := http.Header{"X-Cloud-Trace-Context": {"105445aa7843bc8bf206b12000100000/1;o=1"}}
	if status, _, _ := call(t, a, "watchdog", "/", h); status != http.StatusOK {
		t.Fatalf("status = %d, want 200", status)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if m["message"] == "inside" {
			found = true
			if got, want := m["logging.googleapis.com/trace"], "projects/bc-prod/traces/105445aa7843bc8bf206b12000100000"; got != want {
				t.Errorf("trace = %v, want %v", got, want)
			}
			if got := m["function"]; got != "watchdog" {
				t.Errorf("function = %v, want watchdog", got)
			}
		}
	}
	if !found {
		t.Errorf("no log line from the handler:\n%s", logs)
	}
}

func TestShutdownWaitsForRequestsThenCloses(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	b := &fakeBuilder{serve: func(name string, w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		ok(name, w, r)
	}}
	a, _ := newTestApp(t, complete(), b)
	first := make(chan int, 1)
	go func() {
		status, _, _ := call(t, a, "reconcile", "/", nil)
		first <- status
	}()
	<-entered
	done := make(chan error, 1)
	go func() { done <- a.Shutdown(context.Background()) }()

	// Wait until shutdown has begun refusing, then check a new request.
	wait.Until(t, "shutdown draining", a.isDraining)
	if status, code, _ := call(t, a, "watchdog", "/", nil); status != http.StatusServiceUnavailable {
		t.Errorf("request during shutdown = %d %q, want 503", status, code)
	}
	select {
	case err := <-done:
		t.Fatalf("shutdown returned %v with a request in flight", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("shutdown = %v", err)
	}
	if got := <-first; got != http.StatusOK {
		t.Errorf("request in flight at shutdown = %d, want 200", got)
	}
	if b.closed != 1 {
		t.Errorf("builder closed %d times, want 1", b.closed)
	}
}

func TestShutdownGivesUpAtItsDeadline(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	b := &fakeBuilder{serve: func(name string, w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}}
	a, _ := newTestApp(t, complete(), b)
	go call(t, a, "reconcile", "/", nil)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("shutdown with a stuck request = %v, want %v", err, context.DeadlineExceeded)
	}
}

// TestMuxServesEveryFunctionOnItsPath serves the app's mux behind its edge,
// as the devstack does, and checks that each function's path reaches that
// function, with a request ID.
func TestMuxServesEveryFunctionOnItsPath(t *testing.T) {
	a, _ := newTestApp(t, complete(), &fakeBuilder{})
	h := a.Edge(a.Mux())
	for _, f := range Functions() {
		req := httptest.NewRequest(http.MethodPost, f.Path, strings.NewReader("{}"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var got struct{ Served string }
		_ = json.Unmarshal(rec.Body.Bytes(), &got)
		if rec.Code != http.StatusOK || got.Served != f.Name {
			t.Errorf("POST %s = %d %s, want 200 from %s", f.Path, rec.Code, rec.Body, f.Name)
		}
		if rec.Header().Get("X-Request-Id") == "" {
			t.Errorf("POST %s: no X-Request-Id", f.Path)
		}
	}
}

// TestFunctionsMatchTheAPI checks the registered names and load balancer
// paths against the API's own routes.
func TestFunctionsMatchTheAPI(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fs, err := firestore.NewClient(context.Background(), "bc-test", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	kube := newKubeConnector(Config{KubernetesToken: "no-cluster-here"}, nil)
	joiner, err := join.New(st, kube, nopEvents{})
	if err != nil {
		t.Fatal(err)
	}
	previewer, err := substrates.NewPreviewer(st)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := api.Routes(api.Deps{Auth: nopAuth{}, Store: st, Events: nopEvents{}, Kicker: nopKicker{},
		Previewer: previewer, Joiner: joiner})
	if err != nil {
		t.Fatalf("api.Routes = %v", err)
	}
	want := map[string]string{}
	for _, r := range routes {
		want[r.Function] = r.Path
	}
	got := map[string]string{}
	for _, f := range registered {
		if f.kind == kindAPI {
			got[f.Name] = f.Path
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("registered API functions = %v, want the API's routes %v", got, want)
	}
	if n := len(Functions()); n != len(routes)+3 {
		t.Errorf("len(Functions()) = %d, want %d (the API's and reconcile, watchdog, poolEvents)", n, len(routes)+3)
	}
}

// TestFrameworkServesEveryFunction starts the Functions Framework as the
// server command does (without FUNCTION_TARGET, every function on its own
// path) and checks that each name reaches the registered app's edge, and
// that before an app is registered each answers 503 in the error envelope.
// The framework offers no way to stop its server; it lives until the test
// binary exits, and a later run of the test starts another.
func TestFrameworkServesEveryFunction(t *testing.T) {
	if os.Getenv("FUNCTION_TARGET") != "" {
		t.Skip("FUNCTION_TARGET is set: the framework would serve one function only")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	lis.Close()
	go func() { _ = funcframework.StartHostPort("127.0.0.1", port) }()
	base := "http://127.0.0.1:" + port
	wait.For(t, "the framework serving", func() (bool, string) {
		resp, err := http.Get(base + "/nothing-here")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET /nothing-here = %d, want 404 from the framework", resp.StatusCode)
		}
		return true, ""
	})
	post := func(name string) (int, string, string) {
		t.Helper()
		resp, err := http.Post(base+"/"+name, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("POST /%s: %v", name, err)
		}
		defer resp.Body.Close()
		var got struct {
			Served string
			Error  struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got.Served, got.Error.Code
	}

	Register(nil)
	for _, f := range Functions() {
		if status, _, code := post(f.Name); status != http.StatusServiceUnavailable || code != "UNAVAILABLE" {
			t.Errorf("POST /%s before an app is registered = %d %q, want 503 UNAVAILABLE", f.Name, status, code)
		}
	}

	a, _ := newTestApp(t, complete(), &fakeBuilder{})
	Register(a)
	t.Cleanup(func() { Register(nil) })
	for _, f := range Functions() {
		name := f.Name
		// A CloudEvent function too is the app's handler, behind the
		// edge: it reads the push itself, once it has checked the token.
		if status, served, code := post(name); status != http.StatusOK || served != name {
			t.Errorf("POST /%s = %d %q %q, want 200 from the registered app's %s", name, status, served, code, name)
		}
	}
}

type nopAuth struct{}

func (nopAuth) Verify(context.Context, string) (string, error) { return "user", nil }

type nopEvents struct{}

func (nopEvents) Send([]event.Event) {}

type nopKicker struct{}

func (nopKicker) Kick(context.Context, chain.Kick) error { return nil }

func (a *App) isDraining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}
