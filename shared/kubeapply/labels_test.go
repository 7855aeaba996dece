package kubeapply

import (
	"crypto/sha256"
	"encoding/base32"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// hash6 is the first 6 characters of the lowercase base32 SHA-256 of s,
// computed here again so that the test does not share the code it checks.
func hash6(s string) string {
	sum := sha256.Sum256([]byte(s))
	return strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:6]
}

// A pool ID that is a label value is its own; any other is made one by
// API.md §9's rule: replaced, trimmed, cut to 56, a hash of the ID.
func TestPoolLabel(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	long100 := "p" + strings.Repeat("x", 98) + "q"
	tests := []struct {
		id, want string
	}{
		{"pool-gpu", "pool-gpu"},
		{"Pool.GPU_1", "Pool.GPU_1"},
		{"a", "a"},
		{"7", "7"},
		{long63, long63},
		{"team:gpu", "team-gpu-" + hash6("team:gpu")},
		{"Team:GPU", "Team-GPU-" + hash6("Team:GPU")},
		{"a:b:c", "a-b-c-" + hash6("a:b:c")},
		{"__x__", "x-" + hash6("__x__")},
		{"-x", "x-" + hash6("-x")},
		{"x.", "x-" + hash6("x.")},
		{"._-x-_.", "x-" + hash6("._-x-_.")},
		{":x:", "x-" + hash6(":x:")},
		{"a__b", "a__b"},
		{".", hash6(".")},
		{"__", hash6("__")},
		{":", hash6(":")},
		{"-.:_", hash6("-.:_")},
		{long63 + "a", strings.Repeat("a", 56) + "-" + hash6(long63+"a")},
		{long100, long100[:56] + "-" + hash6(long100)},
		{"_" + long100 + ":", long100[:56] + "-" + hash6("_"+long100+":")},
		{strings.Repeat("x", 55) + "-:y", strings.Repeat("x", 55) + "--" + hash6(strings.Repeat("x", 55)+"-:y")},
		{strings.Repeat("Z", 128), strings.Repeat("Z", 56) + "-" + hash6(strings.Repeat("Z", 128))},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got := PoolLabel(tt.id)
			if got != tt.want {
				t.Errorf("PoolLabel(%q) = %q, want %q", tt.id, got, tt.want)
			}
			if tt.id != "" {
				if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
					t.Errorf("PoolLabel(%q) = %q, not a label value: %v", tt.id, got, msgs)
				}
			}
			if PoolLabel(tt.id) != got {
				t.Errorf("PoolLabel(%q) is not deterministic", tt.id)
			}
		})
	}
}

// Every ID the pools module's pattern accepts gives a label value, and
// two IDs that differ give two values (the hash sees the whole ID).
func TestPoolLabelEveryID(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	alphabet := "aZ09._:-"
	seen := map[string]string{}
	var ids []string
	for n := 1; n <= 3; n++ {
		var grow func(prefix string)
		grow = func(prefix string) {
			if len(prefix) == n {
				ids = append(ids, prefix)
				return
			}
			for _, c := range alphabet {
				grow(prefix + string(c))
			}
		}
		grow("")
	}
	for _, l := range []int{62, 63, 64, 127, 128} {
		for _, c := range alphabet {
			ids = append(ids, strings.Repeat(string(c), l), "a"+strings.Repeat(string(c), l-2)+"b")
		}
	}
	for _, id := range ids {
		if !pattern.MatchString(id) {
			t.Fatalf("test ID %q is not a pool ID", id)
		}
		v := PoolLabel(id)
		if msgs := validation.IsValidLabelValue(v); v == "" || len(msgs) > 0 {
			t.Errorf("PoolLabel(%q) = %q, not a label value: %v", id, v, msgs)
		}
		if other, ok := seen[v]; ok && other != id {
			t.Errorf("PoolLabel(%q) = PoolLabel(%q) = %q", id, other, v)
		}
		seen[v] = id
	}
}
