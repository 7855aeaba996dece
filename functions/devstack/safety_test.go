package devstack_test

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestForeignHostRefused: the devstack answers only a Host that is a
// loopback address or localhost, with any port, or a name of
// -allowed-hosts; any other (a DNS-rebinding page's name) is 403 on every
// route, /dev/token and the console included.
func TestForeignHostRefused(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.AllowedHosts = []string{"devstack.internal", "10.1.2.3"}
	e := startEnv(t, cfg)
	port := e.URL[strings.LastIndex(e.URL, ":")+1:]
	do := func(method, path, host string) int {
		t.Helper()
		req, err := http.NewRequest(method, e.URL+path, strings.NewReader(`{"sub":"alice"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	routes := []struct{ method, path string }{
		{"POST", "/dev/token"}, {"POST", "/dev/access-token"}, {"GET", "/console"}, {"GET", "/console/act"},
		{"GET", "/healthz"}, {"GET", "/dev/faults"}, {"GET", "/openapi.json"},
		{"POST", "/api/compute/kubernetesClusters/list"}, {"GET", "/.well-known/openid-configuration"},
	}
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port, "localhost.evil.example",
		"192.168.1.10:" + port, "devstack.internal.evil.example", "[::2]:" + port} {
		for _, r := range routes {
			if code := do(r.method, r.path, host); code != http.StatusForbidden {
				t.Errorf("%s %s with Host %q = %d, want 403", r.method, r.path, host, code)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "127.9.8.7:" + port, "localhost:" + port, "LocalHost", "[::1]:" + port,
		"devstack.internal:" + port, "DEVSTACK.internal", "10.1.2.3:" + port} {
		if code := do("POST", "/dev/token", host); code != http.StatusOK {
			t.Errorf("POST /dev/token with Host %q = %d, want 200", host, code)
		}
		if code := do("GET", "/console", host); code != http.StatusOK {
			t.Errorf("GET /console with Host %q = %d, want 200", host, code)
		}
	}
}

// TestDevActionsTakeOnlyJSON: every /dev route that acts answers 415 to
// a body that does not say it is JSON, as a page of another origin sends
// without asking first (a form, plain text), and does nothing.
func TestDevActionsTakeOnlyJSON(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	for _, path := range []string{"/dev/token", "/dev/access-token", devstack.PoolsPutPath, devstack.PoolsArchivePath,
		devstack.GKEUpgradePath, devstack.GKEStockoutPath, devstack.GKEAutoscalePath, devstack.FaultsPath} {
		for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
			req, err := http.NewRequest("POST", e.URL+path, strings.NewReader(`{"sub":"alice","zone":"us-central1-a","count":5}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Del("Content-Type")
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(b), "INVALID_INPUT") {
				t.Errorf("POST %s with Content-Type %q = %d %s, want 415 INVALID_INPUT", path, ct, resp.StatusCode, b)
			}
		}
	}
	if s := e.GKE.Stockouts(); len(s) > 0 {
		t.Errorf("stockouts %v after refused requests, want none", s)
	}
}

// TestConsoleRefusesFraming: every page of the console forbids being
// framed, by its CSP (frame-ancestors 'none') and X-Frame-Options.
func TestConsoleRefusesFraming(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	for _, p := range []string{"/console", "/console/events", "/console/emulators", "/console/firestore", "/console/act", "/console/clusters/acme/kcl_none"} {
		resp, err := http.Get(e.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q, want default-src 'self' and frame-ancestors 'none'", p, csp)
		}
		if xfo := resp.Header.Get("X-Frame-Options"); xfo != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q, want DENY", p, xfo)
		}
	}
}

// TestFirestoreBrowserRefusesBadPaths: a path with an empty segment, .
// or .. names nothing: 400, not a panic.
func TestFirestoreBrowserRefusesBadPaths(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	for _, p := range []string{"a//b", "tenants//clusters", "tenants/acme//x/y", "tenants/..", "./x"} {
		resp, err := http.Get(e.URL + "/console/firestore?path=" + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /console/firestore?path=%s = %d, want 400", p, resp.StatusCode)
		}
	}
	resp, err := http.Get(e.URL + "/console/firestore?path=tenants/acme/clusters")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /console/firestore?path=tenants/acme/clusters = %d, want 200", resp.StatusCode)
	}
}

