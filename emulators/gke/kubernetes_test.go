package gke

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/better-compute/kubernetes/emulators/kubesim"

	"github.com/better-compute/kubernetes/shared/wait"
)

// testToken is a static token of the test's clusters, as the devstack
// gives the product's reconciler.
const testToken = "test-token-of-the-reconciler"

// newK8sEnv is newEnv with WithKubernetes: the clusters get API servers
// of the binary kubesim builds (once per machine; a test waits for it).
func newK8sEnv(t *testing.T, dir string, opts ...Option) *env {
	t.Helper()
	log := kubesim.TestLogger(t)
	bin, err := kubesim.Binary(context.Background(), log)
	if err != nil {
		t.Fatalf("kubesim.Binary: %v", err)
	}
	k := Kubernetes{
		Binary:       func(context.Context) (string, error) { return bin, nil },
		Dir:          dir,
		Tokens:       []kubesim.Token{{Value: testToken, User: "tester", Groups: []string{"system:masters"}}},
		SyncInterval: 100 * time.Millisecond,
	}
	return newEnv(t, append([]Option{WithKubernetes(k), WithLogger(log)}, opts...)...)
}

// kubeClient connects client-go to a cluster as GKE reports it: its
// endpoint and CA, with token.
func kubeClient(t *testing.T, c *containerpb.Cluster, token string) kubernetes.Interface {
	t.Helper()
	if c.MasterAuth == nil {
		t.Fatalf("cluster %s has no masterAuth", c.Name)
	}
	ca, err := base64.StdEncoding.DecodeString(c.MasterAuth.ClusterCaCertificate)
	if err != nil {
		t.Fatalf("clusterCaCertificate: %v", err)
	}
	cs, err := kubernetes.NewForConfig(kubesim.RESTConfig(c.Endpoint, ca, token))
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	return cs
}

// nodesByPool lists the cluster's Nodes, by node pool.
func nodesByPool(ctx context.Context, cs kubernetes.Interface) (map[string][]corev1.Node, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]corev1.Node{}
	for _, n := range list.Items {
		p := n.Labels[labelNodePool]
		out[p] = append(out[p], n)
	}
	return out, nil
}

