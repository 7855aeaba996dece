package devstack_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// fleetConfig is a fleet simulation: N clusters spread over P provider
// projects, each project with a GKE request quota, brought to steady state
// and then hit by a burst of tenant changes.
type fleetConfig struct {
	clusters, projects int
	quota              int     // each project's GKE requests per minute
	share              float64 // the reconciler's share of it
	opTime             time.Duration
	converging         time.Duration
	steady             time.Duration
	steadyFor          time.Duration // how long the steady phase is watched
	burst              float64       // the fraction of clusters changed at once
	settle             bool          // measure the steady phase once creation's GKE minute is over
	devstackFlags      []string      // devstack flags setting Config fields (setConfigFlags)
}

// smallFleet is the fleet TestFleet plays: 60 clusters over 2 projects,
// in fast time.
func smallFleet() fleetConfig {
	f := fleetConfig{clusters: 60, projects: 2, quota: 1200, share: 0.8, opTime: 300 * time.Millisecond,
		converging: 300 * time.Millisecond, steady: 5 * time.Second, burst: 0.05}
	f.steadyFor = 2 * f.steady
	return f
}

// The fleet BenchmarkFleet plays (scripts/fleet.sh sets them; go test
// -run '^$' -bench '^BenchmarkFleet$' -benchtime=1x ./functions/devstack
// -args -fleet.clusters=1000). Their defaults make a fleet small enough
// for CI's one run of every benchmark.
var (
	fleetClusters  = flag.Int("fleet.clusters", 20, "BenchmarkFleet: clusters")
	fleetProjects  = flag.Int("fleet.projects", 0, "BenchmarkFleet: provider projects (0: clusters/200, at least 2)")
	fleetQuota     = flag.Int("fleet.quota", 1200, "BenchmarkFleet: each project's GKE requests a minute")
	fleetTimescale = flag.Float64("fleet.timescale", 1, "BenchmarkFleet: how much slower than fast time (provider operations, converging and steady intervals), at least 1")
	fleetSteady    = flag.Duration("fleet.steady", 0, "BenchmarkFleet: the steady interval (0: 5 s times the time scale)")
	fleetSettle    = flag.Bool("fleet.settle", false, "BenchmarkFleet: measure the steady phase only once the clock minute of the fleet's creation is over and a steady interval has passed")
	fleetFlags     = flag.String("fleet.devstack-flags", "", "BenchmarkFleet: devstack flags setting the Config fields of the same name (-tasks-duplicate-rate 0.1)")
)

// fleetFromFlags is the fleet the -fleet.* flags describe. The time
// scale slows the whole simulation (provider operations, converging and
// steady intervals alike) for a fleet bigger than one 2-core process,
// emulators included, can play in fast time.
func fleetFromFlags(b *testing.B) fleetConfig {
	f := smallFleet()
	if *fleetClusters <= 0 || *fleetProjects < 0 || *fleetQuota <= 0 || *fleetTimescale < 1 || *fleetSteady < 0 {
		b.Fatalf("-fleet.clusters %d, -fleet.projects %d, -fleet.quota %d, -fleet.timescale %v, -fleet.steady %v: want positive numbers, a time scale of at least 1",
			*fleetClusters, *fleetProjects, *fleetQuota, *fleetTimescale, *fleetSteady)
	}
	f.clusters, f.quota = *fleetClusters, *fleetQuota
	f.projects = cmp.Or(*fleetProjects, max(2, f.clusters/200))
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * *fleetTimescale) }
	f.opTime, f.converging, f.steady = scale(f.opTime), scale(f.converging), scale(f.steady)
	f.steady = cmp.Or(*fleetSteady, f.steady)
	f.steadyFor = 2 * f.steady
	f.settle = *fleetSettle
	f.devstackFlags = strings.Fields(*fleetFlags)
	return f
}

