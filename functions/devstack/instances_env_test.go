package devstack

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/functions/cloudrun"
)

// TestInstanceEnv: the environment an instance gets configures the
// server exactly as the stack's configuration says, through
// cloudrun.LoadConfig, as on Cloud Run.
func TestInstanceEnv(t *testing.T) {
	c := cloudrun.Defaults()
	c.Project = "bc-dev"
	c.AuthIssuerURL, c.AuthAudience = "http://127.0.0.1:8080", "http://127.0.0.1:8080"
	c.TasksQueue = "projects/bc-dev/locations/us-central1/queues/reconcile"
	c.TasksSteadyQueue = c.TasksQueue + "-steady"
	c.ReconcileURL = "http://127.0.0.1:8080/internal/reconcile"
	c.TasksServiceAccount = "reconciler@bc-dev.iam.gserviceaccount.com"
	c.TasksAudience = "http://127.0.0.1:8080"
	c.ReconcileIssuerURL, c.ReconcileAudience = "http://127.0.0.1:8080", "http://127.0.0.1:8080"
	c.SchedulerServiceAccount = "scheduler@bc-dev.iam.gserviceaccount.com"
	c.PushServiceAccount, c.PushAudience = "pool-events-push@bc-dev.iam.gserviceaccount.com", "http://127.0.0.1:8080"
	c.NodeServiceAccount = "nodes@bc-dev.iam.gserviceaccount.com"
	c.ReconcilerServiceAccount = c.TasksServiceAccount
	c.ImpersonationTokenLifetime = 10 * time.Minute
	c.BcdImage, c.JoinURL = "bcd.invalid/bcd:dev", "http://127.0.0.1:8080/api/compute/kubernetesSubstrates/join"
	c.KubernetesToken = "kube-token"
	c.ConvergingInterval, c.SteadyInterval, c.LeaseTTL, c.WatchdogGrace = 60*time.Millisecond, 2*time.Second, time.Second, 1500*time.Millisecond
	c.ProviderQuota, c.ProviderQuotaShare, c.ReconcileInstances = 0, 0.75, 3
	c.LogLevel = slog.LevelWarn
	c.Telemetry = cloudrun.TelemetryOff
	c.FirestoreEmulatorHost, c.PubSubEmulatorHost = "127.0.0.1:8086", "127.0.0.1:8085"
	c.TasksEmulatorHost, c.GKEEmulatorHost, c.IAMCredentialsEmulatorHost = "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"
	c.ComputeEmulatorHost = "127.0.0.1:1004"
	c.EmulatorAccessToken = "access-token"

	env := map[string]string{"K_SERVICE": instanceService}
	for _, kv := range instanceEnv(c) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got, err := cloudrun.LoadConfig(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := c
	want.Service = instanceService
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadConfig(instanceEnv(c)) =\n%+v\nwant\n%+v", got, want)
	}
	// Every variable the server reads is one the stack can set.
	read, _ := cloudrun.Variables("")
	for _, name := range read {
		if _, ok := env[name]; !ok && name != "FUNCTION_TARGET" {
			t.Errorf("the instances' environment never sets %s", name)
		}
	}
}
