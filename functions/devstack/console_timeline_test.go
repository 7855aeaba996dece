package devstack_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/chromedp/chromedp"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// TestConsoleTimelineInBrowser resizes a node pool while its cluster's
// page is open: the pool's lane shows it updating (a state no event
// tells of), with a link from the bar to its row in the list of steps,
// then ready again; every bar of the lanes links to a row of the list.
// A part of the page that never changed (a heading) keeps its element
// through every update.
func TestConsoleTimelineInBrowser(t *testing.T) {
	ctx := browser(t)
	cfg := fastConfig()
	cfg.ConsolePoll = 100 * time.Millisecond
	// Long enough an operation that the pool is seen updating.
	cfg.GKEOperationTime = 500 * time.Millisecond
	e := startEnv(t, cfg)
	cl := e.api.createCluster(t, "timeline", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	pools, err := e.api.listPools(cl.ID)
	if err != nil || len(pools) != 1 {
		t.Fatalf("pools of %s = %v, %v", cl.ID, pools, err)
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	within(t, ctx, waitTime, "the cluster's page", chromedp.Navigate(fmt.Sprintf("%s/console/clusters/acme/%s", e.URL, cl.ID)),
		chromedp.WaitVisible(css("#timeline")))
	// What does not change stays: its element is not drawn anew.
	value(t, ctx, "mark a heading", chromedp.Evaluate[string](`document.getElementById("h-pools").kept = "yes"`))
	e.api.updatePool(t, cl.ID, pools[0].ID, map[string]any{"nodeCount": 2})
	poll(t, ctx, waitTime, "the pool updating in its lane",
		`!!document.querySelector("#timeline a.seg rect.s-updating")`)
	e.api.waitCluster(t, cl.ID, resource.StateReady, map[string]resource.State{"a": resource.StateReady})
	poll(t, ctx, waitTime, "the pool ready again after updating in its lane",
		`(() => { const r = [...document.querySelectorAll("#timeline a.seg rect")].filter(r => r.closest("a").getAttribute("aria-label").startsWith("node pool a "));
		  const i = r.findIndex(x => x.classList.contains("s-updating")); return i >= 0 && r.slice(i+1).some(x => x.classList.contains("s-ready")); })()`)
	broken := value(t, ctx, "the bars' links", chromedp.Evaluate[string](`[...document.querySelectorAll("#timeline a")].
		map(a => a.getAttribute("href")).filter(h => !document.getElementById(h.slice(1))).join(",")`))
	if broken != "" {
		t.Errorf("bars that link to no step: %s", broken)
	}
	steps := textOf(t, ctx, "the list of steps", "#steps")
	if !strings.Contains(steps, "node pool a") || !strings.Contains(steps, "updating") {
		t.Errorf("the list of steps lacks the pool's updating:\n%s", steps)
	}
	// Deleted: the lanes show it deleting, then end at the deletion.
	e.api.deleteCluster(t, cl.ID)
	poll(t, ctx, waitTime, "the cluster deleting, then deleted, in its lane",
		`!!document.querySelector("#timeline a.seg rect.s-deleting") && !!document.querySelector("#timeline a.seg rect.s-deleted")`)
	ends := value(t, ctx, "the lanes' ends", chromedp.Evaluate[string](`(() => {
		const last = [...document.querySelectorAll("#timeline a.seg rect.s-deleted")].map(r => +r.getAttribute("x") + +r.getAttribute("width"));
		const axis = [...document.querySelectorAll("#timeline line.axis")].map(l => +l.getAttribute("x1"));
		return Math.max(...last) + " " + Math.max(...axis); })()`))
	var end, right int
	if _, err := fmt.Sscan(ends, &end, &right); err != nil || end > right {
		t.Errorf("the lanes end at x=%d, past the timeline's end at x=%d: a deleted cluster's history ends at its deletion", end, right)
	}
	if kept := value(t, ctx, "the heading kept", chromedp.Evaluate[string](`document.getElementById("h-pools").kept || "drawn anew"`)); kept != "yes" {
		t.Errorf("the node pools' heading, which never changed, was %s", kept)
	}
	// By keyboard: a bar is a link, and following it reaches its step.
	href := value(t, ctx, "the updating bar's step", chromedp.Evaluate[string](`(() => { const a = document.querySelector("#timeline rect.s-updating").closest("a"); a.focus(); return document.activeElement === a ? a.getAttribute("href") : "not focused"; })()`))
	if !strings.HasPrefix(href, "#step-") {
		t.Fatalf("the updating bar: %q, want a focusable link to a step", href)
	}
}

// TestConsoleRunsFromTheStart opens a cluster's page only once the
// cluster is ready: its reconcile runs, and its states in the lanes, were
// recorded from the devstack's start, not from the first visit.
func TestConsoleRunsFromTheStart(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.ConsoleFromStart = true
	e := startEnv(t, cfg)
	cl := e.api.createCluster(t, "runs-from-start", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	resp, err := http.Get(fmt.Sprintf("%s/console/clusters/acme/%s", e.URL, cl.ID))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	m := regexp.MustCompile(`Reconcile runs \((\d+),`).FindStringSubmatch(page)
	if m == nil || m[1] == "0" {
		t.Errorf("reconcile runs on the first visit: %v, want those since the start", m)
	}
	steps := regexp.MustCompile(`(?s)<table id="steps".*?</table>`).FindString(page)
	if !strings.Contains(steps, "provisioning") {
		t.Errorf("the steps of the first visit lack the cluster's provisioning:\n%s", steps)
	}
}

// TestConsoleRunningBarGrowsInBrowser opens the page of a cluster whose
// provider operation runs, and changes nothing: the operation's bar
// widens toward the time now, drawn by the page alone, with no request
// to the console after the page and its stream.
func TestConsoleRunningBarGrowsInBrowser(t *testing.T) {
	ctx := browser(t)
	fsc := fsemu.ForTest(t, "bc-dev")
	now := time.Now()
	cl := model.Cluster{ID: "kcl-grow", TenantID: "acme", CreatedAt: now.Add(-time.Hour), Active: true,
		Spec: model.ClusterSpec{Name: "bc-grow", Mode: resource.ModeStandard, Region: "us-central1", Project: "bc-dev",
			ProviderName: "bc-grow", Generation: 2},
		Status: model.ClusterStatus{State: resource.StateReady, ObservedGeneration: 1}}
	if _, err := store.TenantDoc(fsc, "acme").Collection("clusters").Doc(cl.ID).Set(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	op := &containerpb.Operation{Name: "operation-grow", OperationType: containerpb.Operation_UPGRADE_MASTER,
		Status: containerpb.Operation_RUNNING, StartTime: now.Add(-30 * time.Second).UTC().Format(time.RFC3339Nano),
		TargetLink: "https://container.googleapis.com/v1/projects/bc-dev/locations/us-central1/clusters/bc-grow"}
	c, err := console.New(console.Options{Firestore: fsc, Poll: 100 * time.Millisecond,
		Operations: func() []*containerpb.Operation { return []*containerpb.Operation{op} }})
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	h := c.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { c.Close(); srv.Close() })
	within(t, ctx, waitTime, "the cluster's page", chromedp.Navigate(srv.URL+"/console/clusters/acme/"+cl.ID),
		chromedp.WaitVisible(chromedp.CSS("#timeline rect.op")))
	poll(t, ctx, waitTime, "the page live", `document.getElementById("live-status").textContent === "live"`)
	width := `+document.querySelector("#timeline rect.op").getAttribute("width")`
	w0 := value(t, ctx, "the operation's bar", chromedp.Evaluate[float64](width))
	before := requests.Load()
	poll(t, ctx, waitTime, "the running operation's bar widening", fmt.Sprintf(`%s >= %g`, width, w0+4))
	if n := requests.Load() - before; n != 0 {
		t.Errorf("%d requests to the console while the bar grew, want none", n)
	}
}
