package devstack_test

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/wait"
)

// What BenchmarkMemoryOfSubstrates measures (scripts/memory.sh sets
// them). Their defaults make it one substrate under the devstack's
// defaults, small enough for CI's one run of every benchmark.
var (
	memorySubstrates = flag.Int("memory.substrates", 1, "BenchmarkMemoryOfSubstrates: create-mode substrates made at once")
	memoryConfigs    = flag.String("memory.configs", "defaults", `BenchmarkMemoryOfSubstrates: comma-separated settings: "kept", "bounded", "defaults"`)
	memoryDeadline   = flag.Duration("memory.deadline", 10*time.Minute, "BenchmarkMemoryOfSubstrates: how long every substrate may take to be ready")
	memoryAfter      = flag.Bool("memory.after", false, "BenchmarkMemoryOfSubstrates: watch the memory over the steady interval after (minutes)")
)

// BenchmarkMemoryOfSubstrates makes -memory.substrates create-mode
// substrates at once, each with two nodes joined, and reports the memory
// (RSS) of this process and of its API servers: at the peak and once
// every substrate is ready; with -memory.after, it logs it over the
// steady interval after too (with an idle timeout). -memory.configs says
// under which settings, a comma-separated list of: "kept", every API
// server kept running (as the devstack did before Kubernetes.IdleTimeout
// and MaxRunning); "bounded", bounded to half as many servers with an
// idle timeout of 20 s; "defaults", the devstack's defaults
// (-kubernetes-max-running and -kubernetes-idle-timeout); each is a
// sub-benchmark. scripts/memory.sh runs it:
//
//	go test -run '^$' -bench '^BenchmarkMemoryOfSubstrates$' -benchtime=1x -timeout 90m ./functions/devstack \
//		-args -memory.substrates=50 -memory.configs=defaults -memory.after
func BenchmarkMemoryOfSubstrates(b *testing.B) {
	n, deadline := *memorySubstrates, *memoryDeadline
	if n <= 0 {
		b.Fatalf("-memory.substrates %d: want at least 1", n)
	}
	configs := map[string]bool{}
	for _, c := range strings.Split(*memoryConfigs, ",") {
		configs[strings.TrimSpace(c)] = true
	}
	for _, m := range []struct {
		name string
		idle time.Duration
		max  int
	}{
		{"kept", -1, -1},
		{"bounded", 20 * time.Second, max(n/2, 1)},
		{"defaults", 0, 0},
	} {
		if !configs[m.name] {
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			for range b.N {
				measureSubstrates(b, n, deadline, m.idle, m.max)
			}
		})
	}
}

// measureSubstrates makes n substrates at once, with an idle timeout and
// a bound of running API servers as Config's, and reports the memory at
// the peak and once they are ready, in MB.
func measureSubstrates(b *testing.B, n int, deadline, idle time.Duration, most int) {
	cfg := fastConfig()
	cfg.Kubernetes = true
	cfg.KubernetesIdleTimeout, cfg.KubernetesMaxRunning = idle, most
	// As the devstack's: a ready substrate's client lets its connection go
	// (client-go, after 90 s) before its next steady run.
	cfg.SteadyInterval = 5 * time.Minute
	e := startEnv(b, cfg)
	wait.Within(b, 10*time.Minute, "the substrates converged", func() (bool, string) {
		status, h := healthzKubernetes(b, e.URL)
		return status == http.StatusOK && h.Ready, h.Progress
	})
	var mu sync.Mutex
	var peak memSample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if s := sampleMemory(); s.total() > peak.total() {
				mu.Lock()
				peak = s
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	stopSampling := sync.OnceFunc(func() { close(stop); wg.Wait() })
	// Logged even when a wait fails.
	b.Cleanup(func() {
		stopSampling()
		b.Logf("peak: %s", peak)
	})
	start := time.Now()
	pools := make([]string, n)
	for i := range pools {
		pools[i] = fmt.Sprintf("pool-mem%d", poolSeq.Add(1))
		putPool(b, e, createPolicy(pools[i], 1, flavor("cpu", 1)))
	}
	wait.Within(b, deadline, "every substrate ready", func() (bool, string) {
		ready := 0
		var last string
		for _, p := range pools {
			list, err := e.api.substrates(p)
			if err == nil && len(list) == 1 && readyWith(2)(list[0]) {
				ready++
			} else {
				last = fmt.Sprint(list, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return ready == n, fmt.Sprintf("%d of %d ready after %v (peak so far: %s); one not ready: %s", ready, n, time.Since(start).Round(time.Second), peak, last)
	})
	took := time.Since(start)
	ready := sampleMemory()
	b.Logf("%d substrates ready with 2 nodes joined in %v; max running %s, idle timeout %v",
		n, took.Round(time.Second), maxRunning(most), idleTimeout(idle))
	b.Logf("at ready: %s", ready)
	if *memoryAfter && idle >= 0 {
		// Ready substrates keep coming back (a steady run every
		// SteadyInterval), so the servers may never all be stopped at
		// once: what they hold is watched over a steady interval.
		watch := cfg.SteadyInterval
		if idle > 0 {
			watch += idle
		}
		var sum, low, high memSample
		var samples int64
		for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(2 * time.Second) {
			s := sampleMemory()
			if samples == 0 || s.total() < low.total() {
				low = s
			}
			if s.total() > high.total() {
				high = s
			}
			sum.self, sum.apiServers, sum.servers = sum.self+s.self, sum.apiServers+s.apiServers, sum.servers+s.servers
			samples++
		}
		b.Logf("over the %v after: mean total %d MB, %.1f API servers; least %s; most %s",
			watch, (sum.self+sum.apiServers)/samples>>10, float64(sum.servers)/float64(samples), low, high)
	}
	stopSampling()
	b.ReportMetric(float64(peak.total()>>10), "peak-MB")
	b.ReportMetric(float64(ready.total()>>10), "ready-MB")
	b.ReportMetric(float64(ready.servers), "apiservers")
	b.ReportMetric(took.Seconds(), "ready-s")
}

func idleTimeout(d time.Duration) string {
	switch {
	case d < 0:
		return "none"
	case d == 0:
		return gke.DefaultKubernetesIdleTimeout.String()
	}
	return d.String()
}

func maxRunning(n int) string {
	switch {
	case n < 0:
		return "unbounded"
	case n == 0:
		return strconv.Itoa(gke.DefaultKubernetesMaxRunning)
	}
	return strconv.Itoa(n)
}

// memSample is the RSS of this process and of its API servers.
type memSample struct {
	self, apiServers int64 // kB
	servers          int
}

func (s memSample) total() int64 { return s.self + s.apiServers }

func (s memSample) String() string {
	per := int64(0)
	if s.servers > 0 {
		per = s.apiServers / int64(s.servers)
	}
	return fmt.Sprintf("total %d MB: devstack %d MB, %d API servers %d MB (%d MB each)",
		s.total()>>10, s.self>>10, s.servers, s.apiServers>>10, per>>10)
}

// sampleMemory reads VmRSS of this process and of its children that run
// a kube-apiserver binary.
func sampleMemory() memSample {
	s := memSample{self: rss("self")}
	me := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) < 2 || f[1] != me {
			continue
		}
		exe, _ := os.Readlink(filepath.Join(d, "exe"))
		if !strings.Contains(filepath.Base(exe), "kube-apiserver") {
			continue
		}
		s.apiServers += rss(filepath.Base(d))
		s.servers++
	}
	return s
}

// rss is the VmRSS of /proc/<pid>, in kB.
func rss(pid string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
