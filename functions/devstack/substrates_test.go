package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/telemetry"
	"github.com/better-compute/kubernetes/shared/telemetry/telemetrytest"
	"github.com/better-compute/kubernetes/shared/wait"
)

// The substrates' end-to-end tests run on a stack whose simulated
// clusters have real Kubernetes API servers (API.md §8-9).

const substrateLabel = "better-compute.dev/substrate-pool"

// kubeEnv starts a stack with Kubernetes and waits until its API server
// is built. configure, when not nil, changes the stack's configuration.
func kubeEnv(t *testing.T, configure func(*devstack.Config)) *env {
	t.Helper()
	cfg := fastConfig()
	cfg.Kubernetes = true
	if configure != nil {
		configure(&cfg)
	}
	e := startEnv(t, cfg)
	// The API server's first build takes minutes (once per machine).
	wait.WithinEvery(t, 15*time.Minute, 100*time.Millisecond, "/healthz/kubernetes ready", func() (bool, string) {
		status, h := healthzKubernetes(t, e.URL)
		return status == http.StatusOK && h.Ready, fmt.Sprintf("%d: %s", status, h.Progress)
	})
	return e
}

var poolSeq atomic.Int64

// putPool publishes compute.pool.updated through /dev/pools/put.
func putPool(t testing.TB, e *env, pool map[string]any) {
	t.Helper()
	post(t, e.URL+devstack.PoolsPutPath, pool)
}

func archivePool(t testing.TB, e *env, id string, version int) {
	t.Helper()
	post(t, e.URL+devstack.PoolsArchivePath, map[string]any{"id": id, "tenantId": "acme", "version": version})
}

