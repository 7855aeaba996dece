package cloudrun

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// env returns a lookup over m.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// complete is an environment that serves every function.
func complete() map[string]string {
	return map[string]string{
		"GOOGLE_CLOUD_PROJECT":  "bc-prod",
		"AUTH_ISSUER_URL":       "https://issuer.example.com",
		"AUTH_AUDIENCE":         "https://api.example.com",
		"TASKS_QUEUE":           "projects/bc-prod/locations/europe-west1/queues/reconcile",
		"TASKS_STEADY_QUEUE":    "projects/bc-prod/locations/europe-west1/queues/reconcile-steady",
		"RECONCILE_URL":         "https://reconcile-123.europe-west1.run.app",
		"TASKS_SERVICE_ACCOUNT": "tasks@bc-prod.iam.gserviceaccount.com",
		"RECONCILE_AUDIENCE":    "https://reconcile-123.europe-west1.run.app",
		"NODE_SERVICE_ACCOUNT":  "compute-nodes@bc-prod.iam.gserviceaccount.com",
		// The internal functions' callers.
		"SCHEDULER_SERVICE_ACCOUNT": "scheduler@bc-prod.iam.gserviceaccount.com",
		"PUSH_SERVICE_ACCOUNT":      "pool-events-push@bc-prod.iam.gserviceaccount.com",
		"PUSH_AUDIENCE":             "https://pool-events-123.europe-west1.run.app",
		"BCD_IMAGE":                 "europe-docker.pkg.dev/bc-prod/bcd/bcd:1.0.0",
		"SUBSTRATE_JOIN_URL":        "https://api.example.com/api/compute/kubernetesSubstrates/join",
	}
}

