package store_test

import (
	"context"
	"testing"

	"github.com/better-compute/kubernetes/shared/lifecycle"
)

// A pool's currentNodeCount is saved with its status and served by the
// list, and a run that could not read it leaves it absent.
func TestSaveClusterRunNodeCount(t *testing.T) {
	e := newRunEnv(t)
	for _, want := range []*int{new(3), new(0), nil} {
		read := e.run(t)
		after, events := decide(read, e.clk.Now())
		lifecycle.NodePoolNodes(&after.Pools[0], want)
		e.save(t, read, after, events)
		got := e.poolDoc(t).Status.CurrentNodeCount
		if (got == nil) != (want == nil) || (want != nil && *got != *want) {
			t.Errorf("stored currentNodeCount = %v, want %v", got, want)
		}
		pools, err := e.st.ListNodePools(context.Background(), e.caller, e.cluster.ID)
		if err != nil || len(pools) != 1 {
			t.Fatalf("ListNodePools = %v, %v", pools, err)
		}
		if c := pools[0].CurrentNodeCount; (c == nil) != (want == nil) || (want != nil && *c != *want) {
			t.Errorf("listed currentNodeCount = %v, want %v", c, want)
		}
	}
}
