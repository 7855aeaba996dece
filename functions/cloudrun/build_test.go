package cloudrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
	"github.com/better-compute/kubernetes/functions/poolevents"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
)

// Accounts and audiences of the internal functions' callers in the tests
// over the emulators.
const (
	tasksAccount     = "tasks@bc-test.iam.gserviceaccount.com"
	schedulerAccount = "scheduler@bc-test.iam.gserviceaccount.com"
	pushAccount      = "pool-events-push@bc-test.iam.gserviceaccount.com"
	internalAudience = "http://127.0.0.1:1/reconcile"
	pushAudience     = "http://127.0.0.1:1/pool-events"
)

// overEmulators returns an app built by the production builder, its
// clients pointed at emulators through the configuration, and the
// development issuer that signs both its tenants' tokens (audience
// "bc-api") and its internal callers' OIDC tokens.
func overEmulators(t *testing.T) (*App, *devissuer.Server) {
	t.Helper()
	ctx := context.Background()
	fs, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	ps, err := psemu.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	gke, err := gkeemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gke.Close() })
	ct, err := ctemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ct.Close() })
	iss, err := devissuer.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { iss.Close() })

	const queue = "projects/bc-test/locations/europe-west1/queues/reconcile"
	tc, err := cloudtasks.NewClient(ctx, ct.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	if _, err := tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
		Parent: "projects/bc-test/locations/europe-west1",
		Queue:  &cloudtaskspb.Queue{Name: queue},
	}); err != nil {
		t.Fatalf("CreateQueue = %v", err)
	}

	cfg, err := LoadConfig(env(map[string]string{
		"GOOGLE_CLOUD_PROJECT":      "bc-test",
		"AUTH_ISSUER_URL":           iss.URL(),
		"AUTH_AUDIENCE":             "bc-api",
		"TASKS_QUEUE":               queue,
		"RECONCILE_URL":             internalAudience,
		"TASKS_SERVICE_ACCOUNT":     tasksAccount,
		"RECONCILE_ISSUER_URL":      iss.URL(),
		"RECONCILE_AUDIENCE":        internalAudience,
		"SCHEDULER_SERVICE_ACCOUNT": schedulerAccount,
		"PUSH_SERVICE_ACCOUNT":      pushAccount,
		"PUSH_AUDIENCE":             pushAudience,
		"FIRESTORE_EMULATOR_HOST":   fs.Addr,
		"PUBSUB_EMULATOR_HOST":      ps.Addr,
		"CLOUD_TASKS_EMULATOR_HOST": ct.Addr(),
		"GKE_EMULATOR_HOST":         gke.Addr(),
		"BCD_IMAGE":                 "bcd.invalid/bcd:test",
		"SUBSTRATE_JOIN_URL":        "http://127.0.0.1:1/api/compute/kubernetesSubstrates/join",
		"KUBERNETES_TOKEN":          "no-cluster-here",
	}))
	if err != nil {
		t.Fatalf("LoadConfig = %v", err)
	}
	a := newApp(cfg, io.Discard, Options{}, newCloudBuilder(nil))
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	return a, iss
}

// minter returns a function that returns the token it is given, failing
// the test on an error: mint(iss.Token(...)).
func minter(t *testing.T) func(string, error) string {
	return func(tok string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// TestCloudBuilderOverEmulators builds every kind of function with the
// production builder, its clients pointed at the emulators through the
// configuration, and calls each once.
func TestCloudBuilderOverEmulators(t *testing.T) {
	ctx := context.Background()
	a, iss := overEmulators(t)
	mint := minter(t)
	userToken := mint(iss.Token("alice", "bc-api", time.Hour))
	internalToken := mint(iss.ServiceAccountToken(tasksAccount, internalAudience, time.Hour))
	schedulerToken := mint(iss.ServiceAccountToken(schedulerAccount, internalAudience, time.Hour))
	tests := []struct {
		fn, token, body string
		want            int
		wantBody        string // a fragment of the answer
	}{
		// Alice is no member of the tenant: the API refuses her, which
		// proves the verifier, the store and the handler are wired.
		{"kubernetesClusters-list", userToken, `{"tenantId":"t1"}`, http.StatusForbidden, "PERMISSION_DENIED"},
		{"kubernetesClusters-list", internalToken, `{"tenantId":"t1"}`, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"watchdog", schedulerToken, `{}`, http.StatusOK, `"restarted":0`},
		{"watchdog", userToken, `{}`, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"reconcile", internalToken, `{"tenantId":""}`, http.StatusOK, "dropped"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.fn, tt.want), func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+tt.token)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			a.Handler(tt.fn).ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.want || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("POST %s = %d %s, want %d with %s", tt.fn, rec.Code, body, tt.want, tt.wantBody)
			}
			if !json.Valid(body) {
				t.Errorf("POST %s answered non-JSON %q", tt.fn, body)
			}
		})
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Errorf("shutdown = %v", err)
	}
}

