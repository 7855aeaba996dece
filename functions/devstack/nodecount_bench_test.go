package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2/callctx"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/resource"
)

// bearerRT presents an access token on every request.
type bearerRT string

func (t bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkNoopRefreshNodeCounts is the added cost of currentNodeCount on
// a steady refresh: two ready clusters alike (two pools, three zones
// each) are refreshed by turns, one by a reconciler that reads no node
// counts and the other by one that reads them as production does (one aggregated list of the
// project's instance groups, shared for a tenth of the steady interval,
// which the benchmark's clock passes at every refresh: the worst case, a
// project with one cluster). It reports the Compute Engine and GKE calls
// per refresh of each, the time of each, and their ratio
// (x-without-counts), and that ratio for the refreshes' calls alone
// (x-floor-without-counts, floorRefresh), timed by turns with them: the
// listing's own cost, its client's and its simulator's, on the same two
// cores; and the calls with the listing answered by a server that only
// writes the simulator's answer (x-floor-static-answer): what one listing
// costs its client and an HTTP exchange, with nothing behind it. Then,
// with production's latency on every call through the fault API (50 ms
// before each GKE and Compute Engine call, 8 ms before each Firestore
// call), it times refreshes with and without counts by turns again
// (latencyRounds of each), and reports the ratio of their medians
// (x-without-counts-at-latency; the medians, since on a shared machine a
// stall of a few hundred milliseconds falls on one refresh or the other
// and would decide a ratio of sums, reported too as
// x-mean-without-counts-at-latency): the listing overlaps the GKE read,
// so it should cost next to nothing there.
func BenchmarkNoopRefreshNodeCounts(b *testing.B) {
	rb := newRefreshBench(b, 2)
	k, kc := rb.clusters[0], rb.clusters[1]
	ctx := context.Background()
	cc, err := compute.NewInstanceGroupManagersRESTClient(ctx, option.WithEndpoint(rb.e.Compute.URL()),
		option.WithHTTPClient(&http.Client{Transport: bearerRT(rb.e.FunctionsConfig().EmulatorAccessToken)}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	cfg := chain.Config{ConvergingInterval: 60 * time.Millisecond, SteadyInterval: 5 * time.Minute, LeaseTTL: 30 * time.Second, Clock: rb.clock}
	cr, err := clusters.New(rb.e.Store, rb.e.GKEClient, clusters.WithClock(cfg.Clock),
		clusters.WithNodeCounts(clusters.NodeCounts{Compute: cc, TTL: cfg.SteadyInterval / 10}), clusters.WithRetryEvery(cfg.SteadyInterval))
	if err != nil {
		b.Fatal(err)
	}
	counted, err := chain.NewRunner(rb.e.Store, rb.sched, rb.e.Relay, cfg, cr)
	if err != nil {
		b.Fatal(err)
	}
	plain := rb.rec
	// A first refresh each: the stack's own reconciler left the counts,
	// which the one without them drops once.
	rb.refresh(b, k, -1)
	rb.rec = counted
	rb.refresh(b, kc, -2)
	rb.rec = plain

	nameK, nameKC := rb.providerName(b, k), rb.providerName(b, kc)
	project := rb.e.clusterDoc(b, kc.ID).Spec.Project
	list := func(ctx context.Context) error { return listAll(ctx, cc, project) }
	// The same listing answered by a server that does nothing but write
	// the simulator's answer, captured once: what the listing costs with
	// no work at all behind it, its client's and one HTTP exchange's.
	captured, err := capturedListing(rb.e.Compute.URL(), project, rb.e.FunctionsConfig().EmulatorAccessToken)
	if err != nil {
		b.Fatal(err)
	}
	static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(captured)
	}))
	b.Cleanup(static.Close)
	sc, err := compute.NewInstanceGroupManagersRESTClient(ctx, option.WithEndpoint(static.URL), option.WithoutAuthentication())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sc.Close() })
	listStatic := func(ctx context.Context) error { return listAll(ctx, sc, project) }
	var without, with, floorWithout, floorWith, floorStatic time.Duration
	var gkeWithout, gkeWith, computeCalls, fsWithout, fsWith int
	b.ResetTimer()
	for i := range b.N {
		g, f := rb.gkeCalls(), rb.rpcs.reads()
		t := time.Now()
		rb.refresh(b, k, int64(2*i))
		without += time.Since(t)
		gkeWithout += rb.gkeCalls() - g
		fsWithout += rb.rpcs.reads() - f

		rb.rec = counted
		g, c, f := rb.gkeCalls(), rb.e.Compute.Calls(gke.ComputeAggregatedList), rb.rpcs.reads()
		t = time.Now()
		rb.refresh(b, kc, int64(2*i+1))
		with += time.Since(t)
		gkeWith += rb.gkeCalls() - g
		computeCalls += rb.e.Compute.Calls(gke.ComputeAggregatedList) - c
		fsWith += rb.rpcs.reads() - f
		rb.rec = plain

		t = time.Now()
		rb.floorRefresh(b, k, nameK, nil)
		floorWithout += time.Since(t)
		t = time.Now()
		rb.floorRefresh(b, kc, nameKC, list)
		floorWith += time.Since(t)
		t = time.Now()
		rb.floorRefresh(b, kc, nameKC, listStatic)
		floorStatic += time.Since(t)
	}
	b.StopTimer()
	for _, f := range []map[string]any{
		{"service": "gke", "method": "*", "action": "latency", "latency": "50ms"},
		{"service": "compute", "method": "*", "action": "latency", "latency": "50ms"},
		{"service": "firestore", "method": "*", "action": "latency", "latency": "8ms"},
	} {
		inject(b, rb.e, f)
	}
	rounds := latencyRounds(b.N)
	slowWithout, slowWith := make([]time.Duration, rounds), make([]time.Duration, rounds)
	for i := range rounds {
		t := time.Now()
		rb.refresh(b, k, int64(2*(b.N+i)))
		slowWithout[i] = time.Since(t)
		rb.rec = counted
		t = time.Now()
		rb.refresh(b, kc, int64(2*(b.N+i)+1))
		slowWith[i] = time.Since(t)
		rb.rec = plain
	}
	for _, f := range listFaults(b, rb.e) {
		if f.Hits < rounds {
			b.Errorf("the latency of %s hit %d calls in %d rounds, want every refresh's", f.Service, f.Hits, rounds)
		}
	}
	if code, body := faultsCall(b, http.MethodDelete, rb.e.URL+devstack.FaultsPath, nil); code != http.StatusOK {
		b.Fatalf("DELETE %s = %d %s", devstack.FaultsPath, code, body)
	}
	mw, mwo := median(slowWith), median(slowWithout)
	b.ReportMetric(float64(mwo.Microseconds())/1000, "ms-without-at-latency/op")
	b.ReportMetric(float64(mw.Microseconds())/1000, "ms-with-at-latency/op")
	b.ReportMetric(float64(mw)/float64(mwo), "x-without-counts-at-latency")
	b.ReportMetric(float64(sum(slowWith))/float64(sum(slowWithout)), "x-mean-without-counts-at-latency")
	n := float64(b.N)
	b.ReportMetric(float64(computeCalls)/n, "compute-calls/op")
	b.ReportMetric(float64(gkeWithout)/n, "gke-calls-without/op")
	b.ReportMetric(float64(gkeWith)/n, "gke-calls-with/op")
	b.ReportMetric(float64(without.Microseconds())/n, "µs-without/op")
	b.ReportMetric(float64(with.Microseconds())/n, "µs-with/op")
	b.ReportMetric(float64(fsWithout)/n, "fs-reads-without/op")
	b.ReportMetric(float64(fsWith)/n, "fs-reads-with/op")
	b.ReportMetric(float64(with)/float64(without), "x-without-counts")
	b.ReportMetric(float64(floorWith)/float64(floorWithout), "x-floor-without-counts")
	b.ReportMetric(float64(floorStatic)/float64(floorWithout), "x-floor-static-answer")
	for _, p := range rb.e.poolsOf(b, kc.ID) {
		if p.State != resource.StateReady || p.CurrentNodeCount == nil {
			b.Errorf("pool %s after the refreshes = %s with %v nodes, want ready with its count", p.Name, p.State, p.CurrentNodeCount)
		}
	}
}

