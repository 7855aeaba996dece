package devstack_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/wait"
)

// BenchmarkSubstrateJoined times a create-mode substrate from its pool's
// first event (/dev/pools/put) to every node joined, and reports it
// against what it cannot beat: the provider's operation (the cluster and
// its pool are made in one) and the converging interval. The goal is the
// provider's time plus at most two converging intervals
// (intervals-over-provider/op ≤ 2). Each iteration's substrate is
// archived, untimed, so that the machine holds one cluster's API server
// at a time.
func BenchmarkSubstrateJoined(b *testing.B) {
	cfg := fastConfig()
	cfg.Kubernetes = true
	cfg.KubernetesAtCreate = true
	// The simulated control plane starts with the cluster, and the
	// operation lasts longer than it takes to start here (a Kubernetes API
	// server: 2 to 3 s on 2 busy cores), as GKE's cluster creation,
	// minutes long, covers its control plane's start: the cluster is
	// RUNNING when its API answers.
	cfg.GKEOperationTime = 4 * time.Second
	cfg.ConvergingInterval = 500 * time.Millisecond
	cfg.SteadyInterval = 10 * time.Second
	e := startEnv(b, cfg)
	wait.Within(b, 15*time.Minute, "/healthz/kubernetes ready", func() (bool, string) {
		status, h := healthzKubernetes(b, e.URL)
		return status == http.StatusOK && h.Ready, fmt.Sprintf("%d %s", status, h.Progress)
	})
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pool := fmt.Sprintf("pool-b%d", poolSeq.Add(1))
		start := time.Now()
		putPool(b, e, map[string]any{"id": pool, "tenantId": "acme", "version": 1,
			"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp",
				"cluster": map[string]any{"create": map[string]any{"region": "us-central1", "zones": []string{"us-central1-a"}}}}},
			"flavors": []any{flavor("cpu", 2)}})
		e.api.waitSubstrate(b, pool, "ready with 2 nodes joined", readyWith(2))
		took = append(took, time.Since(start))
		b.StopTimer()
		archivePool(b, e, pool, 2)
		wait.For(b, "substrate deleted", func() (bool, string) {
			list, err := e.api.substrates(pool)
			return err == nil && len(list) == 0, jsonOf(list)
		})
		b.StartTimer()
	}
	slices.Sort(took)
	median := took[len(took)/2]
	b.ReportMetric(float64(median.Milliseconds()), "median-ms-to-joined")
	b.ReportMetric(float64(median-cfg.GKEOperationTime)/float64(cfg.ConvergingInterval), "intervals-over-provider/op")
}
