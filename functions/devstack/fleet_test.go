package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
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
}

// fleetFromEnv reads FLEET_CLUSTERS, FLEET_PROJECTS, FLEET_QUOTA,
// FLEET_STEADY and FLEET_TIMESCALE over small defaults (CI's). The time
// scale slows the whole simulation (provider operations, converging and
// steady intervals alike) for a fleet bigger than one 2-core process,
// emulators included, can play in fast time.
func fleetFromEnv(t testing.TB) fleetConfig {
	f := fleetConfig{clusters: 60, quota: 1200, share: 0.8, opTime: 300 * time.Millisecond,
		converging: 300 * time.Millisecond, steady: 5 * time.Second, burst: 0.05}
	num := func(name string, into *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive number", name, v)
			}
			*into = n
		}
	}
	num("FLEET_CLUSTERS", &f.clusters)
	f.projects = max(2, f.clusters/200)
	num("FLEET_PROJECTS", &f.projects)
	num("FLEET_QUOTA", &f.quota)
	if v := os.Getenv("FLEET_TIMESCALE"); v != "" {
		k, err := strconv.ParseFloat(v, 64)
		if err != nil || k < 1 {
			t.Fatalf("FLEET_TIMESCALE=%q: want a number, at least 1", v)
		}
		scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * k) }
		f.opTime, f.converging, f.steady = scale(f.opTime), scale(f.converging), scale(f.steady)
	}
	if v := os.Getenv("FLEET_STEADY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("FLEET_STEADY=%q: want a duration", v)
		}
		f.steady = d
	}
	f.steadyFor = 2 * f.steady
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
}

// TestFleet runs a small fleet (FLEET_CLUSTERS and friends make it larger:
// scripts/fleet.sh) and holds it to its goals: no project ever above the
// reconciler's share of its quota, no rate limit shown as a state, every
// tenant change converged, and the changes' p99 within the provider's
// operation time and two converging intervals.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet simulation takes tens of seconds")
	}
	f := fleetFromEnv(t)
	r := runFleet(t, f)
	fmt.Printf("fleet: %d clusters, %d projects, quota exceeded %d, errors shown %d, converged %d/%d, change-to-ready p99 %.2f s (limit %.2f s)\n",
		f.clusters, f.projects, r.exceeded, r.errorsShown, r.converged, r.changed, r.p99.Seconds(), r.limit.Seconds())
	if r.exceeded != 0 || r.refused != 0 {
		t.Errorf("quota: %d project-minutes above the share, %d calls refused; want none", r.exceeded, r.refused)
	}
	if r.errorsShown != 0 {
		t.Errorf("%d error events, want none", r.errorsShown)
	}
	if r.converged != r.changed {
		t.Errorf("converged %d of %d changes", r.converged, r.changed)
	}
	// The latency goal is a measurement, held only where one is asked
	// for (scripts/fleet.sh): CI's machine is too busy for a timed
	// assertion to mean anything.
	if os.Getenv("FLEET_CLUSTERS") != "" && r.p99 > r.limit {
		t.Errorf("change-to-ready p99 %v, want at most %v", r.p99, r.limit)
	}
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
	deadline := time.Now().Add(2*time.Minute + time.Duration(f.clusters)*50*time.Millisecond)
	for n := 0; n < f.clusters; {
		if time.Now().After(deadline) {
			describeNotReady(t, s.FirestoreClient)
			t.Fatalf("%d of %d clusters ready by the deadline", n, f.clusters)
		}
		time.Sleep(500 * time.Millisecond)
		n = countReady(t, s.FirestoreClient)
	}
	rep.setup = time.Since(start)
	t.Logf("fleet of %d clusters in %d projects ready in %v (provider operations %v, converging interval %v, steady %v)",
		f.clusters, f.projects, rep.setup.Round(time.Second), f.opTime, f.converging, f.steady)

	// The steady phase.
	readsBefore, writesBefore := rpcs.reads(), rpcs.writeCount()
	tasksBefore := s.Tasks.Stats().Dispatched
	computeBefore := s.Compute.Calls(gkeemu.ComputeAggregatedList)
	steadyStart := time.Now()
	time.Sleep(f.steadyFor)
	steady := time.Since(steadyStart)
	intervals := float64(f.clusters) * steady.Seconds() / f.steady.Seconds()
	rep.readsPerInterval = float64(rpcs.reads()-readsBefore) / intervals
	rep.writesPerInterval = float64(rpcs.writeCount()-writesBefore) / intervals
	rep.tasksPerSecond = float64(s.Tasks.Stats().Dispatched-tasksBefore) / steady.Seconds()
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
	w.FS = wfs
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
	for end := time.Now().Add(30*time.Second + time.Duration(len(changed))*20*time.Millisecond); ; time.Sleep(100 * time.Millisecond) {
		n := 0
		for i, id := range poolIDs {
			if at, made, ok := readyAt(id); ok {
				took[i], tookCommit[i] = at.Sub(changedAt[i]), made.Sub(changedAt[i])
				n++
			} else {
				took[i], tookCommit[i] = time.Hour, time.Hour
			}
		}
		rep.converged = n
		if n == len(changed) || time.Now().After(end) {
			break
		}
	}
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
		if typ := m.Attributes["ce-type"]; typ == outbox.ClusterError || typ == outbox.NodePoolError {
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
		Name: name, Topic: "projects/bc-dev/topics/" + outbox.NodePoolReady, AckDeadlineSeconds: 10,
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
