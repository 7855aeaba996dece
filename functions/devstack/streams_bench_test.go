package devstack_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// BenchmarkStreamsBesideList opens a console stream on each cluster of a
// fleet of another tenant (1,000 clusters with a node pool each, written
// to Firestore as the store does; -streams.fleet changes the size) and
// measures a tenant's list of its clusters beside them: the p99 with the
// streams open and with none (before they open and after they close),
// and their ratio to the larger of the two without (goal: within 2). Idle
// streams should cost nothing: they are pushed by the console's watchers,
// never read again per stream per poll.
// streamsFleet is BenchmarkStreamsBesideList's fleet.
var streamsFleet = flag.Int("streams.fleet", 1000, "BenchmarkStreamsBesideList: the other tenant's clusters, a stream open on each")

func BenchmarkStreamsBesideList(b *testing.B) {
	n := *streamsFleet
	if n <= 0 {
		b.Fatalf("-streams.fleet %d: want a positive number", n)
	}
	const lists = 500
	cfg := fastConfig()
	cfg.ConsoleMaxStreams, cfg.ConsoleMaxStreamsPerClient = n+10, n+10
	e := startEnv(b, cfg)
	cl := e.api.createCluster(b, "lister", poolSpec("a", 1))
	e.api.waitCluster(b, cl.ID, resource.StateReady, nil)

	// The other tenant's fleet.
	ctx := context.Background()
	bw := e.FirestoreClient.BulkWriter(ctx)
	now := time.Now()
	for i := range n {
		id := fmt.Sprintf("kcl_bulk%05d", i)
		ref := store.TenantDoc(e.FirestoreClient, "bulk").Collection("clusters").Doc(store.DocID(id))
		c := model.Cluster{ID: id, TenantID: "bulk", CreatedAt: now, Active: true,
			Spec:   model.ClusterSpec{Name: fmt.Sprintf("bulk-%d", i), Mode: resource.ModeStandard, Region: "us-central1", Project: "bc-dev", ProviderName: "bc-" + id},
			Status: model.ClusterStatus{State: resource.StateReady, KubernetesVersion: "1.33.1-gke.100"}}
		if _, err := bw.Create(ref, c); err != nil {
			b.Fatal(err)
		}
		p := model.NodePool{ID: "knp_" + id[4:], TenantID: "bulk", ClusterID: id, CreatedAt: now, Active: true,
			Spec:   model.NodePoolSpec{Name: "a", MachineType: "e2-standard-4", NodeCount: 1},
			Status: model.NodePoolStatus{State: resource.StateReady}}
		if _, err := bw.Create(ref.Collection("nodePools").Doc(store.DocID(p.ID)), p); err != nil {
			b.Fatal(err)
		}
	}
	bw.End()
	// The console's watchers hold the fleet before the streams open, as
	// they do once anyone looked at the console.
	if err := e.Console().Warm(ctx); err != nil {
		b.Fatal(err)
	}

	p99 := func() time.Duration {
		var ds []time.Duration
		// Over a few of the console's polls (a second), so that what a
		// stream does each poll is measured too.
		for began := time.Now(); len(ds) < lists*b.N || time.Since(began) < 2500*time.Millisecond; {
			start := time.Now()
			if err := e.api.call("kubernetesClusters/list", map[string]any{"tenantId": "acme"}, nil); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)*99/100]
	}
	b.ResetTimer()
	none := p99()

	// The streams, each open once it sent its cluster.
	sctx, stop := context.WithCancel(ctx)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	var wg sync.WaitGroup
	opened := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, fmt.Sprintf("%s/console/clusters/bulk/kcl_bulk%05d/stream", e.URL, i), nil)
			resp, err := hc.Do(req)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				opened <- fmt.Errorf("stream %d: %s", i, resp.Status)
				return
			}
			// The first message is the cluster; then wait for the end.
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			first := true
			for sc.Scan() {
				if first && sc.Text() == "event: live" {
					opened <- nil
					first = false
				}
			}
		}()
	}
	for range n {
		if err := <-opened; err != nil {
			b.Fatal(err)
		}
	}
	withStreams := p99()
	b.StopTimer()
	open := e.Console().OpenStreams()
	stop()
	hc.CloseIdleConnections()
	wg.Wait()
	// None open again, in the same warm state as the streams'.
	b.StartTimer()
	after := p99()
	b.StopTimer()

	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(open), "streams")
	b.ReportMetric(ms(none), "list-p99-ms-none-before")
	b.ReportMetric(ms(after), "list-p99-ms-none-after")
	b.ReportMetric(ms(withStreams), "list-p99-ms-streams")
	b.ReportMetric(float64(withStreams)/float64(max(none, after)), "x-p99-streams/none")
}