func post(t testing.TB, url string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out struct {
		MessageID string `json:"messageId"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); resp.StatusCode != http.StatusAccepted || err != nil || out.MessageID == "" {
		t.Fatalf("POST %s = %d %+v (%v), want 202 with a messageId", url, resp.StatusCode, out, err)
	}
}

func createPolicy(id string, version int, flavors ...map[string]any) map[string]any {
	return map[string]any{"id": id, "tenantId": "acme", "version": version,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp",
			"cluster": map[string]any{"create": map[string]any{"region": "us-central1", "zones": []string{"us-central1-a", "us-central1-b"}}}}},
		"flavors": flavors}
}

func adoptPolicy(id string, version int, clusterID string, flavors ...map[string]any) map[string]any {
	return map[string]any{"id": id, "tenantId": "acme", "version": version,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp",
			"cluster": map[string]any{"adopt": map[string]any{"clusterId": clusterID}}}},
		"flavors": flavors}
}

func flavor(name string, nodeCount int) map[string]any {
	return map[string]any{"name": name, "machineType": "e2-standard-4", "nodeCount": nodeCount}
}

func (c *client) substrates(poolID string) ([]resource.Substrate, error) {
	var out struct {
		Substrates []resource.Substrate `json:"substrates"`
	}
	err := c.call("kubernetesSubstrates/list", map[string]any{"tenantId": "acme", "poolId": poolID}, &out)
	return out.Substrates, err
}

// waitSubstrate waits until the pool's substrate satisfies ok.
func (c *client) waitSubstrate(t testing.TB, poolID, what string, ok func(resource.Substrate) bool) resource.Substrate {
	t.Helper()
	var got resource.Substrate
	wait.For(t, fmt.Sprintf("substrate of %s %s", poolID, what), func() (bool, string) {
		list, err := c.substrates(poolID)
		if err != nil {
			return false, err.Error()
		}
		if len(list) != 1 {
			return false, fmt.Sprintf("%d substrates: %s", len(list), jsonOf(list))
		}
		got = list[0]
		return ok(got), jsonOf(got)
	})
	return got
}

func readyWith(joined int64) func(resource.Substrate) bool {
	return func(s resource.Substrate) bool { return s.State == resource.StateReady && s.JoinedNodes == joined }
}

// adminClient is a client-go clientset with the cluster's kubeconfig.
func adminClient(t testing.TB, e *env, clusterID string) *kubernetes.Clientset {
	t.Helper()
	status, kc := getKubeconfig(t.(*testing.T), e.URL, clusterID)
	if status != http.StatusOK {
		t.Fatalf("kubeconfig of %s = %d %s", clusterID, status, kc)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// substrateObjects returns the resourceVersion of each of the substrate's
// objects, failing the test when one lacks the pool's label.
func substrateObjects(t testing.TB, cs *kubernetes.Clientset, poolID string) map[string]string {
	t.Helper()
	ctx := context.Background()
	const ns = "better-compute-system"
	versions := map[string]string{}
	check := func(kind string, m metav1.Object, err error) {
		if err != nil {
			t.Fatalf("get %s: %v", kind, err)
		}
		if m.GetLabels()[substrateLabel] != poolID {
			t.Errorf("%s %s carries labels %v, want %s=%s", kind, m.GetName(), m.GetLabels(), substrateLabel, poolID)
		}
		versions[kind] = m.GetResourceVersion()
	}
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	check("Namespace", n, err)
	sa, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "bcd", metav1.GetOptions{})
	check("ServiceAccount", sa, err)
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "bcd-join", metav1.GetOptions{})
	check("Secret", sec, err)
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "bcd", metav1.GetOptions{})
	check("DaemonSet", ds, err)
	return versions
}

func joinToken(t testing.TB, cs *kubernetes.Clientset) string {
	t.Helper()
	sec, err := cs.CoreV1().Secrets("better-compute-system").Get(context.Background(), "bcd-join", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read the join Secret: %v", err)
	}
	return string(sec.Data["token"])
}

// join calls kubernetesSubstrates.join as bcd does.
func join(t testing.TB, e *env, token, node, providerID string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"nodeName": node, "providerId": providerID})
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/api/compute/kubernetesSubstrates/join", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, jsonOf(out)
}

// nodesOf lists the cluster's Nodes of one GKE node pool.
func nodesOf(t testing.TB, cs *kubernetes.Clientset, pool string) []corev1.Node {
	t.Helper()
	list, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "cloud.google.com/gke-nodepool=" + pool})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	return list.Items
}

// TestSubstrateCreateMode follows a create-mode substrate from the pool's
// first event to ready with every node joined, through flavor changes,
// duplicate and stale events, to its archive.
func TestSubstrateCreateMode(t *testing.T) {
	t.Parallel()
	rec := telemetrytest.New(t)
	e := kubeEnv(t, func(cfg *devstack.Config) { cfg.Telemetry = rec.Telemetry })
	pool := fmt.Sprintf("pool-c%d", poolSeq.Add(1))
	putPool(t, e, createPolicy(pool, 1, flavor("cpu", 1), map[string]any{"name": "gpu", "machineType": "g2-standard-8",
		"nodeCount": 1, "zones": []string{"us-central1-a"}, "accelerators": map[string]any{"type": "nvidia-l4", "count": 1}}))
	// cpu: 1 node in each of 2 zones; gpu: 1 in one zone.
	s := e.api.waitSubstrate(t, pool, "ready with 3 nodes joined", readyWith(3))
	if s.Mode != "create" || s.PoolVersion != 1 || len(s.NodePools) != 2 || s.ClusterID == "" {
		t.Fatalf("substrate = %s", jsonOf(s))
	}
	cl, err := e.api.getCluster(s.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	if cl.ManagedBy != s.ID || cl.PoolID != pool || cl.Name != "bc-"+pool {
		t.Errorf("cluster = %s, want bc-%s managed by %s in pool %s", jsonOf(cl), pool, s.ID, pool)
	}
	pools, err := e.api.listPools(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if p.ManagedBy != s.ID || !strings.HasPrefix(p.Name, "bc-"+pool+"-") {
			t.Errorf("pool %s managedBy %q, want %s", p.Name, p.ManagedBy, s.ID)
		}
	}
	// Tenants see the substrate's cluster and pools but cannot change them.
	err = e.api.call("kubernetesNodePools/update", map[string]any{"tenantId": "acme", "clusterId": cl.ID, "nodePoolId": pools[0].ID, "nodeCount": 3}, nil)
	if ae, ok := err.(*apiError); !ok || ae.Code != "INVALID_STATE" || !strings.Contains(ae.Message, pool) {
		t.Errorf("tenant's resize of a substrate pool = %v, want INVALID_STATE naming %s", err, pool)
	}
	err = e.api.call("kubernetesClusters/delete", map[string]any{"tenantId": "acme", "clusterId": cl.ID}, nil)
	if ae, ok := err.(*apiError); !ok || ae.Code != "INVALID_STATE" {
		t.Errorf("tenant's delete of a substrate cluster = %v, want INVALID_STATE", err)
	}

	cs := adminClient(t, e, cl.ID)
	before := substrateObjects(t, cs, pool)
	doc := e.FirestoreClient.Collection("tenants").Doc("acme").Collection("substrates").Doc(s.ID)
	snap, err := doc.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Runs of a ready substrate apply nothing new and write nothing: wait
	// until the chain has made two more runs that found nothing to change
	// (a dead chain fails the wait), and compare.
	steadyRuns := func() float64 {
		return rec.Collect(t).Sum(telemetry.ReconcileRuns, telemetrytest.Attrs{telemetry.KeyKind: "substrates", telemetry.KeyOutcome: chain.OutcomeSteady})
	}
	from := steadyRuns()
	wait.For(t, "two steady runs of the substrates", func() (bool, string) {
		n := steadyRuns()
		return n >= from+2, fmt.Sprintf("%v steady runs, from %v", n, from)
	})
	if after := substrateObjects(t, cs, pool); jsonOf(after) != jsonOf(before) {
		t.Errorf("steady runs changed the objects: %v then %v", before, after)
	}
	if again, err := doc.Get(context.Background()); err != nil || !again.UpdateTime.Equal(snap.UpdateTime) {
		t.Errorf("steady runs wrote the substrate's document (updated %v, then %v; %v)", snap.UpdateTime, again.UpdateTime, err)
	}

	// Flavors: cpu resized to 2 per zone, gpu removed, mem added.
	putPool(t, e, createPolicy(pool, 2, flavor("cpu", 2), map[string]any{"name": "mem", "machineType": "n2-standard-4", "nodeCount": 1, "zones": []string{"us-central1-b"}}))
	s = e.api.waitSubstrate(t, pool, "ready again with 5 nodes", func(s resource.Substrate) bool {
		return s.PoolVersion == 2 && s.State == resource.StateReady && s.JoinedNodes == 5 && len(s.NodePools) == 2
	})
	var nodes struct {
		Nodes         []resource.SubstrateNode `json:"nodes"`
		NextPageToken string                   `json:"nextPageToken"`
	}
	if err := e.api.call("kubernetesSubstrates/listNodes", map[string]any{"tenantId": "acme", "substrateId": s.ID, "pageSize": 2}, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 2 || nodes.NextPageToken == "" {
		t.Errorf("listNodes page of 2 = %s", jsonOf(nodes))
	}
	e.waitEvents(t, s.ClusterID, map[string]int{"kubernetes.substrate.ready": 1, "kubernetes.substrate.updated": 1,
		"kubernetes.substrate.node.joined": 6, "kubernetes.substrate.node.left": 1})
	// The substrate's events count apart from its cluster's, whose
	// sequence holds the node pools' events the substrate caused.
	e.checkSequence(t, "substrate/"+s.ID, doc)
	e.checkSequence(t, "cluster/"+s.ClusterID, e.Store.ClusterRef("acme", s.ClusterID))

	// A stale and a duplicate event change nothing; the next version is
	// applied. Had either been applied, the cpu pool would have been
	// resized again, and its version moved.
	v2 := createPolicy(pool, 2, flavor("cpu", 2), map[string]any{"name": "mem", "machineType": "n2-standard-4", "nodeCount": 1, "zones": []string{"us-central1-b"}})
	putPool(t, e, createPolicy(pool, 1, flavor("cpu", 5)))
	dup := createPolicy(pool, 2, flavor("cpu", 4))
	putPool(t, e, dup)
	v3 := v2
	v3["version"] = 3
	putPool(t, e, v3)
	e.api.waitSubstrate(t, pool, "at version 3", func(s resource.Substrate) bool { return s.PoolVersion == 3 && s.State == resource.StateReady })
	cpu := poolByName(t, e.api, s.ClusterID, "bc-"+pool+"-cpu")
	if cpu.NodeCount != 2 || cpu.Version != 2 {
		t.Errorf("cpu pool = %d nodes at version %d, want 2 at version 2 (created, resized once)", cpu.NodeCount, cpu.Version)
	}

	archivePool(t, e, pool, 4)
	wait.For(t, "substrate deleted", func() (bool, string) {
		list, err := e.api.substrates(pool)
		return err == nil && len(list) == 0, jsonOf(list)
	})
	var got resource.Substrate
	if err := e.api.call("kubernetesSubstrates/get", map[string]any{"tenantId": "acme", "substrateId": s.ID}, &got); err == nil {
		t.Errorf("get of a deleted substrate = %s, want NOT_FOUND", jsonOf(got))
	} else if ae, ok := err.(*apiError); !ok || ae.Code != "NOT_FOUND" {
		t.Errorf("get of a deleted substrate = %v, want NOT_FOUND", err)
	}
	if _, err := e.api.getCluster(s.ClusterID); err == nil {
		t.Errorf("the substrate's cluster outlived it")
	}
	e.waitEvents(t, s.ClusterID, map[string]int{"kubernetes.substrate.deleted": 1, "kubernetes.substrate.node.left": 6})
}

// TestSubstrateAdoptMode adopts a tenant's cluster that holds a foreign
// bcd DaemonSet (error, untouched), then without it (ready), checks joins
// with valid, forged and revoked tokens and a node of another pool, and
// archives: only what the substrate made is gone.
func TestSubstrateAdoptMode(t *testing.T) {
	t.Parallel()
	e := kubeEnv(t, nil)
	pool := fmt.Sprintf("pool-a%d", poolSeq.Add(1))
	cl := e.api.createCluster(t, "tenant", poolSpec("own", 1))
	cl = e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	cs := adminClient(t, e, cl.ID)
	ctx := context.Background()
	const ns = "better-compute-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	foreign := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "bcd", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "theirs", Image: "example.com/theirs:1"}}}}}}
	foreign, err := cs.AppsV1().DaemonSets(ns).Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The tenant's own object, which nothing of the substrate's may touch.
	mine, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bcd"},
		Data: map[string]string{"owner": "tenant"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	putPool(t, e, adoptPolicy(pool, 1, cl.ID, flavor("cpu", 1)))
	s := e.api.waitSubstrate(t, pool, "in error naming the foreign DaemonSet", func(s resource.Substrate) bool {
		return s.State == resource.StateError && strings.Contains(s.Message, "DaemonSet better-compute-system/bcd") &&
			strings.Contains(s.Message, "Namespace better-compute-system")
	})
	again, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "bcd", metav1.GetOptions{})
	if err != nil || again.ResourceVersion != foreign.ResourceVersion {
		t.Fatalf("the foreign DaemonSet changed: %v, resourceVersion %s then %s", err, foreign.ResourceVersion, again.ResourceVersion)
	}
	e.waitEvents(t, cl.ID, map[string]int{"kubernetes.substrate.error": 1})
	err = e.api.call("kubernetesClusters/delete", map[string]any{"tenantId": "acme", "clusterId": cl.ID}, nil)
	if ae, ok := err.(*apiError); !ok || ae.Code != "INVALID_STATE" || !strings.Contains(ae.Message, pool) {
		t.Errorf("delete of an adopted cluster = %v, want INVALID_STATE naming %s", err, pool)
	}

	// Without them (the DaemonSet's Namespace was the tenant's too), the
	// next run makes the substrate ready.
	if err := cs.AppsV1().DaemonSets(ns).Delete(ctx, "bcd", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = e.api.waitSubstrate(t, pool, "ready with 3 nodes joined", readyWith(3)) // 1 per zone of us-central1
	substrateObjects(t, cs, pool)

	// Joins: bcd's token with a node of the tenant's own pool, a forged
	// token, a valid join again (idempotent).
	token := joinToken(t, cs)
	own := nodesOf(t, cs, "own")
	if len(own) == 0 {
		t.Fatal("the tenant's pool has no Nodes")
	}
	if status, body := join(t, e, token, own[0].Name, own[0].Spec.ProviderID); status != http.StatusForbidden {
		t.Errorf("join of a node of another pool = %d %s, want 403", status, body)
	}
	if status, body := join(t, e, "bcj_forged"+strings.Repeat("x", 40), own[0].Name, own[0].Spec.ProviderID); status != http.StatusUnauthorized {
		t.Errorf("join with a forged token = %d %s, want 401", status, body)
	}
	ours := nodesOf(t, cs, s.NodePools[0].Name)
	if status, body := join(t, e, token, ours[0].Name, ours[0].Spec.ProviderID); status != http.StatusOK ||
		!strings.Contains(body, s.ID) || !strings.Contains(body, `"flavor":"cpu"`) {
		t.Errorf("join again of a joined node = %d %s, want 200 naming the substrate and flavor", status, body)
	}
	if status, body := join(t, e, token, ours[0].Name, "gce://elsewhere/us-central1-a/x"); status != http.StatusForbidden {
		t.Errorf("join with another provider ID = %d %s, want 403", status, body)
	}

	// An emptied Secret makes the next run mint a new token and revoke
	// the old one.
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "bcd-join", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{}
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "a new token in the Secret", func() (bool, string) {
		tok := joinToken(t, cs)
		return tok != "" && tok != token, "token " + tok
	})
	if status, body := join(t, e, token, ours[0].Name, ours[0].Spec.ProviderID); status != http.StatusUnauthorized {
		t.Errorf("join with the revoked token = %d %s, want 401", status, body)
	}

	newToken := joinToken(t, cs)
	archivePool(t, e, pool, 2)
	wait.For(t, "substrate deleted", func() (bool, string) {
		list, err := e.api.substrates(pool)
		return err == nil && len(list) == 0, jsonOf(list)
	})
	pools, err := e.api.listPools(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 1 || pools[0].Name != "own" {
		t.Errorf("pools after archive = %s, want only the tenant's", jsonOf(pools))
	}
	for _, get := range []func() (metav1.Object, error){
		func() (metav1.Object, error) { return cs.AppsV1().DaemonSets(ns).Get(ctx, "bcd", metav1.GetOptions{}) },
		func() (metav1.Object, error) {
			return cs.CoreV1().Secrets(ns).Get(ctx, "bcd-join", metav1.GetOptions{})
		},
	} {
		o, err := get()
		if err == nil && o.GetDeletionTimestamp() == nil {
			t.Errorf("%s outlived the substrate", o.GetName())
		} else if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if status, body := join(t, e, newToken, ours[0].Name, ours[0].Spec.ProviderID); status != http.StatusUnauthorized {
		t.Errorf("join after archive = %d %s, want 401: the token is revoked", status, body)
	}
	if got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "bcd", metav1.GetOptions{}); err != nil || got.ResourceVersion != mine.ResourceVersion {
		t.Errorf("the tenant's ConfigMap changed: %v", err)
	}
	// The cluster is the tenant's again.
	e.api.deleteCluster(t, cl.ID)
}