// latencyRounds is how many refreshes of each kind the benchmark of n
// iterations times at production's latency: enough for a steady ratio,
// few enough that a refresh of a few hundred milliseconds keeps the run
// short.
func latencyRounds(n int) int { return min(max(n, 20), 40) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// groupFields is the selection the reconciler's listing makes (clusters'
// groupFields).
const groupFields = "items/*/instanceGroupManagers(name,zone,targetSize,currentActions/none),nextPageToken"

// listAll lists project's instance groups with c as the reconciler does,
// every page.
func listAll(ctx context.Context, c *compute.InstanceGroupManagersClient, project string) error {
	ctx = callctx.SetHeaders(ctx, "X-Goog-FieldMask", groupFields)
	it := c.AggregatedList(ctx, &computepb.AggregatedListInstanceGroupManagersRequest{Project: project})
	for {
		if _, err := it.Next(); errors.Is(err, iterator.Done) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// capturedListing is the body of the reconciler's listing of project's
// instance groups (its field selection) as the Compute Engine simulator
// at base answers it.
func capturedListing(base, project, token string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, base+"/compute/v1/projects/"+project+"/aggregated/instanceGroupManagers", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Goog-FieldMask", groupFields)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("listing answered %s: %s", resp.Status, body)
	}
	return body, err
}

// poolsOf lists a cluster's pools through the API.
func (e *env) poolsOf(t testing.TB, clusterID string) []resource.NodePool {
	t.Helper()
	ps, err := e.api.listPools(clusterID)
	if err != nil {
		t.Fatalf("list node pools of %s: %v", clusterID, err)
	}
	return ps
}