// waitNodes waits until the cluster has want Nodes per node pool, none
// of them still tainted not-ready.
func waitNodes(t *testing.T, cs kubernetes.Interface, want map[string]int) map[string][]corev1.Node {
	t.Helper()
	var got map[string][]corev1.Node
	wait.For(t, "the Nodes of each pool", func() (bool, string) {
		var err error
		got, err = nodesByPool(context.Background(), cs)
		if err != nil {
			return false, "list nodes: " + err.Error()
		}
		counts := map[string]int{}
		for p, ns := range got {
			counts[p] = len(ns)
			for _, n := range ns {
				// Registered, not yet untainted (kubenodes.go's applyNode).
				if slices.ContainsFunc(n.Spec.Taints, isNotReadyTaint) {
					return false, "node " + n.Name + " still has the not-ready taint"
				}
			}
		}
		for p, n := range want {
			if counts[p] != n {
				return false, "nodes per pool = " + jsonString(counts) + ", want " + jsonString(want)
			}
		}
		return len(counts) == len(want), "nodes per pool = " + jsonString(counts) + ", want " + jsonString(want)
	})
	return got
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestKubernetesEndpointAndNodes(t *testing.T) {
	dir := t.TempDir()
	e := newK8sEnv(t, dir)
	ctx := e.ctx
	op, err := e.client.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name: "c1", NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 2, zoneA, zoneB)},
	}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	c, err := e.client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if c.Endpoint != "" || c.MasterAuth.GetClusterCaCertificate() != "" {
		t.Errorf("while PROVISIONING: endpoint %q, CA %q; want none yet", c.Endpoint, c.MasterAuth.GetClusterCaCertificate())
	}
	if _, err := e.srv.KubernetesAccess(clusterN); !errors.Is(err, ErrNoKubernetes) {
		t.Errorf("KubernetesAccess while PROVISIONING = %v, want ErrNoKubernetes", err)
	}
	e.wait(t, op)
	c, err = e.client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if !strings.HasPrefix(c.Endpoint, "127.0.0.1:") {
		t.Fatalf("RUNNING cluster's endpoint = %q, want 127.0.0.1:<port>", c.Endpoint)
	}
	cs := kubeClient(t, c, testToken)

	nodes := waitNodes(t, cs, map[string]int{"p0": 4})
	nameRE := regexp.MustCompile(`^gke-c1-p0-[0-9a-f]{8}-[a-z0-9]{4}$`)
	zones := map[string]int{}
	var names []string
	for _, n := range nodes["p0"] {
		names = append(names, n.Name)
		zone := n.Labels[labelZone]
		zones[zone]++
		if !nameRE.MatchString(n.Name) {
			t.Errorf("node name %q, want gke-c1-p0-<8 hex>-<4 chars>", n.Name)
		}
		if want := "gce://" + project + "/" + zone + "/" + n.Name; n.Spec.ProviderID != want {
			t.Errorf("node %s providerID = %q, want %q", n.Name, n.Spec.ProviderID, want)
		}
		if n.Labels[labelInstanceType] != "e2-standard-4" || n.Labels[labelHostname] != n.Name {
			t.Errorf("node %s labels = %v, want instance type e2-standard-4 and its hostname", n.Name, n.Labels)
		}
		if !ready(n) {
			t.Errorf("node %s is not Ready: %v", n.Name, n.Status.Conditions)
		}
	}
	if zones[zoneA] != 2 || zones[zoneB] != 2 {
		t.Errorf("nodes per zone = %v, want 2 in each of %s, %s", zones, zoneA, zoneB)
	}

	// A resize removes nodes, keeping the names of those that stay.
	op, err = e.client.SetNodePoolSize(ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p0", NodeCount: 1})
	if err != nil {
		t.Fatalf("SetNodePoolSize: %v", err)
	}
	e.wait(t, op)
	for _, n := range waitNodes(t, cs, map[string]int{"p0": 2})["p0"] {
		if !slices.Contains(names, n.Name) {
			t.Errorf("after shrinking, node %s is new; want a subset of %v", n.Name, names)
		}
	}

	// A pool's taints and labels are the nodes'.
	np := pool("p1", "n1-standard-4", 1, zoneA)
	np.Config.Labels = map[string]string{"team": "ml"}
	np.Config.Taints = []*containerpb.NodeTaint{{Key: "dedicated", Value: "ml", Effect: containerpb.NodeTaint_NO_SCHEDULE}}
	np.Config.Spot = true
	op, err = e.client.CreateNodePool(ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: np})
	if err != nil {
		t.Fatalf("CreateNodePool: %v", err)
	}
	e.wait(t, op)
	n := waitNodes(t, cs, map[string]int{"p0": 2, "p1": 1})["p1"][0]
	if n.Labels["team"] != "ml" || n.Labels["cloud.google.com/gke-spot"] != "true" {
		t.Errorf("p1 node labels = %v, want team=ml and the spot label", n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("p1 node taints = %v, want dedicated=ml:NoSchedule", n.Spec.Taints)
	}
	op, err = e.client.DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p1"})
	if err != nil {
		t.Fatalf("DeleteNodePool: %v", err)
	}
	e.wait(t, op)
	waitNodes(t, cs, map[string]int{"p0": 2})

	// The admin's access, as the devstack's kubeconfig gives it.
	acc, err := e.srv.KubernetesAccess(clusterN)
	if err != nil {
		t.Fatalf("KubernetesAccess: %v", err)
	}
	if acc.Endpoint != c.Endpoint {
		t.Errorf("KubernetesAccess endpoint = %q, want the cluster's %q", acc.Endpoint, c.Endpoint)
	}
	admin, err := kubernetes.NewForConfig(acc.RESTConfig())
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("Get namespace default as admin: %v", err)
	}
	if _, err := kubeClient(t, c, "not-a-token").CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("List with an unknown token = %v, want Unauthorized", err)
	}

	// Deleting the cluster stops its server and removes its state.
	clusterDir := filepath.Join(dir, c.Id)
	if _, err := os.Stat(filepath.Join(clusterDir, "etcd")); err != nil {
		t.Fatalf("cluster state: %v", err)
	}
	op, err = e.client.DeleteCluster(ctx, &containerpb.DeleteClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("DeleteCluster: %v", err)
	}
	e.wait(t, op)
	wait.For(t, "the deleted cluster's directory removed", func() (bool, string) {
		_, err := os.Stat(clusterDir)
		return os.IsNotExist(err), "the deleted cluster's directory is still there"
	})
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Nodes().List(quick, metav1.ListOptions{}); err == nil {
		t.Errorf("List nodes of a deleted cluster succeeded")
	}
}