// hostilePage is a page of another origin that tries every action of the
// devstack: each /dev route by fetch (no-cors: no preflight) with JSON
// sent as text, and by forms (urlencoded, and text/plain shaped as JSON),
// and each console form, submitted into frames of its own.
var hostilePage = template.Must(template.New("hostile").Parse(`<!doctype html>
<html><body><script>
(function () {
  var target = {{.Target}}, cluster = {{.Cluster}}, fault = {{.Fault}};
  var pool = JSON.stringify({id: "pool-dev", tenantId: "acme", version: 9007199254740991,
    policy: {substrate: {kind: "kubernetes", account: "acc-gcp", cluster: {create: {region: "us-central1"}}}},
    flavors: [{name: "cpu", machineType: "e2-standard-4", nodeCount: 1}]});
  var dev = [
    ["/dev/token", {sub: "alice"}],
    ["/dev/access-token", {}],
    ["/dev/pools/put", JSON.parse(pool)],
    ["/dev/pools/archive", {id: "pool-dev", tenantId: "acme", version: 9007199254740991}],
    ["/dev/gke/upgrade", {clusterId: cluster, duration: "100000h"}],
    ["/dev/gke/upgrade", {clusterId: cluster, duration: "1h"}],
    ["/dev/gke/stockout", {zone: "us-central1-a", count: 1000}],
    ["/dev/gke/autoscale", {clusterId: cluster, nodePool: "a", nodeCount: 3}],
    ["/dev/faults", {service: "gke", method: "*", action: "fail", code: "UNAVAILABLE"}]
  ];
  var forms = [
    ["/console/act/stockout", {zone: "us-central1-a", count: "1000"}],
    ["/console/act/upgrade", {clusterId: cluster, duration: "1h"}],
    ["/console/act/autoscale", {clusterId: cluster, nodePool: "a", nodeCount: "3"}],
    ["/console/act/fault", {service: "gke", method: "*", action: "fail", code: "UNAVAILABLE"}],
    ["/console/act/fault-clear", {id: fault}],
    ["/console/act/faults-clear", {}],
    ["/console/act/pool", {action: "put", tenantId: "acme", as: "alice", pool: pool}],
    ["/console/act/pool", {action: "archive", tenantId: "acme", as: "alice", pool: JSON.stringify({id: "pool-dev", tenantId: "acme", version: 9007199254740991})}],
    ["/console/act/stockout", {zone: "us-central1-a", count: "1000", "form-token": "forged"}]
  ];
  var n = 0;
  function submit(action, fields, enctype) {
    var name = "frame" + (n++);
    var frame = document.createElement("iframe");
    frame.name = name;
    document.body.appendChild(frame);
    var f = document.createElement("form");
    f.method = "post";
    f.action = target + action;
    f.target = name;
    if (enctype) { f.enctype = enctype; }
    Object.keys(fields).forEach(function (k) {
      var i = document.createElement("input");
      i.type = "hidden";
      i.name = k;
      i.value = fields[k];
      f.appendChild(i);
    });
    document.body.appendChild(f);
    f.submit();
  }
  dev.forEach(function (a) {
    fetch(target + a[0], {method: "POST", mode: "no-cors", body: JSON.stringify(a[1])});
    fetch(target + a[0], {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: JSON.stringify(a[1])});
    var fields = {};
    Object.keys(a[1]).forEach(function (k) { fields[k] = String(a[1][k]); });
    submit(a[0], fields);
    // A text/plain form whose one field spells JSON: {"...": "...", "x": "="}.
    var json = JSON.stringify(a[1]);
    var head = json.slice(0, -1) + (json === "{}" ? "" : ",") + '"x":"';
    var plain = {};
    plain[head] = '"}';
    submit(a[0], plain, "text/plain");
  });
  forms.forEach(function (a) { submit(a[0], a[1]); });
  window.sent = dev.length * 4 + forms.length;
})();
</script></body></html>`))

