package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// shown is what a fleet page shows: each table's rows in order, by key,
// their HTML, and each pager's HTML.
type shown struct {
	rows   map[string][]string // table → keys
	html   map[string]string   // key → the row's HTML
	pagers map[string]string   // element → its HTML
	stream string
}

var (
	tbodyRE  = regexp.MustCompile(`(?s)<table id="(clusters|substrates)">.*?<tbody>(.*?)</tbody>`)
	rowRE    = regexp.MustCompile(`(?s)<tr id="([^"]+)".*?</tr>`)
	pagerRE  = regexp.MustCompile(`(?s)<div id="([a-z]+-pager)" class="pager">(.*?)</div>`)
	streamRE = regexp.MustCompile(`data-stream="([^"]+)"`)
)

// parsePage reads what a fleet page shows.
func parsePage(t testing.TB, body string) *shown {
	t.Helper()
	s := &shown{rows: map[string][]string{"clusters": nil, "substrates": nil}, html: map[string]string{}, pagers: map[string]string{}}
	for _, tb := range tbodyRE.FindAllStringSubmatch(body, -1) {
		for _, r := range rowRE.FindAllStringSubmatch(tb[2], -1) {
			s.rows[tb[1]] = append(s.rows[tb[1]], r[1])
			s.html[r[1]] = r[0]
		}
	}
	for _, p := range pagerRE.FindAllStringSubmatch(body, -1) {
		s.pagers[p[1]] = p[2]
	}
	if m := streamRE.FindStringSubmatch(body); m != nil {
		s.stream = html.UnescapeString(m[1])
	}
	if len(s.pagers) != 2 {
		t.Fatalf("the fleet page has %d pagers, want 2:\n%.3000s", len(s.pagers), body)
	}
	return s
}

// same reports how a page that a stream kept differs from one rendered
// now ("" when it does not).
func (s *shown) same(o *shown) string {
	for _, tb := range []string{"clusters", "substrates"} {
		if !slices.Equal(s.rows[tb], o.rows[tb]) {
			return fmt.Sprintf("%s: %v, the page now %v", tb, s.rows[tb], o.rows[tb])
		}
		for _, k := range o.rows[tb] {
			if s.html[k] != o.html[k] {
				return fmt.Sprintf("row %s: %s, the page now %s", k, s.html[k], o.html[k])
			}
		}
	}
	for id, h := range o.pagers {
		if s.pagers[id] != h {
			return fmt.Sprintf("pager %s: %q, the page now %q", id, s.pagers[id], h)
		}
	}
	return ""
}

// msg is a message of the fleet's stream (console's rowMsg).
type msg struct {
	Op, Key, Table, HTML, After string
	Keys                        []string
}

// apply does what console.js does with a message.
func (s *shown) apply(t testing.TB, m msg) {
	rows := s.rows[m.Table]
	switch m.Op {
	case "remove":
		for tb, keys := range s.rows {
			s.rows[tb] = slices.DeleteFunc(keys, func(k string) bool { return k == m.Key })
		}
		return
	case "keep":
		s.rows[m.Table] = slices.DeleteFunc(rows, func(k string) bool { return !slices.Contains(m.Keys, k) })
		return
	case "pager":
		s.pagers[m.Key] = m.HTML
		return
	case "put":
	default:
		t.Errorf("a message of an unknown op: %+v", m)
		return
	}
	present := slices.Contains(rows, m.Key)
	if m.HTML == "" && !present {
		t.Errorf("a move of row %s, which the page lacks", m.Key)
		return
	}
	if m.HTML != "" {
		s.html[m.Key] = m.HTML
	}
	rows = slices.DeleteFunc(rows, func(k string) bool { return k == m.Key })
	at := 0
	if m.After != "" {
		at = slices.Index(rows, m.After) + 1
		if at == 0 {
			t.Errorf("row %s put after %s, which the page lacks", m.Key, m.After)
			at = len(rows)
		}
	}
	s.rows[m.Table] = slices.Insert(rows, at, m.Key)
}

// follow applies the messages of the page's stream to the page, until
// the test ends.
type follow struct {
	mu   sync.Mutex
	page *shown
	n    int // messages applied
}

