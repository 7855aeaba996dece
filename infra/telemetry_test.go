package infra

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/telemetry"
)

var (
	// otlpRE matches the type of a metric the functions export over OTLP
	// (telemetry.CloudMetricType): its name and kind.
	otlpRE     = regexp.MustCompile(`metric\.type="prometheus\.googleapis\.com/([^"/]+)/([^"/]+)"`)
	labelRE    = regexp.MustCompile(`metric\.labels?\.([A-Za-z0-9_]+)`)
	resourceRE = regexp.MustCompile(`resource\.type="([^"]+)"`)
)

// TestTelemetryMetricsAreRecorded checks that every OpenTelemetry metric
// an alert or a dashboard reads (prometheus.googleapis.com/<name>/<kind>,
// as the Telemetry API writes it) is one the code records, of the kind
// it records, on the resource type the API writes, that every metric
// label they filter or group by is one of its attributes, and that the
// dashboard shows every metric.
func TestTelemetryMetricsAreRecorded(t *testing.T) {
	m := tf(t)
	shown := map[string]bool{}
	check := func(where, filter string, groupBy []string) {
		t.Helper()
		names := otlpRE.FindAllStringSubmatch(filter, -1)
		for _, n := range names {
			name, kind := n[1], n[2]
			keys, ok := telemetry.Attributes[name]
			if !ok {
				t.Errorf("%s reads metric %q, which the code does not record (shared/telemetry)", where, name)
				continue
			}
			if want := telemetry.CloudMetricType(name); "prometheus.googleapis.com/"+name+"/"+kind != want {
				t.Errorf("%s reads %s as a %s; the code records a %s (%s)", where, name, kind, telemetry.Kinds[name], want)
			}
			for _, r := range resourceRE.FindAllStringSubmatch(filter, -1) {
				if r[1] != "prometheus_target" {
					t.Errorf("%s reads %s on a %s; the Telemetry API writes it on a prometheus_target", where, name, r[1])
				}
			}
			shown[name] = true
			labels := labelRE.FindAllStringSubmatch(filter+" "+strings.Join(groupBy, " "), -1)
			for _, l := range labels {
				if !slices.Contains(keys, l[1]) {
					t.Errorf("%s reads label %q of %s, whose attributes are %v", where, l[1], name, keys)
				}
			}
		}
	}
	for _, p := range m.ofType("google_monitoring_alert_policy") {
		conds, err := m.nested(p, "conditions", "condition_threshold")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range conds {
			check(p.addr(), str(c["filter"]), nil)
		}
	}
	var dashboards int
	for _, d := range m.ofType("google_monitoring_dashboard") {
		var dash struct {
			MosaicLayout struct {
				Tiles []struct {
					Widget struct {
						Title   string `json:"title"`
						XYChart struct {
							DataSets []struct {
								TimeSeriesQuery struct {
									TimeSeriesFilter struct {
										Filter      string `json:"filter"`
										Aggregation struct {
											GroupByFields []string `json:"groupByFields"`
										} `json:"aggregation"`
									} `json:"timeSeriesFilter"`
								} `json:"timeSeriesQuery"`
							} `json:"dataSets"`
						} `json:"xyChart"`
					} `json:"widget"`
				} `json:"tiles"`
			} `json:"mosaicLayout"`
		}
		src := d.str("dashboard_json")
		if src == "" {
			t.Fatalf("%s: dashboard_json cannot be evaluated", d.addr())
		}
		if err := json.Unmarshal([]byte(src), &dash); err != nil {
			t.Fatalf("%s: dashboard_json: %v", d.addr(), err)
		}
		for _, tile := range dash.MosaicLayout.Tiles {
			for _, ds := range tile.Widget.XYChart.DataSets {
				f := ds.TimeSeriesQuery.TimeSeriesFilter
				if otlpRE.MatchString(f.Filter) {
					dashboards++
				}
				check(d.addr()+" "+tile.Widget.Title, f.Filter, f.Aggregation.GroupByFields)
			}
		}
	}
	if dashboards == 0 {
		t.Fatal("no dashboard charts a prometheus.googleapis.com metric")
	}
	for name := range telemetry.Attributes {
		if !shown[name] {
			t.Errorf("metric %s is recorded but neither charted nor alerted on", name)
		}
	}
}
