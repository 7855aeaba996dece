package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
)

// fakeAuth accepts the bearer token "good".
type fakeAuth struct{}

func (fakeAuth) Verify(_ context.Context, authorization string) (string, error) {
	if authorization != "Bearer good" {
		return "", errs.E(errs.Unauthenticated, "bad token")
	}
	return "tasks@example.iam.gserviceaccount.com", nil
}

// fakeRunner records its runs and answers err.
type fakeRunner struct {
	mu    sync.Mutex
	kicks []chain.Kick
	tasks []string
	err   error
}

func (r *fakeRunner) Run(_ context.Context, k chain.Kick, task string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kicks = append(r.kicks, k)
	r.tasks = append(r.tasks, task)
	return r.err
}

func TestHandler(t *testing.T) {
	const good = `{"kind":"clusters","tenantId":"acme","id":"kcl_1","token":"tok"}`
	tests := []struct {
		name     string
		method   string
		auth     string
		body     string
		runErr   error
		wantCode int
		wantRun  bool
	}{
		{name: "run", method: http.MethodPost, auth: "Bearer good", body: good, wantCode: http.StatusOK, wantRun: true},
		{name: "busy is retried", method: http.MethodPost, auth: "Bearer good", body: good, runErr: chain.ErrBusy, wantCode: http.StatusServiceUnavailable, wantRun: true},
		{name: "failed run is retried", method: http.MethodPost, auth: "Bearer good", body: good, runErr: errors.New("get cluster: unavailable"), wantCode: http.StatusServiceUnavailable, wantRun: true},
		{name: "not POST", method: http.MethodGet, auth: "Bearer good", body: good, wantCode: http.StatusMethodNotAllowed},
		{name: "no token", method: http.MethodPost, body: good, wantCode: http.StatusUnauthorized},
		{name: "bad token", method: http.MethodPost, auth: "Bearer bad", body: good, wantCode: http.StatusUnauthorized},
		{name: "malformed task dropped", method: http.MethodPost, auth: "Bearer good", body: `{"tenantId":`, wantCode: http.StatusOK},
		{name: "task without token dropped", method: http.MethodPost, auth: "Bearer good", body: `{"kind":"clusters","tenantId":"acme","id":"kcl_1"}`, wantCode: http.StatusOK},
		{name: "unknown field dropped", method: http.MethodPost, auth: "Bearer good", body: `{"kind":"clusters","tenantId":"acme","id":"kcl_1","token":"t","x":1}`, wantCode: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRunner{err: tt.runErr}
			h, err := Handler(fakeAuth{}, r)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(tt.method, "/", strings.NewReader(tt.body))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			req.Header.Set("X-CloudTasks-TaskName", "task-7")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Errorf("status = %d (%s), want %d", rec.Code, rec.Body, tt.wantCode)
			}
			if got := len(r.kicks) > 0; got != tt.wantRun {
				t.Fatalf("ran = %v, want %v", got, tt.wantRun)
			}
			if tt.wantRun {
				want := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "tok"}
				if r.kicks[0] != want || r.tasks[0] != "task-7" {
					t.Errorf("Run(%+v, %q), want Run(%+v, task-7)", r.kicks[0], r.tasks[0], want)
				}
			}
		})
	}
	if _, err := Handler(nil, &fakeRunner{}); err == nil {
		t.Errorf("Handler(nil, runner) = nil error, want one")
	}
}

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

// fakeWatchdog counts its passes.
type fakeWatchdog struct{ passes int }

func (w *fakeWatchdog) Tick(context.Context) (chain.Pass, error) {
	w.passes++
	return chain.Pass{Restarted: 1, Drained: 2}, nil
}

func TestWatchdogHandler(t *testing.T) {
	w := &fakeWatchdog{}
	h, err := WatchdogHandler(fakeAuth{}, w)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		auth string
		want int
	}{{"Bearer good", http.StatusOK}, {"Bearer bad", http.StatusUnauthorized}} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.Header.Set("Authorization", tt.auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("watchdog with %q = %d, want %d", tt.auth, rec.Code, tt.want)
		}
		if tt.want == http.StatusOK {
			var res chain.Pass
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res != (chain.Pass{Restarted: 1, Drained: 2}) {
				t.Errorf("watchdog answer = %s, want the pass's result", rec.Body)
			}
		}
	}
	if w.passes != 1 {
		t.Errorf("passes = %d, want 1 (the unauthenticated call makes none)", w.passes)
	}
	if _, err := WatchdogHandler(fakeAuth{}, nil); err == nil {
		t.Errorf("WatchdogHandler without a watchdog = nil error, want one")
	}
}

// TestOtherMethodsAre405 checks that both functions take only POST, the
// method of Cloud Tasks' tasks and of the Scheduler's job, and answer any
// other 405 in the API's error envelope, before looking at the token.
func TestOtherMethodsAre405(t *testing.T) {
	w, r := &fakeWatchdog{}, &fakeRunner{}
	watchdog, err := WatchdogHandler(fakeAuth{}, w)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Handler(fakeAuth{}, r)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{"watchdog": watchdog, "reconcile": run} {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req := httptest.NewRequest(method, "/", strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer good")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var env struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
				t.Errorf("%s %s: answer %q is not JSON: %v", method, name, rec.Body, err)
			}
			if rec.Code != http.StatusMethodNotAllowed || env.Error.Code != "INVALID_INPUT" || !strings.Contains(env.Error.Message, method) {
				t.Errorf("%s %s = %d %+v, want 405 INVALID_INPUT naming %s", method, name, rec.Code, env.Error, method)
			}
			if got := rec.Header().Get("Allow"); got != http.MethodPost {
				t.Errorf("%s %s: Allow = %q, want POST", method, name, got)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: Content-Type = %q, want application/json", method, name, ct)
			}
		}
	}
	if w.passes != 0 || len(r.kicks) != 0 {
		t.Errorf("passes = %d, runs = %d, want none", w.passes, len(r.kicks))
	}
}

// TestSchedulerSendsPost checks that the method the functions accept is
// the one the infrastructure's Scheduler job sends.
func TestSchedulerSendsPost(t *testing.T) {
	files, err := filepath.Glob("../../infra/*.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Terraform in ../../infra: %v", err)
	}
	re := regexp.MustCompile(`http_method\s*=\s*"([A-Z]+)"`)
	var methods []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			methods = append(methods, string(m[1]))
		}
	}
	if len(methods) == 0 {
		t.Fatal("no http_method in the Terraform: the Scheduler job's method is not stated")
	}
	for _, m := range methods {
		if m != http.MethodPost {
			t.Errorf("the Terraform sends %s; the watchdog accepts only POST", m)
		}
	}
}
