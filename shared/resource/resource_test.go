package resource

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// The seed's patterns for IDs (API.md §4).
var (
	clusterIDPattern  = regexp.MustCompile(`^kcl_[0-9a-hjkmnp-tv-z]{26,52}$`)
	nodePoolIDPattern = regexp.MustCompile(`^knp_[0-9a-hjkmnp-tv-z]{26,52}$`)
	gkeNamePattern    = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)
)

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		c, p := NewClusterID(), NewNodePoolID()
		if !clusterIDPattern.MatchString(c) || !nodePoolIDPattern.MatchString(p) {
			t.Fatalf("NewClusterID() = %q, NewNodePoolID() = %q; want the seed's patterns", c, p)
		}
		if seen[c] || seen[p] {
			t.Fatalf("duplicate ID %q or %q", c, p)
		}
		seen[c], seen[p] = true, true
		if name := ProviderClusterName(c); !gkeNamePattern.MatchString(name) || strings.Contains(name, "_") {
			t.Fatalf("ProviderClusterName(%q) = %q, not a valid GKE cluster name", c, name)
		}
	}
}

func TestNodePoolJSONShape(t *testing.T) {
	p := NodePool{ID: "knp_x", Name: "a", State: StatePending, Version: 1}
	p.Normalize()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"autoscaling", "accelerators", "diskGiB", "diskType"} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s present in %s, want omitted when not given", absent, b)
		}
	}
	if m["spot"] != false {
		t.Errorf("spot = %v in %s, want always present", m["spot"], b)
	}
	for _, empty := range []string{"zones", "labels", "taints"} {
		if m[empty] == nil {
			t.Errorf("%s = null in %s, want empty", empty, b)
		}
	}
}
