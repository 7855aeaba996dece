package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/better-compute/kubernetes/functions/cmd/terraform-provider-bettercompute/provider"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// address is the provider's source address as OpenTofu spells it in full.
const address = "registry.opentofu.org/better-compute/bettercompute"

// step is one command of the run and how long it took, for the summary
// the test logs (the README quotes it).
type step struct {
	what string
	took time.Duration
}

// TestNodePoolsAsCode applies a cluster with two node pools through the
// real OpenTofu against the devstack and walks the life of node pools as
// code: a plan right after the apply shows no change; a resize is made in
// place; a resize by another client shows as drift in the next plan and
// the apply brings it back; an apply killed after its create reached the
// API leaves no second pool when it is run again (the idempotency key);
// a pool removed from the state comes back by import with no change to
// make; a broken field fails at plan naming it, before any call; destroy
// deletes everything.
func TestNodePoolsAsCode(t *testing.T) {
	bin := tofuBinary(t)
	stack := startStack(t)
	token, err := stack.Token("alice")
	if err != nil {
		t.Fatal(err)
	}
	api, err := client.New(stack.URL, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	// The provider reads where and as whom from the environment, as bc
	// does; the file bc login writes is not there.
	t.Setenv("BC_URL", stack.URL)
	t.Setenv("BC_TENANT", "acme")
	t.Setenv("BC_TOKEN", token)
	t.Setenv("BC_CONFIG", filepath.Join(t.TempDir(), "no-config.yaml"))
	// The provider runs in this process: its SDK's trace logs, which
	// OpenTofu would otherwise collect from a provider process of its own,
	// would fill the test's output.
	for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_PROVIDER", "TF_LOG_PROVIDER_BETTERCOMPUTE"} {
		t.Setenv(v, "off")
	}

	tf := newTofu(t, bin, serveProvider(t))
	name := fmt.Sprintf("iac-%d", time.Now().UnixNano()%1_000_000)
	cfg := config{cluster: name, small: 1}

	// Apply: a cluster with its first pool, and two pools beside it.
	tf.write(cfg)
	tf.must("init", "init", "-input=false", "-no-color")
	tf.must("apply: a cluster and two node pools", "apply", "-auto-approve", "-input=false", "-no-color")
	out := tf.outputs()
	clusterID, smallID, autoID := out["cluster_id"], out["small_id"], out["auto_id"]
	pools := poolsByName(t, api, clusterID)
	if len(pools) != 3 {
		t.Fatalf("after the apply the cluster has pools %v, want default, small and auto", keys(pools))
	}
	for name, p := range pools {
		if p.State != client.StateReady {
			t.Errorf("pool %s is %s after the apply, want ready (the apply waits for it)", name, p.State)
		}
	}
	if p := pools["small"]; p.ID != smallID || p.NodeCount != 1 || p.Labels["team"] != "web" {
		t.Errorf("pool small = %+v, want ID %s, 1 node, label team=web", p, smallID)
	}
	if p := pools["auto"]; p.ID != autoID || p.Autoscaling == nil || p.Autoscaling.MinNodes != 1 || p.Autoscaling.MaxNodes != 3 {
		t.Errorf("pool auto = %+v, want ID %s autoscaling 1-3", p, autoID)
	}
	if out["listed"] != "3" || out["cluster_state"] != "ready" {
		t.Errorf("the data sources read %q pools and a cluster %q; want 3, ready", out["listed"], out["cluster_state"])
	}

	// Nothing changed: the plan says so.
	if code, plan := tf.plan("plan after the apply"); code != 0 {
		t.Errorf("plan right after the apply exits %d, want 0 (no changes):\n%s", code, plan)
	}

	// A resize is made in place: the same pool, its version up by one.
	cfg.small = 2
	tf.write(cfg)
	tf.must("apply: a resize", "apply", "-auto-approve", "-input=false", "-no-color")
	p := poolsByName(t, api, clusterID)["small"]
	if p.ID != smallID || p.NodeCount != 2 || p.Version != 2 || p.State != client.StateReady {
		t.Errorf("after the resize pool small = %+v, want the same ID %s, 2 nodes, version 2, ready", p, smallID)
	}

	// Another client resizes the pool: the next plan shows it as drift,
	// and the apply brings it back.
	three := 3
	if _, err := api.UpdateNodePool(context.Background(), client.UpdateNodePoolRequest{
		TenantID: "acme", ClusterID: clusterID, NodePoolID: smallID, NodeCount: &three,
	}); err != nil {
		t.Fatalf("resize by another client: %v", err)
	}
	code, plan := tf.plan("plan after a resize by another client")
	if code != 2 || !strings.Contains(plan, "node_count") || !strings.Contains(plan, "3 -> 2") {
		t.Errorf("plan after another client's resize exits %d, want 2 with node_count 3 -> 2:\n%s", code, plan)
	}
	tf.must("apply: the drift brought back", "apply", "-auto-approve", "-input=false", "-no-color")
	if p := poolsByName(t, api, clusterID)["small"]; p.NodeCount != 2 || p.State != client.StateReady {
		t.Errorf("after the apply pool small = %+v, want 2 nodes again, ready", p)
	}

	// An apply killed once its create reached the API, before it could
	// record the pool, is run again: the same pool, not a second one nor
	// a name conflict. GKE is slowed for the create, so the pool is still
	// converging when the apply dies.
	postFault(t, stack.URL, `{"service":"gke","method":"CreateNodePool","action":"latency","latency":"5s","count":1}`)
	cfg.retry = true
	tf.write(cfg)
	tf.killedApply(func() (bool, string) {
		pools := poolsByName(t, api, clusterID)
		_, ok := pools["retry"]
		return ok, fmt.Sprintf("pools %v", keys(pools))
	})
	first := poolsByName(t, api, clusterID)["retry"].ID
	tf.must("apply again after the killed apply", "apply", "-auto-approve", "-input=false", "-no-color")
	var retried []client.NodePool
	for _, p := range list(t, api, clusterID) {
		if p.Name == "retry" {
			retried = append(retried, p)
		}
	}
	if len(retried) != 1 || retried[0].ID != first || tf.outputs()["retry_id"] != first {
		t.Errorf("after the apply run again, pools named retry: %+v (outputs %v); want exactly one, in the state", retried, tf.outputs())
	}

	// Import: a pool dropped from the state is taken back by its ID, and
	// the plan then has nothing to do.
	tf.must("state rm", "state", "rm", "-no-color", "bettercompute_kubernetes_node_pool.auto")
	tf.must("import a node pool", "import", "-input=false", "-no-color", "bettercompute_kubernetes_node_pool.auto", clusterID+"/"+autoID)
	tf.must("state rm", "state", "rm", "-no-color", "bettercompute_kubernetes_cluster.prod")
	tf.must("import a cluster", "import", "-input=false", "-no-color", "bettercompute_kubernetes_cluster.prod", "acme/"+clusterID)
	if code, plan := tf.plan("plan after the import"); code != 0 {
		t.Errorf("plan after the import exits %d, want 0:\n%s", code, plan)
	}

	// A broken field fails at plan, naming it, and nothing is called.
	bad := newTofu(t, bin, tf.reattach)
	bad.writeRaw(badConfig(clusterID))
	bad.must("init (broken configuration)", "init", "-input=false", "-no-color")
	code, msg := bad.plan("plan of broken fields")
	if code != 1 {
		t.Errorf("plan of a broken configuration exits %d, want 1:\n%s", code, msg)
	}
	for _, want := range []string{"Invalid machine_type", "Invalid labels", "Invalid node_count"} {
		if !strings.Contains(msg, want) {
			t.Errorf("plan of broken fields does not name %s:\n%s", want, msg)
		}
	}
	if _, ok := poolsByName(t, api, clusterID)["broken"]; ok {
		t.Error("a pool of the broken configuration was created")
	}

	// A pool the provider refuses goes error: the apply fails with the
	// pool's message, and the pool is in the state, to be fixed or
	// destroyed.
	cfg.refused = true
	tf.write(cfg)
	code, msg = tf.run("apply: a pool GKE refuses", "apply", "-auto-approve", "-input=false", "-no-color")
	refused := poolsByName(t, api, clusterID)["refused"]
	if code != 1 || refused.State != client.StateError || refused.Message == "" || !strings.Contains(unwrap(msg), unwrap(refused.Message)) {
		t.Errorf("apply of a refused pool exits %d with %q; want 1 with the pool's message %q (state %s)", code, msg, refused.Message, refused.State)
	}
	if out := tf.must("state list", "state", "list"); !strings.Contains(out, "bettercompute_kubernetes_node_pool.refused") {
		t.Errorf("the refused pool is not in the state:\n%s", out)
	}

	// Destroy: every pool and the cluster deleted.
	tf.must("destroy", "destroy", "-auto-approve", "-input=false", "-no-color")
	c, err := api.GetCluster(context.Background(), "acme", clusterID)
	var apiErr *client.Error
	switch {
	case err == nil && c.State != client.StateDeleted:
		t.Errorf("after destroy the cluster is %s, want deleted", c.State)
	case err != nil && !(errors.As(err, &apiErr) && apiErr.Code == client.CodeNotFound):
		t.Errorf("get the cluster after destroy: %v", err)
	}

	var total time.Duration
	for _, s := range append(tf.steps, bad.steps...) {
		total += s.took
		t.Logf("%-45s %6.1f s", s.what, s.took.Seconds())
	}
	t.Logf("%-45s %6.1f s (%d commands)", "all of the above", total.Seconds(), len(tf.steps)+len(bad.steps))
}