// TestInternalFunctionsCheckTheirCaller: each internal function, built by
// the production builder, accepts the OIDC tokens of its one caller's
// service account only, as Google's services mint them: no token, a
// malformed one or one of another audience is 401; a tenant's token (even
// for the function's audience, even with the account's address as its
// subject) or another internal caller's is 403; and nothing runs (the
// refused pool events make no substrate).
func TestInternalFunctionsCheckTheirCaller(t *testing.T) {
	ctx := context.Background()
	a, iss := overEmulators(t)
	parts, err := a.Build(ctx)
	if err != nil {
		t.Fatalf("Build = %v", err)
	}
	seedFile, err := os.ReadFile("../../emulators/seed/devstack.json")
	if err != nil {
		t.Fatal(err)
	}
	seed, err := store.ParseSeed(seedFile, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	if err := parts.Store.LoadSeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	mint := minter(t)
	alice := mint(iss.Token("alice", "bc-api", time.Hour))
	tasks := mint(iss.ServiceAccountToken(tasksAccount, internalAudience, time.Hour))
	scheduler := mint(iss.ServiceAccountToken(schedulerAccount, internalAudience, time.Hour))
	push := mint(iss.ServiceAccountToken(pushAccount, pushAudience, time.Hour))

	// A pool event as a push subscription delivers it, on the path infra/
	// pushes to, and as the CloudEvent the devstack's push makes of it.
	pool := `{"id":"pool-gpu","tenantId":"acme","version":1,
		"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp","cluster":{"create":{"region":"us-central1"}}}},
		"flavors":[{"name":"cpu","machineType":"e2-standard-4","nodeCount":1}]}`
	var msg poolevents.MessagePublished
	msg.Message.Data = []byte(pool)
	msg.Message.Attributes = map[string]string{"ce-type": event.PoolUpdated, "ce-id": "evt-1", "ce-specversion": "1.0",
		"ce-source": "//compute.better-compute.dev/tenants/acme", "ce-subject": "pool-gpu"}
	msg.Message.MessageID = "m-1"
	msg.Subscription = "projects/bc-test/subscriptions/pool-events"
	pushBody, _ := json.Marshal(msg)
	const pushPath = "/projects/bc-pools/topics/" + event.PoolUpdated
	binary := func(r *http.Request) {
		r.Header.Set("ce-specversion", "1.0")
		r.Header.Set("ce-type", poolevents.MessagePublishedType)
		r.Header.Set("ce-source", "//pubsub.googleapis.com/"+msg.Subscription)
		r.Header.Set("ce-id", "m-1")
	}

	send := func(fn, path, token, body string, edit func(*http.Request)) (int, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		if edit != nil {
			edit(req)
		}
		rec := httptest.NewRecorder()
		a.Handler(fn).ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	substratesOfPool := func() int {
		t.Helper()
		code, body := send("kubernetesSubstrates-list", "/", alice, `{"tenantId":"acme","poolId":"pool-gpu"}`, nil)
		var out struct{ Substrates []json.RawMessage }
		if err := json.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil {
			t.Fatalf("kubernetesSubstrates.list = %d %s", code, body)
		}
		return len(out.Substrates)
	}

	task := `{"kind":"clusters","tenantId":"acme","id":"kcl_01jd0000000000000000000000","token":"tok"}`
	functions := []struct {
		fn, path, body string
		edit           func(*http.Request)
		audience       string
		account        string // the function's caller
		own, other     string // its caller's token, another internal caller's
		ownWant        string // a fragment of the answer to its own caller
	}{
		{ReconcileFunction, "/", task, nil, internalAudience, tasksAccount, tasks, scheduler, `"status":"`},
		{WatchdogFunction, "/", `{}`, nil, internalAudience, schedulerAccount, scheduler, tasks, `"restarted":`},
		{PoolEventsFunction, pushPath, string(pushBody), nil, pushAudience, pushAccount, push,
			mint(iss.ServiceAccountToken(tasksAccount, pushAudience, time.Hour)), `"status":"ok"`},
		{PoolEventsFunction, "/internal/poolEvents", string(pushBody), binary, pushAudience, pushAccount, push,
			mint(iss.ServiceAccountToken(schedulerAccount, pushAudience, time.Hour)), `"status":"ok"`},
	}
	for _, f := range functions {
		refused := []struct {
			name, token string
			want        int
			code        string
		}{
			{"no token", "", http.StatusUnauthorized, "UNAUTHENTICATED"},
			{"malformed token", "not-a-jwt", http.StatusUnauthorized, "UNAUTHENTICATED"},
			{"a tenant's token for the API", alice, http.StatusUnauthorized, "UNAUTHENTICATED"},
			{"a tenant's token for the function", mint(iss.Token("alice", f.audience, time.Hour)), http.StatusForbidden, "PERMISSION_DENIED"},
			{"a token whose subject is the caller's address", mint(iss.Token(f.account, f.audience, time.Hour)), http.StatusForbidden, "PERMISSION_DENIED"},
			{"another internal caller's token", f.other, http.StatusForbidden, "PERMISSION_DENIED"},
			{"its caller's token for another audience", mint(iss.ServiceAccountToken(f.account, "bc-api", time.Hour)), http.StatusUnauthorized, "UNAUTHENTICATED"},
		}
		for _, r := range refused {
			t.Run(f.fn+f.path+"/"+r.name, func(t *testing.T) {
				code, body := send(f.fn, f.path, r.token, f.body, f.edit)
				if code != r.want || !strings.Contains(body, r.code) {
					t.Errorf("POST %s = %d %s, want %d %s", f.fn, code, body, r.want, r.code)
				}
			})
		}
	}
	if n := substratesOfPool(); n != 0 {
		t.Fatalf("after refused pool events, pool-gpu has %d substrates, want none", n)
	}
	for _, f := range functions {
		t.Run(f.fn+f.path+"/its caller", func(t *testing.T) {
			code, body := send(f.fn, f.path, f.own, f.body, f.edit)
			if code != http.StatusOK || !strings.Contains(body, f.ownWant) {
				t.Errorf("POST %s by its caller = %d %s, want 200 with %s", f.fn, code, body, f.ownWant)
			}
			// The first push applies the event (the push subscription's
			// own JSON, read as the framework would), the second is
			// the same event again.
			if n := substratesOfPool(); f.fn == PoolEventsFunction && n != 1 {
				t.Errorf("after its push subscription's pool event, pool-gpu has %d substrates, want 1", n)
			}
		})
	}
}
