package clusters

import (
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
)

func TestOpPoll(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	call := func(ago time.Duration) (string, *model.Intent) {
		return "operation-1", &model.Intent{Kind: CreateNodePool, At: now.Add(-ago)}
	}
	for _, c := range []struct {
		name string
		d    func() Decision
		want time.Duration
	}{
		{"nothing in flight", func() Decision { return Decision{Pools: []model.NodePool{{}}} }, 0},
		{"a call just made: a second", func() Decision {
			var d Decision
			d.Cluster.Status.Provider.Operation, d.Cluster.Status.Provider.Intent = call(0)
			return d
		}, time.Second},
		{"an operation running for 5 minutes: a tenth of it", func() Decision {
			d := Decision{Pools: []model.NodePool{{}, {}}}
			d.Pools[1].Status.Provider.Operation, d.Pools[1].Status.Provider.Intent = call(5 * time.Minute)
			return d
		}, 30 * time.Second},
		{"an intent with no operation yet: the run's own call failed", func() Decision {
			var d Decision
			_, d.Cluster.Status.Provider.Intent = call(time.Minute)
			return d
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.d()
			if got := opPoll(&d, now); got != c.want {
				t.Errorf("opPoll = %v, want %v", got, c.want)
			}
		})
	}
}
