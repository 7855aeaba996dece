package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/apidoc/apidoctest"
	"github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// waitTime bounds every wait of the tests, as wait.For does: generous for
// a cold, loaded 2-core machine with the race detector.
const waitTime = wait.Timeout

var (
	stackOnce sync.Once
	stack     *devstack.Stack
	stackErr  error
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	code := m.Run()
	if stack != nil {
		stack.Close()
	}
	os.Exit(code)
}

// devStack returns the devstack the tests share, on free ports with test
// timings (provider operations of 30 ms).
func devStack(t *testing.T) *devstack.Stack {
	t.Helper()
	stackOnce.Do(func() {
		b, err := os.ReadFile("../../../emulators/seed/devstack.json")
		if err != nil {
			stackErr = err
			return
		}
		seed, err := store.ParseSeed(b, lifecycle.Rules{})
		if err != nil {
			stackErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stack, stackErr = devstack.Start(ctx, devstack.Config{
			Seed: seed, GKEOperationTime: 30 * time.Millisecond, ConvergingInterval: 60 * time.Millisecond,
			SteadyInterval: 2 * time.Second, LeaseTTL: time.Second, WatchdogInterval: 300 * time.Millisecond, WatchdogGrace: time.Second,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	})
	if stackErr != nil {
		t.Fatalf("start the devstack: %v", stackErr)
	}
	return stack
}

// syncBuffer is a buffer safe for a running bc and a test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bc is a user of the CLI with a config file of their own.
type bc struct {
	t   *testing.T
	env map[string]string
}

// loggedIn returns a user who ran bc login --dev against the stack.
func loggedIn(t *testing.T) *bc {
	t.Helper()
	s := devStack(t)
	u := &bc{t: t, env: map[string]string{"BC_CONFIG": filepath.Join(t.TempDir(), "config.yaml")}}
	res := u.run("login", "--dev", "--url", s.URL, "--tenant", "acme", "--pubsub-emulator", s.PubSub.Addr)
	if res.code != 0 {
		t.Fatalf("bc login --dev = %d\n%s", res.code, res.stderr)
	}
	return u
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs bc with args (and the hidden poll interval the fast devstack
// suits) to the end.
func (u *bc) run(args ...string) result {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()
	var out, errOut syncBuffer
	code := run(ctx, append(args, "--poll-interval", "20ms"), u.lookup, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func (u *bc) lookup(k string) (string, bool) { v, ok := u.env[k]; return v, ok }

var seq atomic.Int64

func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// createCluster runs bc clusters create --wait -o json and returns the
// ready cluster.
func (u *bc) createCluster(name string) client.Cluster {
	u.t.Helper()
	res := u.run("clusters", "create", "--name", name, "--pool", "pool-dev", "--region", "us-central1",
		"--node-pool", "name=default,machine-type=e2-standard-4,nodes=1", "--wait", "--output", "json")
	if res.code != 0 {
		u.t.Fatalf("bc clusters create --wait = %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var cl client.Cluster
	if err := json.Unmarshal([]byte(res.stdout), &cl); err != nil {
		u.t.Fatalf("bc clusters create -o json printed %q: %v", res.stdout, err)
	}
	if err := apidoctest.Validate(apidoctest.OpenAPI, "/components/schemas/Cluster", []byte(res.stdout)); err != nil {
		u.t.Errorf("bc clusters create -o json printed what the document does not describe: %v", err)
	}
	if cl.State != client.StateReady {
		u.t.Fatalf("bc clusters create --wait printed state %s, want ready", cl.State)
	}
	return cl
}

// transition is a line of --wait: [   1.2s] node pool gpu: ready
var transition = regexp.MustCompile(`(?m)^\[\s*(\d+\.\d)s\] (cluster|node pool) (\S+): (\w+)`)

// states returns the states --wait printed, checking their times grow.
func states(t *testing.T, stderr string) []string {
	t.Helper()
	var out []string
	last := -1.0
	for _, m := range transition.FindAllStringSubmatch(stderr, -1) {
		var s float64
		fmt.Sscan(m[1], &s)
		if s < last {
			t.Errorf("elapsed times go back: %s", stderr)
		}
		last = s
		out = append(out, m[4])
	}
	return out
}

// TestCreateWaitsToReady creates a cluster and a node pool with --wait,
// as the README shows, and checks the live transitions, the exit codes
// and the outputs.
func TestCreateWaitsToReady(t *testing.T) {
	t.Parallel()
	u := loggedIn(t)
	name := uniqueName("wait")
	res := u.run("clusters", "create", "--name", name, "--pool", "pool-dev", "--region", "us-central1",
		"--node-pool", "name=default,machine-type=e2-standard-4,nodes=1", "--wait")
	if res.code != 0 {
		t.Fatalf("bc clusters create --wait = %d\n%s", res.code, res.stderr)
	}
	got := states(t, res.stderr)
	if len(got) < 2 || got[0] != "pending" || got[len(got)-1] != "ready" {
		t.Errorf("--wait printed states %v, want pending first and ready last:\n%s", got, res.stderr)
	}
	if !strings.HasPrefix(res.stdout, "NAME ") || !strings.Contains(res.stdout, name) || !strings.Contains(res.stdout, " ready ") {
		t.Errorf("table = %q, want a header and the ready cluster", res.stdout)
	}
	id := regexp.MustCompile(`kcl_[0-9a-z]{26}`).FindString(res.stdout)

	res = u.run("nodepools", "create", "--cluster", id, "--name", "gpu", "--machine-type", "g2-standard-8", "--nodes", "2",
		"--accelerator", "type=nvidia-l4,count=1", "--labels", "team=ml", "--taints", "gpu=true:NoSchedule", "--wait", "-o", "yaml")
	if res.code != 0 {
		t.Fatalf("bc nodepools create --wait = %d\n%s", res.code, res.stderr)
	}
	if got := states(t, res.stderr); len(got) == 0 || got[len(got)-1] != "ready" || !strings.Contains(res.stderr, "node pool gpu") {
		t.Errorf("--wait printed %q, want node pool gpu ending ready", res.stderr)
	}
	var p client.NodePool
	if err := yaml.Unmarshal([]byte(res.stdout), &p); err != nil || p.State != client.StateReady || p.Name != "gpu" || p.Accelerators == nil || p.Labels["team"] != "ml" {
		t.Errorf("-o yaml printed %q (%v), want the ready pool gpu with its accelerator and label", res.stdout, err)
	}

	res = u.run("nodepools", "update", p.ID, "--cluster", id, "--nodes", "3", "--wait", "-o", "json")
	if err := json.Unmarshal([]byte(res.stdout), &p); res.code != 0 || err != nil || p.NodeCount != 3 || p.Version != 2 || p.State != client.StateReady {
		t.Errorf("bc nodepools update --wait = %d, %+v (%v)\n%s", res.code, p, err, res.stderr)
	}
	// The table shows what the provider runs beside what was asked.
	res = u.run("nodepools", "list", "--cluster", id)
	found := false
	for _, line := range strings.Split(res.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == "gpu" {
			found = true
			// A ready pool's count was read when its resize ended.
			if p.CurrentNodeCount == nil {
				t.Fatalf("the ready pool after its resize has no currentNodeCount: %+v", p)
			}
			if want := fmt.Sprint(*p.CurrentNodeCount); f[3] != "3" || f[4] != want {
				t.Errorf("bc nodepools list row %q: NODES %s, RUNNING %s; want 3 and %s", line, f[3], f[4], want)
			}
		}
	}
	if !found || !strings.Contains(res.stdout, " NODES ") || !strings.Contains(res.stdout, " RUNNING ") {
		t.Errorf("bc nodepools list = %q, want the NODES and RUNNING columns", res.stdout)
	}
	res = u.run("nodepools", "list", "--cluster", id, "-o", "json")
	var list struct{ NodePools []client.NodePool }
	if err := json.Unmarshal([]byte(res.stdout), &list); res.code != 0 || err != nil || len(list.NodePools) != 2 {
		t.Errorf("bc nodepools list -o json = %d, %q (%v), want 2 pools", res.code, res.stdout, err)
	}
	if err := apidoctest.Validate(apidoctest.OpenAPI, "/components/schemas/NodePoolList", []byte(res.stdout)); err != nil {
		t.Errorf("bc nodepools list -o json: %v", err)
	}
	res = u.run("nodepools", "delete", p.ID, "--cluster", id, "--wait", "-o", "json")
	if res.code != 0 || !strings.Contains(res.stdout, `"state": "deleted"`) {
		t.Errorf("bc nodepools delete --wait = %d, %s\n%s", res.code, res.stdout, res.stderr)
	}
	res = u.run("clusters", "delete", id, "--wait")
	if res.code != 0 || !strings.Contains(res.stdout, " deleted ") {
		t.Errorf("bc clusters delete --wait = %d, %s\n%s", res.code, res.stdout, res.stderr)
	}
	if res = u.run("clusters", "get", id); res.code != exitNotFound || !strings.Contains(res.stderr, "NOT_FOUND") {
		t.Errorf("bc clusters get of a deleted cluster = %d, %q; want %d NOT_FOUND", res.code, res.stderr, exitNotFound)
	}
}

// TestRefusedMachineTypeFails checks that a node pool the provider
// refuses ends --wait with exit code 9 and the provider's message.
func TestRefusedMachineTypeFails(t *testing.T) {
	t.Parallel()
	u := loggedIn(t)
	cl := u.createCluster(uniqueName("refused"))
	res := u.run("nodepools", "create", "--cluster", cl.ID, "--name", "bad", "--machine-type", "e2-nonexistent", "--nodes", "1", "--wait")
	if res.code != exitFailed {
		t.Fatalf("bc nodepools create --machine-type e2-nonexistent --wait = %d, want %d\n%s", res.code, exitFailed, res.stderr)
	}
	c, err := client.New(devStack(t).URL, client.WithToken(tokenOf(t, u)))
	if err != nil {
		t.Fatal(err)
	}
	pools, err := c.ListNodePools(context.Background(), "acme", cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	var msg string
	for _, p := range pools {
		if p.Name == "bad" {
			msg = p.Message
		}
	}
	if msg == "" || !strings.Contains(res.stderr, "error: node pool bad") || !strings.Contains(res.stderr, msg) {
		t.Errorf("stderr = %q, want the failure with the provider's message %q", res.stderr, msg)
	}
	if got := states(t, res.stderr); len(got) == 0 || got[len(got)-1] != "error" {
		t.Errorf("--wait printed states %v, want error last", got)
	}
}

func tokenOf(t *testing.T, u *bc) string {
	t.Helper()
	cfg, err := loadConfig(u.env["BC_CONFIG"])
	if err != nil || cfg.Token == "" {
		t.Fatalf("config: %+v, %v", cfg, err)
	}
	return cfg.Token
}

// TestErrorsNameTheFlags checks the exit codes a script tests, and that
// a refused input names each field by its flag.
func TestErrorsNameTheFlags(t *testing.T) {
	t.Parallel()
	u := loggedIn(t)
	const someCluster = "kcl_01jd8x4k2m9q7v3w5y6z0a1b2c"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want []string // in stderr
	}{
		{"invalid fields", []string{"nodepools", "create", "--cluster", someCluster, "--name", "Bad_Name", "--machine-type", "e2-standard-4",
			"--nodes", "5000", "--min-nodes", "3", "--max-nodes", "1"}, nil, exitInvalid,
			[]string{"INVALID_INPUT", "--name (name):", "--nodes (nodeCount): must be between 0 and 1000", "--min-nodes (autoscaling.minNodes):", "request ID: "}},
		{"invalid cluster", []string{"clusters", "create", "--name", "x", "--pool", "pool-dev", "--region", "us-central1",
			"--node-pool", "name=a,machine-type=e2-standard-4,nodes=1", "--node-pool", "name=a,machine-type=e2-standard-4,nodes=1"}, nil, exitInvalid,
			[]string{"--node-pool (nodePools[1].name): duplicates nodePools[0].name"}},
		{"not found", []string{"clusters", "get", someCluster}, nil, exitNotFound, []string{"NOT_FOUND"}},
		{"unsupported", []string{"clusters", "create", "--name", uniqueName("metal"), "--pool", "pool-metal", "--region", "fra",
			"--node-pool", "name=a,machine-type=e2-standard-4,nodes=1"}, nil, exitRefused, []string{"UNSUPPORTED"}},
		{"no token", []string{"clusters", "list"}, map[string]string{"BC_TOKEN": "not-a-jwt"}, exitAuth, []string{"UNAUTHENTICATED", "bc login"}},
		{"viewer may not create", []string{"clusters", "create", "--name", "x", "--pool", "pool-dev", "--region", "us-central1", "--mode", "autopilot",
			"--token", devToken(t, "bob")}, nil, exitAuth, []string{"PERMISSION_DENIED"}},
		{"missing flags", []string{"nodepools", "create", "--name", "x"}, nil, exitUsage, []string{`required flag(s) "cluster", "machine-type", "nodes" not set`}},
		{"unknown command", []string{"nodepools", "frob"}, nil, exitUsage, []string{`unknown command "frob"`}},
		{"bad output", []string{"clusters", "list", "-o", "xml"}, nil, exitUsage, []string{"--output"}},
		{"bad flag value", []string{"nodepools", "create", "--cluster", someCluster, "--name", "x", "--machine-type", "y", "--nodes", "many"}, nil, exitUsage, []string{"--nodes"}},
		{"no tenant", []string{"clusters", "list", "--config", filepath.Join(t.TempDir(), "none.yaml"), "--url", devStack(t).URL}, nil, exitUsage, []string{"no tenant"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &bc{t: t, env: map[string]string{}}
			for k, x := range u.env {
				v.env[k] = x
			}
			for k, x := range tt.env {
				v.env[k] = x
			}
			res := v.run(tt.args...)
			if res.code != tt.code {
				t.Errorf("bc %s = %d, want %d\n%s", strings.Join(tt.args, " "), res.code, tt.code, res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr = %q, want %q in it", res.stderr, w)
				}
			}
		})
	}
}

func devToken(t *testing.T, sub string) string {
	t.Helper()
	tok, err := devStack(t).Token(sub)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestEventsTail runs bc events tail --cluster while a cluster and a node
// pool are created, and checks it prints their events as they arrive,
// each matching the AsyncAPI document, and none of another cluster.
func TestEventsTail(t *testing.T) {
	t.Parallel()
	u := loggedIn(t)
	cl := u.createCluster(uniqueName("events"))

	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"events", "tail", "--cluster", cl.ID, "-o", "json"}, u.lookup, &out, &errOut)
	}()
	wait.For(t, "bc events tail listening", func() (bool, string) {
		return strings.Contains(errOut.String(), fmt.Sprintf("Listening for %d event types", len(event.Types))), errOut.String()
	})

	res := u.run("nodepools", "create", "--cluster", cl.ID, "--name", "tail", "--machine-type", "e2-standard-4", "--nodes", "1", "--wait", "-o", "json")
	if res.code != 0 {
		t.Fatalf("bc nodepools create = %d\n%s", res.code, res.stderr)
	}
	var p client.NodePool
	if err := json.Unmarshal([]byte(res.stdout), &p); err != nil {
		t.Fatal(err)
	}
	other := u.createCluster(uniqueName("other"))

	want := map[string]bool{event.NodePoolCreated + "/" + p.ID: true, event.NodePoolReady + "/" + p.ID: true, event.ClusterUpdated + "/": true}
	var lines []string
	wait.For(t, "the node pool's events in the tail", func() (bool, string) {
		lines = nonEmpty(out.String())
		seen := map[string]bool{}
		for _, l := range lines {
			var e printedEvent
			if err := json.Unmarshal([]byte(l), &e); err == nil {
				seen[e.Attributes["ce-type"]+"/"+e.Attributes["nodePoolId"]] = true
			}
		}
		for k := range want {
			if !seen[k] {
				return false, fmt.Sprintf("no %s in %q", k, out.String())
			}
		}
		return true, ""
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("bc events tail ended with %d\n%s", code, errOut.String())
		}
	case <-time.After(waitTime):
		t.Fatal("bc events tail did not stop when interrupted")
	}
	for _, l := range lines {
		var e printedEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Errorf("line %q is not an event: %v", l, err)
			continue
		}
		typ := e.Attributes["ce-type"]
		if e.Attributes["clusterId"] != cl.ID {
			t.Errorf("--cluster %s printed an event of %s (other cluster: %s)", cl.ID, e.Attributes["clusterId"], other.ID)
		}
		attrs, _ := json.Marshal(e.Attributes)
		ptr := "/components/messages/" + typ
		if err := apidoctest.Validate(apidoctest.AsyncAPI, ptr+"/headers", attrs); err != nil {
			t.Errorf("%s attributes do not match the AsyncAPI document: %v", typ, err)
		}
		if err := apidoctest.Validate(apidoctest.AsyncAPI, ptr+"/payload", e.Data); err != nil {
			t.Errorf("%s data does not match the AsyncAPI document: %v", typ, err)
		}
		if apidoc.IsNodePoolEvent(typ) != (e.Attributes["nodePoolId"] != "") {
			t.Errorf("%s: nodePoolId %q", typ, e.Attributes["nodePoolId"])
		}
	}
}

func nonEmpty(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestConfig checks login writes a private config, config set and view,
// and that flags beat the environment, which beats the file.
func TestConfig(t *testing.T) {
	t.Parallel()
	u := loggedIn(t)
	if fi, err := os.Stat(u.env["BC_CONFIG"]); err != nil {
		t.Errorf("config file: %v", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode = %v, want 0600: it holds a token", fi.Mode())
	}
	if res := u.run("config", "set", "tenant", "other"); res.code != 0 {
		t.Fatalf("bc config set = %d: %s", res.code, res.stderr)
	}
	res := u.run("config", "view")
	if !strings.Contains(res.stdout, "tenant: other") || strings.Contains(res.stdout, tokenOf(t, u)) {
		t.Errorf("bc config view = %q, want the new tenant and no whole token", res.stdout)
	}
	// The file says other, where the caller has no binding: 403; the
	// environment and the flag name acme.
	if res := u.run("clusters", "list"); res.code != exitAuth {
		t.Errorf("list in tenant other = %d, want %d\n%s", res.code, exitAuth, res.stderr)
	}
	u.env["BC_TENANT"] = "acme"
	if res := u.run("clusters", "list", "-o", "json"); res.code != 0 || !json.Valid([]byte(res.stdout)) {
		t.Errorf("list with BC_TENANT=acme = %d %q\n%s", res.code, res.stdout, res.stderr)
	}
	u.env["BC_TENANT"] = "other"
	if res := u.run("clusters", "list", "--tenant", "acme"); res.code != 0 || !strings.HasPrefix(res.stdout, "NAME") {
		t.Errorf("list with --tenant acme = %d %q\n%s", res.code, res.stdout, res.stderr)
	}
	if res := u.run("config", "set", "nope", "x"); res.code != exitUsage {
		t.Errorf("bc config set nope = %d, want %d", res.code, exitUsage)
	}
	// A token of another issuer: login keeps it, the API refuses it.
	if res := u.run("login", "--token", "not.a.jwt"); res.code != 0 {
		t.Fatalf("bc login --token = %d: %s", res.code, res.stderr)
	}
	if res := u.run("clusters", "list", "--tenant", "acme"); res.code != exitAuth || !strings.Contains(res.stderr, "UNAUTHENTICATED") {
		t.Errorf("list with a bad token = %d %q, want %d UNAUTHENTICATED", res.code, res.stderr, exitAuth)
	}
	if res := u.run("login"); res.code != exitUsage {
		t.Errorf("bc login without --dev or --token = %d, want %d", res.code, exitUsage)
	}
}

// publishPool publishes a pools module's event through the devstack.
func publishPool(t *testing.T, path string, pool map[string]any) {
	t.Helper()
	b, _ := json.Marshal(pool)
	resp, err := http.Post(devStack(t).URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s = %d, want 202", path, resp.StatusCode)
	}
}

// TestSubstrates makes a pool's substrate with the pools module's event
// and reads it with bc substrates list, get and nodes, in each output,
// checking the JSON against the document; then archives the pool.
func TestSubstrates(t *testing.T) {
	t.Parallel()
	u := loggedIn(t)
	poolID := uniqueName("pool-bc")
	publishPool(t, devstack.PoolsPutPath, map[string]any{"id": poolID, "tenantId": "acme", "version": 1,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp",
			"cluster": map[string]any{"create": map[string]any{"region": "us-central1"}}}},
		"flavors": []any{map[string]any{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}}})

	var list struct{ Substrates []client.Substrate }
	wait.For(t, "the pool's substrate in bc substrates list", func() (bool, string) {
		res := u.run("substrates", "list", "--pool", poolID, "-o", "json")
		if res.code != 0 {
			return false, res.stderr
		}
		if err := apidoctest.Validate(apidoctest.OpenAPI, "/components/schemas/SubstrateList", []byte(res.stdout)); err != nil {
			t.Fatalf("bc substrates list -o json printed what the document does not describe: %v\n%s", err, res.stdout)
		}
		if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
			t.Fatalf("bc substrates list -o json printed %q: %v", res.stdout, err)
		}
		return len(list.Substrates) == 1, res.stdout
	})
	sub := list.Substrates[0]
	if sub.PoolID != poolID || sub.Mode != client.SubstrateCreate {
		t.Errorf("substrate = %+v, want pool %s's, create mode", sub, poolID)
	}

	res := u.run("substrates", "list")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "POOL ") || !strings.Contains(res.stdout, sub.ID) || !strings.Contains(res.stdout, poolID) {
		t.Errorf("bc substrates list = %d %q, want a table with %s of %s\n%s", res.code, res.stdout, sub.ID, poolID, res.stderr)
	}
	res = u.run("substrates", "get", sub.ID, "-o", "json")
	if err := apidoctest.Validate(apidoctest.OpenAPI, "/components/schemas/Substrate", []byte(res.stdout)); res.code != 0 || err != nil {
		t.Errorf("bc substrates get -o json = %d %q (%v)\n%s", res.code, res.stdout, err, res.stderr)
	}
	res = u.run("substrates", "get", sub.ID, "-o", "yaml")
	var y client.Substrate
	if err := yaml.Unmarshal([]byte(res.stdout), &y); res.code != 0 || err != nil || y.ID != sub.ID {
		t.Errorf("bc substrates get -o yaml = %d %q (%v)", res.code, res.stdout, err)
	}
	res = u.run("substrates", "nodes", sub.ID, "-o", "json")
	var nodes client.SubstrateNodeList
	if err := apidoctest.Validate(apidoctest.OpenAPI, "/components/schemas/SubstrateNodeList", []byte(res.stdout)); res.code != 0 || err != nil {
		t.Errorf("bc substrates nodes -o json = %d %q (%v)\n%s", res.code, res.stdout, err, res.stderr)
	} else if err := json.Unmarshal([]byte(res.stdout), &nodes); err != nil || nodes.Nodes == nil || len(nodes.Nodes) != 0 {
		t.Errorf("bc substrates nodes -o json = %q, want no node (the devstack runs no Kubernetes here)", res.stdout)
	}
	if res = u.run("substrates", "nodes", sub.ID); res.code != 0 || !strings.HasPrefix(res.stdout, "NAME ") {
		t.Errorf("bc substrates nodes = %d %q, want the table's header", res.code, res.stdout)
	}

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"substrates", "get", "ksb_01jd8x4k2m9q7v3w5y6z0a1b2e"}, exitNotFound, "NOT_FOUND"},
		{[]string{"substrates", "get", "kcl_01jd8x4k2m9q7v3w5y6z0a1b2e"}, exitInvalid, "SUBSTRATE_ID (substrateId):"},
		{[]string{"substrates", "list", "--pool", "no pool"}, exitInvalid, "--pool (poolId):"},
		{[]string{"substrates", "nodes"}, exitUsage, "SUBSTRATE_ID"},
		{[]string{"substrates", "frob"}, exitUsage, `unknown command "frob"`},
	} {
		if res := u.run(tt.args...); res.code != tt.code || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("bc %s = %d %q, want %d and %q", strings.Join(tt.args, " "), res.code, res.stderr, tt.code, tt.want)
		}
	}

	// The plan of a change of shape: the flavor's node pool replaced.
	dir := t.TempDir()
	planned := filepath.Join(dir, "pool.json")
	pool := `{"id":"` + poolID + `","tenantId":"acme","version":2,"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp",` +
		`"cluster":{"create":{"region":"us-central1"}}}},"flavors":[{"name":"cpu","machineType":"n2-standard-4","nodeCount":1}]}`
	if err := os.WriteFile(planned, []byte(pool), 0o600); err != nil {
		t.Fatal(err)
	}
	res = u.run("substrates", "plan", "-f", planned, "-o", "json")
	if err := apidoctest.Validate(apidoctest.OpenAPI, "/components/schemas/SubstratePlan", []byte(res.stdout)); res.code != 0 || err != nil {
		t.Errorf("bc substrates plan -o json = %d %q (%v)\n%s", res.code, res.stdout, err, res.stderr)
	}
	if res = u.run("substrates", "plan", "-f", planned); res.code != 0 || !strings.HasPrefix(res.stdout, "ACTION ") || !strings.Contains(res.stdout, "bc-"+poolID+"-cpu") {
		t.Errorf("bc substrates plan = %d %q, want the table of actions on the flavor's pool\n%s", res.code, res.stdout, res.stderr)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(pool, `"nodeCount":1`, `"nodeCount":0,"diskGiB":1`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if res = u.run("substrates", "plan", "-f", bad); res.code != exitInvalid || !strings.Contains(res.stderr, "-f (pool.flavors[0].diskGiB):") {
		t.Errorf("bc substrates plan of a malformed pool = %d %q, want %d naming -f (pool.flavors[0].diskGiB)", res.code, res.stderr, exitInvalid)
	}
	if res = u.run("substrates", "plan"); res.code != exitUsage || !strings.Contains(res.stderr, "file") {
		t.Errorf("bc substrates plan without -f = %d %q, want usage", res.code, res.stderr)
	}

	// A policy that cannot be served: --wait ends with the substrate's
	// error and its reason.
	publishPool(t, devstack.PoolsPutPath, map[string]any{"id": poolID, "tenantId": "acme", "version": 2,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-metal",
			"cluster": map[string]any{"create": map[string]any{"region": "fra"}}}},
		"flavors": []any{map[string]any{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}}})
	var failed struct{ Substrates []client.Substrate }
	wait.For(t, "the pool's new substrate", func() (bool, string) {
		res := u.run("substrates", "list", "--pool", poolID, "-o", "json")
		_ = json.Unmarshal([]byte(res.stdout), &failed)
		return res.code == 0 && len(failed.Substrates) == 1 && failed.Substrates[0].ID != sub.ID, res.stdout + res.stderr
	})
	res = u.run("substrates", "get", failed.Substrates[0].ID, "--wait", "--timeout", "20s")
	if res.code != exitFailed || !strings.Contains(res.stderr, "no managed Kubernetes") {
		t.Errorf("bc substrates get --wait of a substrate that cannot be served = %d, stderr %q; want %d with the reason", res.code, res.stderr, exitFailed)
	}
	sub = failed.Substrates[0]

	publishPool(t, devstack.PoolsArchivePath, map[string]any{"id": poolID, "tenantId": "acme", "version": 3})
	wait.For(t, "the archived pool's substrate gone", func() (bool, string) {
		res := u.run("substrates", "get", sub.ID)
		return res.code == exitNotFound, res.stdout + res.stderr
	})
}

