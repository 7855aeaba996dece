package devstack_test

import (
	"context"
	"fmt"
	"path"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// rpcCounter counts the RPCs of a gRPC connection by method, and the
// document writes of its commits.
type rpcCounter struct {
	mu     sync.Mutex
	calls  map[string]int
	writes int
}

func (c *rpcCounter) count(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[path.Base(method)]++
}

func (c *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.count(method)
	if r, ok := req.(*firestorepb.CommitRequest); ok {
		c.mu.Lock()
		c.writes += len(r.GetWrites())
		c.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// reads counts the read RPCs.
func (c *rpcCounter) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls["GetDocument"] + c.calls["BatchGetDocuments"] + c.calls["RunQuery"] + c.calls["RunAggregationQuery"]
}

func (c *rpcCounter) writeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

func (c *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c.count(method)
	return streamer(ctx, desc, cc, method, opts...)
}

// snapshot returns the counts so far and their total.
func (c *rpcCounter) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	total := 0
	for m, n := range c.calls {
		out[m] = n
		total += n
	}
	return out, total
}

// jumpClock is a clock that jumps ahead by step at every tick, so that
// each refresh finds the lease of the one before it expired, as the
// steady interval does in production.
type jumpClock struct {
	start time.Time
	base  time.Time
	step  time.Duration
	ticks atomic.Int64
}

func (c *jumpClock) Now() time.Time {
	return c.base.Add(time.Since(c.start) + time.Duration(c.ticks.Load())*c.step)
}

func (c *jumpClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *jumpClock) tick() { c.ticks.Add(1) }

// noSchedule takes the successor of each run and keeps the last of each
// subject rather than scheduling it: the benchmark runs the refreshes
// itself, each with the kick its predecessor scheduled, as the queue
// would deliver it (its Hint included).
type noSchedule struct {
	n    atomic.Int64
	mu   sync.Mutex
	last map[string]chain.Kick
}

func (s *noSchedule) Schedule(_ context.Context, k chain.Kick, _ time.Time, _ string) error {
	s.n.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]chain.Kick{}
	}
	s.last[k.ID] = k
	return nil
}

// next is the kick of k's subject's next run: the successor a run of its
// chain scheduled last, or k.
func (s *noSchedule) next(k chain.Kick) chain.Kick {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.last[k.ID]; ok && n.Token == k.Token {
		return n
	}
	return k
}

// refreshBench is a stack with ready clusters and a reconciler of its own
// whose Firestore RPCs are counted.
type refreshBench struct {
	e        *env
	rpcs     *rpcCounter
	clock    *jumpClock
	rec      *chain.Runner
	sched    *noSchedule // every runner's of the benchmark
	clusters []chain.Kick
}

func newRefreshBench(b *testing.B, clusters int) *refreshBench {
	b.Helper()
	rpcs := &rpcCounter{}
	cfg := fastConfig()
	// The stack's own chains and watchdog stay quiet once the clusters
	// are ready, so only the benchmark's refreshes count.
	cfg.SteadyInterval = time.Hour
	cfg.WatchdogInterval = time.Hour
	cfg.FirestoreDialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(rpcs.unary), grpc.WithChainStreamInterceptor(rpcs.stream)}
	e := startEnv(b, cfg)
	var ids []string
	for i := range clusters {
		cl := e.api.createCluster(b, fmt.Sprintf("bench%d", i), poolSpec("a", 1), poolSpec("b", 2))
		ids = append(ids, cl.ID)
	}
	rb := &refreshBench{e: e, rpcs: rpcs, sched: &noSchedule{}}
	for _, id := range ids {
		e.api.waitCluster(b, id, resource.StateReady, nil)
		// A ready cluster's refreshes are a steady chain's.
		var k chain.Kick
		wait.For(b, "a steady chain for "+id, func() (bool, string) {
			k = chain.Kick{Kind: store.ClustersKind, TenantID: "acme", ID: id, Token: e.clusterDoc(b, id).Reconcile.Token}
			return k.Steady(), "chain token " + k.Token
		})
		rb.clusters = append(rb.clusters, k)
	}
	rb.clock = &jumpClock{start: time.Now(), base: time.Now(), step: cfg.LeaseTTL + time.Millisecond}
	// Past every lease the stack's own runs took.
	rb.clock.tick()
	var err error
	rb.rec, err = newRunner(e, e.GKEClient, rb.sched, chain.Config{
		ConvergingInterval: cfg.ConvergingInterval, SteadyInterval: 5 * time.Minute, LeaseTTL: 30 * time.Second, Clock: rb.clock,
	})
	if err != nil {
		b.Fatal(err)
	}
	rb.clock.step = 30*time.Second + time.Millisecond
	return rb
}

func (rb *refreshBench) refresh(b *testing.B, k chain.Kick, i int64) {
	rb.clock.tick()
	if err := rb.rec.Run(context.Background(), rb.sched.next(k), fmt.Sprintf("bench-%d", i)); err != nil {
		b.Errorf("Run: %v", err)
	}
}

// gkeCalls is the count of every GKE call the reconciler makes.
func (rb *refreshBench) gkeCalls() int {
	n := 0
	for _, rpc := range []string{"GetCluster", "GetOperation", "ListOperations", "CreateCluster", "DeleteCluster", "CreateNodePool", "DeleteNodePool", "SetNodePoolSize", "SetNodePoolAutoscaling"} {
		n += rb.e.GKE.Calls(rpc)
	}
	return n
}