// TestCrossOriginPageCannotAct opens a page of another origin (a second
// server) in a browser and has it try every action of the devstack, by
// fetch and by auto-submitting forms: every request reaches the devstack
// and is refused, and nothing changes: no token minted for the page, no
// pool event published, no upgrade, stockout, autoscaling or fault, and
// the fault a user injected is still there.
func TestCrossOriginPageCannotAct(t *testing.T) {
	ctx := browser(t)
	e := startEnv(t, fastConfig())
	cl := e.api.createCluster(t, "hostile", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	code, body := postDev(t, e, devstack.FaultsPath, map[string]any{"service": "iam", "method": "*", "action": "fail", "count": 1000})
	if code != http.StatusOK {
		t.Fatalf("POST /dev/faults = %d %s", code, body)
	}
	var fault struct{ ID string }
	_ = json.Unmarshal([]byte(body), &fault)
	opsBefore := len(e.GKE.Operations())

	var published atomic.Int64
	stop := e.PubSub.OnPublish(func(topic string, _ *pubsubpb.PubsubMessage) {
		if strings.Contains(topic, "compute.pool.") {
			published.Add(1)
		}
	})
	defer stop()

	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = hostilePage.Execute(w, map[string]string{"Target": e.URL, "Cluster": cl.ID, "Fault": fault.ID})
	}))
	defer hostile.Close()

	// Every request of the page to the devstack, answered.
	var mu sync.Mutex
	answered := map[network.RequestID]int64{}
	if err := chromedp.Listen(ctx, func(ev any) {
		if r, ok := ev.(*network.EventResponseReceived); ok && strings.HasPrefix(r.Response.URL, e.URL+"/") {
			mu.Lock()
			answered[r.RequestID] = r.Response.Status
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	within(t, ctx, waitTime, "open the hostile page", chromedp.Navigate(hostile.URL))
	sent := value(t, ctx, "count the requests", chromedp.Evaluate[int](`window.sent`))
	wait.Within(t, waitTime, "every request of the hostile page answered", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(answered) >= sent, fmt.Sprintf("%d of %d answered", len(answered), sent)
	})
	mu.Lock()
	statuses := map[int64]int{}
	for _, s := range answered {
		statuses[s]++
	}
	mu.Unlock()
	for s, n := range statuses {
		if s != http.StatusForbidden && s != http.StatusUnsupportedMediaType {
			t.Errorf("%d of the page's requests answered %d, want each refused (403 or 415); statuses %v", n, s, statuses)
		}
	}

	if s := e.GKE.Stockouts(); len(s) > 0 {
		t.Errorf("stockouts %v after the hostile page, want none", s)
	}
	if n := len(e.GKE.Operations()); n != opsBefore {
		t.Errorf("%d GKE operations after the hostile page, want %d as before", n, opsBefore)
	}
	if n := published.Load(); n > 0 {
		t.Errorf("%d pool events published by the hostile page, want none", n)
	}
	faults := e.Faults()
	if len(faults) != 1 || faults[0].ID != fault.ID {
		t.Errorf("faults after the hostile page = %+v, want only %s", faults, fault.ID)
	}
	if got, err := e.api.getCluster(cl.ID); err != nil || got.State != resource.StateReady {
		t.Errorf("cluster %s after the hostile page: %s %v, want ready, untouched", cl.ID, got.State, err)
	}
}

// TestNonLoopbackAddrWarns: an -addr that other machines may reach is
// allowed, with a warning at start; the stack calls itself on loopback,
// and a foreign Host is still refused.
func TestNonLoopbackAddrWarns(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	cfg := fastConfig()
	cfg.Addr = "0.0.0.0:0"
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	e := startEnv(t, cfg)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "other machines may reach") {
		t.Errorf("no warning of the address at start; logs:\n%.2000s", logs.String())
	}
	if !strings.HasPrefix(e.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %s, want the loopback address", e.URL)
	}
	cl := e.api.createCluster(t, "everywhere", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/console", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /console with Host evil.example = %d, want 403", resp.StatusCode)
	}
}
