package devstack_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/resource"
)

// BenchmarkContention runs 20 clients mixing list, create, update and
// delete of node pools on 5 clusters, as a busy tenant's tools do, and
// reports the latency of each kind of call: medians and tails, and the
// ratio of the mutations' p99 to their p50 (scripts/contention.sh).
// contentionConverging, when set, is BenchmarkContention's converging
// interval instead of the suite's (scripts/contention.sh).
var contentionConverging = flag.Duration("contention.converging", 0, "BenchmarkContention: the converging interval (0: the suite's)")

func BenchmarkContention(b *testing.B) {
	const clients, clusters = 20, 5
	cfg := fastConfig()
	if *contentionConverging > 0 {
		cfg.ConvergingInterval = *contentionConverging
	}
	e := startEnv(b, cfg)
	c := e.api
	var ids []string
	for i := range clusters {
		cl := c.createCluster(b, fmt.Sprintf("busy%d", i), poolSpec("base", 1))
		ids = append(ids, cl.ID)
	}
	for _, id := range ids {
		c.waitCluster(b, id, resource.StateReady, nil)
	}
	var mu sync.Mutex
	var mutations, lists []time.Duration
	record := func(into *[]time.Duration, d time.Duration) {
		mu.Lock()
		*into = append(*into, d)
		mu.Unlock()
	}
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []resource.NodePool
			for i := range b.N {
				id := ids[(w+i)%clusters]
				start := time.Now()
				switch op := rng.IntN(4); {
				case op == 0:
					if _, err := c.listPools(id); err != nil {
						b.Error(err)
					}
					record(&lists, time.Since(start))
				case op == 1 || len(mine) == 0:
					var p resource.NodePool
					err := c.call("kubernetesNodePools/create", map[string]any{"tenantId": "acme", "clusterId": id,
						"name": fmt.Sprintf("w%d-%d", w, i), "machineType": "e2-standard-4", "nodeCount": 1}, &p)
					if err == nil {
						mine = append(mine, p)
					}
					// The quota of 10 pools is a legitimate refusal.
					record(&mutations, time.Since(start))
				case op == 2:
					p := mine[rng.IntN(len(mine))]
					_ = c.call("kubernetesNodePools/update", map[string]any{"tenantId": "acme", "clusterId": p.ClusterID, "nodePoolId": p.ID, "nodeCount": 1 + rng.IntN(3)}, nil)
					record(&mutations, time.Since(start))
				default:
					k := rng.IntN(len(mine))
					p := mine[k]
					mine = slices.Delete(mine, k, k+1)
					_ = c.call("kubernetesNodePools/delete", map[string]any{"tenantId": "acme", "clusterId": p.ClusterID, "nodePoolId": p.ID}, nil)
					record(&mutations, time.Since(start))
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(len(mutations)+len(lists))/time.Since(began).Seconds(), "calls/s")
	q := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(float64(len(ds))*p))]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(q(mutations, 0.5)), "mut-p50-ms")
	b.ReportMetric(ms(q(mutations, 0.99)), "mut-p99-ms")
	b.ReportMetric(ms(q(mutations, 1)), "mut-max-ms")
	b.ReportMetric(ms(q(lists, 0.99)), "list-p99-ms")
	if p50 := q(mutations, 0.5); p50 > 0 {
		b.ReportMetric(float64(q(mutations, 0.99))/float64(p50), "mut-p99/p50")
	}
}
