package devstack_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/functions/poolevents"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// callerModes are the two ways the stack serves its functions: in its own
// process, and from separate processes of the deployed server behind its
// front end (-instances).
var callerModes = []struct {
	name string
	cfg  func() devstack.Config
}{
	{"in-process", func() devstack.Config {
		cfg := fastConfig()
		cfg.Instances, cfg.InstanceCommand = 0, nil
		return cfg
	}},
	{"instances", func() devstack.Config { return instancesConfig(2) }},
}

// TestInternalFunctionsCheckTheirCaller: /internal/reconcile,
// /internal/watchdog and /internal/poolEvents refuse what a tenant can
// send them, in the stack's process and on the instances alike: no token
// or a malformed one is 401, a token of POST /dev/token (alice's, or one
// whose subject is the very address or ID of the function's caller) is
// 403, and nothing runs (a refused pool event makes no substrate). The
// stack's own callers keep working with the tokens they send as Google's
// services do: the Cloud Tasks emulator's dispatches (a cluster gets
// ready), the pool delivery (a substrate appears) and the watchdog's
// scheduler (a pass with its token is made, and none of the stack's
// scheduled passes failed meanwhile).
func TestInternalFunctionsCheckTheirCaller(t *testing.T) {
	t.Parallel()
	for _, mode := range callerModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			cfg := mode.cfg()
			logs := &lockedBuffer{}
			var out io.Writer = logs
			if os.Getenv("DEVSTACK_LOG") != "" {
				out = io.MultiWriter(logs, os.Stderr)
			}
			cfg.Log = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
			e := startEnv(t, cfg)
			fc := e.FunctionsConfig()

			tenant := func(sub string) string {
				t.Helper()
				return devToken(t, e.URL, sub)
			}
			posers := map[string]string{
				"alice":                           tenant("alice"),
				"the tasks' address":              tenant(fc.TasksServiceAccount),
				"the scheduler's address":         tenant(fc.SchedulerServiceAccount),
				"the push subscription's address": tenant(fc.PushServiceAccount),
				"the tasks' ID":                   tenant(devissuer.ServiceAccountID(fc.TasksServiceAccount)),
			}

			// What each function would act on, if it took the call: a
			// task of a cluster, a pass, a pool event of a pool of its own.
			cl := e.api.createCluster(t, "callers", poolSpec("default", 1))
			task, _ := json.Marshal(tasks.Payload{Kind: "clusters", TenantID: "acme", ID: cl.ID, Token: "tok"})
			const refusedPool = "pool-refused"
			event, headers := poolEventPush(t, fc.Project, createPolicy(refusedPool, 1, flavor("cpu", 1)))
			calls := []struct {
				fn   string
				body []byte
				hdr  http.Header
			}{
				{cloudrun.ReconcileFunction, task, http.Header{"X-CloudTasks-TaskName": {"projects/bc-dev/locations/us-central1/queues/reconcile/tasks/x"}}},
				{cloudrun.WatchdogFunction, []byte(`{}`), nil},
				{cloudrun.PoolEventsFunction, event, headers},
			}
			for _, c := range calls {
				path := pathOf(c.fn)
				refused := []struct {
					name, auth string
					want       int
					code       string
				}{
					{"no token", "", http.StatusUnauthorized, "UNAUTHENTICATED"},
					{"malformed token", "Bearer not-a-jwt", http.StatusUnauthorized, "UNAUTHENTICATED"},
				}
				for name, tok := range posers {
					refused = append(refused, struct {
						name, auth string
						want       int
						code       string
					}{"a tenant's token for " + name, "Bearer " + tok, http.StatusForbidden, "PERMISSION_DENIED"})
				}
				for _, r := range refused {
					t.Run(c.fn+"/"+r.name, func(t *testing.T) {
						status, body := postRaw(t, e.URL+path, r.auth, c.hdr, bytes.NewReader(c.body))
						if status != r.want || !strings.Contains(body, `"code":"`+r.code+`"`) {
							t.Errorf("POST %s with %s = %d %s, want %d %s", path, r.name, status, body, r.want, r.code)
						}
					})
				}
			}
			if list, err := e.api.substrates(refusedPool); err != nil || len(list) != 0 {
				t.Errorf("after refused pushes, %s has substrates %s (%v), want none", refusedPool, jsonOf(list), err)
			}

			// The stack's own callers are let in.
			e.api.waitCluster(t, cl.ID, resource.StateReady, map[string]resource.State{"default": resource.StateReady})
			acceptedPool := fmt.Sprintf("pool-callers-%d", poolSeq.Add(1))
			putPool(t, e, createPolicy(acceptedPool, 1, flavor("cpu", 1)))
			e.api.waitSubstrate(t, acceptedPool, "recorded", func(resource.Substrate) bool { return true })
			// The watchdog takes the scheduler's token, through the same
			// front end as the stack's schedule calls it: a pass is made.
			schedTok, err := e.Issuer.ServiceAccountToken(fc.SchedulerServiceAccount, fc.ReconcileAudience, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if status, body := postRaw(t, e.URL+pathOf(cloudrun.WatchdogFunction), "Bearer "+schedTok, nil, strings.NewReader(`{}`)); status != http.StatusOK || !json.Valid([]byte(body)) {
				t.Errorf("POST %s with the scheduler's token = %d %s, want 200 and a pass", pathOf(cloudrun.WatchdogFunction), status, body)
			}
			// Meanwhile, the cluster ready and the substrate recorded, the
			// stack's schedule made a pass every 300 ms.
			if strings.Contains(logs.String(), "Watchdog pass incomplete") || strings.Contains(logs.String(), "Pool event delivery failed") {
				t.Errorf("the stack's own callers were refused:\n%s", logs.String())
			}
		})
	}
}