// report reports the provider calls, Firestore RPCs and document writes
// per refresh, and the refreshes per second.
func (rb *refreshBench) report(b *testing.B, n int, start time.Time, gkeBefore int, fsBefore map[string]int, fsTotalBefore, writesBefore int) {
	elapsed := time.Since(start)
	fs, total := rb.rpcs.snapshot()
	b.ReportMetric(float64(rb.gkeCalls()-gkeBefore)/float64(n), "gke-calls/op")
	b.ReportMetric(float64(total-fsTotalBefore)/float64(n), "fs-rpcs/op")
	b.ReportMetric(float64(fs["Commit"]-fsBefore["Commit"])/float64(n), "fs-commits/op")
	b.ReportMetric(float64(rb.rpcs.writeCount()-writesBefore)/float64(n), "fs-writes/op")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "refreshes/s")
}

// bareRead reads what a refresh reads, and nothing else: the cluster's
// document and its pools, with the stack's own Firestore client.
func (rb *refreshBench) bareRead(b *testing.B, k chain.Kick) {
	ctx := context.Background()
	ref := rb.e.Store.ClusterRef(k.TenantID, k.ID)
	if _, err := ref.Get(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := ref.Collection("nodePools").Where("active", "==", true).OrderBy("createdAt", firestore.Asc).Documents(ctx).GetAll(); err != nil {
		b.Fatal(err)
	}
}

// floorRefresh makes the calls of a no-op refresh of k and nothing else,
// as the refresh overlaps them: the cluster's document, its pools and the
// provider (GetCluster, and with list the listing of the project's
// instance groups), all at once. It decodes nothing and plans nothing: a
// refresh costs at least this on the same machine, and what it costs
// above it is the reconciler's own work.
func (rb *refreshBench) floorRefresh(b *testing.B, k chain.Kick, name string, list func(context.Context) error) {
	ctx := context.Background()
	ref := rb.e.Store.ClusterRef(k.TenantID, k.ID)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := ref.Get(ctx); err != nil {
			b.Error(err)
		}
	})
	wg.Go(func() {
		if _, err := rb.e.GKEClient.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name}); err != nil {
			b.Error(err)
		}
	})
	if list != nil {
		wg.Go(func() {
			if err := list(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	if _, err := ref.Collection("nodePools").Where("active", "==", true).OrderBy("createdAt", firestore.Asc).Documents(ctx).GetAll(); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
}

// providerName is the name GKE knows k's cluster by.
func (rb *refreshBench) providerName(b *testing.B, k chain.Kick) string {
	c := rb.e.clusterDoc(b, k.ID)
	return fmt.Sprintf("projects/%s/locations/%s/clusters/%s", c.Spec.Project, c.Spec.Region, c.Spec.ProviderName)
}

// BenchmarkNoopRefresh refreshes a ready cluster that needs nothing, one
// run after the other: one provider read, two Firestore reads (the
// cluster, its pools), and no write but the watchdog's deadline once a
// heartbeat. It also reports the ratio of a refresh to a bare read of the
// same documents on the same emulator (x-bare-read), timed alternately in
// the same loop so that the machine's noise falls on both, and the same
// ratio for the refresh's calls alone (x-floor-bare-read, floorRefresh):
// the difference is the reconciler's own work; the floor's excess over 1
// is the provider read, whose client and simulator share the machine's
// two cores with the Firestore emulator.
func BenchmarkNoopRefresh(b *testing.B) {
	rb := newRefreshBench(b, 1)
	k := rb.clusters[0]
	gkeBefore := rb.gkeCalls()
	fsBefore, fsTotal := rb.rpcs.snapshot()
	writes := rb.rpcs.writeCount()
	var refreshes, bare time.Duration
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		t := time.Now()
		rb.refresh(b, k, int64(i))
		refreshes += time.Since(t)
	}
	b.StopTimer()
	rb.report(b, b.N, start, gkeBefore, fsBefore, fsTotal, writes)
	// Then refreshes and bare reads by turns, so that the machine's
	// noise falls on both alike.
	refreshes = 0
	name := rb.providerName(b, k)
	var floor time.Duration
	for i := range b.N {
		t := time.Now()
		rb.refresh(b, k, int64(b.N+i))
		refreshes += time.Since(t)
		t = time.Now()
		rb.bareRead(b, k)
		bare += time.Since(t)
		t = time.Now()
		rb.floorRefresh(b, k, name, nil)
		floor += time.Since(t)
	}
	b.ReportMetric(float64(refreshes)/float64(bare), "x-bare-read")
	b.ReportMetric(float64(floor)/float64(bare), "x-floor-bare-read")
	if cl := rb.e.clusterDoc(b, k.ID); cl.View().State != resource.StateReady {
		b.Errorf("cluster after the refreshes = %s, want ready", cl.View().State)
	}
}

// BenchmarkNoopRefreshParallel refreshes ready clusters from four
// goroutines per core, each on its own cluster, as one instance serving
// concurrent tasks does.
func BenchmarkNoopRefreshParallel(b *testing.B) {
	rb := newRefreshBench(b, 4*runtime.GOMAXPROCS(0))
	gkeBefore := rb.gkeCalls()
	fsBefore, fsTotal := rb.rpcs.snapshot()
	writes := rb.rpcs.writeCount()
	var next, seq atomic.Int64
	start := time.Now()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine keeps to one cluster: runs of one cluster are
		// serialized by its lease anyway.
		k := rb.clusters[int(next.Add(1)-1)%len(rb.clusters)]
		for pb.Next() {
			rb.refresh(b, k, seq.Add(1))
		}
	})
	b.StopTimer()
	rb.report(b, b.N, start, gkeBefore, fsBefore, fsTotal, writes)
}
