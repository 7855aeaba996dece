package gke

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"

	"github.com/better-compute/kubernetes/emulators/kubesim"

	"github.com/better-compute/kubernetes/shared/wait"
)

// kubeStatusOf is the server of the cluster named name in srv's
// KubernetesStatus, and the whole status.
func kubeStatusOf(t *testing.T, srv *Server, name string) (KubernetesServer, KubernetesStatus) {
	t.Helper()
	st, err := srv.KubernetesStatus()
	if err != nil {
		t.Fatalf("KubernetesStatus: %v", err)
	}
	for _, s := range st.Servers {
		if s.Cluster == parent+"/clusters/"+name {
			return s, st
		}
	}
	t.Fatalf("KubernetesStatus lists no server of cluster %s: %+v", name, st.Servers)
	return KubernetesServer{}, st
}

// createStatusCluster starts the create of cluster name, and returns its
// operation.
func createStatusCluster(t *testing.T, e *env, name string) *containerpb.Operation {
	t.Helper()
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name: name, NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA)}}})
	if err != nil {
		t.Fatalf("CreateCluster(%s): %v", name, err)
	}
	return op
}

// endpointClient is an HTTP client of the cluster's endpoint, as its
// administrator, over connections of its own, and the endpoint's base URL.
func endpointClient(t *testing.T, srv *Server, name string) (*http.Client, string, string) {
	t.Helper()
	acc, err := srv.KubernetesAccess(parent + "/clusters/" + name)
	if err != nil {
		t.Fatalf("KubernetesAccess(%s): %v", name, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(acc.CAPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, "https://" + acc.Endpoint, acc.AdminToken
}

// getEndpoint sends GET path to the cluster's endpoint as its
// administrator; the response's body is the caller's to close.
func getEndpoint(ctx context.Context, c *http.Client, base, token, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return c.Do(req)
}

func TestKubernetesStatusWithoutKubernetes(t *testing.T) {
	e := newEnv(t)
	if _, err := e.srv.KubernetesStatus(); !errors.Is(err, ErrNoKubernetes) {
		t.Errorf("KubernetesStatus without WithKubernetes = %v, want ErrNoKubernetes", err)
	}
}

// TestKubernetesStatusDownIdleFailed follows a cluster's server through
// the states that need no binary: down while the cluster is created, idle
// (never run) once it is, and failed when a start cannot get the binary.
func TestKubernetesStatusDownIdleFailed(t *testing.T) {
	noBinary := errors.New("no binary in this test")
	e := newEnv(t, WithKubernetes(Kubernetes{
		Binary:      func(context.Context) (string, error) { return "", noBinary },
		Dir:         t.TempDir(),
		MaxRunning:  3,
		IdleTimeout: -1,
	}))
	op := createStatusCluster(t, e, "c1")
	if s, st := kubeStatusOf(t, e.srv, "c1"); s.State != KubernetesDown || st.MaxRunning != 3 || st.IdleTimeout >= 0 || st.Slots != 0 {
		t.Errorf("while the create runs: %+v of %+v, want down, the bound 3, no idle timeout, no slot taken", s, st)
	}
	e.wait(t, op)
	s, _ := kubeStatusOf(t, e.srv, "c1")
	if s.State != KubernetesIdle || !s.Since.IsZero() || s.Endpoint == "" || s.ID == "" || s.Queue != -1 {
		t.Errorf("once created: %+v, want idle, never run (no since), with its endpoint and ID, in no queue", s)
	}

	c, base, token := endpointClient(t, e.srv, "c1")
	resp, err := getEndpoint(e.ctx, c, base, token, "/version")
	if err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /version without a binary = %d, want 503", resp.StatusCode)
	}
	s, st := kubeStatusOf(t, e.srv, "c1")
	if s.State != KubernetesFailed || !strings.Contains(s.Error, noBinary.Error()) || s.Since.IsZero() || st.Slots != 0 {
		t.Errorf("after a failed start: %+v of %+v, want failed since then, saying why, its slot given back", s, st)
	}
	// The failure is forgotten as a state once the next request may try
	// again, not as the reason.
	wait.Within(t, 2*startRetry+30*time.Second, "the failed server idle again", func() (bool, string) {
		s, _ := kubeStatusOf(t, e.srv, "c1")
		return s.State == KubernetesIdle && strings.Contains(s.Error, noBinary.Error()), string(s.State) + " " + s.Error
	})
}

// TestKubernetesStatusRunningWaitingBound runs two clusters' servers
// under a bound of one: the first runs while a watch holds it, the
// second's start waits for its slot, and once the watch ends the second
// runs and the first is idle since its last use.
func TestKubernetesStatusRunningWaitingBound(t *testing.T) {
	log := kubesim.TestLogger(t)
	bin, err := kubesim.Binary(context.Background(), log)
	if err != nil {
		t.Fatalf("kubesim.Binary: %v", err)
	}
	e := newEnv(t, WithLogger(log), WithKubernetes(Kubernetes{
		Binary:       func(context.Context) (string, error) { return bin, nil },
		Dir:          t.TempDir(),
		SyncInterval: 100 * time.Millisecond,
		MaxRunning:   1,
		IdleTimeout:  -1,
	}))
	e.wait(t, createStatusCluster(t, e, "c1"))
	e.wait(t, createStatusCluster(t, e, "c2"))

	// A watch on c1: the request under way holds its server.
	c1, base1, token1 := endpointClient(t, e.srv, "c1")
	before := time.Now()
	watchCtx, endWatch := context.WithCancel(e.ctx)
	defer endWatch()
	var watch *http.Response
	wait.Within(t, startWait, "a watch on c1", func() (bool, string) {
		resp, err := getEndpoint(watchCtx, c1, base1, token1, "/api/v1/namespaces?watch=true")
		if err != nil {
			return false, err.Error()
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return false, resp.Status // 503 while it starts, on a slow machine
		}
		watch = resp
		return true, ""
	})
	s, st := kubeStatusOf(t, e.srv, "c1")
	if s.State != KubernetesRunning || s.Since.Before(before) || s.StartTook <= 0 || s.Requests != 1 || st.Slots != 1 || st.MaxRunning != 1 {
		t.Errorf("c1 under a watch: %+v of %+v, want running since its start, one request, the one slot taken", s, st)
	}

	// c2's start waits for the slot the watch holds.
	c2, base2, token2 := endpointClient(t, e.srv, "c2")
	got := make(chan int, 1)
	go func() {
		code := 0
		if resp, err := getEndpoint(e.ctx, c2, base2, token2, "/version"); err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		got <- code
	}()
	wait.Within(t, time.Minute, "c2 waiting for the slot", func() (bool, string) {
		s, st := kubeStatusOf(t, e.srv, "c2")
		return s.State == KubernetesWaiting && s.Queue == 0 && st.Waiting == 1, string(s.State)
	})
	if code := <-got; code != http.StatusServiceUnavailable {
		t.Errorf("GET /version of c2 while c1 holds the slot = %d, want 503 (its start waits)", code)
	}

	endWatch()
	watch.Body.Close()
	wait.Within(t, startWait, "c2 running and c1 idle", func() (bool, string) {
		s1, _ := kubeStatusOf(t, e.srv, "c1")
		s2, st := kubeStatusOf(t, e.srv, "c2")
		return s1.State == KubernetesIdle && s2.State == KubernetesRunning && st.Slots == 1 && st.Waiting == 0,
			string(s1.State) + ", " + string(s2.State)
	})
	s, st = kubeStatusOf(t, e.srv, "c1")
	if s.Since.IsZero() || !s.Since.Equal(s.LastUsed) || s.Requests != 0 || st.Peak != 1 {
		t.Errorf("c1 stopped for c2: %+v of %+v, want idle since its last use, no request, never more than the one slot", s, st)
	}
}