// config is the acceptance run's configuration: a cluster with a first
// pool, a fixed pool "small", an autoscaled pool "auto", and with retry
// a third pool.
type config struct {
	cluster string
	small   int
	retry   bool
	refused bool // a pool of a machine type GKE does not have
}

func (c config) hcl() string {
	var b strings.Builder
	fmt.Fprintf(&b, `terraform {
  required_providers {
    bettercompute = { source = "better-compute/bettercompute" }
  }
}

provider "bettercompute" {}

resource "bettercompute_kubernetes_cluster" "prod" {
  name    = %q
  pool_id = "pool-dev"
  region  = "us-central1"
  node_pool {
    name         = "default"
    machine_type = "e2-standard-4"
    node_count   = 1
  }
}

resource "bettercompute_kubernetes_node_pool" "small" {
  cluster_id   = bettercompute_kubernetes_cluster.prod.id
  name         = "small"
  machine_type = "e2-standard-4"
  node_count   = %d
  labels       = { team = "web" }
}

resource "bettercompute_kubernetes_node_pool" "auto" {
  cluster_id   = bettercompute_kubernetes_cluster.prod.id
  name         = "auto"
  machine_type = "e2-standard-8"
  node_count   = 1
  autoscaling  = { min_nodes = 1, max_nodes = 3 }
}

data "bettercompute_kubernetes_node_pools" "all" {
  cluster_id = bettercompute_kubernetes_cluster.prod.id
  depends_on = [bettercompute_kubernetes_node_pool.small, bettercompute_kubernetes_node_pool.auto]
}

data "bettercompute_kubernetes_cluster" "prod" {
  id         = bettercompute_kubernetes_cluster.prod.id
  depends_on = [bettercompute_kubernetes_node_pool.small, bettercompute_kubernetes_node_pool.auto]
}

output "cluster_id" { value = bettercompute_kubernetes_cluster.prod.id }
output "cluster_state" { value = data.bettercompute_kubernetes_cluster.prod.state }
output "small_id"   { value = bettercompute_kubernetes_node_pool.small.id }
output "auto_id"    { value = bettercompute_kubernetes_node_pool.auto.id }
output "listed"     { value = tostring(length(data.bettercompute_kubernetes_node_pools.all.node_pools)) }
`, c.cluster, c.small)
	if c.retry {
		b.WriteString(`
resource "bettercompute_kubernetes_node_pool" "retry" {
  cluster_id   = bettercompute_kubernetes_cluster.prod.id
  name         = "retry"
  machine_type = "e2-standard-4"
  node_count   = 1
}

output "retry_id" { value = bettercompute_kubernetes_node_pool.retry.id }
`)
	}
	if c.refused {
		b.WriteString(`
resource "bettercompute_kubernetes_node_pool" "refused" {
  cluster_id   = bettercompute_kubernetes_cluster.prod.id
  name         = "refused"
  machine_type = "e2-nonexistent"
  node_count   = 1
}
`)
	}
	return b.String()
}