func followStream(t *testing.T, base string, page *shown) *follow {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+page.stream, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	f := &follow{page: page}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	go func() {
		defer close(done)
		for m := range sseMessages(resp.Body, "row") {
			f.mu.Lock()
			f.page.apply(t, m)
			f.n++
			f.mu.Unlock()
		}
	}()
	return f
}

// sseMessages are the messages of the named event of an event stream,
// until it ends; a message that does not parse ends them.
func sseMessages(r io.Reader, name string) iter.Seq[msg] {
	return func(yield func(msg) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && event == name {
				var m msg
				if json.Unmarshal([]byte(d), &m) != nil || !yield(m) {
					return
				}
			}
		}
	}
}

// converges waits until the followed page is the page rendered now.
func (f *follow) converges(t *testing.T, h http.Handler, path string) {
	t.Helper()
	wait.Within(t, 30*time.Second, path+" kept by its stream as it renders now", func() (bool, string) {
		_, body := get(t, h, path)
		now := parsePage(t, body)
		f.mu.Lock()
		defer f.mu.Unlock()
		d := f.page.same(now)
		return d == "", d
	})
}

// TestFleetStreamEveryPage changes the fleet under pages other than the
// first, filtered and not: a new cluster that pushes rows down a page, a
// deleted one, a state that leaves a filter, a new substrate. Each
// page's stream keeps it as the page renders now, by putting, moving
// and removing rows and replacing the pagers.
func TestFleetStreamEveryPage(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	now := time.Now()
	writeFleet(t, fsc, 24, 12, now)
	c := newConsole(t, fsc, 5)
	if err := c.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	h := c.Handler()
	paths := []string{"/console?page=2", "/console?page=3&spage=2", "/console?tenant=globex&page=2", "/console?state=ready&page=2", "/console?spage=3"}
	follows := map[string]*follow{}
	for _, p := range paths {
		_, body := get(t, h, p)
		page := parsePage(t, body)
		if strings.Contains(page.stream, "v=0") {
			t.Fatalf("%s: a warm console's page of version 0: %s", p, page.stream)
		}
		follows[p] = followStream(t, srv.URL, page)
	}
	ctx := context.Background()
	acme := store.TenantDoc(fsc, "acme").Collection("clusters")
	globex := store.TenantDoc(fsc, "globex").Collection("clusters")
	steps := []struct {
		what string
		do   func() error
	}{
		{"a new cluster at the top of acme's", func() error {
			_, err := acme.Doc("kcl-0100").Set(ctx, testCluster("acme", "kcl-0100", 100, now.Add(time.Hour)))
			return err
		}},
		{"two new globex clusters", func() error {
			if _, err := globex.Doc("kcl-0101").Set(ctx, testCluster("globex", "kcl-0101", 101, now.Add(time.Hour))); err != nil {
				return err
			}
			_, err := globex.Doc("kcl-0103").Set(ctx, testCluster("globex", "kcl-0103", 103, now.Add(-time.Hour)))
			return err
		}},
		{"a globex cluster deleted", func() error {
			_, err := globex.Doc("kcl-0015").Delete(ctx)
			return err
		}},
		{"a cluster in error", func() error {
			_, err := globex.Doc("kcl-0017").Update(ctx, []firestore.Update{{Path: "status.state", Value: "error"}, {Path: "status.message", Value: "broken now"}})
			return err
		}},
		{"a substrate newer than all", func() error {
			_, err := store.TenantDoc(fsc, "acme").Collection("substrates").Doc("ksb-0100").Set(ctx, map[string]any{
				"id": "ksb-0100", "tenantId": "acme", "poolId": "pool-new", "createdAt": now.Add(time.Hour), "active": true})
			return err
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		for _, p := range paths {
			follows[p].converges(t, h, p)
		}
	}
	// Each stream said something: the test saw its messages.
	for _, p := range paths {
		f := follows[p]
		f.mu.Lock()
		if f.n == 0 {
			t.Errorf("%s: no message on its stream", p)
		}
		f.mu.Unlock()
	}
}

// TestColdViewIsTheWarmView checks that the first view of the fleet,
// read by queries of its page before the console listens, shows what the
// view from the listeners shows, and that its stream brings it up to
// date whole.
func TestColdViewIsTheWarmView(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	writeFleet(t, fsc, 250, 130, time.Now())
	warm := newConsole(t, fsc, 0)
	if err := warm.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/console", "/console?page=3", "/console?tenant=globex&page=2", "/console?spage=2", "/console?page=99&spage=99", "/console?tenant=nobody"} {
		cold := newConsole(t, fsc, 0)
		code, body := get(t, cold.Handler(), p)
		if code != http.StatusOK {
			t.Fatalf("GET %s cold = %d %s", p, code, body)
		}
		cp := parsePage(t, body)
		if !strings.Contains(cp.stream, "v=0") {
			t.Errorf("GET %s: the first view is not the queries' (stream %s)", p, cp.stream)
		}
		_, wbody := get(t, warm.Handler(), p)
		if d := cp.same(parsePage(t, wbody)); d != "" {
			t.Errorf("GET %s: the first view differs from the listeners': %s", p, d)
		}
		tenants := regexp.MustCompile(`(?s)<select id="f-tenant".*?</select>`)
		if a, b := tenants.FindString(body), tenants.FindString(wbody); a != b {
			t.Errorf("GET %s: tenants %s, the listeners' %s", p, a, b)
		}
	}

	// A cold page's stream, once the console listens, puts every row.
	cold := newConsole(t, fsc, 0)
	_, body := get(t, cold.Handler(), "/console?page=2")
	page := parsePage(t, body)
	// Changed before the stream opens, unseen by the page.
	if _, err := store.TenantDoc(fsc, "acme").Collection("clusters").Doc("kcl-0020").Update(context.Background(),
		[]firestore.Update{{Path: "status.message", Value: "changed after the page"}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(cold.Handler())
	t.Cleanup(srv.Close)
	f := followStream(t, srv.URL, page)
	f.converges(t, cold.Handler(), "/console?page=2")
	f.mu.Lock()
	if !strings.Contains(f.page.html["cl-acme-kcl-0020"], "changed after the page") {
		t.Errorf("the cold page's stream did not bring row kcl-0020 up to date: %s", f.page.html["cl-acme-kcl-0020"])
	}
	f.mu.Unlock()
}

// TestSubstratesPaged pages the substrates as the clusters: 100 a page,
// each table's links keeping the other's page.
func TestSubstratesPaged(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	writeFleet(t, fsc, 250, 250, time.Now())
	c := newConsole(t, fsc, 0)
	if err := c.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	_, body := get(t, h, "/console?page=2")
	p := parsePage(t, body)
	if n := len(p.rows["substrates"]); n != console.DefaultPageSize {
		t.Errorf("substrates on page 1 = %d, want %d", n, console.DefaultPageSize)
	}
	for _, want := range []string{"1–100 of 250 substrates", "101–200 of 250 clusters",
		`<nav aria-label="Substrate pages" class="pages"> Page 1 of 3 <a href="/console?page=2&amp;spage=2#h-substrates" rel="next">`,
		`<a href="/console#h-clusters" rel="prev">`} {
		if !strings.Contains(body, want) {
			t.Errorf("page 2 lacks %q", want)
		}
	}
	_, body = get(t, h, "/console?page=2&spage=3")
	p = parsePage(t, body)
	if n := len(p.rows["substrates"]); n != 50 {
		t.Errorf("substrates on page 3 = %d, want 50", n)
	}
	if n := len(p.rows["clusters"]); n != 100 {
		t.Errorf("clusters on page 2 with the substrates' page 3 = %d, want 100", n)
	}
	if !strings.Contains(body, `<a href="/console?page=2&amp;spage=2#h-substrates" rel="prev">Previous page<span class="sr"> of substrates</span></a> Page 3 of 3`) {
		t.Errorf("substrates' page 3 lacks its link to page 2:\n%s", p.pagers["substrates-pager"])
	}
	// Newest first, as the clusters.
	if first := p.rows["substrates"][0]; first != "sb-acme-ksb-0049" {
		t.Errorf("the first substrate of page 3 is %s, want sb-acme-ksb-0049", first)
	}
}
