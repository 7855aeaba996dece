package substrates

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct{ pool, flavor, want string }{
		{"pool-gpu", "l4", "bc-pool-gpu-l4"},
		{"pool-with-a-rather-long-identifier-here", "l4", "bc-pool-with-a-rather-long-identi-"},
		{"Pool_GPU", "l4", "bc-pool-gpu-l4-"},
		{"pool.gpu", "a100", "bc-pool-gpu-a100-"},
	} {
		got := NodePoolName(tc.pool, tc.flavor)
		if !validName.MatchString(got) {
			t.Errorf("NodePoolName(%q, %q) = %q: not a valid name", tc.pool, tc.flavor, got)
		}
		if tc.want == strings.TrimSuffix(tc.want, "-") {
			if got != tc.want {
				t.Errorf("NodePoolName(%q, %q) = %q, want %q", tc.pool, tc.flavor, got, tc.want)
			}
			continue
		}
		// Derived: the prefix, then 6 characters of the hash.
		if !strings.HasPrefix(got, tc.want) || len(got) != len(tc.want)+6 {
			t.Errorf("NodePoolName(%q, %q) = %q, want %q + 6 hash characters", tc.pool, tc.flavor, got, tc.want)
		}
		if again := NodePoolName(tc.pool, tc.flavor); again != got {
			t.Errorf("not deterministic: %q then %q", got, again)
		}
	}
	// Two pairs that clean up to the same text still differ by their hash.
	if a, b := NodePoolName("Pool_GPU", "l4"), NodePoolName("pool.gpu", "l4"); a == b {
		t.Errorf("distinct pairs share name %q", a)
	}
	if got := ClusterName("pool-gpu"); got != "bc-pool-gpu" {
		t.Errorf("ClusterName = %q", got)
	}
	if got := ClusterName("POOL"); !validName.MatchString(got) || !strings.HasPrefix(got, "bc-pool-") {
		t.Errorf("ClusterName(POOL) = %q", got)
	}
}

func TestFlavorPoolName(t *testing.T) {
	for _, tc := range []struct {
		pool, flavor string
		n            int
		want         string // ending in '-': that prefix and 6 hash characters
	}{
		{"pool-gpu", "l4", 1, "bc-pool-gpu-l4"},
		{"pool-gpu", "l4", 2, "bc-pool-gpu-l4-2"},
		{"pool-gpu", "l4", 17, "bc-pool-gpu-l4-17"},
		{"pool-with-a-rather-long-identifier", "l4", 3, "bc-pool-with-a-rather-long-identi-"},
		{"Pool_GPU", "l4", 2, "bc-pool-gpu-l4-2-"},
	} {
		got := FlavorPoolName(tc.pool, tc.flavor, tc.n)
		if !validName.MatchString(got) {
			t.Errorf("FlavorPoolName(%q, %q, %d) = %q: not a valid name", tc.pool, tc.flavor, tc.n, got)
		}
		prefix, hashed := strings.CutSuffix(tc.want, "-")
		switch {
		case !hashed && got != tc.want:
			t.Errorf("FlavorPoolName(%q, %q, %d) = %q, want %q", tc.pool, tc.flavor, tc.n, got, tc.want)
		case hashed && (!strings.HasPrefix(got, prefix+"-") || len(got) != len(tc.want)+6):
			t.Errorf("FlavorPoolName(%q, %q, %d) = %q, want %q + 6 hash characters", tc.pool, tc.flavor, tc.n, got, tc.want)
		}
	}
	// The hash input holds n: two replacements of a long name differ.
	a, b := FlavorPoolName("pool-with-a-rather-long-identifier", "l4", 2), FlavorPoolName("pool-with-a-rather-long-identifier", "l4", 3)
	if a == b {
		t.Errorf("replacements 2 and 3 share name %q", a)
	}
}
