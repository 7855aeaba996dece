package kubesim

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// apiserverIdle is how long BenchmarkMemoryOfOneServer leaves its server
// alone before measuring it idle: short by default, for CI's one run of
// every benchmark; the figure in functions/devstack/README.md is of 20 s.
var apiserverIdle = flag.Duration("apiserver.idle", 5*time.Second, "BenchmarkMemoryOfOneServer: how long the server is left alone before it is measured idle")

// BenchmarkMemoryOfOneServer reports the RSS of one API server idle
// (started, -apiserver.idle later) and in use (500 ConfigMaps of 1 KiB
// written, listed, and a watch open):
//
//	go test -run '^$' -bench '^BenchmarkMemoryOfOneServer$' -benchtime=1x ./emulators/kubesim -args -apiserver.idle=20s
func BenchmarkMemoryOfOneServer(b *testing.B) {
	for range b.N {
		idle, inUse := measureOneServer(b)
		b.ReportMetric(float64(idle>>10), "idle-MB")
		b.ReportMetric(float64(inUse>>10), "in-use-MB")
	}
}

// measureOneServer returns the RSS of a server of its own, in kB: idle,
// then in use.
func measureOneServer(b *testing.B) (idle, inUse int64) {
	api := ForTest(b)
	pid := api.cmd.Process.Pid
	time.Sleep(*apiserverIdle) // the measurement is of a server left alone
	idle = rssKB(b, pid)
	cs, err := kubernetes.NewForConfig(api.RESTConfig(""))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for range w.ResultChan() {
		}
	}()
	data := map[string]string{"v": strings.Repeat("x", 1024)}
	for i := range 500 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: data}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for range 5 {
		if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return idle, rssKB(b, pid)
}

func rssKB(t testing.TB, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
