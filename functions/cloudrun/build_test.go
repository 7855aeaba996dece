package cloudrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2/pstest"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
)

// TestCloudBuilderOverEmulators builds every kind of function with the
// production builder, its clients pointed at the emulators through the
// configuration, and calls each once.
func TestCloudBuilderOverEmulators(t *testing.T) {
	ctx := context.Background()
	fs, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	ps := pstest.NewServer()
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

	const internalAudience = "http://127.0.0.1:1/reconcile"
	cfg, err := LoadConfig(env(map[string]string{
		"GOOGLE_CLOUD_PROJECT":      "bc-test",
		"AUTH_ISSUER_URL":           iss.URL(),
		"AUTH_AUDIENCE":             "bc-api",
		"TASKS_QUEUE":               queue,
		"RECONCILE_URL":             internalAudience,
		"TASKS_SERVICE_ACCOUNT":     "tasks@bc-test.iam.gserviceaccount.com",
		"RECONCILE_ISSUER_URL":      iss.URL(),
		"RECONCILE_AUDIENCE":        internalAudience,
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

	userToken, err := iss.Token("alice", "bc-api", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	internalToken, err := iss.Token("tasks", internalAudience, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		fn, token, body string
		want            int
		wantBody        string // a fragment of the answer
	}{
		// Alice is no member of the tenant: the API refuses her, which
		// proves the verifier, the store and the handler are wired.
		{"kubernetesClusters-list", userToken, `{"tenantId":"t1"}`, http.StatusForbidden, "PERMISSION_DENIED"},
		{"kubernetesClusters-list", internalToken, `{"tenantId":"t1"}`, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"watchdog", internalToken, `{}`, http.StatusOK, `"restarted":0`},
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
