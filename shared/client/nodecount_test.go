package client_test

import (
	"encoding/json"
	"testing"

	"github.com/better-compute/kubernetes/shared/client"
)

// A node pool's currentNodeCount is there once observed, and absent (nil)
// until then, both ways through JSON.
func TestNodePoolCurrentNodeCount(t *testing.T) {
	tests := []struct {
		body string
		want *int
	}{
		{`{"id":"knp_x","nodeCount":1,"currentNodeCount":9}`, new(9)},
		{`{"id":"knp_x","nodeCount":1,"currentNodeCount":0}`, new(0)},
		{`{"id":"knp_x","nodeCount":1}`, nil},
	}
	for _, tt := range tests {
		var p client.NodePool
		if err := json.Unmarshal([]byte(tt.body), &p); err != nil {
			t.Fatal(err)
		}
		if (p.CurrentNodeCount == nil) != (tt.want == nil) || (tt.want != nil && *p.CurrentNodeCount != *tt.want) {
			t.Errorf("%s: CurrentNodeCount = %v, want %v", tt.body, p.CurrentNodeCount, tt.want)
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		if _, has := back["currentNodeCount"]; has != (tt.want != nil) {
			t.Errorf("%s: encoded %s, want currentNodeCount present: %v", tt.body, out, tt.want != nil)
		}
	}
}
