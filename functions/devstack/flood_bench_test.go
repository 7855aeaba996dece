package devstack_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/functions/devstack"
)

// floodClients is how many clients of the flooding tenant call at once.
const floodClients = 8

// BenchmarkAPINeighbourFlood measures what one tenant's flood of creates
// does to another tenant's calls (issue 37, API.md §10): with the
// functions on three instances, the victim (globex) lists its clusters
// and creates clusters, one call after another, first on an idle stack,
// then while acme's 8 clients create clusters and node pools as fast as
// they can. It reports the victim's list and create p50 and p99 in both
// phases and the ratio of each p99 under the flood to idle (the goal: at
// most 2), and the flood's calls per second.
//
// Why the devstack cannot hold the goal on 2 cores: the instances, the
// emulators, the reconcile runs the flood kicks (in production another
// service's instances) and the clients all share the machine's cores,
// and the Firestore emulator serves every RPC under one lock. Nothing on
// the API path queues one tenant behind another: the front passes each
// request on at once, an instance serves every request in its own
// goroutine with no limit of concurrency, and two tenants' transactions
// touch no common document (a tenant's creates meet only on its own
// tenant document, which keeps its quota of clusters). So the victim
// waits for CPU, and for the emulator's lock: its p50 and p99 grow with
// the flood's share of them. It reports the CPU the stack's processes
// used in each phase (stack-cores-*) and the machine's load average, so
// that a run on a machine busy with other work reads as such. On Cloud
// Run each instance has its own CPU, and the flood scales the instances
// out instead of taking the victim's.
//
// Measured (2 cores, 3 instances, the machine shared with other work at
// a load average of 4 to 11; 16 runs of this and nearby paces): the p99
// under the flood is a median 3.5 times the idle one for list (2.2 to
// 11.5), 4.3 for create (1.2 to 14.4); the p50 2.0 to 3.4 times for
// list, 2.8 to 6.4 for create. A limit of each principal's calls in
// flight per instance (2) was tried, changed neither beyond the runs'
// spread, and was left out.
func BenchmarkAPINeighbourFlood(b *testing.B) {
	// The victim calls at an interactive pace: a list and a create every
	// pace, for each phase.
	const phase, pace = 5 * time.Second, 20 * time.Millisecond
	cfg := instancesConfig(3)
	// Runs and the watchdog at the pace of the deployed functions'
	// defaults, so that each create costs the one reconcile run its kick
	// starts in the phases, as it would.
	cfg.ConvergingInterval, cfg.GKEOperationTime, cfg.SteadyInterval = 30*time.Second, 3*time.Second, 5*time.Minute
	cfg.LeaseTTL, cfg.WatchdogInterval, cfg.WatchdogGrace = 30*time.Second, devstack.DefaultWatchdogInterval, time.Minute
	withTenant(cfg.Seed, "globex", "hank", nil)
	e := startEnv(b, cfg)
	victim := e.tenantClient(b, "globex", "hank")
	// A page of 10 clusters to list, the same in both phases.
	for i := range 10 {
		if _, err := victim.create(fmt.Sprintf("base-%d", i), ""); err != nil {
			b.Fatalf("create cluster: %v", err)
		}
	}
	var seq atomic.Int64
	// measure runs the victim's calls, one after another, for the phase.
	measure := func() (lists, creates []time.Duration) {
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for end := time.Now().Add(phase); time.Now().Before(end); <-tick.C {
			start := time.Now()
			if page, err := victim.list10(); err != nil || len(page) != 10 {
				b.Errorf("victim's list = %d clusters, %v; want 10", len(page), err)
			}
			lists = append(lists, time.Since(start))
			start = time.Now()
			if _, err := victim.create(fmt.Sprintf("v-%d", seq.Add(1)), ""); err != nil {
				b.Errorf("victim's create: %v", err)
			}
			creates = append(creates, time.Since(start))
		}
		return lists, creates
	}
	b.ResetTimer()
	cpu := e.cpuSeconds()
	idleLists, idleCreates := measure()
	idleCPU := (e.cpuSeconds() - cpu) / phase.Seconds()

	flood := e.tenantClient(b, "acme", "alice")
	stop := make(chan struct{})
	var floodCalls, floodFailed atomic.Int64
	var wg sync.WaitGroup
	for w := range floodClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// A standard cluster with one pool, then three pools more.
				var cl struct {
					ID string `json:"id"`
				}
				err := flood.call("kubernetesClusters/create", map[string]any{"tenantId": "acme", "poolId": "pool-dev",
					"name": fmt.Sprintf("flood-%d-%d", w, i), "mode": "standard", "region": "us-central1",
					"nodePools": []any{poolSpec("base", 1)}}, &cl)
				floodCalls.Add(1)
				if err != nil {
					floodFailed.Add(1)
					continue
				}
				for p := range 3 {
					err := flood.call("kubernetesNodePools/create", map[string]any{"tenantId": "acme", "clusterId": cl.ID,
						"name": fmt.Sprintf("np%d", p), "machineType": "e2-standard-4", "nodeCount": 1}, nil)
					floodCalls.Add(1)
					if err != nil {
						floodFailed.Add(1)
					}
				}
			}
		}()
	}
	began := time.Now()
	cpu = e.cpuSeconds()
	floodLists, floodCreates := measure()
	floodCPU := (e.cpuSeconds() - cpu) / time.Since(began).Seconds()
	close(stop)
	wg.Wait()
	floodRate := float64(floodCalls.Load()) / time.Since(began).Seconds()
	b.StopTimer()
	if n := floodFailed.Load(); n > 0 {
		b.Errorf("%d of the flood's %d calls failed", n, floodCalls.Load())
	}

	q := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(float64(len(ds))*p))]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, m := range []struct {
		name        string
		idle, flood []time.Duration
	}{{"list", idleLists, floodLists}, {"create", idleCreates, floodCreates}} {
		b.ReportMetric(ms(q(m.idle, 0.5)), m.name+"-idle-p50-ms")
		b.ReportMetric(ms(q(m.idle, 0.99)), m.name+"-idle-p99-ms")
		b.ReportMetric(ms(q(m.flood, 0.5)), m.name+"-flood-p50-ms")
		b.ReportMetric(ms(q(m.flood, 0.99)), m.name+"-flood-p99-ms")
		if p99 := q(m.idle, 0.99); p99 > 0 {
			b.ReportMetric(float64(q(m.flood, 0.99))/float64(p99), m.name+"-p99-x-idle")
		}
		b.Logf("%s: idle p50 %.1f ms p99 %.1f ms (%d calls); under the flood p50 %.1f ms p99 %.1f ms (%d calls)",
			m.name, ms(q(m.idle, 0.5)), ms(q(m.idle, 0.99)), len(m.idle), ms(q(m.flood, 0.5)), ms(q(m.flood, 0.99)), len(m.flood))
	}
	b.ReportMetric(floodRate, "flood-calls/s")
	b.ReportMetric(idleCPU, "stack-cores-idle")
	b.ReportMetric(floodCPU, "stack-cores-flood")
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("flood: %d calls by %d clients, %.0f/s; the stack used %.2f cores idle, %.2f under the flood, of %d (load average %s)",
		floodCalls.Load(), floodClients, floodRate, idleCPU, floodCPU, runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
}

// cpuSeconds is the CPU time the stack's processes (this one, which runs
// the emulators and the front, and the instances) have used, from
// /proc; 0 where there is none.
func (e *env) cpuSeconds() float64 {
	pids := []int{os.Getpid()}
	for _, in := range e.Instances() {
		if in.PID != os.Getpid() {
			pids = append(pids, in.PID)
		}
	}
	var total float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command's name, which ends with ')':
		// utime and stime are the 12th and 13th, in clock ticks (100 a
		// second on Linux).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		for _, v := range f[11:13] {
			n, _ := strconv.ParseFloat(v, 64)
			total += n / 100
		}
	}
	return total
}

// list10 lists a page of 10 of the tenant's clusters.
func (c *tenantClient) list10() ([]struct{}, error) {
	var out struct {
		Clusters []struct{} `json:"clusters"`
	}
	err := c.call("kubernetesClusters/list", map[string]any{"tenantId": c.tenant, "pageSize": 10}, &out)
	return out.Clusters, err
}