func ready(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// joinCall is a call the join server received.
type joinCall struct {
	Token      string
	NodeName   string `json:"nodeName"`
	ProviderID string `json:"providerId"`
}

// joinServer records bcd's calls, failing the first call of failNode with
// 503.
type joinServer struct {
	*httptest.Server
	srv      *Server // the simulator whose clusters call
	mu       sync.Mutex
	ok       []joinCall
	failed   int
	failNode string
}

func newJoinServer(t *testing.T, srv *Server) *joinServer {
	js := &joinServer{srv: srv}
	js.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c joinCall
		if r.Method != http.MethodPost || r.URL.Path != "/join" || json.NewDecoder(r.Body).Decode(&c) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c.Token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		js.mu.Lock()
		defer js.mu.Unlock()
		if c.NodeName == js.failNode && js.failed == 0 {
			js.failed++
			http.Error(w, `{"error":{"code":"UNAVAILABLE"}}`, http.StatusServiceUnavailable)
			return
		}
		js.ok = append(js.ok, c)
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(js.Close)
	return js
}

// joined returns the tokens each node joined with, in order.
func (js *joinServer) joined() map[string][]string {
	js.mu.Lock()
	defer js.mu.Unlock()
	out := map[string][]string{}
	for _, c := range js.ok {
		out[c.NodeName] = append(out[c.NodeName], c.Token)
	}
	return out
}

func TestKubernetesPlaysBCD(t *testing.T) {
	e := newK8sEnv(t, "")
	ctx := e.ctx
	tainted := pool("t", "e2-standard-4", 1, zoneA)
	tainted.Config.Taints = []*containerpb.NodeTaint{{Key: "dedicated", Value: "x", Effect: containerpb.NodeTaint_NO_SCHEDULE}}
	c := e.createCluster(t, pool("a", "e2-standard-4", 2, zoneA), pool("b", "e2-standard-4", 1, zoneA), tainted)
	cs := kubeClient(t, c, testToken)
	nodes := waitNodes(t, cs, map[string]int{"a": 2, "b": 1, "t": 1})
	js := newJoinServer(t, e.srv)
	js.mu.Lock()
	js.failNode = nodes["a"][0].Name
	js.mu.Unlock()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "better-compute-system"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bcd-join", Namespace: "better-compute-system"}, Data: map[string][]byte{"token": []byte("tok1")}}
	if _, err := cs.CoreV1().Secrets("better-compute-system").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
	// A DaemonSet that names the token otherwise gives bcd no token:
	// no node joins, and bcd calls nothing.
	wrong := bcdDaemonSet(js.URL+"/join", "a", "t")
	wrong.Spec.Template.Spec.Containers[0].Env[2].Name = "BCD_JOIN_TOKEN"
	wrong, err := cs.AppsV1().DaemonSets("better-compute-system").Create(ctx, wrong, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create daemonset: %v", err)
	}
	waitPasses(t, e.srv, 3)
	js.mu.Lock()
	calls, failed := len(js.ok), js.failed
	js.mu.Unlock()
	if calls+failed != 0 {
		t.Fatalf("with BCD_JOIN_TOKEN for BCD_TOKEN: %d join calls, want none", calls+failed)
	}
	ds := bcdDaemonSet(js.URL+"/join", "a", "t")
	ds.ResourceVersion = wrong.ResourceVersion
	if _, err := cs.AppsV1().DaemonSets("better-compute-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update daemonset: %v", err)
	}

	// Pool a's nodes join, the failed call is retried; b is not selected
	// and t's taint is not tolerated.
	want := map[string][]string{nodes["a"][0].Name: {"tok1"}, nodes["a"][1].Name: {"tok1"}}
	waitJoined(t, js, want)
	js.mu.Lock()
	joins := slices.Clone(js.ok)
	failed = js.failed
	js.mu.Unlock()
	for _, call := range joins {
		if want := "gce://" + project + "/" + zoneA + "/" + call.NodeName; call.ProviderID != want {
			t.Errorf("join of %s: providerId %q, want %q", call.NodeName, call.ProviderID, want)
		}
	}
	if failed != 1 {
		t.Errorf("failed calls = %d, want 1 (then retried)", failed)
	}

	// Tolerating the taint brings t's node in.
	ds, err = cs.AppsV1().DaemonSets("better-compute-system").Get(ctx, "bcd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get daemonset: %v", err)
	}
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := cs.AppsV1().DaemonSets("better-compute-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update daemonset: %v", err)
	}
	want[nodes["t"][0].Name] = []string{"tok1"}
	waitJoined(t, js, want)

	// A new token makes every node join again.
	secret.Data["token"] = []byte("tok2")
	if _, err := cs.CoreV1().Secrets("better-compute-system").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update secret: %v", err)
	}
	for n := range want {
		want[n] = append(want[n], "tok2")
	}
	waitJoined(t, js, want)

	// Deleting the namespace deletes what it holds, then the namespace.
	if err := cs.CoreV1().Namespaces().Delete(ctx, "better-compute-system", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	wait.For(t, "the namespace deleted", func() (bool, string) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "better-compute-system", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "get deleted namespace: " + errString(err)
	})
	if _, err := cs.AppsV1().DaemonSets("better-compute-system").Get(ctx, "bcd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get daemonset of the deleted namespace = %v, want NotFound", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}

