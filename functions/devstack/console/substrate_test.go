package console_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// replacing writes two substrates of acme mid-replacement: ksb-r
// replaces its flavor cpu's node pool bc-r-cpu (2 nodes, both joined)
// with bc-r-cpu-2 (1 of its 2 nodes joined, still provisioning), in
// cluster kcl-r, and its flavor gpu has one pool (1 node, joined); ksb-next replaces ksb-old, whose cluster kcl-o is being
// deleted.
func replacing(t *testing.T, fsc *firestore.Client) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	acme := store.TenantDoc(fsc, "acme")
	set := func(ref *firestore.DocumentRef, v any) {
		t.Helper()
		if _, err := ref.Set(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	cl := model.Cluster{ID: "kcl-r", TenantID: "acme", CreatedAt: now, Active: true,
		Spec: model.ClusterSpec{Name: "bc-r", Mode: resource.ModeStandard, Region: "us-central1", Project: "bc-dev", ProviderName: "bc-r",
			Zones: []string{"us-central1-a", "us-central1-b"}, ManagedBy: "ksb-r"},
		Status: model.ClusterStatus{State: resource.StateReady}}
	set(acme.Collection("clusters").Doc("kcl-r"), cl)
	two, one := 2, 1
	old := model.NodePool{ID: "knp-old", TenantID: "acme", ClusterID: "kcl-r", CreatedAt: now, Active: true,
		Spec:   model.NodePoolSpec{Name: "bc-r-cpu", MachineType: "e2-standard-4", NodeCount: 1, ManagedBy: "ksb-r", Generation: 1},
		Status: model.NodePoolStatus{State: resource.StateReady, CurrentNodeCount: &two, ObservedGeneration: 1}}
	set(acme.Collection("clusters").Doc("kcl-r").Collection("nodePools").Doc("knp-old"), old)
	nw := model.NodePool{ID: "knp-new", TenantID: "acme", ClusterID: "kcl-r", CreatedAt: now, Active: true,
		Spec: model.NodePoolSpec{Name: "bc-r-cpu-2", MachineType: "n2-standard-4", NodeCount: 1, ManagedBy: "ksb-r", Generation: 1,
			Zones: []string{"us-central1-a", "us-central1-b"}},
		Status: model.NodePoolStatus{State: resource.StateProvisioning, CurrentNodeCount: &one, ObservedGeneration: 1}}
	set(acme.Collection("clusters").Doc("kcl-r").Collection("nodePools").Doc("knp-new"), nw)
	gpu := model.NodePool{ID: "knp-gpu", TenantID: "acme", ClusterID: "kcl-r", CreatedAt: now, Active: true,
		Spec:   model.NodePoolSpec{Name: "bc-r-gpu", MachineType: "g2-standard-4", NodeCount: 1, ManagedBy: "ksb-r", Generation: 1, Zones: []string{"us-central1-a"}},
		Status: model.NodePoolStatus{State: resource.StateReady, CurrentNodeCount: &one, ObservedGeneration: 1}}
	set(acme.Collection("clusters").Doc("kcl-r").Collection("nodePools").Doc("knp-gpu"), gpu)
	sb := model.Substrate{ID: "ksb-r", TenantID: "acme", PoolID: "pool-r", CreatedAt: now, Active: true, Joined: 3,
		Spec: model.SubstrateSpec{Mode: resource.SubstrateCreate},
		Status: model.SubstrateStatus{State: resource.StateUpdating, ClusterID: "kcl-r",
			Message: "replacing node pool bc-r-cpu with bc-r-cpu-2: 1 of 2 nodes joined",
			NodePools: []resource.SubstrateNodePool{
				{Flavor: "cpu", Name: "bc-r-cpu-2", NodePoolID: "knp-new", State: resource.StateProvisioning},
				{Flavor: "cpu", Name: "bc-r-cpu", NodePoolID: "knp-old", State: resource.StateReady},
				{Flavor: "gpu", Name: "bc-r-gpu", NodePoolID: "knp-gpu", State: resource.StateReady}}}}
	set(acme.Collection("substrates").Doc("ksb-r"), sb)
	// A flavor's only pool has its joined nodes, whatever their names.
	for n, flavor := range map[string]string{"gke-bc-r-bc-r-cpu-0a1b2c3d-ab12": "cpu", "gke-bc-r-bc-r-cpu-0a1b2c3d-cd34": "cpu",
		"gke-bc-r-bc-r-cpu-2-9f8e7d6c-ef56": "cpu", "a-gpu-node": "gpu"} {
		set(acme.Collection("substrates").Doc("ksb-r").Collection("nodes").Doc(n), resource.SubstrateNode{Name: n, Flavor: flavor, JoinedAt: now})
	}

	co := model.Cluster{ID: "kcl-o", TenantID: "acme", CreatedAt: now.Add(-time.Hour), Active: true,
		Spec:   model.ClusterSpec{Name: "bc-o", Mode: resource.ModeStandard, Region: "us-central1", ProviderName: "bc-o", Deleting: true, ManagedBy: "ksb-old"},
		Status: model.ClusterStatus{State: resource.StateReady}}
	set(acme.Collection("clusters").Doc("kcl-o"), co)
	set(acme.Collection("substrates").Doc("ksb-old"), model.Substrate{ID: "ksb-old", TenantID: "acme", PoolID: "pool-o", CreatedAt: now.Add(-time.Hour),
		Active: true, Joined: 4, Spec: model.SubstrateSpec{Mode: resource.SubstrateCreate, Deleting: true},
		Status: model.SubstrateStatus{State: resource.StateDeleting, ClusterID: "kcl-o"}})
	set(acme.Collection("substrates").Doc("ksb-next"), model.Substrate{ID: "ksb-next", TenantID: "acme", PoolID: "pool-o", CreatedAt: now,
		Active: true, Spec: model.SubstrateSpec{Mode: resource.SubstrateCreate, After: "ksb-old"},
		Status: model.SubstrateStatus{State: resource.StatePending, Message: "waiting for substrate ksb-old to be deleted"}})
}

// poolRow is the row of the named node pool in a substrate's progress:
// its role, nodes and joined nodes.
var poolRowRE = regexp.MustCompile(`(?s)<tr id="sp-([^"]+)" data-role="([a-z]+)">.*?<td class="num">([^<]*)</td><td class="num joined">([^<]*)</td></tr>`)

func poolRows(body string) map[string][3]string {
	out := map[string][3]string{}
	for _, m := range poolRowRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = [3]string{m[2], m[3], m[4]}
	}
	return out
}