// fleetReport is what a simulation measured.
type fleetReport struct {
	commitP50, commitP99         time.Duration // from a change to the commit of its ready event (ce-time), before Pub/Sub
	peakPerMinute, meanPerMinute float64       // GKE calls of the busiest project-minute, and the mean over full minutes
	exceeded                     int           // project-minutes above the reconciler's share
	refused                      int           // calls the simulator refused for quota
	errorsShown                  int           // error events published
	readsPerInterval             float64       // Firestore read RPCs per cluster per steady interval
	writesPerInterval            float64       // Firestore document writes per cluster per steady interval
	tasksPerSecond               float64       // Cloud Tasks dispatched per second, steady
	computePerInterval           float64       // Compute Engine calls (currentNodeCount) per cluster per steady interval
	changed, converged           int
	p50, p99, limit              time.Duration
	watchdogRPCs                 int
	watchdogRestarted            int
	watchdogTime                 time.Duration
	heapMiB                      float64
	setup                        time.Duration
	// perHour is the steady phase's use per cluster per hour, at the
	// production steady interval; runsPerInterval is how many steady runs
	// a cluster had per fleet interval (1 when they kept up).
	perHour         fleetUsage
	runsPerInterval float64
}

// TestFleet runs a small fleet and holds it to its goals: no project ever
// above the reconciler's share of its quota, no rate limit shown as a
// state, every tenant change converged. Its latency is a measurement
// (BenchmarkFleet), not a goal here: CI's machine is too busy for a timed
// assertion to mean anything.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet simulation takes tens of seconds")
	}
	checkFleet(t, runFleet(t, smallFleet()))
}

// checkFleet fails t when a fleet missed a goal other than its latency.
func checkFleet(t testing.TB, r fleetReport) {
	t.Helper()
	if r.exceeded != 0 || r.refused != 0 {
		t.Errorf("quota: %d project-minutes above the share, %d calls refused; want none", r.exceeded, r.refused)
	}
	if r.errorsShown != 0 {
		t.Errorf("%d error events, want none", r.errorsShown)
	}
	if r.converged != r.changed {
		t.Errorf("converged %d of %d changes", r.converged, r.changed)
	}
}

// BenchmarkFleet plays the fleet the -fleet.* flags describe
// (scripts/fleet.sh), b.N times, each one held to TestFleet's goals, and
// reports the last one's latency, GKE calls and steady use. Its "fleet:"
// line carries the latency goal, which scripts/fleet.sh holds.
func BenchmarkFleet(b *testing.B) {
	f := fleetFromFlags(b)
	var r fleetReport
	for range b.N {
		r = runFleet(b, f)
		checkFleet(b, r)
	}
	b.StopTimer()
	// scripts/fleet.sh prices this line.
	fmt.Printf("fleet-usage: per cluster per hour, steady runs every %v: %s\n", cloudrun.DefaultSteadyInterval, r.perHour.fields())
	fmt.Printf("fleet: %d clusters, %d projects, quota exceeded %d, errors shown %d, converged %d/%d, change-to-ready p99 %.2f s (limit %.2f s)\n",
		f.clusters, f.projects, r.exceeded, r.errorsShown, r.converged, r.changed, r.p99.Seconds(), r.limit.Seconds())
	b.ReportMetric(r.p50.Seconds(), "ready-p50-s")
	b.ReportMetric(r.p99.Seconds(), "ready-p99-s")
	b.ReportMetric(r.p99.Seconds()/r.limit.Seconds(), "p99/limit")
	b.ReportMetric(r.commitP99.Seconds(), "commit-p99-s")
	b.ReportMetric(r.peakPerMinute, "gke-peak/min")
	b.ReportMetric(r.readsPerInterval, "reads/cluster-interval")
	b.ReportMetric(r.writesPerInterval, "writes/cluster-interval")
	b.ReportMetric(r.setup.Seconds(), "ready-s")
	b.ReportMetric(r.heapMiB, "heap-MiB")
}

