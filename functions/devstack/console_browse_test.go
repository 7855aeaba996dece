package devstack_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestConsoleFirestoreInBrowser follows the Firestore browser's links
// from its root to a node pool's document, three levels down: the
// tenants (documents of no field, only subcollections, listed as
// Firebase's emulator lists them), a tenant's clusters, a cluster's node
// pools; each link leads to what it names.
func TestConsoleFirestoreInBrowser(t *testing.T) {
	ctx := browser(t)
	e := sharedStack(t)
	cl := e.api.createCluster(t, "console-firestore", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	link := func(text string) string {
		return fmt.Sprintf(`(() => { const a = [...document.querySelectorAll("main a")].find(a => a.textContent.trim() === %q); if (!a) { return false; } a.click(); return true; })()`, text)
	}
	within(t, ctx, waitTime, "the root", chromedp.Navigate(e.URL+"/console/firestore"), chromedp.WaitVisible(css("#collections")))
	for _, step := range []struct{ follow, want string }{
		{"tenants", "#docs"},
		{"acme", "#collections"},
		{"tenants/acme/clusters", "#docs"},
		{cl.ID, "#collections"},
		{"tenants/acme/clusters/" + cl.ID + "/nodePools", "#docs"},
	} {
		poll(t, ctx, waitTime, "follow "+step.follow, link(step.follow))
		within(t, ctx, waitTime, "the page of "+step.follow, chromedp.WaitVisible(css(step.want)))
	}
	pools, err := e.api.listPools(cl.ID)
	if err != nil || len(pools) == 0 {
		t.Fatalf("pools of %s: %v, %v", cl.ID, pools, err)
	}
	poll(t, ctx, waitTime, "follow the pool", link(pools[0].ID))
	within(t, ctx, waitTime, "the pool's document", chromedp.WaitVisible(css("main pre")))
	doc := textOf(t, ctx, "the pool's document", "main")
	if !strings.Contains(doc, "Document "+pools[0].ID) || !strings.Contains(doc, "machineType") {
		t.Errorf("the pool's page, three levels down, lacks its fields:\n%.2000s", doc)
	}
	crumbs := value(t, ctx, "the path", chromedp.Evaluate[string](`[...document.querySelectorAll('nav[aria-label="Path"] a')].map(a => a.textContent).join("/")`))
	if want := "root/tenants/acme/clusters/" + cl.ID + "/nodePools/" + pools[0].ID; crumbs != want {
		t.Errorf("path = %q, want %q", crumbs, want)
	}
}

// TestConsoleSubstrateFailureAsLogged creates a substrate on a devstack
// without Kubernetes API servers: its page says why its runs fail as the
// log says it (its cluster has no endpoint), not only that they are
// retried, and that substrates need -kubernetes.
func TestConsoleSubstrateFailureAsLogged(t *testing.T) {
	t.Parallel()
	substrateFailureAsLogged(t, fastConfig())
}

// TestConsoleSubstrateFailureAsLoggedByInstances is
// TestConsoleSubstrateFailureAsLogged with the functions in two
// processes: the reason is in the log of whichever instance ran the
// substrate.
func TestConsoleSubstrateFailureAsLoggedByInstances(t *testing.T) {
	t.Parallel()
	substrateFailureAsLogged(t, instancesConfig(2))
}

func substrateFailureAsLogged(t *testing.T, cfg devstack.Config) {
	e := startEnv(t, cfg)
	putPool(t, e, createPolicy("pool-logged", 1, flavor("cpu", 1)))
	sub := e.api.waitSubstrate(t, "pool-logged", "a substrate", func(resource.Substrate) bool { return true })
	wait.For(t, "the substrate's page with the log's reason", func() (bool, string) {
		resp, err := http.Get(e.URL + "/console/substrates/acme/" + sub.ID)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page := string(b)
		retrying := regexp.MustCompile(`(?s)<dd id="substrate-retrying">.*?</dd>`).FindString(page)
		return strings.Contains(retrying, "The log says:") && strings.Contains(retrying, "has no endpoint or CA yet") &&
			strings.Contains(page, `id="substrate-nokube"`) && strings.Contains(page, "-kubernetes"), retrying
	})
}

// TestConsoleSearchInBrowser finds a cluster by the search box of every
// page: by its name and by its ID, each leading to its page; a part of
// a name lists what holds it.
func TestConsoleSearchInBrowser(t *testing.T) {
	ctx := browser(t)
	e := sharedStack(t)
	cl := e.api.createCluster(t, "console-search-by-name", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	for _, q := range []string{cl.Name, cl.ID} {
		within(t, ctx, waitTime, "search "+q, chromedp.Navigate(e.URL+"/console/events"), chromedp.WaitVisible(css("#search-q")),
			chromedp.SendKeys(css("#search-q"), q+"\r"), chromedp.WaitVisible(css("#cluster-state")))
		if p := value(t, ctx, "the page found", chromedp.Evaluate[string](`location.pathname`)); p != "/console/clusters/acme/"+cl.ID {
			t.Errorf("search %q led to %s, want the cluster's page", q, p)
		}
	}
	within(t, ctx, waitTime, "search a part of the name", chromedp.Navigate(e.URL+"/console"), chromedp.WaitVisible(css("#search-q")),
		chromedp.SendKeys(css("#search-q"), "search-by\r"), chromedp.WaitVisible(css(fmt.Sprintf(`#found-clusters tr[id="cl-acme-%s"] a`, cl.ID))))
	within(t, ctx, waitTime, "search what is not there", chromedp.Navigate(e.URL+"/console/search?q=no-such-thing-anywhere"),
		chromedp.WaitVisible(css("#found-none")))
}

// TestConsoleLinksToClusters follows the emulators' page to clusters: a
// GKE operation links to its cluster's page.
func TestConsoleLinksToClusters(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	cl := e.api.createCluster(t, "console-links", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	link := fmt.Sprintf(`<a href="/console/clusters/acme/%s">%s</a>`, cl.ID, cl.Name)
	wait.For(t, "the emulators' page linking the operation to its cluster", func() (bool, string) {
		resp, err := http.Get(e.URL + "/console/emulators")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ops := regexp.MustCompile(`(?s)<table id="ops">.*?</table>`).FindString(string(b))
		return strings.Contains(ops, link), fmt.Sprintf("%.500s", ops)
	})
}

// TestConsoleStaleInBrowser opens the fleet, then stops the console: the
// page says it is disconnected and may be stale, drawn apart from the
// live state (not the live green).
func TestConsoleStaleInBrowser(t *testing.T) {
	ctx := browser(t)
	fsc := fsemu.ForTest(t, "bc-dev")
	c, err := console.New(console.Options{Firestore: fsc, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { c.Close(); srv.Close() })
	within(t, ctx, waitTime, "the fleet", chromedp.Navigate(srv.URL+"/console"), chromedp.WaitVisible(chromedp.CSS("#clusters")))
	poll(t, ctx, waitTime, "live", `document.getElementById("live-status").textContent === "live"`)
	liveColor := value(t, ctx, "the live color", chromedp.Evaluate[string](`getComputedStyle(document.getElementById("live-status")).color`))
	c.Close()
	srv.CloseClientConnections()
	srv.Close()
	poll(t, ctx, waitTime, "the page stale", `document.body.classList.contains("stale") && document.getElementById("live-status").textContent.includes("stale")`)
	if stale := value(t, ctx, "the stale color", chromedp.Evaluate[string](`getComputedStyle(document.getElementById("live-status")).color + " on " + getComputedStyle(document.getElementById("live-status")).backgroundColor`)); strings.HasPrefix(stale, liveColor+" on rgba(0, 0, 0, 0)") {
		t.Errorf("the stale status is drawn as the live one: %s", stale)
	}
}

// TestConsoleRequestLog creates a cluster through the API, then reads
// the console's requests: the call is there with its method, path,
// principal, status, request ID and latency.
func TestConsoleRequestLog(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	cl := e.api.createCluster(t, "console-requests", poolSpec("a", 1))
	resp, err := http.Get(e.URL + "/console/requests")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	row := regexp.MustCompile(`<td>POST</td><th scope="row">/api/compute/kubernetesClusters/create</th><td>alice</td><td class="num">200</td><td><small>([0-9a-f]+)</small></td><td class="num">([0-9.]+(?:µs|ms|s))</td>`)
	if !row.Match(b) {
		t.Errorf("the requests lack the create of %s with its principal, status, request ID and latency:\n%.3000s", cl.ID, b)
	}
}

// TestConsoleClusterFailureAsLogged has the provider refuse to create a
// cluster: its page says the log's latest warning of it, the provider's
// answer, while it is not ready.
func TestConsoleClusterFailureAsLogged(t *testing.T) {
	t.Parallel()
	clusterFailureAsLogged(t, fastConfig())
}

// TestConsoleClusterFailureAsLoggedByInstances is
// TestConsoleClusterFailureAsLogged with the functions in two processes:
// the provider's answer is in the log of whichever instance ran the
// cluster.
func TestConsoleClusterFailureAsLoggedByInstances(t *testing.T) {
	t.Parallel()
	clusterFailureAsLogged(t, instancesConfig(2))
}

func clusterFailureAsLogged(t *testing.T, cfg devstack.Config) {
	e := startEnv(t, cfg)
	resp, err := http.Post(e.URL+"/dev/faults", "application/json",
		strings.NewReader(`{"service":"gke","method":"CreateCluster","action":"fail","code":"UNAVAILABLE"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /dev/faults = %v, %v", resp, err)
	}
	resp.Body.Close()
	cl := e.api.createCluster(t, "console-logged", poolSpec("a", 1))
	wait.For(t, "the cluster's page with the log's warning", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("%s/console/clusters/acme/%s", e.URL, cl.ID))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		logged := regexp.MustCompile(`(?s)<dd id="cluster-logged" class="logged">.*?</dd>`).FindString(string(b))
		return strings.Contains(logged, "Provider call failed") && strings.Contains(logged, "Unavailable"), logged
	})
}
