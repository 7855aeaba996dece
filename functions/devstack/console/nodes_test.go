package console

import (
	"bytes"
	"html/template"
	"regexp"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// TestNodeCountsOneForm renders a cluster in three zones with a pool of
// its zones and one of two zones: the fleet's row, and the cluster's
// page, say the nodes one way, current of wanted in all the zones, with
// the per-zone count explained where a pool's nodes are, and no two
// cells of the row say the same numbers.
func TestNodeCountsOneForm(t *testing.T) {
	nine, four := 9, 4
	cl := model.Cluster{ID: "kcl-1", TenantID: "acme", Spec: model.ClusterSpec{Name: "prod",
		Zones: []string{"us-central1-a", "us-central1-b", "us-central1-c"}}, Status: model.ClusterStatus{State: resource.StateReady}}
	pools := []model.NodePool{
		{ID: "knp-a", Spec: model.NodePoolSpec{Name: "a", NodeCount: 3}, Status: model.NodePoolStatus{State: resource.StateReady, CurrentNodeCount: &nine}},
		{ID: "knp-b", Spec: model.NodePoolSpec{Name: "b", NodeCount: 2, Zones: []string{"us-central1-a", "us-central1-b"}},
			Status: model.NodePoolStatus{State: resource.StateReady, CurrentNodeCount: &four}},
	}
	var cells []PoolCell
	for i := range pools {
		cells = append(cells, poolCell(&pools[i]))
	}
	row := clusterRow(&cl, cells, "")
	if row.Wanted != 13 || row.CurrentNodeCount != 13 || !row.CurrentKnown {
		t.Fatalf("row nodes = %d of %d (known %v), want 13 of 13", row.CurrentNodeCount, row.Wanted, row.CurrentKnown)
	}
	base, err := template.New("base").Funcs(funcs).Funcs(template.FuncMap{"formToken": newFormTokens().mint}).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := base.ExecuteTemplate(&b, "clusterRow", row); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"9 of 9", "4 of 4", `<td class="num">13 of 13</td>`} {
		if !strings.Contains(html, want) {
			t.Errorf("the fleet's row lacks %q:\n%s", want, html)
		}
	}
	if regexp.MustCompile(`\d+ ?/ ?\d+`).MatchString(html) {
		t.Errorf("the fleet's row writes a count with a slash:\n%s", html)
	}
	cells1 := []PoolCell{poolCell(&pools[0])}
	b.Reset()
	if err := base.ExecuteTemplate(&b, "clusterRow", clusterRow(&cl, cells1, "")); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "9 of 9"); n != 1 {
		t.Errorf("a cluster of one pool says its nodes %d times, want once:\n%s", n, b.String())
	}
}
