package outbox

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
)

func TestNodePoolEventMessage(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 4000, time.UTC)
	p := resource.NodePool{ID: "knp_1", TenantID: "acme", ClusterID: "kcl_1", Name: "gpu", State: resource.StateReady}
	e := event.ForNodePool(event.NodePoolReady, p, at)
	m := Message(e)
	want := map[string]string{
		"ce-specversion": "1.0",
		"ce-id":          e.ID,
		"ce-type":        "kubernetes.nodepool.ready",
		"ce-source":      "//compute.better-compute.dev/tenants/acme",
		"ce-subject":     "kcl_1",
		"ce-time":        "2026-11-30T01:02:03.000004Z",
		"content-type":   "application/json",
		"tenantId":       "acme",
		"clusterId":      "kcl_1",
		"nodePoolId":     "knp_1",
	}
	for k, v := range want {
		if m.Attributes[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, m.Attributes[k], v)
		}
	}
	if len(m.Attributes) != len(want) {
		t.Errorf("attributes = %v, want exactly %v", m.Attributes, want)
	}
	if m.OrderingKey != "kcl_1" {
		t.Errorf("ordering key = %q, want the cluster ID", m.OrderingKey)
	}
	var got resource.NodePool
	if err := json.Unmarshal(m.Data, &got); err != nil || got.ID != "knp_1" {
		t.Errorf("data = %s (%v), want the pool as the API returns it", m.Data, err)
	}
}

func TestClusterEventHasNoNodePool(t *testing.T) {
	e := event.ForCluster(event.ClusterReady, resource.Cluster{ID: "kcl_1", TenantID: "acme"}, time.Now())
	if _, ok := Message(e).Attributes["nodePoolId"]; ok {
		t.Errorf("cluster event carries nodePoolId")
	}
}

func TestSequence(t *testing.T) {
	events := []event.Event{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	if last := Number(events, 41); last != 44 {
		t.Errorf("Number(3 events, 41) = %d, want 44", last)
	}
	for i, want := range []string{"00000000000000000042", "00000000000000000043", "00000000000000000044"} {
		if got := Message(events[i]).Attributes["ce-sequence"]; got != want {
			t.Errorf("event %d ce-sequence = %q, want %q", i, got, want)
		}
	}
	if last := Number(nil, 7); last != 7 {
		t.Errorf("Number(none, 7) = %d, want 7", last)
	}
	// String order is numeric order.
	if a, b := FormatSequence(9), FormatSequence(10); !(a < b) || len(a) != 20 {
		t.Errorf("FormatSequence(9) = %q, FormatSequence(10) = %q", a, b)
	}
	if _, ok := Message(event.Event{}).Attributes["ce-sequence"]; ok {
		t.Errorf("an event never numbered carries ce-sequence")
	}
}
