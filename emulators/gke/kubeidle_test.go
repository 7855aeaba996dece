package gke

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/better-compute/kubernetes/emulators/kubesim"

	"github.com/better-compute/kubernetes/shared/wait"
)

// startWait bounds the wait for an API server's start on a loaded
// machine (kubesim.DefaultReadyTimeout, with room for the Nodes).
const startWait = 2 * time.Minute

// newK8sEnvTuned is newK8sEnv with its Kubernetes options changed by tune.
func newK8sEnvTuned(t *testing.T, tune func(*Kubernetes)) *env {
	t.Helper()
	log := kubesim.TestLogger(t)
	bin, err := kubesim.Binary(context.Background(), log)
	if err != nil {
		t.Fatalf("kubesim.Binary: %v", err)
	}
	k := Kubernetes{
		Binary:       func(context.Context) (string, error) { return bin, nil },
		Dir:          t.TempDir(),
		Tokens:       []kubesim.Token{{Value: testToken, User: "tester", Groups: []string{"system:masters"}}},
		SyncInterval: 100 * time.Millisecond,
	}
	tune(&k)
	return newEnv(t, WithKubernetes(k), WithLogger(log))
}

// createNamed creates cluster name with one node and waits for it to be
// RUNNING.
func (e *env) createNamed(t *testing.T, name string) *containerpb.Cluster {
	t.Helper()
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name: name, NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA)}}})
	if err != nil {
		t.Fatalf("CreateCluster(%s): %v", name, err)
	}
	e.wait(t, op)
	c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: parent + "/clusters/" + name})
	if err != nil {
		t.Fatalf("GetCluster(%s): %v", name, err)
	}
	return c
}

// kubeOf is the Kubernetes API of the cluster named name.
func kubeOf(t *testing.T, e *env, name string) *kubeCluster {
	t.Helper()
	g := e.srv.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.clusters {
		if c.pb.Name == name && c.kube != nil {
			return c.kube
		}
	}
	t.Fatalf("cluster %s has no Kubernetes API", name)
	return nil
}

// server is k's running API server, nil when none runs.
func (k *kubeCluster) server() *kubesim.APIServer {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.api
}

// slots are the slots taken now and the most ever taken at once.
func (e *kubeEnv) slots() (running, peak int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running, e.peak
}

// ownClient connects to the cluster over a transport of its own (a Dial
// keeps client-go from sharing one), and returns with it what closes its
// connections, as a client that exits.
func ownClient(t *testing.T, c *containerpb.Cluster) (kubernetes.Interface, func()) {
	t.Helper()
	cs, _, done := countedClient(t, c)
	return cs, done
}

// use creates (or, when it is there, reads) the ConfigMap named after the
// cluster through a connection of its own, and ends the connection.
func use(t *testing.T, e *env, c *containerpb.Cluster) {
	t.Helper()
	cs, done := ownClient(t, c)
	defer done()
	ctx, cancel := context.WithTimeout(e.ctx, startWait)
	defer cancel()
	cms := cs.CoreV1().ConfigMaps("default")
	if _, err := cms.Get(ctx, c.Name, metav1.GetOptions{}); err == nil {
		return
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap in %s: %v", c.Name, err)
	}
}

// holdWatch watches the cluster's ConfigMaps through a connection of its
// own, which it holds until the returned stop.
func holdWatch(t *testing.T, e *env, c *containerpb.Cluster) (watch.Interface, func()) {
	t.Helper()
	cs, done := ownClient(t, c)
	// The watch lasts as long as its context.
	ctx, cancel := context.WithCancel(e.ctx)
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("watch configmaps of %s: %v", c.Name, err)
	}
	return w, func() { w.Stop(); cancel(); done() }
}

// expectAdded waits for the watch to report the ConfigMap name added.
func expectAdded(t *testing.T, w watch.Interface, name string) {
	t.Helper()
	deadline := time.After(startWait)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended before it saw %s added", name)
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type == watch.Added && cm.Name == name {
				return
			}
		case <-deadline:
			t.Fatalf("the watch did not see %s added within %v", name, startWait)
		}
	}
}

// waitIdleFor waits until every server has gone d without a connection,
// by the clock, and the reaper has looked twice since.
func waitIdleFor(t *testing.T, e *kubeEnv, d time.Duration) {
	t.Helper()
	until := time.Now().Add(d)
	wait.For(t, d.String()+" without a connection", func() (bool, string) {
		return time.Now().After(until), "waiting"
	})
	n := e.reaps.Load()
	wait.For(t, "two passes of the reaper", func() (bool, string) {
		return e.reaps.Load() >= n+2, "the reaper makes no passes"
	})
}