// with returns a copy of complete() with changes applied; an empty value
// removes the variable.
func with(changes map[string]string) map[string]string {
	m := complete()
	for k, v := range changes {
		if v == "" {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

func TestLoadConfigDefaults(t *testing.T) {
	got, err := LoadConfig(env(complete()))
	if err != nil {
		t.Fatalf("LoadConfig(complete) = %v", err)
	}
	want := Config{
		Project:                 "bc-prod",
		FirestoreDatabase:       "(default)",
		AuthIssuerURL:           "https://issuer.example.com",
		AuthAudience:            "https://api.example.com",
		TasksQueue:              "projects/bc-prod/locations/europe-west1/queues/reconcile",
		TasksSteadyQueue:        "projects/bc-prod/locations/europe-west1/queues/reconcile-steady",
		ReconcileURL:            "https://reconcile-123.europe-west1.run.app",
		TasksServiceAccount:     "tasks@bc-prod.iam.gserviceaccount.com",
		TasksAudience:           "https://reconcile-123.europe-west1.run.app",
		ReconcileIssuerURL:      "https://accounts.google.com",
		ReconcileAudience:       "https://reconcile-123.europe-west1.run.app",
		SchedulerServiceAccount: "scheduler@bc-prod.iam.gserviceaccount.com",
		PushServiceAccount:      "pool-events-push@bc-prod.iam.gserviceaccount.com",
		PushAudience:            "https://pool-events-123.europe-west1.run.app",
		NodeServiceAccount:      "compute-nodes@bc-prod.iam.gserviceaccount.com",
		BcdImage:                "europe-docker.pkg.dev/bc-prod/bcd/bcd:1.0.0",
		JoinURL:                 "https://api.example.com/api/compute/kubernetesSubstrates/join",
		ConvergingInterval:      30 * time.Second,
		SteadyInterval:          5 * time.Minute,
		LeaseTTL:                30 * time.Second,
		WatchdogGrace:           time.Minute,
		ProviderQuota:           600,
		ProviderQuotaShare:      0.8,
		ReconcileInstances:      10,
		LogLevel:                slog.LevelInfo,

		ImpersonationTokenLifetime: time.Hour,
		Telemetry:                  "off",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig(complete) (-want +got):\n%s", diff)
	}
}

func TestLoadConfigValid(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(c Config) string // returns a failure message, or ""
	}{
		{
			name: "an API function needs no internal audience",
			env:  with(map[string]string{"FUNCTION_TARGET": "kubernetesClusters-get", "RECONCILE_AUDIENCE": ""}),
			check: func(c Config) string {
				if c.Function != "kubernetesClusters-get" {
					return "Function = " + c.Function
				}
				return ""
			},
		},
		{
			name: "steady queues separated by commas",
			env:  with(map[string]string{"TASKS_STEADY_QUEUE": "projects/p/locations/l/queues/s,projects/p/locations/l/queues/s-1"}),
			check: func(c Config) string {
				if got := c.SteadyQueues(); len(got) != 2 || got[1] != "projects/p/locations/l/queues/s-1" {
					return fmt.Sprintf("SteadyQueues() = %q", got)
				}
				return ""
			},
		},
		{
			name: "change queues separated by commas",
			env:  with(map[string]string{"TASKS_QUEUE": "projects/p/locations/l/queues/r-0,projects/p/locations/l/queues/r-1"}),
			check: func(c Config) string {
				if got := c.ChangeQueues(); len(got) != 2 || got[1] != "projects/p/locations/l/queues/r-1" {
					return fmt.Sprintf("ChangeQueues() = %q", got)
				}
				return ""
			},
		},
		{
			name: "the reconcile function needs no tenant issuer",
			env:  with(map[string]string{"FUNCTION_TARGET": "reconcile", "AUTH_ISSUER_URL": "", "AUTH_AUDIENCE": ""}),
		},
		{
			name: "the watchdog needs no tenant issuer",
			env:  with(map[string]string{"FUNCTION_TARGET": "watchdog", "AUTH_ISSUER_URL": "", "AUTH_AUDIENCE": ""}),
		},
		{
			name: "each internal function needs only its own caller's settings",
			env:  with(map[string]string{"FUNCTION_TARGET": "reconcile", "SCHEDULER_SERVICE_ACCOUNT": "", "PUSH_SERVICE_ACCOUNT": "", "PUSH_AUDIENCE": ""}),
		},
		{
			name: "the watchdog needs no push subscription's settings",
			env:  with(map[string]string{"FUNCTION_TARGET": "watchdog", "PUSH_SERVICE_ACCOUNT": "", "PUSH_AUDIENCE": ""}),
		},
		{
			name: "the pool events function needs no scheduler's nor internal audience",
			env:  with(map[string]string{"FUNCTION_TARGET": PoolEventsFunction, "SCHEDULER_SERVICE_ACCOUNT": "", "RECONCILE_AUDIENCE": ""}),
			check: func(c Config) string {
				if c.PushServiceAccount != "pool-events-push@bc-prod.iam.gserviceaccount.com" || c.PushAudience != "https://pool-events-123.europe-west1.run.app" {
					return fmt.Sprintf("push settings %q %q not applied", c.PushServiceAccount, c.PushAudience)
				}
				return ""
			},
		},
		{
			name: "only the reconcile function needs the nodes' service account",
			env:  with(map[string]string{"FUNCTION_TARGET": "watchdog", "NODE_SERVICE_ACCOUNT": ""}),
		},
		{
			name: "an API function needs no nodes' service account",
			env:  with(map[string]string{"FUNCTION_TARGET": "kubernetesNodePools-create", "NODE_SERVICE_ACCOUNT": ""}),
		},
		{
			name: "against the GKE emulator nodes need no service account",
			env:  with(map[string]string{"FUNCTION_TARGET": "reconcile", "NODE_SERVICE_ACCOUNT": "", "GKE_EMULATOR_HOST": "127.0.0.1:8124"}),
			check: func(c Config) string {
				if c.NodeServiceAccount != "" {
					return "NodeServiceAccount = " + c.NodeServiceAccount
				}
				return ""
			},
		},
		{
			name: "durations, level, database and audience",
			env: with(map[string]string{
				"CONVERGING_INTERVAL": "10s", "STEADY_INTERVAL": "2m", "LEASE_TTL": "45s", "WATCHDOG_GRACE": "90s",
				"LOG_LEVEL": "debug", "FIRESTORE_DATABASE": "compute", "TASKS_AUDIENCE": "https://custom.example.com",
			}),
			check: func(c Config) string {
				if c.ConvergingInterval != 10*time.Second || c.SteadyInterval != 2*time.Minute || c.LeaseTTL != 45*time.Second || c.WatchdogGrace != 90*time.Second {
					return "durations not applied"
				}
				if c.LogLevel != slog.LevelDebug || c.FirestoreDatabase != "compute" || c.TasksAudience != "https://custom.example.com" {
					return "level, database or audience not applied"
				}
				return ""
			},
		},
		{
			name: "loopback http and emulators for local runs",
			env: with(map[string]string{
				"AUTH_ISSUER_URL": "http://127.0.0.1:8080", "RECONCILE_URL": "http://localhost:8081/reconcile",
				"RECONCILE_ISSUER_URL": "http://[::1]:9000", "FIRESTORE_EMULATOR_HOST": "127.0.0.1:8086",
				"PUBSUB_EMULATOR_HOST": "localhost:8085", "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:8123", "GKE_EMULATOR_HOST": "127.0.0.1:8124",
			}),
			check: func(c Config) string {
				if c.TasksEmulatorHost != "127.0.0.1:8123" || c.GKEEmulatorHost != "127.0.0.1:8124" {
					return "emulator hosts not applied"
				}
				return ""
			},
		},
		{
			name: "impersonation of tenants' service accounts, on the emulators",
			env: with(map[string]string{
				"GKE_EMULATOR_HOST": "127.0.0.1:8124", "IAM_CREDENTIALS_EMULATOR_HOST": "127.0.0.1:8125", "EMULATOR_ACCESS_TOKEN": "ya29.emu.x",
				"RECONCILER_SERVICE_ACCOUNT": "reconciler@bc-prod.iam.gserviceaccount.com", "IMPERSONATION_TOKEN_LIFETIME": "4s",
			}),
			check: func(c Config) string {
				if c.IAMCredentialsEmulatorHost != "127.0.0.1:8125" || c.EmulatorAccessToken != "ya29.emu.x" ||
					c.ReconcilerServiceAccount != "reconciler@bc-prod.iam.gserviceaccount.com" || c.ImpersonationTokenLifetime != 4*time.Second {
					return "impersonation settings not applied"
				}
				return ""
			},
		},
		{
			name: "surrounding spaces are trimmed",
			env:  with(map[string]string{"GOOGLE_CLOUD_PROJECT": " bc-prod \n"}),
			check: func(c Config) string {
				if c.Project != "bc-prod" {
					return "Project = " + c.Project
				}
				return ""
			},
		},
		{
			name: "domain-scoped project",
			env:  with(map[string]string{"GOOGLE_CLOUD_PROJECT": "example.com:bc-prod"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadConfig(env(tt.env))
			if err != nil {
				t.Fatalf("LoadConfig(%v) = %v, want no error", tt.env, err)
			}
			if tt.check != nil {
				if msg := tt.check(c); msg != "" {
					t.Errorf("LoadConfig(%v): %s", tt.env, msg)
				}
			}
		})
	}
}

func TestLoadConfigInvalid(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // variables the error must name
	}{
		{"empty environment", map[string]string{}, []string{"GOOGLE_CLOUD_PROJECT", "TASKS_QUEUE", "RECONCILE_URL", "TASKS_SERVICE_ACCOUNT", "AUTH_ISSUER_URL", "AUTH_AUDIENCE", "RECONCILE_AUDIENCE", "SCHEDULER_SERVICE_ACCOUNT", "PUSH_SERVICE_ACCOUNT", "PUSH_AUDIENCE", "NODE_SERVICE_ACCOUNT"}},
		{"unknown target", with(map[string]string{"FUNCTION_TARGET": "kubernetesClusters-update"}), []string{"FUNCTION_TARGET"}},
		{"API function without issuer", with(map[string]string{"FUNCTION_TARGET": "kubernetesNodePools-create", "AUTH_ISSUER_URL": ""}), []string{"AUTH_ISSUER_URL"}},
		{"reconcile without audience", with(map[string]string{"FUNCTION_TARGET": "reconcile", "RECONCILE_AUDIENCE": ""}), []string{"RECONCILE_AUDIENCE"}},
		{"watchdog without audience", with(map[string]string{"FUNCTION_TARGET": "watchdog", "RECONCILE_AUDIENCE": ""}), []string{"RECONCILE_AUDIENCE"}},
		{"watchdog without its caller", with(map[string]string{"FUNCTION_TARGET": "watchdog", "SCHEDULER_SERVICE_ACCOUNT": ""}), []string{"SCHEDULER_SERVICE_ACCOUNT"}},
		{"pool events without their caller", with(map[string]string{"FUNCTION_TARGET": PoolEventsFunction, "PUSH_SERVICE_ACCOUNT": "", "PUSH_AUDIENCE": ""}), []string{"PUSH_SERVICE_ACCOUNT", "PUSH_AUDIENCE"}},
		{"every function without the internal callers", with(map[string]string{"SCHEDULER_SERVICE_ACCOUNT": "", "PUSH_SERVICE_ACCOUNT": "", "PUSH_AUDIENCE": ""}), []string{"SCHEDULER_SERVICE_ACCOUNT", "PUSH_SERVICE_ACCOUNT", "PUSH_AUDIENCE"}},
		{"callers not service accounts", with(map[string]string{"SCHEDULER_SERVICE_ACCOUNT": "scheduler", "PUSH_SERVICE_ACCOUNT": "bob@example.com"}), []string{"SCHEDULER_SERVICE_ACCOUNT", "PUSH_SERVICE_ACCOUNT"}},
		{"reconcile without nodes' service account", with(map[string]string{"FUNCTION_TARGET": "reconcile", "NODE_SERVICE_ACCOUNT": ""}), []string{"NODE_SERVICE_ACCOUNT"}},
		{"nodes' service account not an email", with(map[string]string{"NODE_SERVICE_ACCOUNT": "compute-nodes"}), []string{"NODE_SERVICE_ACCOUNT"}},
		{"nodes' service account not a service account", with(map[string]string{"NODE_SERVICE_ACCOUNT": "alice@example.com"}), []string{"NODE_SERVICE_ACCOUNT"}},
		{"bad project", with(map[string]string{"GOOGLE_CLOUD_PROJECT": "Bad_Project"}), []string{"GOOGLE_CLOUD_PROJECT"}},
		{"bad database", with(map[string]string{"FIRESTORE_DATABASE": "No Spaces"}), []string{"FIRESTORE_DATABASE"}},
		{"bad queue", with(map[string]string{"TASKS_QUEUE": "reconcile"}), []string{"TASKS_QUEUE"}},
		{"bad second queue", with(map[string]string{"TASKS_QUEUE": "projects/p/locations/l/queues/r,r-1"}), []string{"TASKS_QUEUE"}},
		{"queue named twice", with(map[string]string{"TASKS_QUEUE": "projects/p/locations/l/queues/r,projects/p/locations/l/queues/r"}), []string{"TASKS_QUEUE"}},
		{"bad steady queue", with(map[string]string{"TASKS_STEADY_QUEUE": "reconcile-steady"}), []string{"TASKS_STEADY_QUEUE"}},
		{"bad second steady queue", with(map[string]string{"TASKS_STEADY_QUEUE": "projects/p/locations/l/queues/s,s-1"}), []string{"TASKS_STEADY_QUEUE"}},
		{"steady queue named twice", with(map[string]string{"TASKS_STEADY_QUEUE": "projects/p/locations/l/queues/s,projects/p/locations/l/queues/s"}), []string{"TASKS_STEADY_QUEUE"}},
		{"steady queue the main one", with(map[string]string{"TASKS_QUEUE": "projects/p/locations/l/queues/s", "TASKS_STEADY_QUEUE": "projects/p/locations/l/queues/s"}), []string{"TASKS_STEADY_QUEUE"}},
		{"plain http beyond loopback", with(map[string]string{"RECONCILE_URL": "http://reconcile.example.com"}), []string{"RECONCILE_URL"}},
		{"relative issuer", with(map[string]string{"AUTH_ISSUER_URL": "issuer.example.com"}), []string{"AUTH_ISSUER_URL"}},
		{"issuer with query", with(map[string]string{"RECONCILE_ISSUER_URL": "https://accounts.google.com?x=1"}), []string{"RECONCILE_ISSUER_URL"}},
		{"service account not an email", with(map[string]string{"TASKS_SERVICE_ACCOUNT": "tasks"}), []string{"TASKS_SERVICE_ACCOUNT"}},
		{"durations", with(map[string]string{"CONVERGING_INTERVAL": "30", "STEADY_INTERVAL": "-5m", "LEASE_TTL": "0s", "WATCHDOG_GRACE": "soon"}), []string{"CONVERGING_INTERVAL", "STEADY_INTERVAL", "LEASE_TTL", "WATCHDOG_GRACE"}},
		{"log level", with(map[string]string{"LOG_LEVEL": "verbose"}), []string{"LOG_LEVEL"}},
		{"provider budget", with(map[string]string{"PROVIDER_QUOTA_PER_MINUTE": "-1", "PROVIDER_QUOTA_SHARE": "1.5", "RECONCILE_MAX_INSTANCES": "0"}), []string{"PROVIDER_QUOTA_PER_MINUTE", "PROVIDER_QUOTA_SHARE", "RECONCILE_MAX_INSTANCES"}},
		{"emulator without port", with(map[string]string{"CLOUD_TASKS_EMULATOR_HOST": "localhost"}), []string{"CLOUD_TASKS_EMULATOR_HOST"}},
		{"IAM Credentials emulator without port", with(map[string]string{"IAM_CREDENTIALS_EMULATOR_HOST": "localhost"}), []string{"IAM_CREDENTIALS_EMULATOR_HOST"}},
		{"reconciler's account not a service account", with(map[string]string{"RECONCILER_SERVICE_ACCOUNT": "reconciler"}), []string{"RECONCILER_SERVICE_ACCOUNT"}},
		{"emulators' token toward real services", with(map[string]string{"EMULATOR_ACCESS_TOKEN": "ya29.emu.x"}), []string{"EMULATOR_ACCESS_TOKEN"}},
		{"impersonated tokens over an hour", with(map[string]string{"IMPERSONATION_TOKEN_LIFETIME": "2h"}), []string{"IMPERSONATION_TOKEN_LIFETIME"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadConfig(env(tt.env))
			if err == nil {
				t.Fatalf("LoadConfig(%v) = %+v, want an error naming %v", tt.env, c, tt.want)
			}
			for _, name := range tt.want {
				if !strings.Contains(err.Error(), name+":") {
					t.Errorf("LoadConfig(%v) = %v, want it to name %s", tt.env, err, name)
				}
			}
			// Only the broken variables are named.
			for name := range maps.Keys(complete()) {
				if strings.Contains(err.Error(), name+":") && !slices.Contains(tt.want, name) && len(tt.env) > 0 {
					t.Errorf("LoadConfig(%v) = %v, names %s which is fine", tt.env, err, name)
				}
			}
		})
	}
}

func TestVariables(t *testing.T) {
	common := []string{"GOOGLE_CLOUD_PROJECT", "TASKS_QUEUE", "RECONCILE_URL", "TASKS_SERVICE_ACCOUNT"}
	tests := []struct {
		function string
		want     []string
	}{
		{"kubernetesClusters-get", append(common[:len(common):len(common)], "AUTH_ISSUER_URL", "AUTH_AUDIENCE")},
		{"reconcile", append(common[:len(common):len(common)], "RECONCILE_AUDIENCE", "NODE_SERVICE_ACCOUNT", "BCD_IMAGE", "SUBSTRATE_JOIN_URL")},
		{PoolEventsFunction, append(common[:len(common):len(common)], "PUSH_SERVICE_ACCOUNT", "PUSH_AUDIENCE")},
		{"watchdog", append(common[:len(common):len(common)], "RECONCILE_AUDIENCE", "SCHEDULER_SERVICE_ACCOUNT")},
		{"", append(common[:len(common):len(common)], "AUTH_ISSUER_URL", "AUTH_AUDIENCE", "RECONCILE_AUDIENCE", "SCHEDULER_SERVICE_ACCOUNT", "PUSH_SERVICE_ACCOUNT", "PUSH_AUDIENCE", "NODE_SERVICE_ACCOUNT", "BCD_IMAGE", "SUBSTRATE_JOIN_URL")},
	}
	for _, tt := range tests {
		t.Run(tt.function, func(t *testing.T) {
			read, required := Variables(tt.function)
			if diff := cmp.Diff(tt.want, required); diff != "" {
				t.Errorf("Variables(%q) required (-want +got):\n%s", tt.function, diff)
			}
			for _, name := range append(required, "FUNCTION_TARGET", "LOG_LEVEL", "FIRESTORE_DATABASE", "GKE_EMULATOR_HOST") {
				if !slices.Contains(read, name) {
					t.Errorf("Variables(%q) read = %v, want it to hold %s", tt.function, read, name)
				}
			}
			// What it reports required is what LoadConfig refuses to
			// go without.
			env := map[string]string{"FUNCTION_TARGET": tt.function}
			_, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			for _, name := range required {
				if err == nil || !strings.Contains(err.Error(), name+":") {
					t.Errorf("LoadConfig(FUNCTION_TARGET=%q) = %v, want it to name %s", tt.function, err, name)
				}
			}
		})
	}
}
