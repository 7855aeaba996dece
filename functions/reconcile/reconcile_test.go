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
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
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
	kicks []store.Kick
	tasks []string
	err   error
}

func (r *fakeRunner) Run(_ context.Context, k store.Kick, task string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kicks = append(r.kicks, k)
	r.tasks = append(r.tasks, task)
	return r.err
}

func TestHandler(t *testing.T) {
	const good = `{"tenantId":"acme","clusterId":"kcl_1","token":"tok"}`
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
		{name: "busy is retried", method: http.MethodPost, auth: "Bearer good", body: good, runErr: store.ErrBusy, wantCode: http.StatusServiceUnavailable, wantRun: true},
		{name: "failed run is retried", method: http.MethodPost, auth: "Bearer good", body: good, runErr: errors.New("get cluster: unavailable"), wantCode: http.StatusServiceUnavailable, wantRun: true},
		{name: "not POST", method: http.MethodGet, auth: "Bearer good", body: good, wantCode: http.StatusMethodNotAllowed},
		{name: "no token", method: http.MethodPost, body: good, wantCode: http.StatusUnauthorized},
		{name: "bad token", method: http.MethodPost, auth: "Bearer bad", body: good, wantCode: http.StatusUnauthorized},
		{name: "malformed task dropped", method: http.MethodPost, auth: "Bearer good", body: `{"tenantId":`, wantCode: http.StatusOK},
		{name: "task without token dropped", method: http.MethodPost, auth: "Bearer good", body: `{"tenantId":"acme","clusterId":"kcl_1"}`, wantCode: http.StatusOK},
		{name: "unknown field dropped", method: http.MethodPost, auth: "Bearer good", body: `{"tenantId":"acme","clusterId":"kcl_1","token":"t","x":1}`, wantCode: http.StatusOK},
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
				want := store.Kick{TenantID: "acme", ClusterID: "kcl_1", Token: "tok"}
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

// fakeKicker records kicks and fails while err is set.
type fakeKicker struct {
	mu    sync.Mutex
	kicks []store.Kick
	err   error
}

func (k *fakeKicker) Kick(_ context.Context, kick store.Kick) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	k.kicks = append(k.kicks, kick)
	return nil
}

type fakeDrainer struct {
	n   int
	age time.Duration
}

func (d *fakeDrainer) Drain(_ context.Context, olderThan time.Duration, _ int) (int, error) {
	d.age = olderThan
	return d.n, nil
}

func newStore(t *testing.T) *store.Store {
	t.Helper()
	srv, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := firestore.NewClient(context.Background(), "p", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	s, err := store.New(fs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putCluster(t *testing.T, s *store.Store, id string, active bool, nextAt time.Time) {
	t.Helper()
	c := store.ClusterDoc{
		Cluster:   resource.Cluster{ID: id, TenantID: "acme", State: resource.StateReady},
		Active:    active,
		Reconcile: store.Reconcile{Token: "old-" + id, NextAt: nextAt},
	}
	if !active {
		c.State = resource.StateDeleted
	}
	if _, err := s.ClusterRef("acme", id).Set(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

func TestWatchdog(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	putCluster(t, s, "kcl_dead", true, now.Add(-time.Hour))
	putCluster(t, s, "kcl_late", true, now.Add(-30*time.Second)) // late, within the grace
	putCluster(t, s, "kcl_gone", false, now.Add(-time.Hour))
	k := &fakeKicker{}
	d := &fakeDrainer{n: 3}
	w := &Watchdog{Store: s, Kicker: k, Events: d, Grace: time.Minute, DrainAge: 2 * time.Minute, Now: func() time.Time { return now }}

	res, err := w.Tick(ctx)
	if err != nil {
		t.Fatalf("Tick: %v", err)
	}
	if res != (Result{Restarted: 1, Drained: 3}) || d.age != 2*time.Minute {
		t.Errorf("Tick = %+v, drained older than %v; want 1 restarted, 3 drained, older than 2m", res, d.age)
	}
	if len(k.kicks) != 1 || k.kicks[0].ClusterID != "kcl_dead" {
		t.Fatalf("kicks = %+v, want one of kcl_dead", k.kicks)
	}
	snap, err := s.ClusterRef("acme", "kcl_dead").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var c store.ClusterDoc
	if err := snap.DataTo(&c); err != nil {
		t.Fatal(err)
	}
	if c.Reconcile.Token != k.kicks[0].Token || c.Reconcile.Token == "old-kcl_dead" {
		t.Errorf("stored token = %q, kicked %q; want a new token, the one kicked", c.Reconcile.Token, k.kicks[0].Token)
	}

	// The restarted chain is no longer overdue: a second pass leaves it.
	if res, err := w.Tick(ctx); err != nil || res.Restarted != 0 {
		t.Errorf("second Tick = %+v, %v; want nothing restarted", res, err)
	}

	// A failed kick is reported, and the chain is restarted by a later
	// pass once it is overdue again.
	putCluster(t, s, "kcl_dead2", true, now.Add(-time.Hour))
	k.err = errors.New("queue unavailable")
	if res, err := w.Tick(ctx); err == nil || res.Restarted != 0 {
		t.Errorf("Tick with failing kicks = %+v, %v; want an error, nothing restarted", res, err)
	}
	k.err = nil
	k.kicks = nil
	// Later, every chain that did not run since is overdue, the one whose
	// kick failed among them.
	w.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	res, err = w.Tick(ctx)
	kicked := map[string]bool{}
	for _, kk := range k.kicks {
		kicked[kk.ClusterID] = true
	}
	if err != nil || !kicked["kcl_dead2"] || kicked["kcl_gone"] || res.Restarted != len(k.kicks) {
		t.Errorf("Tick after the queue recovered = %+v, %v, kicked %v; want kcl_dead2 restarted, never kcl_gone", res, err, kicked)
	}
}

func TestWatchdogHandler(t *testing.T) {
	s := newStore(t)
	w := &Watchdog{Store: s, Kicker: &fakeKicker{}, Events: &fakeDrainer{n: 2}, Grace: time.Minute, DrainAge: time.Minute}
	h, err := w.Handler(fakeAuth{})
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
			var res Result
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res.Drained != 2 {
				t.Errorf("watchdog answer = %s, want drained 2", rec.Body)
			}
		}
	}
	if _, err := (&Watchdog{}).Handler(fakeAuth{}); err == nil {
		t.Errorf("Handler of a watchdog without dependencies = nil error, want one")
	}
}