// TestKubernetesIdleServerStops checks that a server no connection has
// used for Kubernetes.IdleTimeout is stopped, its process gone, and that
// the next request starts it again on the same state; a server held
// by a watch is not stopped, and the watch goes on.
func TestKubernetesIdleServerStops(t *testing.T) {
	const idle = 2 * time.Second
	e := newK8sEnvTuned(t, func(k *Kubernetes) { k.IdleTimeout = idle })
	c := e.createCluster(t)
	k := c1Kube(t, e)
	use(t, e, c)
	first := k.server()
	if first == nil {
		t.Fatalf("no server runs after a connection")
	}
	wait.For(t, "the idle server stopped", func() (bool, string) {
		return k.server() == nil, "the server still runs after " + idle.String() + " without a connection"
	})
	select {
	case <-first.Exited():
	case <-time.After(time.Minute):
		t.Fatalf("the stopped server's process has not exited")
	}
	wait.For(t, "every slot free", func() (bool, string) {
		running, _ := e.srv.GServer.kube.slots()
		return running == 0, fmt.Sprintf("slots taken after the stop = %d, want 0", running)
	})

	// The next request starts it again, with its objects and Nodes.
	cs, done := ownClient(t, c)
	ctx, cancel := context.WithTimeout(e.ctx, startWait)
	defer cancel()
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, c.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("get the configmap after the restart: %v", err)
	}
	waitNodes(t, cs, map[string]int{"p0": 1})
	done()
	second := k.server()
	if second == nil || second == first {
		t.Fatalf("server after the next connection = %p (first %p), want a new one", second, first)
	}

	// A watch holds its connection past the timeout: the server runs on
	// and the watch sees what is created after.
	w, stop := holdWatch(t, e, c)
	defer stop()
	waitIdleFor(t, e.srv.GServer.kube, 2*idle)
	if k.server() != second {
		t.Fatalf("the server held by a watch was stopped")
	}
	use(t, e, &containerpb.Cluster{Name: "after-the-timeout", Endpoint: c.Endpoint, MasterAuth: c.MasterAuth})
	expectAdded(t, w, "after-the-timeout")
	if k.server() != second {
		t.Errorf("the server held by a watch was replaced")
	}
}

func c1Kube(t *testing.T, e *env) *kubeCluster { return kubeOf(t, e, "c1") }

// TestKubernetesMaxRunning uses more clusters than Kubernetes.MaxRunning
// allows servers: a start stops the least recently used server that
// serves no request, even under an idle keep-alive connection, whose next
// request is served by the restarted server; when requests hold every
// running server, the next start waits, never beyond the bound, its
// caller answered 503 with Retry-After meanwhile, until one is let go; the
// objects of each cluster survive its stops, and no request is cut.
func TestKubernetesMaxRunning(t *testing.T) {
	e := newK8sEnvTuned(t, func(k *Kubernetes) { k.MaxRunning = 2; k.IdleTimeout = -1 })
	env := e.srv.GServer.kube
	c1, c2, c3 := e.createNamed(t, "c1"), e.createNamed(t, "c2"), e.createNamed(t, "c3")
	k1, k2, k3 := kubeOf(t, e, "c1"), kubeOf(t, e, "c2"), kubeOf(t, e, "c3")
	runs := func() (bool, bool, bool) { return k1.server() != nil, k2.server() != nil, k3.server() != nil }

	use(t, e, c1)
	use(t, e, c2)
	// A client that keeps its connection to c3 open, idle, once served.
	cs3, conns3, done3 := countedClient(t, c3)
	defer done3()
	getCM := func(cs kubernetes.Interface, name string) error {
		ctx, cancel := context.WithTimeout(e.ctx, startWait)
		defer cancel()
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		return err
	}
	if err := getCM(cs3, "c3"); err != nil {
		t.Fatalf("c3: %v", err)
	}
	// c1 is the least recently used: it goes.
	if r1, r2, r3 := runs(); r1 || !r2 || !r3 {
		t.Fatalf("after c1, c2, c3: running %v %v %v, want c2 and c3", r1, r2, r3)
	}

	// c2 held by a watch: c1's start stops c3, held only by an idle
	// keep-alive connection.
	w2, stop2 := holdWatch(t, e, c2)
	defer stop2()
	held := k2.server()
	use(t, e, c1) // reads the ConfigMap made before its stop
	if r1, r2, r3 := runs(); !r1 || !r2 || r3 {
		t.Fatalf("after c1 again with c2 held: running %v %v %v, want c1 and c2", r1, r2, r3)
	}
	if k2.server() != held {
		t.Fatalf("c2's server, held by a watch, was stopped")
	}
	// The idle connection's next request starts c3 again (stopping c1)
	// and is served by it, on the same connection.
	if err := getCM(cs3, "c3"); err != nil {
		t.Fatalf("c3 after its server was stopped under an idle connection: %v", err)
	}
	if n := conns3(); n != 1 {
		t.Errorf("c3's client opened %d connections, want its one kept alive", n)
	}
	if r1, r2, r3 := runs(); r1 || !r2 || !r3 {
		t.Fatalf("after c3 again: running %v %v %v, want c2 and c3", r1, r2, r3)
	}

	// Both running servers held by watches: c1's start waits, and its
	// caller is answered 503 with Retry-After rather than kept waiting.
	_, stop3 := holdWatch(t, e, c3)
	code, retryAfter, reason := rawGet(t, c1, "/api/v1/namespaces/default/configmaps/c1")
	if code != http.StatusServiceUnavailable || retryAfter != strconv.Itoa(kubeRetryAfter) || reason != string(metav1.StatusReasonServiceUnavailable) {
		t.Errorf("a request to c1 while c2 and c3 are held: %d, Retry-After %q, reason %q; want 503, %d, ServiceUnavailable", code, retryAfter, reason, kubeRetryAfter)
	}
	if r1, r2, r3 := runs(); r1 || !r2 || !r3 {
		t.Fatalf("while c2 and c3 are held: running %v %v %v, want c2 and c3 only", r1, r2, r3)
	}
	// client-go retries the 503s by itself, until c3 is let go.
	got := make(chan error, 1)
	go func() {
		cs, done := ownClient(t, c1)
		defer done()
		got <- getCM(cs, "c1")
	}()
	wait.For(t, "c1's start queued", func() (bool, string) {
		k1.mu.Lock()
		defer k1.mu.Unlock()
		return k1.busy != nil, "c1's start is not under way"
	})
	stop3()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("get c1's configmap once c3 was let go: %v", err)
		}
	case <-time.After(2 * startWait):
		t.Fatalf("c1's call did not return after c3 was let go")
	}
	if r1, r2, r3 := runs(); !r1 || !r2 || r3 {
		t.Fatalf("after c3 was let go: running %v %v %v, want c1 and c2", r1, r2, r3)
	}
	use(t, e, &containerpb.Cluster{Name: "seen-by-c2", Endpoint: c2.Endpoint, MasterAuth: c2.MasterAuth})
	expectAdded(t, w2, "seen-by-c2")
	if k2.server() != held {
		t.Errorf("c2's server, held by a watch all along, was replaced")
	}
	if running, peak := env.slots(); running != 2 || peak != 2 {
		t.Errorf("slots taken = %d, most at once %d; want 2 and 2", running, peak)
	}
}

