package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/docpath"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// fleet writes n clusters of two tenants, each with two node pools, and
// a substrate, and returns a console on them.
func fleet(t testing.TB, n int) (*console.Console, *firestore.Client) {
	t.Helper()
	fsc := fsemu.ForTest(t, "bc-dev")
	ctx := context.Background()
	bw := fsc.BulkWriter(ctx)
	now := time.Now()
	for i := range n {
		tenant := []string{"acme", "globex"}[i%2]
		id := fmt.Sprintf("kcl-%04d", i)
		cur := 1
		ref := docpath.Tenant(fsc, tenant).Collection("clusters").Doc(id)
		cl := lifecycle.Cluster{ID: id, TenantID: tenant, CreatedAt: now.Add(time.Duration(i) * time.Second), Active: true,
			Spec:   lifecycle.ClusterSpec{Name: fmt.Sprintf("c-%d", i), Mode: resource.ModeStandard, Region: "us-central1", ProviderName: "bc-" + id},
			Status: lifecycle.ClusterStatus{State: resource.StateReady, KubernetesVersion: "1.33.1-gke.100"}}
		if i%7 == 0 {
			cl.Status.State, cl.Status.Message = resource.StateProvisioning, "creating <the> cluster"
		}
		if _, err := bw.Set(ref, cl); err != nil {
			t.Fatal(err)
		}
		for j, name := range []string{"a", "b"} {
			p := lifecycle.NodePool{ID: fmt.Sprintf("knp-%04d-%d", i, j), TenantID: tenant, ClusterID: id, CreatedAt: now, Active: true,
				Spec:   lifecycle.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: 1, Zones: []string{"us-central1-a"}},
				Status: lifecycle.NodePoolStatus{State: resource.StateReady, CurrentNodeCount: &cur}}
			if _, err := bw.Set(ref.Collection("nodePools").Doc(p.ID), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	sb := lifecycle.Substrate{ID: "ksb-1", TenantID: "acme", PoolID: "pool-dev", CreatedAt: now, Active: true, Joined: 3,
		Status: lifecycle.SubstrateStatus{State: resource.StateReady, ClusterID: "kcl-0000"}}
	if _, err := bw.Set(docpath.Tenant(fsc, "acme").Collection("substrates").Doc("ksb-1"), sb); err != nil {
		t.Fatal(err)
	}
	bw.End()
	c, err := console.New(console.Options{Firestore: fsc, Topics: []string{"kubernetes.cluster.ready"}, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, fsc
}

func get(t testing.TB, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestFleetPagesAndFilters(t *testing.T) {
	c, _ := fleet(t, 250)
	h := c.Handler()
	code, body := get(t, h, "/console")
	if code != 200 {
		t.Fatalf("GET /console = %d %s", code, body)
	}
	if n := strings.Count(body, `<tr id="cl-`); n != console.DefaultPageSize {
		t.Errorf("rows on page 1 = %d, want %d", n, console.DefaultPageSize)
	}
	for _, want := range []string{"1–100 of 250", `rel="next"`, "creating &lt;the&gt; cluster", "ksb-1", "2 / 2"} {
		if !strings.Contains(body, want) {
			t.Errorf("fleet page lacks %q", want)
		}
	}
	_, body = get(t, h, "/console?page=3")
	if n := strings.Count(body, `<tr id="cl-`); n != 50 {
		t.Errorf("rows on page 3 = %d, want 50", n)
	}
	_, body = get(t, h, "/console?tenant=globex&state=provisioning")
	rows := regexp.MustCompile(`<tr id="cl-([a-z]+)-`).FindAllStringSubmatch(body, -1)
	if len(rows) == 0 {
		t.Fatal("no row for tenant globex, state provisioning")
	}
	for _, r := range rows {
		if r[1] != "globex" {
			t.Errorf("row of tenant %s in the globex filter", r[1])
		}
	}
	if strings.Contains(body, `data-state="ready"`) {
		t.Error("a ready cluster in the provisioning filter")
	}
	code, body = get(t, h, "/console/clusters/acme/kcl-0000")
	if code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, "Substrate ksb-1") {
		t.Errorf("cluster page = %d, want its timeline and substrate:\n%s", code, body)
	}
}

// TestFleetStream checks that a row that changes is sent on the stream.
func TestFleetStream(t *testing.T) {
	c, fsc := fleet(t, 3)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/console/fleet/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	time.Sleep(200 * time.Millisecond)
	ref := docpath.Tenant(fsc, "acme").Collection("clusters").Doc("kcl-0000")
	if _, err := ref.Update(context.Background(), []firestore.Update{{Path: "status.state", Value: "error"}, {Path: "status.message", Value: "broken now"}}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if strings.Contains(b.String(), "broken now") || err != nil {
				got <- b.String()
				return
			}
		}
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, "event: row") || !strings.Contains(s, "broken now") {
			t.Errorf("stream = %q, want the changed row", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no row on the stream within 5s")
	}
}

// externalRef is a reference to anything with a scheme or a host:
// http(s)://, protocol-relative //host, in an attribute or in CSS.
var externalRef = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|(src|href|action)\s*=\s*["']?(https?:|//)|url\(\s*["']?(https?:|//)|@import`)

// TestNothingFromOutside checks that no page, script or style refers to
// anything outside the devstack.
func TestNothingFromOutside(t *testing.T) {
	c, _ := fleet(t, 3)
	c.Add(&pubsub.Message{Data: []byte(`{"state":"ready"}`), Attributes: map[string]string{"ce-type": "kubernetes.cluster.ready", "ce-id": "e1",
		"tenantId": "acme", "clusterId": "kcl-0000", "ce-sequence": "00000000000000000001", "ce-time": time.Now().UTC().Format(time.RFC3339Nano)}})
	h := c.Handler()
	pages := []string{"/console", "/console/clusters/acme/kcl-0000", "/console/events", "/console/emulators",
		"/console/firestore", "/console/firestore?path=tenants/acme/clusters", "/console/act"}
	for _, name := range []string{"console.js", "console.css"} {
		pages = append(pages, "/console/static/"+name)
	}
	for _, p := range pages {
		code, body := get(t, h, p)
		if code != 200 {
			t.Errorf("GET %s = %d", p, code)
			continue
		}
		if m := externalRef.FindString(body); m != "" {
			t.Errorf("GET %s refers outside the devstack: %q", p, m)
		}
		for _, src := range regexp.MustCompile(`(?:src|href|action)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
			if u := src[1]; !strings.HasPrefix(u, "/console") && !strings.HasPrefix(u, "#") && !strings.HasPrefix(u, "?") {
				t.Errorf("GET %s: reference %q is not the console's", p, u)
			}
		}
	}
}

// BenchmarkFleet1000 renders the fleet view of 1,000 clusters (2,000
// node pools), as GET /console answers once the console listens to the
// Firestore emulator: the rows of all of them built, filtered, sorted,
// and the first page rendered.
func BenchmarkFleet1000(b *testing.B) {
	c, _ := fleet(b, 1000)
	h := c.Handler()
	get(b, h, "/console") // the console starts listening
	b.ResetTimer()
	for b.Loop() {
		if code, _ := get(b, h, "/console"); code != 200 {
			b.Fatal(code)
		}
	}
}

// BenchmarkFleet1000FirstView is the first view of a fleet of 1,000
// clusters: a console that starts listening, reads every cluster, node
// pool and substrate from the Firestore emulator, and renders the page.
func BenchmarkFleet1000FirstView(b *testing.B) {
	_, fsc := fleet(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		c, err := console.New(console.Options{Firestore: fsc})
		if err != nil {
			b.Fatal(err)
		}
		if code, _ := get(b, c.Handler(), "/console"); code != 200 {
			b.Fatal(code)
		}
		c.Close()
	}
}
