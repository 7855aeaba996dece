package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestServedAsOnCloudRun serves every function with the Functions Framework
// as the Cloud Run server does (functions/cloudrun's registration, each
// function on /<name>), with an app of its own built from the stack's
// configuration, and checks that bad requests get the same answer there as
// on the stack's routes: status, headers, request ID and error envelope,
// byte for byte. Both are one code path: the function built by cloudrun,
// behind its edge.
func TestServedAsOnCloudRun(t *testing.T) {
	e := startEnv(t, fastConfig())
	t.Setenv("FUNCTION_TARGET", "") // the framework serves every function, each on its own path
	cfg := e.FunctionsConfig()
	cfg.LogLevel = slog.LevelError // the app logs to stdout, as on Cloud Run
	app, err := cloudrun.New(cfg, cloudrun.Options{})
	if err != nil {
		t.Fatalf("the stack's configuration does not configure the Cloud Run functions: %v", err)
	}
	cloudrun.Register(app)
	t.Cleanup(func() {
		cloudrun.Register(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	framework := startFramework(t)

	bearer := "Bearer " + e.api.token
	type badRequest struct {
		name, method, auth, body string
	}
	common := []badRequest{
		{"no token", http.MethodPost, "", `{}`},
		{"bad token", http.MethodPost, "Bearer not-a-jwt", `{}`},
		{"GET", http.MethodGet, "", ""},
	}
	api := []badRequest{
		{"GET with a token", http.MethodGet, bearer, ""},
		{"malformed JSON", http.MethodPost, bearer, `{"tenantId":`},
		{"unknown field", http.MethodPost, bearer, `{"tenantId":"acme","bogus":1}`},
		{"broken fields", http.MethodPost, bearer, `{"tenantId":"","clusterId":"kcl_x","nodeCount":-1}`},
		{"other tenant", http.MethodPost, bearer, `{"tenantId":"globex","clusterId":"kcl_01jd0000000000000000000000","nodePoolId":"knp_01jd0000000000000000000000"}`},
	}
	served := 0
	for _, f := range cloudrun.Functions() {
		cases := common
		if strings.HasPrefix(f.Path, "/api/compute/") {
			cases = append(cases, api...)
		}
		for i, bad := range cases {
			t.Run(f.Name+"/"+bad.name, func(t *testing.T) {
				id := fmt.Sprintf("req-%s-%d", f.Name, i)
				want := send(t, bad.method, e.URL+f.Path, bad.auth, bad.body, id)
				got := send(t, bad.method, framework+"/"+f.Name, bad.auth, bad.body, id)
				if got != want {
					t.Errorf("%s %s through the Functions Framework =\n%s\nwant, as the devstack answers on %s,\n%s", bad.method, f.Name, got, f.Path, want)
				}
				if want.status < 400 || !strings.Contains(want.body, `"error":{"code":"`) {
					t.Errorf("%s %s = %s, want an error in the envelope", bad.method, f.Path, want)
				}
				if want.requestID != id {
					t.Errorf("X-Request-Id = %q, want %q echoed", want.requestID, id)
				}
			})
			served++
		}
	}
	// Without one, each side makes a request ID of its own.
	for _, url := range []string{e.URL + "/api/compute/kubernetesClusters/list", framework + "/kubernetesClusters-list"} {
		if r := send(t, http.MethodPost, url, "", `{}`, ""); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(r.requestID) {
			t.Errorf("POST %s without X-Request-Id: X-Request-Id = %q, want 32 new hex digits", url, r.requestID)
		}
	}
	if served == 0 {
		t.Fatal("no function compared")
	}
}

// answer is what a comparison looks at.
type answer struct {
	status                        int
	requestID, contentType, allow string
	retryAfter, body              string
}

func (a answer) String() string {
	return fmt.Sprintf("%d X-Request-Id=%q Content-Type=%q Allow=%q Retry-After=%q %s", a.status, a.requestID, a.contentType, a.allow, a.retryAfter, strings.TrimSpace(a.body))
}

func send(t *testing.T, method, url, authorization, body, requestID string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, url, err)
	}
	if resp.StatusCode >= 400 && !json.Valid(b) {
		t.Errorf("%s %s answered %d with non-JSON %q", method, url, resp.StatusCode, b)
	}
	h := resp.Header
	return answer{
		status: resp.StatusCode, requestID: h.Get("X-Request-Id"), contentType: h.Get("Content-Type"),
		allow: h.Get("Allow"), retryAfter: h.Get("Retry-After"), body: string(b),
	}
}

// startFramework starts the Functions Framework's server, as the server
// command does, on a free port, and returns its URL. The framework offers
// no way to stop it; it lives until the test binary exits.
func startFramework(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	lis.Close()
	go func() { _ = funcframework.StartHostPort("127.0.0.1", port) }()
	base := "http://127.0.0.1:" + port
	wait.For(t, "the Functions Framework serving", func() (bool, string) {
		resp, err := http.Get(base + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	return base
}