// badConfig is a pool with three broken fields: an unknown machine type's
// shape, a label key that Kubernetes manages, a node count outside its
// autoscaling bounds.
func badConfig(clusterID string) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    bettercompute = { source = "better-compute/bettercompute" }
  }
}

provider "bettercompute" {}

resource "bettercompute_kubernetes_node_pool" "broken" {
  cluster_id   = %q
  name         = "broken"
  machine_type = "E2 Standard!"
  node_count   = 9
  autoscaling  = { min_nodes = 1, max_nodes = 3 }
  labels       = { "kubernetes.io/role" = "x" }
}
`, clusterID)
}

// tofu runs OpenTofu in one working directory with the provider attached.
type tofu struct {
	t        *testing.T
	bin, dir string
	reattach string
	steps    []step
}

func newTofu(t *testing.T, bin, reattach string) *tofu {
	return &tofu{t: t, bin: bin, dir: t.TempDir(), reattach: reattach}
}

func (tf *tofu) write(c config) { tf.writeRaw(c.hcl()) }

func (tf *tofu) writeRaw(hcl string) {
	tf.t.Helper()
	if err := os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		tf.t.Fatal(err)
	}
}

// command is tofu with args in the working directory, its environment
// closed to this machine's own OpenTofu settings.
func (tf *tofu) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tf.bin, args...)
	cmd.Dir = tf.dir
	cli := filepath.Join(tf.dir, ".tofurc")
	if _, err := os.Stat(cli); err != nil {
		_ = os.WriteFile(cli, nil, 0o644)
	}
	cmd.Env = append(os.Environ(),
		"TF_REATTACH_PROVIDERS="+tf.reattach,
		"TF_CLI_CONFIG_FILE="+cli,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1",
	)
	return cmd
}

// run runs one command and returns its exit code and its output.
func (tf *tofu) run(what string, args ...string) (int, string) {
	tf.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait.Timeout)
	defer cancel()
	cmd := tf.command(ctx, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	tf.steps = append(tf.steps, step{what, time.Since(start)})
	if ctx.Err() != nil {
		tf.t.Fatalf("tofu %s: no end within %v:\n%s", strings.Join(args, " "), wait.Timeout, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		tf.t.Fatalf("tofu %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String()
}

func (tf *tofu) must(what string, args ...string) string {
	tf.t.Helper()
	code, out := tf.run(what, args...)
	if code != 0 {
		tf.t.Fatalf("%s: tofu %s exited %d:\n%s", what, strings.Join(args, " "), code, out)
	}
	return out
}

// plan runs a plan whose exit code says whether it has changes: 0 none,
// 2 some, 1 an error.
func (tf *tofu) plan(what string) (int, string) {
	tf.t.Helper()
	return tf.run(what, "plan", "-detailed-exitcode", "-input=false", "-no-color")
}

// outputs are the root module's outputs, as strings.
func (tf *tofu) outputs() map[string]string {
	tf.t.Helper()
	var raw map[string]struct{ Value any }
	if err := json.Unmarshal([]byte(tf.must("output", "output", "-json")), &raw); err != nil {
		tf.t.Fatalf("tofu output -json: %v", err)
	}
	out := map[string]string{}
	for k, v := range raw {
		out[k] = fmt.Sprint(v.Value)
	}
	return out
}

// killedApply starts an apply and kills it (SIGKILL) as soon as made
// holds.
func (tf *tofu) killedApply(made func() (bool, string)) {
	tf.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait.Timeout)
	defer cancel()
	cmd := tf.command(ctx, "apply", "-auto-approve", "-input=false", "-no-color")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tf.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	wait.For(tf.t, "the apply's create to reach the API", func() (bool, string) {
		select {
		case err := <-done:
			tf.t.Fatalf("the apply ended (%v) before its create was seen:\n%s", err, out.String())
		default:
		}
		return made()
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	tf.steps = append(tf.steps, step{"apply, killed once its create reached the API", time.Since(start)})
}

// serveProvider serves the provider from this process and returns the
// TF_REATTACH_PROVIDERS value that points OpenTofu at it.
func serveProvider(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	configs := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- tf6server.Serve(address, providerserver.NewProtocol6(provider.New("test")()),
			tf6server.WithDebug(ctx, configs, closed), tf6server.WithGoPluginLogger(hclog.NewNullLogger()))
	}()
	var rc *plugin.ReattachConfig
	select {
	case rc = <-configs:
	case err := <-served:
		t.Fatalf("serve the provider: %v", err)
	case <-time.After(wait.Timeout):
		t.Fatal("the provider gave no reattach configuration")
	}
	t.Cleanup(func() {
		cancel()
		<-closed
	})
	type addr struct{ Network, String string }
	b, err := json.Marshal(map[string]any{address: map[string]any{
		"Protocol": string(rc.Protocol), "ProtocolVersion": rc.ProtocolVersion, "Pid": rc.Pid, "Test": rc.Test,
		"Addr": addr{rc.Addr.Network(), rc.Addr.String()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tofuBinary is OpenTofu, built by scripts/tofu.sh when this machine has
// none yet (scripts/test.sh builds it beside the tests that do not need
// it).
func tofuBinary(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("../../../../scripts/tofu.sh")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/tofu.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// startStack is a devstack with quick provider operations.
func startStack(t *testing.T) *devstack.Stack {
	t.Helper()
	b, err := os.ReadFile("../../../../emulators/seed/devstack.json")
	if err != nil {
		t.Fatal(err)
	}
	seed, err := store.ParseSeed(b, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait.Timeout)
	defer cancel()
	s, err := devstack.Start(ctx, devstack.Config{
		Seed: seed, GKEOperationTime: 50 * time.Millisecond, ConvergingInterval: 100 * time.Millisecond,
		SteadyInterval: 2 * time.Second, LeaseTTL: time.Second, WatchdogInterval: 300 * time.Millisecond, WatchdogGrace: time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("start the devstack: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// postFault injects a fault through the devstack's fault API.
func postFault(t *testing.T, base, body string) {
	t.Helper()
	resp, err := http.Post(base+devstack.FaultsPath, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s %s = %d %s", devstack.FaultsPath, body, resp.StatusCode, b)
	}
}

// unwrap joins the lines OpenTofu wrapped to its terminal's width.
func unwrap(s string) string { return strings.Join(strings.Fields(s), " ") }

func list(t *testing.T, api *client.Client, clusterID string) []client.NodePool {
	t.Helper()
	pools, err := api.ListNodePools(context.Background(), "acme", clusterID)
	if err != nil {
		t.Fatalf("list node pools: %v", err)
	}
	return pools
}

func poolsByName(t *testing.T, api *client.Client, clusterID string) map[string]client.NodePool {
	t.Helper()
	m := map[string]client.NodePool{}
	for _, p := range list(t, api, clusterID) {
		m[p.Name] = p
	}
	return m
}

func keys(m map[string]client.NodePool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