// TestPrintSubstrateEvent checks the table line of a substrate's events,
// whose data has no name: the substrate, its pool, and the node.
func TestPrintSubstrateEvent(t *testing.T) {
	sub := resource.Substrate{ID: resource.NewSubstrateID(), TenantID: "acme", PoolID: "pool-gpu", ClusterID: resource.NewClusterID(), State: resource.StateReady}
	node := resource.SubstrateNode{Name: "gke-node-1", Flavor: "l4", Zone: "us-central1-a", JoinedAt: time.Now()}
	for _, tt := range []struct {
		e    event.Event
		want []string
	}{
		{event.ForSubstrate(event.SubstrateReady, sub, time.Now()), []string{event.SubstrateReady, sub.ClusterID, " ready ", "substrate=" + sub.ID + " pool=pool-gpu"}},
		{event.ForSubstrateNode(event.SubstrateNodeJoined, sub, node, time.Now()), []string{event.SubstrateNodeJoined, "substrate=" + sub.ID + " pool=pool-gpu node=gke-node-1"}},
	} {
		var out bytes.Buffer
		a := &app{stdout: &out, output: "table"}
		m := outbox.Message(tt.e)
		a.printEvent(printedEvent{Attributes: m.Attributes, Data: m.Data})
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s printed %q, want %q in it", tt.e.Type, out.String(), w)
			}
		}
	}
}
