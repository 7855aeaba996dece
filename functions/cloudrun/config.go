package cloudrun

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config is everything a function instance is configured with: what a
// deployed one reads from its environment (LoadConfig, which Main gives
// the process's environment: Main is the one place of the server that
// reads it), and what the devstack sets in code. New validates it as
// LoadConfig does. Each field names the variable that sets it.
type Config struct {
	// Function is FUNCTION_TARGET, the one function this instance serves
	// on Cloud Run; empty when every function is served on its own path
	// (a local run of the server command).
	Function string

	Project           string // GOOGLE_CLOUD_PROJECT: Firestore, Pub/Sub, traces
	FirestoreDatabase string // FIRESTORE_DATABASE; "(default)" when unset

	// AuthIssuerURL and AuthAudience say which tenant tokens the API
	// functions accept (AUTH_ISSUER_URL, AUTH_AUDIENCE).
	AuthIssuerURL string
	AuthAudience  string

	// TasksQueue is the reconcile queue, projects/P/locations/L/queues/Q
	// (TASKS_QUEUE), or several separated by commas, each tenant's
	// changing chains on the one its ID hashes to (tasks.TenantShard), so
	// that one tenant's many converging chains wait on its queue and not
	// another's (API.md §10); ReconcileURL the reconcile function's URL its tasks
	// call (RECONCILE_URL); TasksServiceAccount the identity of the tasks'
	// OIDC tokens (TASKS_SERVICE_ACCOUNT); TasksAudience their audience
	// (TASKS_AUDIENCE, ReconcileURL when unset).
	TasksQueue string
	// TasksSteadyQueue takes the runs of steady chains, so that a
	// fleet's refreshes never delay a change (TASKS_STEADY_QUEUE;
	// TasksQueue takes every run when unset): one queue, or several
	// separated by commas, each chain on the one its ID hashes to, for a
	// fleet whose refreshes outgrow one queue's dispatch rate.
	TasksSteadyQueue    string
	ReconcileURL        string
	TasksServiceAccount string
	TasksAudience       string

	// ReconcileIssuerURL is the issuer of the tokens the internal
	// functions accept: Google-signed OIDC tokens minted by Cloud Tasks,
	// Cloud Scheduler and Pub/Sub push subscriptions
	// (RECONCILE_ISSUER_URL, https://accounts.google.com when unset).
	// ReconcileAudience is the audience of the reconcile and watchdog
	// functions' tokens (RECONCILE_AUDIENCE, the URL of the service
	// itself). Each internal function accepts the tokens of one service
	// account only, by their verified email (auth.ServiceAccount): the
	// reconcile function TasksServiceAccount's, the watchdog
	// SchedulerServiceAccount's, the pool events' PushServiceAccount's.
	ReconcileIssuerURL string
	ReconcileAudience  string

	// SchedulerServiceAccount is the identity of Cloud Scheduler's OIDC
	// tokens, the watchdog's one caller (SCHEDULER_SERVICE_ACCOUNT).
	SchedulerServiceAccount string
	// PushServiceAccount and PushAudience are the identity and the
	// audience of the OIDC tokens of the Pub/Sub push subscriptions, the
	// pool events function's one caller (PUSH_SERVICE_ACCOUNT, and
	// PUSH_AUDIENCE, the URL of the service itself, as the subscriptions'
	// oidc_token names it).
	PushServiceAccount string
	PushAudience       string

	// NodeServiceAccount is the service account the nodes of every
	// cluster and node pool the reconciler creates run as
	// (NODE_SERVICE_ACCOUNT): required by the reconcile function, unless
	// GKE_EMULATOR_HOST points it at an emulator, where nodes have no
	// identity.
	NodeServiceAccount string

	// ReconcilerServiceAccount is the reconcile function's own identity
	// (RECONCILER_SERVICE_ACCOUNT, optional): the account tenants grant
	// roles/iam.serviceAccountTokenCreator on the service account their
	// own project's clusters are made as, named in the error a cluster
	// shows when that grant is missing.
	ReconcilerServiceAccount string
	// ImpersonationTokenLifetime is the lifetime of the tokens the
	// reconciler mints of tenants' service accounts
	// (IMPERSONATION_TOKEN_LIFETIME, 1h, at most 1h). Each is replaced 5
	// minutes before it expires (at half its life when that is shorter),
	// so a revoked grant shows within about this long.
	ImpersonationTokenLifetime time.Duration

	// BcdImage is the container image of bcd, which the substrates apply
	// in their clusters (BCD_IMAGE), and JoinURL the URL of
	// kubernetesSubstrates.join that bcd calls (SUBSTRATE_JOIN_URL): both
	// required by the reconcile function.
	BcdImage string
	JoinURL  string
	// KubernetesToken, when set, is the bearer token presented as the
	// functions' own identity to the clusters' Kubernetes APIs
	// (KUBERNETES_TOKEN), for clusters that take static tokens. Unset in
	// production, where the reconcile and join functions present their
	// Google OAuth token, as GKE accepts, and on the GKE emulator, where
	// they present EmulatorAccessToken, which its clusters accept as
	// GKE's do. Either way, a cluster in a tenant's project is reached as
	// the tenant's impersonated service account.
	KubernetesToken string

	ConvergingInterval time.Duration // CONVERGING_INTERVAL, 30s
	SteadyInterval     time.Duration // STEADY_INTERVAL, 5m
	LeaseTTL           time.Duration // LEASE_TTL, 30s
	// WatchdogGrace is how late a run may be before the watchdog restarts
	// its chain, and how old an outbox event must be before the watchdog
	// publishes it (WATCHDOG_GRACE, 1m).
	WatchdogGrace time.Duration

	// ProviderQuota is each provider project's request quota, calls per
	// minute (PROVIDER_QUOTA_PER_MINUTE, 600; 0: no budget); the runs of
	// the reconcile function, all its instances together, spend at most
	// ProviderQuotaShare of it (PROVIDER_QUOTA_SHARE, 0.8), counted in
	// Firestore. ReconcileInstances, the most instances
	// (RECONCILE_MAX_INSTANCES, 10, as Terraform caps the service), sizes
	// the batches of the share an instance leases at once.
	ProviderQuota      int
	ProviderQuotaShare float64
	ReconcileInstances int

	LogLevel slog.Level // LOG_LEVEL: DEBUG, INFO, WARN or ERROR; INFO

	// Telemetry is where the metrics and traces go (TELEMETRY):
	// TelemetryCloud (over OTLP to the Telemetry API, which writes to
	// Cloud Monitoring and Cloud Trace, in Project),
	// TelemetryStdout (JSON lines on stdout) or TelemetryOff. Unset, it is
	// cloud on Cloud Run (where K_SERVICE is set) and off elsewhere, so
	// that a local run needs no Google credentials.
	Telemetry string
	// Service is the Cloud Run service (K_SERVICE, set by Cloud Run): the
	// name of the instance's metrics and spans. Empty elsewhere.
	Service string

	// Emulator addresses (host:port), for running the server against the
	// local emulators; empty in production. FIRESTORE_EMULATOR_HOST and
	// PUBSUB_EMULATOR_HOST are also honoured by Google's clients
	// themselves; CLOUD_TASKS_EMULATOR_HOST and GKE_EMULATOR_HOST are this
	// project's.
	FirestoreEmulatorHost string
	PubSubEmulatorHost    string
	TasksEmulatorHost     string
	GKEEmulatorHost       string
	// ComputeEmulatorHost (COMPUTE_EMULATOR_HOST) points the reading of
	// the node pools' instance groups (currentNodeCount) at the GKE
	// simulator's Compute Engine API, over plain HTTP. A reconciler on the
	// GKE emulator without it reads no node counts.
	ComputeEmulatorHost string
	// IAMCredentialsEmulatorHost (IAM_CREDENTIALS_EMULATOR_HOST) points
	// the impersonation of tenants' service accounts at the IAM
	// Credentials emulator. Without it, a reconciler on the GKE emulator
	// impersonates no one.
	IAMCredentialsEmulatorHost string
	// EmulatorAccessToken (EMULATOR_ACCESS_TOKEN) is the OAuth access
	// token the reconciler presents as its own identity to the GKE and
	// IAM Credentials emulators, which check callers when their IAM is
	// on (the devstack's); in production the identity is the service's
	// own, from its default credentials.
	EmulatorAccessToken string
}

