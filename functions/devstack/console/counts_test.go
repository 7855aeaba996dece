package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// TestFleetCountsAndDeleted reads a fleet with a deleted cluster: it is
// hidden unless asked for, from the first (cold) view as from the
// listeners', the clusters are counted by state with links to each, and
// every row says its age.
func TestFleetCountsAndDeleted(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	now := time.Now()
	writeFleet(t, fsc, 14, 0, now.Add(-3*time.Hour))
	gone := testCluster("acme", "kcl-gone", 99, now.Add(-2*time.Hour))
	gone.Active, gone.Status.State = false, resource.StateDeleted
	if _, err := store.TenantDoc(fsc, "acme").Collection("clusters").Doc(gone.ID).Set(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	row := `<tr id="cl-acme-kcl-gone"`
	cold := newConsole(t, fsc, 0)
	if _, body := get(t, cold.Handler(), "/console"); strings.Contains(body, row) {
		t.Errorf("the first view shows the deleted cluster")
	}
	c := newConsole(t, fsc, 0)
	if err := c.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	code, body := get(t, h, "/console")
	if code != http.StatusOK {
		t.Fatalf("GET /console = %d", code)
	}
	if strings.Contains(body, row) {
		t.Errorf("the fleet shows the deleted cluster by default")
	}
	counts := regexp.MustCompile(`(?s)<p id="cluster-counts" class="counts">(.*?)</p>`).FindStringSubmatch(body)
	if counts == nil {
		t.Fatalf("no counts on the fleet:\n%.3000s", body)
	}
	for _, want := range []string{`href="/console?state=ready#h-clusters"`, `state-ready">ready</span> 12`, `state-provisioning">provisioning</span> 2`,
		"1 deleted hidden", `href="/console?deleted=1#h-clusters"`} {
		if !strings.Contains(counts[1], want) {
			t.Errorf("the counts lack %q: %s", want, counts[1])
		}
	}
	if !strings.Contains(body, `<th scope="col">Age</th>`) || !strings.Contains(body, `>3h</span></td>`) {
		t.Errorf("no age column, or no row 3h old")
	}
	for _, p := range []string{"/console?deleted=1", "/console?state=deleted"} {
		if _, body := get(t, h, p); !strings.Contains(body, row) {
			t.Errorf("GET %s lacks the deleted cluster", p)
		}
	}
	if strings.Contains(body, `id="get-started"`) {
		t.Errorf("a fleet with clusters shows how to create the first")
	}
}

// TestFleetEmptySaysHowToBegin reads an empty fleet: the page shows how
// to create a cluster, from the first view and the listeners'.
func TestFleetEmptySaysHowToBegin(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	cold := newConsole(t, fsc, 0)
	warm := newConsole(t, fsc, 0)
	if err := warm.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]http.Handler{"cold": cold.Handler(), "warm": warm.Handler()} {
		_, body := get(t, c, "/console")
		start := regexp.MustCompile(`(?s)<section id="get-started".*?</section>`).FindString(body)
		if !strings.Contains(start, "kubernetesClusters/create") || !strings.Contains(start, "/dev/token") {
			t.Errorf("%s: the empty fleet does not say how to create a cluster:\n%.2000s", name, body)
		}
	}
}
