package devstack_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestKubernetes creates a cluster through the API on a stack with
// Kubernetes, fetches its kubeconfig and lists its Nodes with client-go,
// with the administrator's credentials and with the reconciler's Google
// access token, which the cluster authenticates as its identity.
func TestKubernetes(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.Kubernetes = true
	e := startEnv(t, cfg)

	// The binary is built once per machine: on a fresh one this waits
	// minutes, as the devstack's first start does.
	wait.Within(t, 15*time.Minute, "/healthz/kubernetes ready", func() (bool, string) {
		status, health := healthzKubernetes(t, e.URL)
		if status == http.StatusOK && health.Ready {
			return true, ""
		}
		if status != http.StatusServiceUnavailable || health.Ready || health.Progress == "" {
			t.Fatalf("GET /healthz/kubernetes = %d %+v, want 503 with the progress until ready", status, health)
		}
		return false, health.Progress
	})

	if status, body := getKubeconfig(t, e.URL, "kcl_nonexistent"); status != http.StatusNotFound || !json.Valid(body) {
		t.Errorf("kubeconfig of an unknown cluster = %d %s, want 404 in the error envelope", status, body)
	}

	cl := e.api.createCluster(t, "kube", poolSpec("a", 2))
	cl = e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	counts, err := e.GKE.NodeCounts(providerName(cl) + "/nodePools/a")
	if err != nil {
		t.Fatal(err)
	}
	nodes := 0
	for _, n := range counts {
		nodes += int(n)
	}

	status, kc := getKubeconfig(t, e.URL, cl.ID)
	if status != http.StatusOK {
		t.Fatalf("GET kubeconfig of a ready cluster = %d %s, want 200", status, kc)
	}
	admin, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatalf("parse kubeconfig: %v\n%s", err, kc)
	}
	reconciler := rest.CopyConfig(admin)
	// The reconciler presents its own Google access token, as to GKE.
	reconciler.BearerToken = e.FunctionsConfig().EmulatorAccessToken
	if reconciler.BearerToken == "" || reconciler.BearerToken == admin.BearerToken {
		t.Fatalf("EMULATOR_ACCESS_TOKEN = %q, want a token of its own", reconciler.BearerToken)
	}
	for name, rc := range map[string]*rest.Config{"admin": admin, "reconciler": reconciler} {
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatalf("NewForConfig: %v", err)
		}
		wait.For(t, name+" lists the cluster's nodes", func() (bool, string) {
			list, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			pooled := 0
			for _, n := range list.Items {
				if n.Labels["cloud.google.com/gke-nodepool"] == "a" {
					pooled++
				}
			}
			return pooled == nodes && len(list.Items) == nodes, "nodes: " + jsonOf(list.Items)
		})
	}
	cs, err := kubernetes.NewForConfig(reconciler)
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	me := e.FunctionsConfig().ReconcilerServiceAccount
	if u := review.Status.UserInfo; u.Username != me || slices.Contains(u.Groups, "system:masters") {
		t.Errorf("the reconciler's token authenticates as %s %v, want %s, not in system:masters", u.Username, u.Groups, me)
	}
}

// TestKubernetesOff checks that a stack without Kubernetes says so.
func TestKubernetesOff(t *testing.T) {
	t.Parallel()
	e := sharedStack(t)
	status, health := healthzKubernetes(t, e.URL)
	if status != http.StatusServiceUnavailable || health.Ready || health.Progress == "" {
		t.Errorf("GET /healthz/kubernetes without Kubernetes = %d %+v, want 503 saying why", status, health)
	}
	if e.FunctionsConfig().KubernetesToken != "" {
		t.Errorf("KUBERNETES_TOKEN is set without Kubernetes")
	}
	if status, body := getKubeconfig(t, e.URL, "kcl_x"); status != http.StatusNotFound {
		t.Errorf("kubeconfig without Kubernetes = %d %s, want 404", status, body)
	}
}

type kubeHealth struct {
	Ready    bool   `json:"ready"`
	Progress string `json:"progress"`
}

func healthzKubernetes(t testing.TB, url string) (int, kubeHealth) {
	t.Helper()
	resp, err := http.Get(url + "/healthz/kubernetes")
	if err != nil {
		t.Fatalf("GET /healthz/kubernetes: %v", err)
	}
	defer resp.Body.Close()
	var h kubeHealth
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("GET /healthz/kubernetes: decode: %v", err)
	}
	return resp.StatusCode, h
}

func getKubeconfig(t *testing.T, url, clusterID string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url + "/dev/clusters/" + clusterID + "/kubeconfig")
	if err != nil {
		t.Fatalf("GET kubeconfig: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET kubeconfig: %v", err)
	}
	return resp.StatusCode, b
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