// TestKubernetesMaxRunningConverges has clients of more clusters than
// Kubernetes.MaxRunning call at once, each several times: every call
// succeeds (client-go retrying the 503s of the waits), and never do more
// servers run than the bound.
func TestKubernetesMaxRunningConverges(t *testing.T) {
	const clusters, calls = 4, 3
	e := newK8sEnvTuned(t, func(k *Kubernetes) { k.MaxRunning = 2; k.IdleTimeout = -1 })
	var cs []*containerpb.Cluster
	for i := range clusters {
		cs = append(cs, e.createNamed(t, fmt.Sprintf("c%d", i)))
	}
	errs := make(chan error, clusters)
	for _, c := range cs {
		go func() {
			client, done := ownClient(t, c)
			defer done()
			ctx, cancel := context.WithTimeout(e.ctx, 4*startWait)
			defer cancel()
			cms := client.CoreV1().ConfigMaps("default")
			for i := range calls {
				name := fmt.Sprintf("%s-%d", c.Name, i)
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
			}
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err == nil && len(list.Items) < calls {
				err = fmt.Errorf("%d configmaps, want %d", len(list.Items), calls)
			}
			if err != nil {
				errs <- fmt.Errorf("list in %s: %w", c.Name, err)
				return
			}
			errs <- nil
		}()
	}
	for range clusters {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if _, peak := e.srv.GServer.kube.slots(); peak > 2 {
		t.Errorf("most servers running at once = %d, want at most the bound, 2", peak)
	}
}

// countedClient is ownClient that also reports how many connections it
// has opened.
func countedClient(t *testing.T, c *containerpb.Cluster) (kubernetes.Interface, func() int, func()) {
	t.Helper()
	ca, err := base64.StdEncoding.DecodeString(c.MasterAuth.GetClusterCaCertificate())
	if err != nil {
		t.Fatalf("clusterCaCertificate: %v", err)
	}
	cfg := kubesim.RESTConfig(c.Endpoint, ca, testToken)
	var mu sync.Mutex
	var conns []net.Conn
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
		return conn, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("HTTPClientFor: %v", err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatalf("NewForConfigAndClient: %v", err)
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
	return cs, count, func() {
		hc.CloseIdleConnections()
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range conns {
			conn.Close()
		}
	}
}

// rawGet makes one GET of path on the cluster's endpoint, with no retry,
// and returns its status code, Retry-After and the reason of its Status.
func rawGet(t *testing.T, c *containerpb.Cluster, path string) (code int, retryAfter, reason string) {
	t.Helper()
	ca, err := base64.StdEncoding.DecodeString(c.MasterAuth.GetClusterCaCertificate())
	if err != nil {
		t.Fatalf("clusterCaCertificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: startWait, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+c.Endpoint+path, nil)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var st metav1.Status
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(st.Reason)
}
