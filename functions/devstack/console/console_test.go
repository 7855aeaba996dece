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
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// fleet writes n clusters of two tenants, each with two node pools, and
// a substrate, and returns a console on them.
func fleet(t testing.TB, n int) (*console.Console, *firestore.Client) {
	t.Helper()
	fsc := fsemu.ForTest(t, "bc-dev")
	writeFleet(t, fsc, n, 1, time.Now())
	return newConsole(t, fsc, 0), fsc
}

// newConsole is a console on fsc with pages of size rows (0: the
// default).
func newConsole(t testing.TB, fsc *firestore.Client, size int, opts ...func(*console.Options)) *console.Console {
	t.Helper()
	o := console.Options{Firestore: fsc, Topics: []string{"kubernetes.cluster.ready"}, Poll: 50 * time.Millisecond, PageSize: size}
	for _, f := range opts {
		f(&o)
	}
	c, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// writeFleet writes n clusters of two tenants, each with two node
// pools, the i-th created i seconds after now, and subs substrates of
// acme, the first using kcl-0000, which it made.
func writeFleet(t testing.TB, fsc *firestore.Client, n, subs int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	bw := fsc.BulkWriter(ctx)
	for i := range n {
		tenant := []string{"acme", "globex"}[i%2]
		id := fmt.Sprintf("kcl-%04d", i)
		cl := testCluster(tenant, id, i, now.Add(time.Duration(i)*time.Second))
		if i == 0 && subs > 0 {
			cl.Spec.ManagedBy = "ksb-0000"
		}
		ref := store.TenantDoc(fsc, tenant).Collection("clusters").Doc(id)
		if _, err := bw.Set(ref, cl); err != nil {
			t.Fatal(err)
		}
		for j, name := range []string{"a", "b"} {
			cur := 1
			p := model.NodePool{ID: fmt.Sprintf("knp-%04d-%d", i, j), TenantID: tenant, ClusterID: id, CreatedAt: now, Active: true,
				Spec:   model.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: 1, Zones: []string{"us-central1-a"}},
				Status: model.NodePoolStatus{State: resource.StateReady, CurrentNodeCount: &cur}}
			if _, err := bw.Set(ref.Collection("nodePools").Doc(p.ID), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range subs {
		id := fmt.Sprintf("ksb-%04d", i)
		sb := model.Substrate{ID: id, TenantID: "acme", PoolID: fmt.Sprintf("pool-%04d", i), CreatedAt: now.Add(time.Duration(i) * time.Second),
			Active: true, Joined: 3, Status: model.SubstrateStatus{State: resource.StateReady}}
		if i == 0 {
			sb.Status.ClusterID = "kcl-0000"
		}
		if _, err := bw.Set(store.TenantDoc(fsc, "acme").Collection("substrates").Doc(id), sb); err != nil {
			t.Fatal(err)
		}
	}
	bw.End()
}

// testCluster is cluster i of the fixture: ready, but every seventh
// provisioning.
func testCluster(tenant, id string, i int, created time.Time) model.Cluster {
	cl := model.Cluster{ID: id, TenantID: tenant, CreatedAt: created, Active: true,
		Spec:   model.ClusterSpec{Name: fmt.Sprintf("c-%d", i), Mode: resource.ModeStandard, Region: "us-central1", Project: "bc-dev", ProviderName: "bc-" + id},
		Status: model.ClusterStatus{State: resource.StateReady, KubernetesVersion: "1.33.1-gke.100"}}
	if i%7 == 0 {
		cl.Status.State, cl.Status.Message = resource.StateProvisioning, "creating <the> cluster"
	}
	return cl
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
	for _, want := range []string{"1–100 of 250 clusters", `rel="next"`, "creating &lt;the&gt; cluster", "ksb-0000", "2 of 2"} {
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
	if code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, `<h2 id="h-substrate">Substrate <a href="/console/substrates/acme/ksb-0000">`) {
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
	// The stream's first messages bring the page up to date whole, the
	// counts last: once they came, the stream holds the fleet, and the
	// change below can only reach it as a change.
	var (
		sent   strings.Builder
		chunks = make(chan string)
		done   = make(chan struct{})
	)
	defer close(done)
	go func() {
		defer close(chunks)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				select {
				case chunks <- string(buf[:n]):
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	readUntil := func(what, want string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for !strings.Contains(sent.String(), want) {
			select {
			case chunk, ok := <-chunks:
				if !ok {
					t.Fatalf("the stream ended before %s:\n%s", what, sent.String())
				}
				sent.WriteString(chunk)
			case <-deadline:
				t.Fatalf("no %s on the stream within 30s:\n%s", what, sent.String())
			}
		}
	}
	readUntil("first view of the fleet", `"key":"cluster-counts"`)
	if strings.Contains(sent.String(), "broken now") {
		t.Fatal("the first view has a change not yet made")
	}
	first := sent.Len()
	ref := store.TenantDoc(fsc, "acme").Collection("clusters").Doc("kcl-0000")
	if _, err := ref.Update(context.Background(), []firestore.Update{{Path: "status.state", Value: "error"}, {Path: "status.message", Value: "broken now"}}); err != nil {
		t.Fatal(err)
	}
	readUntil("changed row", "broken now")
	if after := sent.String()[first:]; !strings.Contains(after, "event: row") || !strings.Contains(after, `"key":"cl-acme-kcl-0000"`) {
		t.Errorf("stream after the change = %q, want the changed row", after)
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
	pages := []string{"/console", "/console?page=2&spage=2", "/console/clusters/acme/kcl-0000", "/console/substrates/acme/ksb-0000", "/console/events", "/console/emulators",
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
	if err := c.Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if code, _ := get(b, h, "/console"); code != 200 {
			b.Fatal(code)
		}
	}
}

// BenchmarkFleet1000FirstView is the first view of a fleet of 1,000
// clusters: a console that does not listen yet answers with queries of
// the page's rows alone (a page of clusters and of substrates, their
// counts and node pools, the tenants), and starts listening after.
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

// BenchmarkFleet1000FirstViewListened is the first view as the listeners
// alone would give it: their first snapshots of every cluster, node pool
// and substrate (3,001 documents), then the page. It is what
// BenchmarkFleet1000FirstView does not wait for.
func BenchmarkFleet1000FirstViewListened(b *testing.B) {
	_, fsc := fleet(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		c, err := console.New(console.Options{Firestore: fsc})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Warm(context.Background()); err != nil {
			b.Fatal(err)
		}
		if code, _ := get(b, c.Handler(), "/console"); code != 200 {
			b.Fatal(code)
		}
		c.Close()
	}
}