func runFleet(t testing.TB, f fleetConfig) fleetReport {
	var rep fleetReport
	rep.limit = f.opTime + 2*f.converging
	rpcs := &rpcCounter{}
	seed := &store.Seed{RoleBindings: []auth.Binding{{TenantID: "fleet", Principal: "alice", Role: auth.RoleAdmin}}}
	for i := range f.projects {
		acc := fmt.Sprintf("acc-%d", i)
		seed.Accounts = append(seed.Accounts, store.Account{ID: acc, Provider: "gcp", Project: fmt.Sprintf("fleet-%d", i),
			Regions: map[string][]string{"us-central1": {"us-central1-a", "us-central1-b"}}})
		seed.Pools = append(seed.Pools, store.Pool{ID: fmt.Sprintf("pool-%d", i), TenantID: "fleet", AccountID: acc})
	}
	cfg := devstack.Config{
		Seed:                 seed,
		GKEOperationTime:     f.opTime,
		GKERequestQuota:      f.quota,
		ConvergingInterval:   f.converging,
		SteadyInterval:       f.steady,
		LeaseTTL:             5 * time.Second,
		WatchdogInterval:     5 * time.Second,
		WatchdogGrace:        10 * time.Second,
		Log:                  testLogger(),
		FirestoreDialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rpcs.unary), grpc.WithChainStreamInterceptor(rpcs.stream)},
	}
	if err := setConfigFlags(&cfg, f.devstackFlags); err != nil {
		t.Fatalf("-fleet.devstack-flags: %v", err)
	}
	if n := suiteInstances(); n > 1 {
		withInstances(&cfg, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s, err := devstack.Start(ctx, cfg)
	cancel()
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	tok, err := s.Token("alice")
	if err != nil {
		t.Fatal(err)
	}
	api := &fleetAPI{url: s.URL, token: tok}

	// Create the fleet.
	start := time.Now()
	ids := make([]string, f.clusters)
	parallel(t, f.clusters, 16, func(i int) error {
		var c resource.Cluster
		err := api.call("kubernetesClusters/create", map[string]any{
			"tenantId": "fleet", "poolId": fmt.Sprintf("pool-%d", i%f.projects), "name": fmt.Sprintf("c%d", i),
			"mode": "standard", "region": "us-central1",
			"nodePools": []any{map[string]any{"name": "a", "machineType": "e2-standard-4", "nodeCount": 1}},
		}, &c)
		ids[i] = c.ID
		return err
	})
	func() {
		ready := false
		defer func() {
			if !ready {
				describeNotReady(t, s.FirestoreClient)
			}
		}()
		// The count reads every cluster: asked twice a second, it leaves
		// the fleet it waits for the machine.
		wait.WithinEvery(t, 2*time.Minute+time.Duration(f.clusters)*50*time.Millisecond, 500*time.Millisecond,
			"the fleet's clusters ready", func() (bool, string) {
				n := countReady(t, s.FirestoreClient)
				return n >= f.clusters, fmt.Sprintf("%d of %d clusters ready", n, f.clusters)
			})
		ready = true
	}()
	rep.setup = time.Since(start)
	t.Logf("fleet of %d clusters in %d projects ready in %v (provider operations %v, converging interval %v, steady %v)",
		f.clusters, f.projects, rep.setup.Round(time.Second), f.opTime, f.converging, f.steady)

	// The steady phase. Measured, when asked (scripts/fleet.sh), once the clock minute
	// of the fleet's creation is over and a steady interval has passed:
	// while the creation's GKE calls crowd a project's minute, steady
	// refreshes put themselves off, and the fleet's first refreshes all
	// come at once.
	if f.settle {
		now := time.Now()
		time.Sleep(max(f.steady, now.Truncate(time.Minute).Add(time.Minute+time.Second).Sub(now)))
	}
	readsBefore, writesBefore := rpcs.reads(), rpcs.writeCount()
	tasksBefore := s.Tasks.Stats().Dispatched
	usageBefore := sampleFleetUsage(t, s)
	computeBefore := s.Compute.Calls(gkeemu.ComputeAggregatedList)
	steadyStart := time.Now()
	time.Sleep(f.steadyFor)
	steady := time.Since(steadyStart)
	usage := sampleFleetUsage(t, s).minus(usageBefore)
	intervals := float64(f.clusters) * steady.Seconds() / f.steady.Seconds()
	rep.readsPerInterval = float64(rpcs.reads()-readsBefore) / intervals
	rep.writesPerInterval = float64(rpcs.writeCount()-writesBefore) / intervals
	rep.tasksPerSecond = float64(s.Tasks.Stats().Dispatched-tasksBefore) / steady.Seconds()
	// A steady cluster's work is per steady run, each one dispatch: scaled
	// to production's steady interval, whether or not the fleet's runs
	// kept up with its fast one.
	rep.perHour = usage.scale(time.Hour.Seconds() / cloudrun.DefaultSteadyInterval.Seconds() / max(usage.tasksDispatches, 1))
	rep.runsPerInterval = usage.tasksDispatches / intervals
	rep.computePerInterval = float64(s.Compute.Calls(gkeemu.ComputeAggregatedList)-computeBefore) / intervals

	// The watchdog's cost: it grows with the overdue chains, not with
	// the fleet. It is counted on a client of its own, apart from the
	// runs going on meanwhile.
	wrpcs := &rpcCounter{}
	conn, err := grpc.NewClient(s.Firestore.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(wrpcs.unary), grpc.WithChainStreamInterceptor(wrpcs.stream))
	if err != nil {
		t.Fatal(err)
	}
	wfs, err := firestore.NewClient(context.Background(), "bc-dev", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer wfs.Close()
	w := *s.Watchdog
	if w.Store, err = store.New(wfs, lifecycle.Rules{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	pass, err := w.Tick(context.Background())
	if err != nil {
		t.Errorf("watchdog pass: %v", err)
	}
	rep.watchdogTime = time.Since(t0)
	_, rep.watchdogRPCs = wrpcs.snapshot()
	rep.watchdogRestarted = pass.Restarted

	// The burst: a share of the clusters resized at once, each timed from
	// its accepted change to its kubernetes.nodepool.ready, as a consumer
	// of the events sees it.
	changed := ids[:max(1, int(float64(f.clusters)*f.burst))]
	rep.changed = len(changed)
	readyAt := watchReady(t, s)
	changedAt := make([]time.Time, len(changed))
	poolIDs := make([]string, len(changed))
	parallel(t, len(changed), 16, func(i int) error {
		var pools struct {
			NodePools []resource.NodePool `json:"nodePools"`
		}
		if err := api.call("kubernetesNodePools/list", map[string]any{"tenantId": "fleet", "clusterId": changed[i]}, &pools); err != nil {
			return err
		}
		poolIDs[i] = pools.NodePools[0].ID
		return nil
	})
	parallel(t, len(changed), 16, func(i int) error {
		changedAt[i] = time.Now()
		return api.call("kubernetesNodePools/update", map[string]any{"tenantId": "fleet", "clusterId": changed[i], "nodePoolId": poolIDs[i], "nodeCount": 2}, nil)
	})
	took := make([]time.Duration, len(changed))
	tookCommit := make([]time.Duration, len(changed))
	wait.WithinEvery(t, max(wait.Timeout, 30*time.Second+time.Duration(len(changed))*20*time.Millisecond), 100*time.Millisecond,
		"every changed pool's ready event", func() (bool, string) {
			n := 0
			for i, id := range poolIDs {
				if at, made, ok := readyAt(id); ok {
					took[i], tookCommit[i] = at.Sub(changedAt[i]), made.Sub(changedAt[i])
					n++
				}
			}
			rep.converged = n
			return n == len(changed), fmt.Sprintf("%d of %d changes converged", n, len(changed))
		})
	slices.Sort(took)
	slices.Sort(tookCommit)
	rep.p50, rep.p99 = took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]
	rep.commitP50, rep.commitP99 = tookCommit[len(took)/2], tookCommit[min(len(took)-1, len(took)*99/100)]

	// Quota and errors over the whole run.
	share := f.share * float64(f.quota)
	var full []int
	for _, p := range s.GKE.Projects() {
		for _, u := range s.GKE.Usage(p) {
			rep.refused += u.Refused
			if float64(u.Calls) > share {
				rep.exceeded++
			}
			rep.peakPerMinute = max(rep.peakPerMinute, float64(u.Calls))
			if u.Start.After(start) && u.Start.Add(time.Minute).Before(time.Now()) {
				full = append(full, u.Calls)
			}
		}
	}
	for _, n := range full {
		rep.meanPerMinute += float64(n) / float64(len(full))
	}
	if len(full) == 0 {
		rep.meanPerMinute = rep.peakPerMinute
	}
	for _, m := range s.PubSub.Messages() {
		if typ := m.Attributes["ce-type"]; typ == event.ClusterError || typ == event.NodePoolError {
			rep.errorsShown++
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.heapMiB = float64(ms.HeapInuse) / (1 << 20)

	t.Logf("GKE calls per project per minute: peak %.0f, mean %.0f (full minutes), quota %d, reconciler's share %.0f; refused %d",
		rep.peakPerMinute, rep.meanPerMinute, f.quota, share, rep.refused)
	t.Logf("steady, per cluster per interval (%v): %.2f Firestore read RPCs, %.3f document writes, %.3f Compute Engine calls (currentNodeCount); Cloud Tasks dispatched %.1f/s",
		f.steady, rep.readsPerInterval, rep.writesPerInterval, rep.computePerInterval, rep.tasksPerSecond)
	t.Logf("burst of %d changes: converged %d, change to ready p50 %v p99 %v (limit %v); to the ready event's commit p50 %v p99 %v",
		rep.changed, rep.converged, rep.p50.Round(time.Millisecond), rep.p99.Round(time.Millisecond), rep.limit,
		rep.commitP50.Round(time.Millisecond), rep.commitP99.Round(time.Millisecond))
	t.Logf("watchdog pass: %d chains overdue and restarted, %d Firestore RPCs, %v; heap in use %.0f MiB",
		rep.watchdogRestarted, rep.watchdogRPCs, rep.watchdogTime.Round(time.Millisecond), rep.heapMiB)
	t.Logf("steady, measured over %v (%.0f cluster-intervals of %v, %.2f runs each): %s", steady.Round(time.Second), intervals, f.steady, rep.runsPerInterval, usage)
	return rep
}

// watchReady subscribes to kubernetes.nodepool.ready and returns when each
// pool's first event of version 2 (its resize) arrived.
// watchReady returns when each pool's kubernetes.nodepool.ready of its
// second version was received, and when it was committed (its ce-time).
func watchReady(t testing.TB, s *devstack.Stack) func(poolID string) (received, made time.Time, ok bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	name := "projects/bc-dev/subscriptions/fleet-ready"
	_, err := s.PubSubClient.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: name, Topic: "projects/bc-dev/topics/" + event.NodePoolReady, AckDeadlineSeconds: 10,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	at := map[string]time.Time{}
	committed := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.PubSubClient.Subscriber(name).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			now := time.Now()
			var p resource.NodePool
			if json.Unmarshal(m.Data, &p) == nil && p.Version == 2 {
				made, _ := time.Parse(time.RFC3339Nano, m.Attributes["ce-time"])
				mu.Lock()
				if _, ok := at[p.ID]; !ok {
					at[p.ID] = now
					committed[p.ID] = made
				}
				mu.Unlock()
			}
			m.Ack()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func(id string) (time.Time, time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := at[id]
		return v, committed[id], ok
	}
}

// describeNotReady logs a few clusters that are not ready: their state,
// message and chain.
func describeNotReady(t testing.TB, fs *firestore.Client) {
	t.Helper()
	docs, err := fs.CollectionGroup("clusters").Where("status.state", "!=", string(resource.StateReady)).Limit(5).Documents(context.Background()).GetAll()
	if err != nil {
		t.Logf("read the clusters not ready: %v", err)
		return
	}
	for _, d := range docs {
		t.Logf("not ready: %s: status %v, spec generation %v, chain %v", d.Ref.Path, d.Data()["status"], d.Data()["spec"].(map[string]any)["generation"], d.Data()["reconcile"])
	}
}

// countReady counts the clusters whose status is ready.
func countReady(t testing.TB, fs *firestore.Client) int {
	t.Helper()
	q := fs.CollectionGroup("clusters").Where("status.state", "==", string(resource.StateReady))
	res, err := q.NewAggregationQuery().WithCount("n").Get(context.Background())
	if err != nil {
		t.Fatalf("count ready clusters: %v", err)
	}
	v, _ := res["n"].(interface{ GetIntegerValue() int64 })
	if v == nil {
		return 0
	}
	return int(v.GetIntegerValue())
}

// parallel runs do(i) for i in [0, n) on workers goroutines.
func parallel(t testing.TB, n, workers int, do func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// fleetAPI calls the API, retrying UNAVAILABLE.
type fleetAPI struct{ url, token string }

func (a *fleetAPI) call(method string, body, out any) error {
	b, _ := json.Marshal(body)
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, a.url+"/api/compute/"+method, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < 20:
			time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
			continue
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("%s: %d %s", method, resp.StatusCode, raw)
		}
		if out != nil {
			return json.Unmarshal(raw, out)
		}
		return nil
	}
}

// fleetUsage is what a fleet used, as the emulators count it (what
// Google bills or limits), and the CPU time of the processes that played
// it.
type fleetUsage struct {
	// Firestore's billed document operations (fsemu.Usage).
	firestoreReads, firestoreWrites, firestoreDeletes float64
	// Cloud Tasks' billed operations: push deliveries and CreateTask
	// calls.
	tasksDispatches, tasksCreates float64
	// GKE calls, every ClusterManager RPC (the quota counts them all).
	gkeCalls float64
	// Pub/Sub messages published, and the bytes billed for them: at
	// least 1,000 a message, published once and delivered once.
	pubsubMessages, pubsubBytes float64
	// cpuSeconds is the CPU time (user and system) of this process: the
	// functions and, in one process, the emulators and the test's own
	// work too; cpuInstances that of its child processes (the function
	// instances of -instances, when there are).
	cpuSeconds, cpuInstances float64
}

// sampleFleetUsage reads the counters now.
func sampleFleetUsage(t testing.TB, s *devstack.Stack) fleetUsage {
	t.Helper()
	fs := s.Firestore.Usage()
	u := fleetUsage{
		firestoreReads: float64(fs.Reads), firestoreWrites: float64(fs.Writes), firestoreDeletes: float64(fs.Deletes),
		tasksDispatches: float64(s.Tasks.Stats().Dispatched), tasksCreates: float64(s.Tasks.Calls("CreateTask")),
	}
	methods := containerpb.File_google_container_v1_cluster_service_proto.Services().ByName("ClusterManager").Methods()
	for i := range methods.Len() {
		u.gkeCalls += float64(s.GKE.Calls(string(methods.Get(i).Name())))
	}
	for _, m := range s.PubSub.Messages() {
		size := len(m.Data) + len(m.OrderingKey)
		for k, v := range m.Attributes {
			size += len(k) + len(v)
		}
		u.pubsubMessages++
		u.pubsubBytes += 2 * float64(max(size, 1000))
	}
	u.cpuSeconds, u.cpuInstances = processCPU(t)
	return u
}

func (u fleetUsage) minus(o fleetUsage) fleetUsage {
	return fleetUsage{
		u.firestoreReads - o.firestoreReads, u.firestoreWrites - o.firestoreWrites, u.firestoreDeletes - o.firestoreDeletes,
		u.tasksDispatches - o.tasksDispatches, u.tasksCreates - o.tasksCreates, u.gkeCalls - o.gkeCalls,
		u.pubsubMessages - o.pubsubMessages, u.pubsubBytes - o.pubsubBytes,
		u.cpuSeconds - o.cpuSeconds, u.cpuInstances - o.cpuInstances,
	}
}

func (u fleetUsage) scale(k float64) fleetUsage {
	return fleetUsage{
		u.firestoreReads * k, u.firestoreWrites * k, u.firestoreDeletes * k,
		u.tasksDispatches * k, u.tasksCreates * k, u.gkeCalls * k,
		u.pubsubMessages * k, u.pubsubBytes * k,
		u.cpuSeconds * k, u.cpuInstances * k,
	}
}

// fields is u as the key=value pairs scripts/fleet.sh reads.
func (u fleetUsage) fields() string {
	return fmt.Sprintf("firestore_reads=%.4g firestore_writes=%.4g firestore_deletes=%.4g tasks_dispatches=%.4g tasks_creates=%.4g gke_calls=%.4g pubsub_messages=%.4g pubsub_bytes=%.4g cpu_seconds=%.4g cpu_seconds_instances=%.4g",
		u.firestoreReads, u.firestoreWrites, u.firestoreDeletes, u.tasksDispatches, u.tasksCreates, u.gkeCalls,
		u.pubsubMessages, u.pubsubBytes, u.cpuSeconds, u.cpuInstances)
}

func (u fleetUsage) String() string {
	return fmt.Sprintf("Firestore %.0f reads, %.0f writes, %.0f deletes; Cloud Tasks %.0f dispatches, %.0f creates; %.0f GKE calls; Pub/Sub %.0f messages; CPU %.2f s in this process, %.2f s in its children",
		u.firestoreReads, u.firestoreWrites, u.firestoreDeletes, u.tasksDispatches, u.tasksCreates, u.gkeCalls,
		u.pubsubMessages, u.cpuSeconds, u.cpuInstances)
}

// processCPU returns the CPU time, user and system, of this process and
// of its child processes: those that ended and were waited for, and
// those that run (from /proc, in clock ticks of 1/100 s, Linux's
// USER_HZ).
func processCPU(t testing.TB) (self, children float64) {
	t.Helper()
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	self = sec(ru.Utime) + sec(ru.Stime)
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	children = sec(ru.Utime) + sec(ru.Stime)
	me := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session tty tpgid flags minflt
		// cminflt majflt cmajflt utime stime ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 || f[1] != me {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		children += (ut + st) / 100
	}
	return self, children
}

// setConfigFlags sets the fields of cfg that devstack flags name, so that
// scripts/fleet.sh can pass the devstack's flags through to a fleet: a
// flag -a-b names the field AB, case aside (-gke-request-quota is
// GKERequestQuota, -instances Instances). Reflection rather than the
// devstack's own flag set, which belongs to its command and takes
// flags this test sets itself (addresses, seed, data).
func setConfigFlags(cfg *devstack.Config, args []string) error {
	v := reflect.ValueOf(cfg).Elem()
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		want := strings.ReplaceAll(name, "-", "")
		var field reflect.Value
		for j := range v.NumField() {
			if strings.EqualFold(v.Type().Field(j).Name, want) {
				field = v.Field(j)
			}
		}
		if !field.IsValid() {
			return fmt.Errorf("-%s: devstack.Config has no field %s", name, want)
		}
		if !hasVal {
			if field.Kind() == reflect.Bool {
				val = "true"
			} else if i+1 < len(args) {
				i++
				val = args[i]
			} else {
				return fmt.Errorf("-%s needs a value", name)
			}
		}
		if err := setField(field, val); err != nil {
			return fmt.Errorf("-%s %s: %w", name, val, err)
		}
	}
	return nil
}

// setField sets a field of a kind the devstack's flags have.
func setField(f reflect.Value, val string) error {
	if f.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(val)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case reflect.Bool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.String:
		f.SetString(val)
	default:
		return fmt.Errorf("a field of type %v", f.Type())
	}
	return nil
}

// TestSetConfigFlags checks the devstack flags scripts/fleet.sh passes
// through.
func TestSetConfigFlags(t *testing.T) {
	for _, tc := range []struct {
		args    string
		want    func(devstack.Config) bool
		wantErr bool
	}{
		{"-gke-request-quota 600", func(c devstack.Config) bool { return c.GKERequestQuota == 600 }, false},
		{"-kubernetes-max-running=3 -lease-ttl 2s", func(c devstack.Config) bool {
			return c.KubernetesMaxRunning == 3 && c.LeaseTTL == 2*time.Second
		}, false},
		{"--tasks-duplicate-rate 0.25 -kubernetes", func(c devstack.Config) bool {
			return c.TasksDuplicateRate == 0.25 && c.Kubernetes
		}, false},
		{"-kubernetes=false", func(c devstack.Config) bool { return !c.Kubernetes }, false},
		{"-no-such-flag 1", nil, true},
		{"-gke-request-quota many", nil, true},
		{"-gke-request-quota", nil, true},
	} {
		cfg := devstack.Config{Kubernetes: true}
		err := setConfigFlags(&cfg, strings.Fields(tc.args))
		switch {
		case tc.wantErr && err == nil:
			t.Errorf("%q: no error, want one", tc.args)
		case !tc.wantErr && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case !tc.wantErr && !tc.want(cfg):
			t.Errorf("%q: config %+v", tc.args, cfg)
		}
	}
}
