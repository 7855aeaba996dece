package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/wait"
)

// TestInstalledOutsideTheRepository installs the command with go install
// and starts it with its default flags and -instances 2 in a directory
// outside the repository, with a user cache of its own: its two
// instances, processes of the installed binary, must serve the API; it
// must start with the seed it carries, build the Kubernetes API server
// from the source it carries, and /healthz/kubernetes must answer 200
// once it has. The
// build reuses the go build cache, so it takes about a minute once the
// machine has built the server once (scripts/test.sh does first), several
// on a cold cache.
func TestInstalledOutsideTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the devstack and builds the Kubernetes API server")
	}
	deadline := time.Now().Add(25 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-time.Minute).Before(deadline) {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	goCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}
	bin := t.TempDir()
	install := exec.CommandContext(ctx, "go", "install", ".")
	install.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}

	work := t.TempDir()
	for dir := work; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			t.Skipf("the temporary directory %s is inside a module (%s)", work, dir)
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	cache := filepath.Join(t.TempDir(), "cache")
	addr := freeAddr(t)
	var out syncBuffer
	cmd := exec.Command(filepath.Join(bin, "devstack"),
		"-addr", addr, "-pubsub-addr", freeAddr(t), "-firestore-addr", freeAddr(t),
		"-log-format", "json", "-instances", "2")
	cmd.Dir = work
	// The API server's binary goes into a cache of the test's own, so that
	// it is built from the source the devstack carries; the compiled
	// packages stay in the machine's build cache.
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "GOCACHE="+strings.TrimSpace(string(goCache)))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the devstack: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("the devstack's output ends:\n%s", out.tail(8<<10))
		}
	}()

	client := &http.Client{Timeout: 10 * time.Second}
	checkInstances(t, time.Until(deadline), client, "http://"+addr, exited)
	wait.Within(t, time.Until(deadline), "/healthz/kubernetes 200", func() (bool, string) {
		resp, err := client.Get("http://" + addr + "/healthz/kubernetes")
		if err != nil {
			exitedFatal(t, exited, "/healthz/kubernetes last failed: "+err.Error())
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var h struct {
			Ready    bool   `json:"ready"`
			Progress string `json:"progress"`
		}
		_ = json.Unmarshal(body, &h)
		if resp.StatusCode == http.StatusOK {
			if !h.Ready || !strings.Contains(h.Progress, filepath.Join(cache, "better-compute")) {
				t.Errorf("/healthz/kubernetes = 200 %s; want ready, with a binary in %s", body, cache)
			}
			return true, ""
		}
		last := resp.Status + " " + string(body)
		if strings.Contains(h.Progress, "could not be built") {
			t.Fatalf("/healthz/kubernetes = %s", last)
		}
		exitedFatal(t, exited, "/healthz/kubernetes last answered "+last)
		return false, last
	})
}

// exitedFatal fails t when the devstack has exited, saying what it last
// answered.
func exitedFatal(t *testing.T, exited chan struct{}, last string) {
	t.Helper()
	select {
	case <-exited:
		t.Fatalf("the devstack exited; %s", last)
	default:
	}
}

// checkInstances waits for the devstack to serve, then checks that its two
// instances, processes of the installed binary, serve the API.
func checkInstances(t *testing.T, timeout time.Duration, client *http.Client, url string, exited chan struct{}) {
	t.Helper()
	wait.Within(t, timeout, "/healthz 200", func() (bool, string) {
		resp, err := client.Get(url + "/healthz")
		if err != nil {
			exitedFatal(t, exited, "/healthz last failed: "+err.Error())
			return false, err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			exitedFatal(t, exited, "/healthz last answered "+resp.Status)
		}
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	resp, err := client.Get(url + "/dev/instances")
	if err != nil {
		t.Fatalf("GET /dev/instances: %v", err)
	}
	var list struct {
		Instances []struct {
			PID  int    `json:"pid"`
			Addr string `json:"addr"`
		} `json:"instances"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Instances) != 2 || list.Instances[0].PID == list.Instances[1].PID {
		t.Fatalf("GET /dev/instances = %+v, %v; want two processes", list, err)
	}
	resp, err = client.Post(url+"/dev/token", "application/json", strings.NewReader(`{"sub":"alice"}`))
	if err != nil {
		t.Fatalf("POST /dev/token: %v", err)
	}
	var tok struct{ Token string }
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	for range 4 {
		req, _ := http.NewRequest(http.MethodPost, url+"/api/compute/kubernetesClusters/list", strings.NewReader(`{"tenantId":"acme"}`))
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("list clusters through the instances: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list clusters through the instances = %s %s, want 200", resp.Status, body)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer is the child's output, written by two copies at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
