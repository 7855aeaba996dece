package api_test

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/better-compute/kubernetes/shared/resource"
)

// parallel runs n calls at once, released together, and returns their
// answers in call order.
func parallel(t *testing.T, n int, body func(i int) obj) []response {
	t.Helper()
	tok := token(t, admin)
	out := make([]response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = send(http.MethodPost, "kubernetesNodePools/create", "Bearer "+tok, body(i), nil)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return out
}

// tally counts answers by status and error code.
func tally(rs []response) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[fmt.Sprintf("%d %s", r.Status, r.Code)]++
	}
	return m
}

// TestConcurrentCreates checks that the transactions hold under
// contention: one name, one quota and one idempotency key each decide
// exactly once.
func TestConcurrentCreates(t *testing.T) {
	tn := newTenant(t)

	t.Run("one name", func(t *testing.T) {
		c := newCluster(t, tn)
		rs := parallel(t, 20, func(int) obj { return createBody(tn, c.ID, "same") })
		want := map[string]int{"200 ": 1, "409 CONFLICT": 19}
		if got := tally(rs); !reflect.DeepEqual(got, want) {
			t.Errorf("answers = %v, want %v", got, want)
		}
		if n := len(listPools(t, tn, c.ID)); n != 2 {
			t.Errorf("pools = %d, want 2", n)
		}
		if got := clusterDoc(t, tn.ID, c.ID).ActivePoolCount; got != 2 {
			t.Errorf("activePoolCount = %d, want 2", got)
		}
	})

	t.Run("quota", func(t *testing.T) {
		c := newCluster(t, tn) // one pool already
		rs := parallel(t, 20, func(i int) obj { return createBody(tn, c.ID, fmt.Sprintf("np%d", i)) })
		want := map[string]int{"200 ": resource.MaxNodePools - 1, "429 QUOTA_EXCEEDED": 20 - (resource.MaxNodePools - 1)}
		if got := tally(rs); !reflect.DeepEqual(got, want) {
			t.Errorf("answers = %v, want %v", got, want)
		}
		if got := clusterDoc(t, tn.ID, c.ID).ActivePoolCount; got != resource.MaxNodePools {
			t.Errorf("activePoolCount = %d, want %d", got, resource.MaxNodePools)
		}
		if n := poolDocs(t, tn.ID, c.ID); n != resource.MaxNodePools {
			t.Errorf("node pool documents = %d, want %d", n, resource.MaxNodePools)
		}
	})

	t.Run("one idempotency key", func(t *testing.T) {
		c := newCluster(t, tn)
		body := with(createBody(tn, c.ID, "idem"), "idempotencyKey", "same-key")
		rs := parallel(t, 10, func(int) obj { return body })
		var first resource.NodePool
		rs[0].decode(t, &first)
		for i, r := range rs[1:] {
			var p resource.NodePool
			r.decode(t, &p)
			if !reflect.DeepEqual(p, first) {
				t.Errorf("answer %d = %+v, want %+v", i+1, p, first)
			}
		}
		if n := poolDocs(t, tn.ID, c.ID); n != 2 {
			t.Errorf("node pool documents = %d, want 2", n)
		}
		if got := clusterDoc(t, tn.ID, c.ID).ActivePoolCount; got != 2 {
			t.Errorf("activePoolCount = %d, want 2", got)
		}
	})
}
