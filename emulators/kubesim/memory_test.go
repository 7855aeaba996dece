package kubesim

import (
	"context"
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

// TestMemoryOfOneServer is a measurement, run by hand:
//
//	MEASURE_APISERVER=1 go test -run TestMemoryOfOneServer -v ./emulators/kubesim
//
// It logs the RSS of one API server idle (started, 20 s later) and in use
// (500 ConfigMaps of 1 KiB written, listed, and a watch open).
func TestMemoryOfOneServer(t *testing.T) {
	if os.Getenv("MEASURE_APISERVER") == "" {
		t.Skip("a measurement: MEASURE_APISERVER=1 go test -run TestMemoryOfOneServer -v ./emulators/kubesim")
	}
	api := ForTest(t)
	pid := api.cmd.Process.Pid
	time.Sleep(20 * time.Second) // the measurement is of a server left alone
	t.Logf("idle: %d MB", rssKB(t, pid)>>10)
	cs, err := kubernetes.NewForConfig(api.RESTConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
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
			t.Fatal(err)
		}
	}
	for range 5 {
		if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("in use: %d MB", rssKB(t, pid)>>10)
}

func rssKB(t *testing.T, pid int) int64 {
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