// TestTokenBeforeBody: the functions check the token before they read a
// body, in the stack's process and behind the instances' front end alike
// (API.md §3): no token, or a bad one, is 401 whatever the size; a valid
// token with a body over the 1 MiB limit is 413 INVALID_INPUT.
func TestTokenBeforeBody(t *testing.T) {
	t.Parallel()
	for _, mode := range callerModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			e := startEnv(t, mode.cfg())
			big := func(n int) []byte {
				return []byte(`{"tenantId":"acme","pad":"` + strings.Repeat("x", n) + `"}`)
			}
			tests := []struct {
				name, auth string
				body       []byte
				want       int
				code       string
			}{
				{"no token, 5 MiB", "", big(5 << 20), http.StatusUnauthorized, "UNAUTHENTICATED"},
				{"malformed token, 5 MiB", "Bearer not-a-jwt", big(5 << 20), http.StatusUnauthorized, "UNAUTHENTICATED"},
				{"valid token, 2 MiB", "Bearer " + e.api.token, big(2 << 20), http.StatusRequestEntityTooLarge, "INVALID_INPUT"},
				{"valid token, small", "Bearer " + e.api.token, []byte(`{"tenantId":"acme"}`), http.StatusOK, ""},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					status, body := postRaw(t, e.URL+"/api/compute/kubernetesClusters/list", tt.auth, nil, bytes.NewReader(tt.body))
					if status != tt.want || (tt.code != "" && !strings.Contains(body, `"code":"`+tt.code+`"`)) {
						t.Errorf("POST kubernetesClusters/list (%s) = %d %.200s, want %d %s", tt.name, status, body, tt.want, tt.code)
					}
				})
			}
		})
	}
}

// devToken mints a tenant's token through POST /dev/token, as anyone can.
func devToken(t *testing.T, url, sub string) string {
	t.Helper()
	b, _ := json.Marshal(devissuer.TokenRequest{Sub: sub})
	resp, err := http.Post(url+devissuer.TokenPath, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out devissuer.TokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /dev/token %s = %d (%v)", sub, resp.StatusCode, err)
	}
	return out.Token
}

// poolEventPush is a pool event as the stack's push delivers it to the
// pool events function: the messagePublished CloudEvent of the Pub/Sub
// message the pools module publishes, in binary mode.
func poolEventPush(t *testing.T, project string, pool map[string]any) ([]byte, http.Header) {
	t.Helper()
	var m poolevents.MessagePublished
	m.Message.Data, _ = json.Marshal(pool)
	m.Message.Attributes = map[string]string{"ce-specversion": "1.0", "ce-id": "evt-refused", "ce-type": "compute.pool.updated",
		"ce-source": "//compute.better-compute.dev/tenants/acme", "ce-subject": pool["id"].(string), "tenantId": "acme"}
	m.Message.MessageID = "refused-1"
	m.Subscription = "projects/" + project + "/subscriptions/" + cloudrun.PoolEventsFunction + "-compute.pool.updated"
	body, _ := json.Marshal(m)
	return body, http.Header{
		"Ce-Specversion": {"1.0"}, "Ce-Type": {poolevents.MessagePublishedType},
		"Ce-Source": {"//pubsub.googleapis.com/" + m.Subscription}, "Ce-Id": {"refused-1"},
	}
}

// pathOf is where the stack serves the named function.
func pathOf(name string) string {
	for _, f := range cloudrun.Functions() {
		if f.Name == name {
			return f.Path
		}
	}
	panic("no function " + name)
}

// postRaw posts body with the Authorization header auth (none when empty)
// and the headers hdr, and returns the status and the body of the answer.
func postRaw(t *testing.T, url, auth string, hdr http.Header, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lockedBuffer is a buffer for logs written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
