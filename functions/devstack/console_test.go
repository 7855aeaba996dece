package devstack_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// chromium is the browser the console's test drives: Debian's chromium
// (.ci/run installs it), or CHROMIUM, or another of the usual names.
func chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless chromium for t.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium binary found (apt-get install chromium, or set CHROMIUM): the console's browser test needs one; CI installs it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTime(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}

// within runs the steps with a deadline of d.
func within(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		body, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage: %.3000s", what, err, body)
	}
}

// value runs one action that gives a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTime)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// poll waits until the expression is true in the page, for at most d.
func poll(t *testing.T, ctx context.Context, d time.Duration, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage: %.3000s", what, err, body)
	}
}

// textOf is the text content of the element sel, once it is in the page,
// found and read in one evaluation in the page. A query for the element's
// node then a read by that node's ID (chromedp.TextContent) fails with "No
// node with given id found" when a stream replaces the element between
// the two.
func textOf(t *testing.T, ctx context.Context, what, sel string) string {
	t.Helper()
	poll(t, ctx, waitTime, what, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	return value(t, ctx, what, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
}

// TestConsoleInBrowser drives the console in a real browser: a cluster
// created through the API appears in the fleet and turns ready without a
// reload; its timeline shows its events, the reconcile runs and the
// provider's operation; a
// stockout set from the page shows in the node pool's message; an event
// appears in the events view within two seconds of its publication.
func TestConsoleInBrowser(t *testing.T) {
	ctx := browser(t)
	cfg := fastConfig()
	cfg.ConsolePoll = 200 * time.Millisecond
	e := startEnv(t, cfg)
	c := e.api
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	// The fleet, open before the cluster exists.
	within(t, ctx, waitTime, "open the fleet",
		chromedp.Navigate(e.URL+"/console"),
		chromedp.WaitVisible(css("#clusters")))
	value(t, ctx, "mark the page", chromedp.Evaluate[string](`window.notReloaded = "yes"`))
	cl := c.createCluster(t, "console", poolSpec("a", 1))
	row := fmt.Sprintf(`tr[id="cl-acme-%s"]`, cl.ID)
	within(t, ctx, waitTime, "the new cluster's row", chromedp.WaitVisible(css(row)))
	within(t, ctx, waitTime, "the cluster ready in the fleet", chromedp.WaitVisible(css(row+`[data-state="ready"]`)))
	// It changed while the page was open: its row says so.
	within(t, ctx, waitTime, "the changed row marked", chromedp.WaitVisible(css(row+`.changed`)))
	if m := value(t, ctx, "no reload", chromedp.Evaluate[string](`window.notReloaded || "reloaded"`)); m != "yes" {
		t.Errorf("the fleet page reloaded (%q)", m)
	}

	// Its page: the timeline with its events and the provider's operation.
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterReady: 1})
	clusterURL := fmt.Sprintf("%s/console/clusters/acme/%s", e.URL, cl.ID)
	within(t, ctx, waitTime, "the timeline",
		chromedp.Navigate(clusterURL),
		chromedp.WaitVisible(css("#timeline")),
		chromedp.WaitVisible(css("#timeline .ev-mark")),
		chromedp.WaitVisible(css("#timeline .op-bar")),
		chromedp.WaitVisible(css("#timeline rect.run")),
		chromedp.WaitVisible(css("#runs tbody tr")))
	if ops := textOf(t, ctx, "the timeline's text", "#timeline"); !strings.Contains(ops, "CREATE_CLUSTER") {
		t.Errorf("timeline %q lacks the CREATE_CLUSTER operation", ops)
	}
	marks := value(t, ctx, "count the events", chromedp.Evaluate[int](`document.querySelectorAll("#timeline .ev-mark").length`))
	if want := len(e.events.of(cl.ID)); marks == 0 || marks > want {
		t.Errorf("timeline shows %d events, want 1 to %d", marks, want)
	}

	// A stockout set from the page, then a pool in that zone: its message
	// arrives on the open cluster page.
	within(t, ctx, waitTime, "the stockout form",
		chromedp.Navigate(e.URL+"/console/act"),
		chromedp.SetValue(css("#so-zone"), "us-central1-c"),
		chromedp.SetValue(css("#so-count"), "1000"),
		chromedp.Click(css("#so-send")),
		chromedp.WaitVisible(css(".flash")))
	if flash := textOf(t, ctx, "the answer", ".flash"); !strings.Contains(flash, "202") {
		t.Fatalf("stockout answer %q, want 202", flash)
	}
	within(t, ctx, waitTime, "back to the cluster", chromedp.Navigate(clusterURL), chromedp.WaitVisible(css("#pools")))
	spec := poolSpec("short", 1)
	spec["zones"] = []string{"us-central1-c"}
	c.createPool(t, cl.ID, spec)
	poll(t, ctx, waitTime, "the stockout in the pool's message",
		`((document.getElementById("pool-short") || {}).textContent || "").includes("GCE_STOCKOUT")`)

	// The events view, then an event: it shows within two seconds of its
	// publication (its arrival at the test's own subscription).
	within(t, ctx, waitTime, "open the events", chromedp.Navigate(e.URL+"/console/events"), chromedp.WaitVisible(css("#events")))
	other := c.createCluster(t, "console-events", poolSpec("a", 1))
	wait.Until(t, fmt.Sprintf("the %s event of %s", event.ClusterCreated, other.ID), func() bool {
		return e.events.count(other.ID, event.ClusterCreated, "") > 0
	})
	published := time.Now()
	poll(t, ctx, 2*time.Second, "the event in the events view within 2s",
		fmt.Sprintf(`[...document.querySelectorAll("#events tbody tr")].some(r => r.textContent.includes("cluster.created") && r.textContent.includes(%q))`, other.ID))
	t.Logf("the event showed %v after its publication", time.Since(published).Round(time.Millisecond))

	// By keyboard: the first Tab reaches the skip link, the next the
	// first link of the navigation, each drawn with a focus ring; Enter
	// follows it.
	within(t, ctx, waitTime, "the fleet by keyboard", chromedp.Navigate(e.URL+"/console/events"), chromedp.WaitVisible(css("#events")),
		chromedp.KeyEvent(kb.Tab))
	focused := `document.activeElement.textContent.trim() + "|" + getComputedStyle(document.activeElement).outlineStyle`
	if f := value(t, ctx, "the first Tab", chromedp.Evaluate[string](focused)); f != "Skip to the content|solid" {
		t.Errorf("focus after one Tab = %q, want the skip link with a focus ring", f)
	}
	within(t, ctx, waitTime, "the second Tab", chromedp.KeyEvent(kb.Tab))
	if f := value(t, ctx, "the second Tab", chromedp.Evaluate[string](focused)); f != "Fleet|solid" {
		t.Errorf("focus after two Tabs = %q, want the Fleet link with a focus ring", f)
	}
	within(t, ctx, waitTime, "Enter on the Fleet link", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(css("#clusters")))

	// A picture of the cluster's page, when asked (the README's).
	if name := os.Getenv("CONSOLE_SCREENSHOT"); name != "" {
		within(t, ctx, waitTime, "the cluster for the screenshot", chromedp.EmulateViewport(1100, 900), chromedp.Navigate(clusterURL),
			chromedp.WaitVisible(css("#timeline")), chromedp.Sleep(300*time.Millisecond))
		png := value(t, ctx, "the screenshot", chromedp.CaptureScreenshot())
		if err := os.WriteFile(name, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// formToken is the form token of a page of the console's.
func formToken(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/console/act")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`<meta name="form-token" content="([^"]+)">`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no form token on the act page:\n%s", b)
	}
	return string(m[1])
}

// TestConsoleForms posts the console's forms as a browser would, with
// the page's token: each calls the devstack's endpoint and comes back
// with its answer; the pool event's form shows the substrate's plan
// before it offers to send the event.
func TestConsoleForms(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	cl := e.api.createCluster(t, "console-forms", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(p string) string {
		t.Helper()
		var page string
		// The act page offers the fleet's clusters once the console's
		// listeners hold it.
		wait.For(t, "GET "+p, func() (bool, string) {
			resp, err := http.Get(e.URL + p)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			page = string(b)
			return resp.StatusCode == http.StatusOK && strings.Contains(page, "dl-clusters"), fmt.Sprint(resp.StatusCode)
		})
		return page
	}
	tok := formToken(t, e.URL)
	form := func(what string, v url.Values) (int, string, string) {
		t.Helper()
		v.Set("form-token", tok)
		resp, err := noRedirect.PostForm(e.URL+"/console/act/"+what, v)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	for _, tt := range []struct {
		what        string
		form        url.Values
		want, words string
		failed      bool
	}{
		{"upgrade", url.Values{"clusterId": {cl.ID}, "duration": {"50ms"}}, "202", "began upgrading the control plane of cluster " + cl.ID, false},
		{"autoscale", url.Values{"clusterId": {cl.ID}, "nodePool": {"a"}, "nodeCount": {"2"}}, "409", "The autoscaler's change was refused", true}, // autoscaling off
		{"stockout", url.Values{"zone": {"us-central1-a"}, "count": {"0"}}, "400", "The stockout was refused (400): invalid input: count", true},
		{"stockout", url.Values{"zone": {"us-central1-z"}, "count": {"1"}}, "us-central1-a, us-central1-b", `no cluster of the devstack can be in zone "us-central1-z"`, true},
	} {
		code, loc, _ := form(tt.what, tt.form)
		u, err := url.Parse(loc)
		if code != http.StatusSeeOther || err != nil || !strings.HasPrefix(u.Path, "/console/act") {
			t.Errorf("%s: %d to %q, want 303 to the act page", tt.what, code, loc)
			continue
		}
		if flash := u.Query().Get("flash"); !strings.Contains(flash, tt.want) || !strings.Contains(flash, tt.words) || strings.Contains(flash, "{\"") {
			t.Errorf("%s: answer %q, want %s and %q in words", tt.what, flash, tt.want, tt.words)
		}
		// The page it goes back to says it, red on a failure.
		class := `<p class="flash ok"`
		if tt.failed {
			class = `<p class="flash err" role="alert"`
		}
		if page := get(loc); !strings.Contains(page, class) {
			t.Errorf("%s: the act page lacks %s", tt.what, class)
		}
	}
	var page []byte
	wait.For(t, "the act page offering cluster "+cl.ID, func() (bool, string) {
		page = []byte(get("/console/act"))
		return strings.Contains(string(page), fmt.Sprintf(`<option value="%s">`, cl.ID)), ""
	})
	if !strings.Contains(string(page), `<option value="europe-west4-b">`) {
		t.Errorf("the act page offers no pick of the accounts' zones")
	}
	pool := regexp.MustCompile(`(?s)<textarea id="pl-pool" name="pool"[^>]*>(.*?)</textarea>`).FindSubmatch(page)
	if pool == nil {
		t.Fatalf("no pool form on the act page:\n%s", page)
	}
	// The plan comes back by a redirect: a reload asks for it again no
	// more than it sends an event.
	code, loc, _ := form("pool", url.Values{"tenantId": {"acme"}, "as": {"alice"}, "action": {"plan"}, "pool": {html.UnescapeString(string(pool[1]))}})
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/act?plan=") {
		t.Fatalf("plan = %d to %q, want 303 to the act page with the plan", code, loc)
	}
	if body := get(loc); !strings.Contains(body, resource.PlanCreateCluster) || !strings.Contains(body, `value="put"`) {
		t.Errorf("plan page, want the plan (createCluster) and the put button:\n%s", body)
	}
}

// TestConsoleLoadsNothingFromOutside reads every page of the console of
// a stack with a cluster and its events: no page, script or style refers
// to anything but the devstack (a URL of another host, a reference that
// is not a path of the console's).
func TestConsoleLoadsNothingFromOutside(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	cl := e.api.createCluster(t, "console-outside", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterReady: 1})
	self, _ := url.Parse(e.URL)
	anyURL := regexp.MustCompile(`(?i)https?://[^\s"'<>)]+`)
	ref := regexp.MustCompile(`(?i)\b(?:src|href|action|xlink:href)\s*=\s*["']?([^"'\s>]*)|url\(\s*["']?([^"')]*)|@import\s+["']?([^"';]*)`)
	for _, p := range []string{"/console", "/console?tenant=acme&state=ready", "/console/clusters/acme/" + cl.ID,
		"/console/events", "/console/events?cluster=" + cl.ID, "/console/emulators", "/console/firestore",
		"/console/firestore?path=tenants/acme/clusters", "/console/firestore?path=tenants/acme/clusters/" + cl.ID, "/console/act",
		"/console/search?q=console", "/console/requests", "/console/firestore?path=tenants",
		"/console/static/console.js", "/console/static/console.css"} {
		resp, err := http.Get(e.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", p, resp.StatusCode)
			continue
		}
		for _, u := range anyURL.FindAllString(string(body), -1) {
			if pu, err := url.Parse(u); err != nil || pu.Host != self.Host {
				t.Errorf("GET %s names a URL outside the devstack: %s", p, u)
			}
		}
		for _, m := range ref.FindAllStringSubmatch(string(body), -1) {
			r := m[1] + m[2] + m[3]
			if !strings.HasPrefix(r, "/console") && !strings.HasPrefix(r, "#") {
				t.Errorf("GET %s refers to %q, not the console's", p, r)
			}
		}
	}
}

// TestConsoleEmulators reads what the emulators hold on the console: the
// reconcile queues, the GKE simulator's operations, the process serving
// the functions, and a cluster's Firestore document.
func TestConsoleEmulators(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	cl := e.api.createCluster(t, "console-emulators", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	get := func(p string) string {
		t.Helper()
		resp, err := http.Get(e.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", p, resp.StatusCode, b)
		}
		return string(b)
	}
	page := get("/console/emulators")
	for _, want := range []string{e.FunctionsConfig().TasksQueue, e.FunctionsConfig().TasksSteadyQueue, "CREATE_CLUSTER", "clusters/" + cl.ProviderName,
		fmt.Sprintf(`<td class="num">%d</td>`, os.Getpid())} {
		if !strings.Contains(page, want) {
			t.Errorf("the emulators' page lacks %q", want)
		}
	}
	doc := get("/console/firestore?path=tenants/acme/clusters/" + cl.ID)
	if !strings.Contains(doc, "Document "+cl.ID) || !strings.Contains(doc, "kubernetesVersion") || !strings.Contains(doc, "nodePools") {
		t.Errorf("the cluster's document page lacks its fields or its node pools:\n%.2000s", doc)
	}
}

// TestConsolePagesInBrowser drives pages past the first of a console on
// a fleet of its own (three rows a page): a new cluster, which pushes
// every row down, and a state that changes show on page 2 without a
// reload, in the order the page has when rendered anew, as does one
// created between two of its rows; the substrates
// are paged the same, and their pages are reached by keyboard.
func TestConsolePagesInBrowser(t *testing.T) {
	ctx := browser(t)
	fsc := fsemu.ForTest(t, "bc-dev")
	bg := context.Background()
	now := time.Now()
	acme := store.TenantDoc(fsc, "acme")
	putCluster := func(i int, created time.Time) {
		t.Helper()
		id := fmt.Sprintf("kcl-%04d", i)
		cl := model.Cluster{ID: id, TenantID: "acme", CreatedAt: created, Active: true,
			Spec:   model.ClusterSpec{Name: fmt.Sprintf("c-%d", i), Mode: resource.ModeAutopilot, Region: "us-central1"},
			Status: model.ClusterStatus{State: resource.StateReady}}
		if _, err := acme.Collection("clusters").Doc(id).Set(bg, cl); err != nil {
			t.Fatal(err)
		}
	}
	putSubstrate := func(i int, created time.Time) {
		t.Helper()
		id := fmt.Sprintf("ksb-%04d", i)
		s := model.Substrate{ID: id, TenantID: "acme", PoolID: "pool-" + id, CreatedAt: created, Active: true,
			Status: model.SubstrateStatus{State: resource.StateReady}}
		if _, err := acme.Collection("substrates").Doc(id).Set(bg, s); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		putCluster(i, now.Add(time.Duration(i)*time.Second))
		putSubstrate(i, now.Add(time.Duration(i)*time.Second))
	}
	c, err := console.New(console.Options{Firestore: fsc, PageSize: 3, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { c.Close(); srv.Close() })
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	// ids are the rows of a table of the page as the console renders it
	// now, in order.
	ids := func(path, table string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body := regexp.MustCompile(`(?s)<table id="` + table + `">.*?</table>`).FindString(string(b))
		var out []string
		for _, m := range regexp.MustCompile(`<tr id="([^"]+)"`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return strings.Join(out, ",")
	}
	// rendered waits until the page renders the table's rows so: the
	// console has seen the change.
	rendered := func(path, table, want string) {
		t.Helper()
		wait.For(t, path+" renders "+table+" "+want, func() (bool, string) {
			got := ids(path, table)
			return got == want, got
		})
	}
	shows := func(table string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#%s tbody tr")].map(r => r.id).join(",")`, table)
	}
	const page = "/console?page=2&spage=2"
	within(t, ctx, waitTime, "open page 2", chromedp.Navigate(srv.URL+page), chromedp.WaitVisible(css("#clusters")))
	value(t, ctx, "mark the page", chromedp.Evaluate[string](`window.notReloaded = "yes"`))
	before := value(t, ctx, "page 2's clusters", chromedp.Evaluate[string](shows("clusters")))
	if want := "cl-acme-kcl-0004,cl-acme-kcl-0003,cl-acme-kcl-0002"; before != want {
		t.Fatalf("page 2 shows clusters %s, want %s", before, want)
	}

	// A new cluster, the newest: page 1's last row moves to page 2's top,
	// and page 2's last to page 3.
	putCluster(100, now.Add(time.Hour))
	want := "cl-acme-kcl-0005,cl-acme-kcl-0004,cl-acme-kcl-0003"
	rendered(page, "clusters", want)
	poll(t, ctx, waitTime, "page 2's rows moved live", fmt.Sprintf(`%s === %q`, shows("clusters"), want))
	poll(t, ctx, waitTime, "page 2's pager live", `document.getElementById("clusters-pager").textContent.includes("4–6 of 9 clusters")`)
	// One between two of page 2's rows: it is put after the first.
	putCluster(101, now.Add(3500*time.Millisecond))
	want = "cl-acme-kcl-0005,cl-acme-kcl-0004,cl-acme-kcl-0101"
	rendered(page, "clusters", want)
	poll(t, ctx, waitTime, "a new row inside page 2 live", fmt.Sprintf(`%s === %q`, shows("clusters"), want))
	if _, err := acme.Collection("clusters").Doc("kcl-0004").Update(bg, []firestore.Update{{Path: "status.state", Value: "error"}}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, waitTime, "a row of page 2 in error live", `!!document.querySelector('#clusters tr[id="cl-acme-kcl-0004"][data-state="error"]')`)

	// The substrates: page 2 of them moves as the clusters'.
	putSubstrate(100, now.Add(time.Hour))
	want = "sb-acme-ksb-0005,sb-acme-ksb-0004,sb-acme-ksb-0003"
	poll(t, ctx, waitTime, "the substrates' page 2 moved live", fmt.Sprintf(`%s === %q`, shows("substrates"), want))
	rendered(page, "substrates", want)
	if m := value(t, ctx, "no reload", chromedp.Evaluate[string](`window.notReloaded || "reloaded"`)); m != "yes" {
		t.Errorf("page 2 reloaded (%q)", m)
	}

	// By keyboard: the substrates' next page, from its link. The pager
	// shows the last change first, so that no stream replaces the link
	// once it has the focus; the link is found and focused in one
	// evaluation in the page.
	poll(t, ctx, waitTime, "the substrates' pager live", `document.getElementById("substrates-pager").textContent.includes("4–6 of 9 substrates")`)
	if f := value(t, ctx, "focus the substrates' next page", chromedp.Evaluate[string](`(() => {
		const a = document.querySelector('#substrates-pager a[rel="next"]'); a.focus();
		return document.activeElement === a ? "focused" : "not focused"; })()`)); f != "focused" {
		t.Fatalf("the substrates' next page link: %s", f)
	}
	within(t, ctx, waitTime, "the substrates' next page by keyboard",
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(css(`#substrates tr[id="sb-acme-ksb-0002"]`)))
	if loc := value(t, ctx, "the location", chromedp.Evaluate[string](`location.search`)); loc != "?page=2&spage=3" {
		t.Errorf("the substrates' next page is %q, want ?page=2&spage=3", loc)
	}
	if got := value(t, ctx, "the clusters kept", chromedp.Evaluate[string](shows("clusters"))); got != "cl-acme-kcl-0005,cl-acme-kcl-0004,cl-acme-kcl-0101" {
		t.Errorf("the clusters' page 2 after the substrates' next page shows %s", got)
	}
}

// TestConsoleKubernetesServers reads, on a stack with Kubernetes, what
// the console says of a cluster's API server: on the emulators' page,
// with the bound, and on the cluster's page, running once its
// kubeconfig's client called it.
func TestConsoleKubernetesServers(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.Kubernetes = true
	e := startEnv(t, cfg)
	wait.Within(t, 15*time.Minute, "the Kubernetes API server binary", func() (bool, string) {
		status, health := healthzKubernetes(t, e.URL)
		return status == http.StatusOK && health.Ready, health.Progress
	})
	cl := e.api.createCluster(t, "console-kube", poolSpec("a", 1))
	cl = e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	get := func(p string) string {
		t.Helper()
		resp, err := http.Get(e.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	page := get("/console/emulators")
	for _, want := range []string{"running or starting (the bound, -kubernetes-max-running)", "of at most 8",
		`<th scope="row"><small>` + providerName(cl) + `</small></th>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the emulators' page lacks %q:\n%s", want, page)
		}
	}
	status, kc := getKubeconfig(t, e.URL, cl.ID)
	if status != http.StatusOK {
		t.Fatalf("GET kubeconfig = %d %s", status, kc)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 5*time.Minute, "the cluster's API server answers", func() (bool, string) {
		_, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	clusterPage := "/console/clusters/acme/" + cl.ID
	if p := get(clusterPage); !strings.Contains(p, `<p id="cluster-kube"><span class="state kube-running">running</span> since`) {
		t.Errorf("the cluster's page does not show its API server running:\n%s", p)
	}
}