// waitJoined waits until the nodes have joined with exactly the tokens of
// want, in order, and stays there a few sync intervals.
func waitJoined(t *testing.T, js *joinServer, want map[string][]string) {
	t.Helper()
	check := func() (bool, string) {
		got := js.joined()
		return jsonString(got) == jsonString(want), "joins = " + jsonString(got) + ", want " + jsonString(want)
	}
	wait.For(t, "the nodes joined", check)
	// No more calls come in the next passes: a node joins once per token.
	waitPasses(t, js.srv, 3)
	if ok, desc := check(); !ok {
		t.Fatalf("later: %s", desc)
	}
}

// bcdDaemonSet is bcd's DaemonSet as its contract describes it (API.md
// §9), spelled here rather than taken from the product or the simulator:
// bcd on the given node pools, its token from the Secret bcd-join, its
// Node's name from the downward API.
func bcdDaemonSet(joinURL string, pools ...string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "bcd"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bcd", Namespace: "better-compute-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{Key: labelNodePool, Operator: corev1.NodeSelectorOpIn, Values: pools}},
						}}},
					}},
					Containers: []corev1.Container{{
						Name:  "bcd",
						Image: "bcd:dev",
						Env: []corev1.EnvVar{
							{Name: "BCD_JOIN_URL", Value: joinURL},
							{Name: "BCD_POOL_ID", Value: "pool-gpu"},
							{Name: "BCD_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: "bcd-join"}, Key: "token",
							}}},
							{Name: "BCD_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
						},
					}},
				},
			},
		},
	}
}

func TestKubernetesSnapshotRestore(t *testing.T) {
	dir := t.TempDir()
	e := newK8sEnv(t, dir)
	ctx := e.ctx
	c := e.createCluster(t)
	cs := kubeClient(t, c, testToken)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	snap, err := e.srv.Snapshot(nil)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	e.srv.Close()

	e2 := newK8sEnv(t, dir)
	if err := e2.srv.Restore(snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	c2, err := e2.client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if c2.Endpoint != c.Endpoint || c2.MasterAuth.GetClusterCaCertificate() != c.MasterAuth.GetClusterCaCertificate() {
		t.Errorf("after Restore: endpoint %q, CA changed %v; want %q, unchanged", c2.Endpoint,
			c2.MasterAuth.GetClusterCaCertificate() != c.MasterAuth.GetClusterCaCertificate(), c.Endpoint)
	}
	// The same client, with its connection gone, finds the same objects.
	if _, err := kubeClient(t, c2, testToken).CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("get configmap after Restore: %v", err)
	}
	waitNodes(t, cs, map[string]int{"p0": 1})
}

func TestNoKubernetesWithoutOption(t *testing.T) {
	e := newEnv(t)
	c := e.createCluster(t)
	if strings.HasPrefix(c.Endpoint, "127.0.0.1") || c.MasterAuth != nil {
		t.Errorf("without WithKubernetes: endpoint %q, masterAuth %v; want the documentation address and none", c.Endpoint, c.MasterAuth)
	}
	if _, err := e.srv.KubernetesAccess(clusterN); !errors.Is(err, ErrNoKubernetes) {
		t.Errorf("KubernetesAccess = %v, want ErrNoKubernetes", err)
	}
}

func TestNodeNames(t *testing.T) {
	a := nodeNames("c1", "p0", "cid", "uid", zoneA, 1000)
	if len(a) != 1000 || len(slices.Compact(slices.Sorted(slices.Values(a)))) != 1000 {
		t.Fatalf("nodeNames(1000) gave %d names, %d distinct; want 1000 distinct", len(a), len(slices.Compact(slices.Sorted(slices.Values(a)))))
	}
	if b := nodeNames("c1", "p0", "cid", "uid", zoneA, 3); !slices.Equal(b, a[:3]) {
		t.Errorf("nodeNames(3) = %v, want the first three of nodeNames(1000)", b)
	}
	if b := nodeNames("c1", "p0", "cid", "uid", zoneB, 1); b[0] == a[0] {
		t.Errorf("zones %s and %s share the name %s", zoneA, zoneB, a[0])
	}
	long := nodeNames(strings.Repeat("c", 40), strings.Repeat("p", 40), "cid", "uid", zoneA, 1)[0]
	if len(long) > 63 {
		t.Errorf("name %q has %d characters, want at most 63", long, len(long))
	}
}

// waitPasses waits until every running sync loop of srv's clusters has
// made n more passes.
func waitPasses(t *testing.T, srv *Server, n int64) {
	t.Helper()
	g := srv.GServer
	passes := func() map[*kubeCluster]int64 {
		g.mu.Lock()
		defer g.mu.Unlock()
		out := map[*kubeCluster]int64{}
		for _, c := range g.clusters {
			if c.kube != nil {
				out[c.kube] = c.kube.passes.Load()
			}
		}
		return out
	}
	start := passes()
	wait.For(t, "the sync loops' passes", func() (bool, string) {
		for k, p := range passes() {
			if p < start[k]+n {
				return false, "the sync loop of " + k.name + " makes no passes"
			}
		}
		return true, ""
	})
}