// TestSubstrateReplacementProgress shows a substrate's replacement on its
// page, its cluster's and its fleet row: the new pool coming up and the
// old one serving, the nodes each runs and has joined, what it waits
// for; and a substrate that waits for the one it replaces to be deleted.
// The page follows the replacement live.
func TestSubstrateReplacementProgress(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	replacing(t, fsc)
	c := newConsole(t, fsc, 0)
	h := c.Handler()

	want := map[string][3]string{
		"bc-r-cpu-2": {"new", "1 of 2", "1"},
		"bc-r-cpu":   {"old", "2 of 2", "2"},
		"bc-r-gpu":   {"serving", "1 of 1", "1"},
	}
	for _, p := range []string{"/console/substrates/acme/ksb-r", "/console/clusters/acme/kcl-r"} {
		code, body := get(t, h, p)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", p, code, body)
		}
		if got := poolRows(body); !maps.Equal(got, want) {
			t.Errorf("GET %s: pools (role, nodes, joined) %v, want %v", p, got, want)
		}
		for _, s := range []string{"a replacement is under way", `id="substrate-waits">replacing node pool bc-r-cpu with bc-r-cpu-2: 1 of 2 nodes joined`,
			"new, coming up", "old, serving until the new pool&#39;s nodes join"} {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s lacks %q", p, s)
			}
		}
	}

	_, body := get(t, h, "/console/substrates/acme/ksb-next")
	if !regexp.MustCompile(`(?s)id="substrate-after">substrate <a [^>]*>ksb-old</a>: <span class="state state-deleting">deleting</span>, its cluster <a [^>]*>kcl-o</a> <span class="state state-deleting">deleting</span>, 4 joined nodes. It must be deleted`).MatchString(body) {
		t.Errorf("ksb-next's page does not say it waits for ksb-old and its cluster to be deleted:\n%s", body)
	}
	if _, body := get(t, h, "/console/substrates/acme/ksb-old"); !strings.Contains(body, `id="substrate-replaced-by">substrate <a href="/console/substrates/acme/ksb-next">ksb-next</a>`) {
		t.Errorf("ksb-old's page does not name the substrate that replaces it:\n%s", body)
	}
	if code, _ := get(t, h, "/console/substrates/acme/ksb-none"); code != http.StatusNotFound {
		t.Errorf("GET of a substrate that does not exist = %d, want 404", code)
	}

	// The fleet's rows.
	if err := c.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, h, "/console")
	page := parsePage(t, body)
	row := page.html["sb-acme-ksb-r"]
	for _, s := range []string{`data-replacing="yes"`, `bc-r-cpu-2</span> <em>new, coming up</em> 1 of 2</span> ← `, `bc-r-cpu</span> <em>old, serving until`} {
		if !strings.Contains(row, s) {
			t.Errorf("ksb-r's row lacks %q:\n%s", s, row)
		}
	}
	if row := page.html["sb-acme-ksb-next"]; !strings.Contains(row, "replaces substrate ksb-old (deleting; its cluster kcl-o deleting), which must be deleted first") {
		t.Errorf("ksb-next's row does not say what it replaces:\n%s", row)
	}

	// The replacement goes on: the new pool's second node joins, it is
	// ready, and the old one is being deleted. The open page follows.
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	live := make(chan string, 16)
	openLive(t, srv.URL+"/console/substrates/acme/ksb-r/stream", live)
	<-live // the page as it is
	ctx := context.Background()
	acme := store.TenantDoc(fsc, "acme")
	n := "gke-bc-r-bc-r-cpu-2-9f8e7d6c-gh78"
	if _, err := acme.Collection("substrates").Doc("ksb-r").Collection("nodes").Doc(n).Set(ctx, resource.SubstrateNode{Name: n, Flavor: "cpu"}); err != nil {
		t.Fatal(err)
	}
	pools := acme.Collection("clusters").Doc("kcl-r").Collection("nodePools")
	if _, err := pools.Doc("knp-new").Update(ctx, []firestore.Update{{Path: "status.state", Value: "ready"}, {Path: "status.currentNodeCount", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Doc("knp-old").Update(ctx, []firestore.Update{{Path: "spec.deleting", Value: true}}); err != nil {
		t.Fatal(err)
	}
	want = map[string][3]string{"bc-r-cpu-2": {"new", "2 of 2", "2"}, "bc-r-cpu": {"deleting", "2 of 2", "2"}, "bc-r-gpu": want["bc-r-gpu"]}
	var last map[string][3]string
	wait.Within(t, 30*time.Second, "the page live with the replacement's next step", func() (bool, string) {
		for {
			select {
			case h := <-live:
				last = poolRows(h)
			default:
				return maps.Equal(last, want), fmt.Sprint(last)
			}
		}
	})
}

// openLive sends the HTML of each "live" message of the stream at url to
// ch, until the test ends.
func openLive(t *testing.T, url string, ch chan<- string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	go func() {
		defer close(done)
		for m := range sseMessages(resp.Body, "live") {
			select {
			case ch <- m.HTML:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// TestKubernetesServersShown shows what the GKE simulator says of its
// clusters' Kubernetes API servers on the emulators' page and each
// cluster's.
func TestKubernetesServersShown(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	writeFleet(t, fsc, 2, 0, time.Now())
	since := time.Now().Add(-time.Minute)
	k := &console.Kubernetes{Binary: "API server binary ready: true", MaxRunning: 8, Slots: 1, Peak: 2, IdleTimeout: time.Minute,
		Servers: []console.KubeServer{
			{Cluster: "projects/bc-dev/locations/us-central1/clusters/bc-kcl-0000", State: "running", Since: since, StartTook: 3 * time.Second, Requests: 2, Queue: -1},
			{Cluster: "projects/bc-dev/locations/us-central1/clusters/bc-kcl-0001", State: "idle", Since: since, Queue: -1},
		}}
	c := newConsole(t, fsc, 0, func(o *console.Options) { o.Kubernetes = func() *console.Kubernetes { return k } })
	h := c.Handler()
	_, body := get(t, h, "/console/emulators")
	for _, s := range []string{"<strong>1 of at most 8</strong> running or starting", "at most 2 at once", "A server unused for 1m0s stops",
		" · 1 running · 1 idle", `<tr data-state="running"><th scope="row"><small>projects/bc-dev/locations/us-central1/clusters/bc-kcl-0000</small>`} {
		if !strings.Contains(body, s) {
			t.Errorf("the emulators' page lacks %q", s)
		}
	}
	_, body = get(t, h, "/console/clusters/acme/kcl-0000")
	if !regexp.MustCompile(`<p id="cluster-kube"><span class="state kube-running">running</span> since [0-9:.]+ UTC \(1m[0-9]+s\), 2 requests under way, its last start took 3s`).MatchString(body) {
		t.Errorf("the cluster's page does not show its running API server:\n%s", body)
	}
	if _, body = get(t, h, "/console/clusters/globex/kcl-0001"); !strings.Contains(body, `<span class="state kube-idle">idle</span> since`) {
		t.Errorf("the cluster's page does not show its idle API server")
	}

	none := newConsole(t, fsc, 0, func(o *console.Options) { o.Kubernetes = func() *console.Kubernetes { return nil } })
	if _, body = get(t, none.Handler(), "/console/emulators"); !strings.Contains(body, "runs without Kubernetes API servers") {
		t.Errorf("the emulators' page of a devstack without Kubernetes does not say so")
	}
}
