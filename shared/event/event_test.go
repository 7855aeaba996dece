package event

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/resource"
)

func TestForNodePool(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 4000, time.FixedZone("CET", 3600))
	p := resource.NodePool{ID: "knp_1", TenantID: "acme", ClusterID: "kcl_1", Name: "gpu", State: resource.StateReady}
	e := ForNodePool(NodePoolReady, p, at)
	if e.Type != NodePoolReady || e.TenantID != "acme" || e.ClusterID != "kcl_1" || e.NodePoolID != "knp_1" || e.SubstrateID != "" {
		t.Errorf("ForNodePool = %+v, want the pool's tenant, cluster and ID", e)
	}
	if !e.Time.Equal(at) || e.Time.Location() != time.UTC {
		t.Errorf("time = %v, want %v in UTC", e.Time, at)
	}
	var got resource.NodePool
	if err := json.Unmarshal(e.Data, &got); err != nil || got.ID != "knp_1" || got.Zones == nil {
		t.Errorf("data = %s (%v), want the pool as the API returns it (normalized)", e.Data, err)
	}
	if again := ForNodePool(NodePoolReady, p, at); again.ID == e.ID {
		t.Errorf("two events share ce-id %q", e.ID)
	}
}

// A substrate's events have its cluster as their subject, or the
// substrate itself while it has none.
func TestForSubstrateSubject(t *testing.T) {
	s := resource.Substrate{ID: "ksb_1", TenantID: "acme", PoolID: "pool-1"}
	if e := ForSubstrate(SubstrateError, s, time.Now()); e.ClusterID != "ksb_1" || e.SubstrateID != "ksb_1" || e.PoolID != "pool-1" {
		t.Errorf("event of a substrate with no cluster = %+v, want the substrate as its subject", e)
	}
	s.ClusterID = "kcl_1"
	n := resource.SubstrateNode{Name: "n1", JoinedAt: time.Now()}
	e := ForSubstrateNode(SubstrateNodeJoined, s, n, time.Now())
	if e.ClusterID != "kcl_1" || e.SubstrateID != "ksb_1" {
		t.Errorf("node event = %+v, want the substrate's cluster as its subject", e)
	}
	var got resource.SubstrateNode
	if err := json.Unmarshal(e.Data, &got); err != nil || got.Name != "n1" {
		t.Errorf("data = %s (%v), want the node", e.Data, err)
	}
}