// Defaults of the optional settings.
const (
	DefaultFirestoreDatabase          = "(default)"
	DefaultReconcileIssuerURL         = "https://accounts.google.com"
	DefaultConvergingInterval         = 30 * time.Second
	DefaultSteadyInterval             = 5 * time.Minute
	DefaultLeaseTTL                   = 30 * time.Second
	DefaultWatchdogGrace              = time.Minute
	DefaultProviderQuota              = 600
	DefaultProviderQuotaShare         = 0.8
	DefaultReconcileInstances         = 10
	DefaultImpersonationTokenLifetime = time.Hour
)

// Telemetry destinations (TELEMETRY).
const (
	TelemetryCloud  = "cloud"
	TelemetryStdout = "stdout"
	TelemetryOff    = "off"
)

var (
	// A project ID, optionally domain-scoped ("example.com:my-project").
	projectRE  = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	databaseRE = regexp.MustCompile(`^[a-z][a-z0-9-]{2,62}$`)
	queueRE    = regexp.MustCompile(`^projects/[^/]+/locations/[a-z0-9-]+/queues/[A-Za-z0-9-]{1,100}$`)
	// A service account email: name@project.iam.gserviceaccount.com, or
	// a Google-managed account's domain.
	serviceAccountRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}@[a-z0-9.:-]+\.gserviceaccount\.com$`)
)

// Defaults returns the configuration of an environment that sets none of
// the optional settings: what LoadConfig starts from, and what a process
// building its Config in code (the devstack) should start from too.
func Defaults() Config {
	return Config{
		FirestoreDatabase:          DefaultFirestoreDatabase,
		ReconcileIssuerURL:         DefaultReconcileIssuerURL,
		ConvergingInterval:         DefaultConvergingInterval,
		SteadyInterval:             DefaultSteadyInterval,
		LeaseTTL:                   DefaultLeaseTTL,
		WatchdogGrace:              DefaultWatchdogGrace,
		ImpersonationTokenLifetime: DefaultImpersonationTokenLifetime,
		ProviderQuota:              DefaultProviderQuota,
		ProviderQuotaShare:         DefaultProviderQuotaShare,
		ReconcileInstances:         DefaultReconcileInstances,
		LogLevel:                   slog.LevelInfo,
		Telemetry:                  TelemetryOff,
	}
}

// LoadConfig reads the configuration through lookup (the process's
// environment, in Main), applies the defaults and validates it. What is required depends
// on FUNCTION_TARGET: the API functions need the tenant token settings, the
// reconcile and watchdog functions the internal ones, the reconcile
// function the nodes' service account, and a process serving every
// function needs them all. Telemetry goes to Google Cloud's Telemetry
// API on Cloud Run unless TELEMETRY says otherwise, and nowhere
// elsewhere. The error names every broken variable.
func LoadConfig(lookup func(string) (string, bool)) (Config, error) {
	return load(lookup, &loaded{})
}

// Variables returns the environment variables LoadConfig reads for the
// named function (its FUNCTION_TARGET; "" for a process serving every
// function), and those of them it requires there: what a deployment of
// the function must set, and may set.
func Variables(function string) (read, required []string) {
	env := map[string]string{"FUNCTION_TARGET": function}
	var v loaded
	_, _ = load(func(name string) (string, bool) {
		val, ok := env[name]
		return val, ok
	}, &v)
	return v.read, v.required
}

// loaded records the variables a load read and those it required.
type loaded struct{ read, required []string }

// load parses the environment over the defaults, then validates the
// result as New does.
func load(lookup func(string) (string, bool), rec *loaded) (Config, error) {
	get := func(name string) string {
		rec.read = append(rec.read, name)
		val, _ := lookup(name)
		return strings.TrimSpace(val)
	}
	var problems []error
	bad := func(name, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	c := Defaults()
	c.Function = get("FUNCTION_TARGET")
	c.Project = get("GOOGLE_CLOUD_PROJECT")
	if v := get("FIRESTORE_DATABASE"); v != "" {
		c.FirestoreDatabase = v
	}
	c.AuthIssuerURL = get("AUTH_ISSUER_URL")
	c.AuthAudience = get("AUTH_AUDIENCE")
	c.TasksQueue = get("TASKS_QUEUE")
	c.TasksSteadyQueue = get("TASKS_STEADY_QUEUE")
	c.ReconcileURL = get("RECONCILE_URL")
	c.TasksServiceAccount = get("TASKS_SERVICE_ACCOUNT")
	if c.TasksAudience = get("TASKS_AUDIENCE"); c.TasksAudience == "" {
		c.TasksAudience = c.ReconcileURL
	}
	if v := get("RECONCILE_ISSUER_URL"); v != "" {
		c.ReconcileIssuerURL = v
	}
	c.ReconcileAudience = get("RECONCILE_AUDIENCE")
	c.SchedulerServiceAccount = get("SCHEDULER_SERVICE_ACCOUNT")
	c.PushServiceAccount = get("PUSH_SERVICE_ACCOUNT")
	c.PushAudience = get("PUSH_AUDIENCE")
	c.FirestoreEmulatorHost = get("FIRESTORE_EMULATOR_HOST")
	c.PubSubEmulatorHost = get("PUBSUB_EMULATOR_HOST")
	c.TasksEmulatorHost = get("CLOUD_TASKS_EMULATOR_HOST")
	c.GKEEmulatorHost = get("GKE_EMULATOR_HOST")
	c.ComputeEmulatorHost = get("COMPUTE_EMULATOR_HOST")
	c.NodeServiceAccount = get("NODE_SERVICE_ACCOUNT")
	c.BcdImage = get("BCD_IMAGE")
	c.JoinURL = get("SUBSTRATE_JOIN_URL")
	c.KubernetesToken = get("KUBERNETES_TOKEN")
	c.ReconcilerServiceAccount = get("RECONCILER_SERVICE_ACCOUNT")
	c.IAMCredentialsEmulatorHost = get("IAM_CREDENTIALS_EMULATOR_HOST")
	c.EmulatorAccessToken = get("EMULATOR_ACCESS_TOKEN")

	// A value that cannot be parsed keeps its default, so that the
	// validation below does not report it a second time.
	duration := func(name string, d *time.Duration) {
		v := get(name)
		if v == "" {
			return
		}
		if p, err := time.ParseDuration(v); err != nil || p <= 0 {
			bad(name, "%q is not a positive duration such as 30s or 5m", v)
		} else {
			*d = p
		}
	}
	duration("CONVERGING_INTERVAL", &c.ConvergingInterval)
	duration("STEADY_INTERVAL", &c.SteadyInterval)
	duration("LEASE_TTL", &c.LeaseTTL)
	duration("WATCHDOG_GRACE", &c.WatchdogGrace)
	duration("IMPERSONATION_TOKEN_LIFETIME", &c.ImpersonationTokenLifetime)

	if v := get("PROVIDER_QUOTA_PER_MINUTE"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			bad("PROVIDER_QUOTA_PER_MINUTE", "%q is not a count of calls per minute (0: no budget)", v)
		} else {
			c.ProviderQuota = n
		}
	}
	if v := get("PROVIDER_QUOTA_SHARE"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err != nil || f <= 0 || f > 1 {
			bad("PROVIDER_QUOTA_SHARE", "%q is not a fraction above 0 and at most 1", v)
		} else {
			c.ProviderQuotaShare = f
		}
	}
	if v := get("RECONCILE_MAX_INSTANCES"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			bad("RECONCILE_MAX_INSTANCES", "%q is not a positive count", v)
		} else {
			c.ReconcileInstances = n
		}
	}

	if v := get("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			bad("LOG_LEVEL", "%q is not DEBUG, INFO, WARN or ERROR", v)
		}
	}

	c.Service = get("K_SERVICE")
	if v := get("TELEMETRY"); v != "" {
		c.Telemetry = v
	} else if c.Service != "" {
		c.Telemetry = TelemetryCloud
	}

	problems = append(problems, c.problems(rec)...)
	if len(problems) > 0 {
		return Config{}, fmt.Errorf("configuration: %w", errors.Join(problems...))
	}
	return c, nil
}

// validate returns an error naming every broken setting of c, by the
// environment variable that sets it.
func (c Config) validate() error {
	if problems := c.problems(&loaded{}); len(problems) > 0 {
		return fmt.Errorf("configuration: %w", errors.Join(problems...))
	}
	return nil
}

// problems checks c, recording in rec the variables it requires.
func (c Config) problems(rec *loaded) []error {
	var problems []error
	bad := func(name, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	api, internal, reconciles, watches, consumes := true, true, true, true, true
	if c.Function != "" {
		f, ok := functionByName[c.Function]
		if !ok {
			bad("FUNCTION_TARGET", "unknown function %q", c.Function)
		}
		api, reconciles = ok && f.kind == kindAPI, ok && f.kind == kindReconcile
		watches, consumes = ok && f.kind == kindWatchdog, ok && f.kind == kindConsumer
		internal = reconciles || watches
	}
	needs := "every function"
	if c.Function != "" {
		needs = c.Function
	}
	required := func(name, val string) bool {
		rec.required = append(rec.required, name)
		if val == "" {
			bad(name, "required by %s", needs)
			return false
		}
		return true
	}

	if required("GOOGLE_CLOUD_PROJECT", c.Project) && !projectRE.MatchString(c.Project) {
		bad("GOOGLE_CLOUD_PROJECT", "%q is not a project ID", c.Project)
	}
	if c.FirestoreDatabase != DefaultFirestoreDatabase && !databaseRE.MatchString(c.FirestoreDatabase) {
		bad("FIRESTORE_DATABASE", "%q is not a database ID", c.FirestoreDatabase)
	}
	seen := map[string]bool{}
	if required("TASKS_QUEUE", c.TasksQueue) {
		for _, q := range c.ChangeQueues() {
			switch {
			case !queueRE.MatchString(q):
				bad("TASKS_QUEUE", "%q is not projects/P/locations/L/queues/Q", q)
			case seen[q]:
				bad("TASKS_QUEUE", "%q is named twice", q)
			}
			seen[q] = true
		}
	}
	for _, q := range c.SteadyQueues() {
		switch {
		case !queueRE.MatchString(q):
			bad("TASKS_STEADY_QUEUE", "%q is not projects/P/locations/L/queues/Q", q)
		case seen[q]:
			bad("TASKS_STEADY_QUEUE", "%q is named twice", q)
		}
		seen[q] = true
	}
	if required("RECONCILE_URL", c.ReconcileURL) {
		if err := checkURL(c.ReconcileURL); err != nil {
			bad("RECONCILE_URL", "%v", err)
		}
	}
	if required("TASKS_SERVICE_ACCOUNT", c.TasksServiceAccount) && !strings.Contains(c.TasksServiceAccount, "@") {
		bad("TASKS_SERVICE_ACCOUNT", "%q is not a service account email", c.TasksServiceAccount)
	}
	// LoadConfig defaults it to RECONCILE_URL; a Config made in code
	// must say it.
	if c.TasksAudience == "" && c.ReconcileURL != "" {
		bad("TASKS_AUDIENCE", "empty: the reconcile tasks' tokens would name no audience")
	}
	if api {
		if required("AUTH_ISSUER_URL", c.AuthIssuerURL) {
			if err := checkURL(c.AuthIssuerURL); err != nil {
				bad("AUTH_ISSUER_URL", "%v", err)
			}
		}
		required("AUTH_AUDIENCE", c.AuthAudience)
	}
	if err := checkURL(c.ReconcileIssuerURL); err != nil {
		bad("RECONCILE_ISSUER_URL", "%v", err)
	}
	if internal {
		required("RECONCILE_AUDIENCE", c.ReconcileAudience)
	}
	// The watchdog and the pool events function each accept the tokens
	// of their one caller only.
	if watches {
		required("SCHEDULER_SERVICE_ACCOUNT", c.SchedulerServiceAccount)
	}
	if consumes {
		required("PUSH_SERVICE_ACCOUNT", c.PushServiceAccount)
		required("PUSH_AUDIENCE", c.PushAudience)
	}
	if c.SchedulerServiceAccount != "" && !serviceAccountRE.MatchString(c.SchedulerServiceAccount) {
		bad("SCHEDULER_SERVICE_ACCOUNT", "%q is not a service account email", c.SchedulerServiceAccount)
	}
	if c.PushServiceAccount != "" && !serviceAccountRE.MatchString(c.PushServiceAccount) {
		bad("PUSH_SERVICE_ACCOUNT", "%q is not a service account email", c.PushServiceAccount)
	}
	// Against the real GKE, nodes without this account would run as the
	// project's Compute Engine default account; an emulator has no
	// identities.
	if reconciles && c.GKEEmulatorHost == "" {
		required("NODE_SERVICE_ACCOUNT", c.NodeServiceAccount)
	}
	if reconciles {
		required("BCD_IMAGE", c.BcdImage)
		if required("SUBSTRATE_JOIN_URL", c.JoinURL) {
			if err := checkURL(c.JoinURL); err != nil {
				bad("SUBSTRATE_JOIN_URL", "%v", err)
			}
		}
	}
	if c.NodeServiceAccount != "" && !serviceAccountRE.MatchString(c.NodeServiceAccount) {
		bad("NODE_SERVICE_ACCOUNT", "%q is not a service account email", c.NodeServiceAccount)
	}
	if c.ReconcilerServiceAccount != "" && !serviceAccountRE.MatchString(c.ReconcilerServiceAccount) {
		bad("RECONCILER_SERVICE_ACCOUNT", "%q is not a service account email", c.ReconcilerServiceAccount)
	}
	// A token for emulators must never reach a real service.
	if c.EmulatorAccessToken != "" && c.GKEEmulatorHost == "" && c.IAMCredentialsEmulatorHost == "" {
		bad("EMULATOR_ACCESS_TOKEN", "set without GKE_EMULATOR_HOST or IAM_CREDENTIALS_EMULATOR_HOST: it is for emulators only")
	}

	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"CONVERGING_INTERVAL", c.ConvergingInterval},
		{"STEADY_INTERVAL", c.SteadyInterval},
		{"LEASE_TTL", c.LeaseTTL},
		{"WATCHDOG_GRACE", c.WatchdogGrace},
	} {
		if d.v <= 0 {
			bad(d.name, "%v is not a positive duration", d.v)
		}
	}
	if c.ImpersonationTokenLifetime < time.Second || c.ImpersonationTokenLifetime > time.Hour {
		bad("IMPERSONATION_TOKEN_LIFETIME", "%v is not between 1s and 1h", c.ImpersonationTokenLifetime)
	}
	if c.ProviderQuota < 0 {
		bad("PROVIDER_QUOTA_PER_MINUTE", "%d is not a count of calls per minute (0: no budget)", c.ProviderQuota)
	}
	if c.ProviderQuotaShare <= 0 || c.ProviderQuotaShare > 1 {
		bad("PROVIDER_QUOTA_SHARE", "%v is not a fraction above 0 and at most 1", c.ProviderQuotaShare)
	}
	if c.ReconcileInstances < 1 {
		bad("RECONCILE_MAX_INSTANCES", "%d is not a positive count", c.ReconcileInstances)
	}

	switch c.Telemetry {
	case TelemetryCloud, TelemetryStdout, TelemetryOff:
	default:
		bad("TELEMETRY", "%q is not cloud, stdout or off", c.Telemetry)
	}

	for _, e := range []struct{ name, v string }{
		{"FIRESTORE_EMULATOR_HOST", c.FirestoreEmulatorHost},
		{"PUBSUB_EMULATOR_HOST", c.PubSubEmulatorHost},
		{"CLOUD_TASKS_EMULATOR_HOST", c.TasksEmulatorHost},
		{"GKE_EMULATOR_HOST", c.GKEEmulatorHost},
		{"COMPUTE_EMULATOR_HOST", c.ComputeEmulatorHost},
		{"IAM_CREDENTIALS_EMULATOR_HOST", c.IAMCredentialsEmulatorHost},
	} {
		if e.v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(e.v); err != nil || port == "" {
			bad(e.name, "%q is not host:port", e.v)
		}
	}
	return problems
}

// checkURL accepts an absolute https URL, or an http one on the loopback
// interface: OIDC tokens and tenant credentials never travel in the clear
// beyond the machine.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL without query", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("%q: http is allowed only on the loopback interface; use https", raw)
	}
	return fmt.Errorf("%q: scheme must be https", raw)
}

// ChangeQueues are the queues TasksQueue names, in its order.
func (c Config) ChangeQueues() []string {
	if c.TasksQueue == "" {
		return nil
	}
	return strings.Split(c.TasksQueue, ",")
}

// SteadyQueues are the queues TasksSteadyQueue names, in its order.
func (c Config) SteadyQueues() []string {
	if c.TasksSteadyQueue == "" {
		return nil
	}
	return strings.Split(c.TasksSteadyQueue, ",")
}
