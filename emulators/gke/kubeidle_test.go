package gke

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	corev1 "k8s.io/api/core/v1"
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
	return cs, func() {
		hc.CloseIdleConnections()
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range conns {
			conn.Close()
		}
	}
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
// the next connection starts it again on the same state; a server held
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

	// The next connection starts it again, with its objects and Nodes.
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
// allows servers: a start stops the least recently used server that no
// connection holds; when connections hold every running one, the next
// start waits for one to be let go, or after slotWait starts beyond the
// bound, which is restored once one is let go; the objects of each
// cluster survive its stops, and no held connection is cut.
func TestKubernetesMaxRunning(t *testing.T) {
	e := newK8sEnvTuned(t, func(k *Kubernetes) { k.MaxRunning = 2; k.IdleTimeout = -1 })
	env := e.srv.GServer.kube
	c1, c2, c3 := e.createNamed(t, "c1"), e.createNamed(t, "c2"), e.createNamed(t, "c3")
	k1, k2, k3 := kubeOf(t, e, "c1"), kubeOf(t, e, "c2"), kubeOf(t, e, "c3")
	runs := func() (bool, bool, bool) { return k1.server() != nil, k2.server() != nil, k3.server() != nil }

	use(t, e, c1)
	use(t, e, c2)
	use(t, e, c3) // c1 is the least recently used: it goes
	if r1, r2, r3 := runs(); r1 || !r2 || !r3 {
		t.Fatalf("after c1, c2, c3: running %v %v %v, want c2 and c3", r1, r2, r3)
	}

	// c2 held by a watch: c1's start stops c3, the unheld one.
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

	// Both running servers held: c3 waits until c1's connection ends.
	_, stop1 := holdWatch(t, e, c1)
	got := make(chan struct{})
	go func() {
		defer close(got)
		cs, done := ownClient(t, c3)
		defer done()
		ctx, cancel := context.WithTimeout(e.ctx, slotWait+startWait)
		defer cancel()
		if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "c3", metav1.GetOptions{}); err != nil {
			t.Errorf("get c3's configmap once c1 was let go: %v", err)
		}
	}()
	wait.For(t, "c3's connection waiting for a start", func() (bool, string) {
		k3.mu.Lock()
		defer k3.mu.Unlock()
		return k3.busy != nil, "c3's connection does not wait for a start"
	})
	if r1, r2, r3 := runs(); !r1 || !r2 || r3 {
		t.Fatalf("while c1 and c2 are held: running %v %v %v, want c1 and c2 only", r1, r2, r3)
	}
	stop1()
	select {
	case <-got:
	case <-time.After(slotWait + startWait):
		t.Fatalf("c3's call did not return after c1 was let go")
	}
	if r1, r2, r3 := runs(); r1 || !r2 || !r3 {
		t.Fatalf("after c1 was let go: running %v %v %v, want c2 and c3", r1, r2, r3)
	}
	use(t, e, &containerpb.Cluster{Name: "seen-by-c2", Endpoint: c2.Endpoint, MasterAuth: c2.MasterAuth})
	expectAdded(t, w2, "seen-by-c2")
	if running, peak := env.slots(); running != 2 || peak != 2 {
		t.Errorf("slots taken = %d, most at once %d; want 2 and 2", running, peak)
	}

	// Held for good (a client reusing its connection), they would keep
	// c1 out forever: after slotWait it starts beyond the bound, which is
	// restored once a server is let go.
	_, stop3 := holdWatch(t, e, c3)
	start := time.Now()
	// The wait and the start may outlast a TLS handshake's timeout: the
	// client tries again, as client-go's callers do.
	wait.For(t, "c1 served again", func() (bool, string) {
		cs, done := ownClient(t, c1)
		defer done()
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		defer cancel()
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "c1", metav1.GetOptions{})
		return err == nil, fmt.Sprintf("get c1's configmap: %v", err)
	})
	if waited := time.Since(start); waited < slotWait {
		t.Errorf("c1 started after %v with c2 and c3 held, want after slotWait (%v)", waited, slotWait)
	}
	if _, peak := env.slots(); peak != 3 {
		t.Errorf("most slots taken at once = %d, want 3 (one beyond the bound)", peak)
	}
	// c1, let go, is the least recently used server no connection holds.
	wait.For(t, "c1 stopped, c2 and c3 running", func() (bool, string) {
		r1, r2, r3 := runs()
		running, _ := env.slots()
		return !r1 && r2 && r3 && running == 2, fmt.Sprintf("running %v %v %v (%d slots) once c1 was let go, want c2 and c3", r1, r2, r3, running)
	})
	stop3()
}
