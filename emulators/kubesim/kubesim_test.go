package kubesim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestServerSideApply checks that the server is a real one: apply,
// a no-op re-apply, and a conflict between field managers.
func TestServerSideApply(t *testing.T) {
	api := ForTest(t)
	cs, err := kubernetes.NewForConfig(api.RESTConfig(""))
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")

	cm := corev1ac.ConfigMap("c", "default").WithData(map[string]string{"a": "1"})
	first, err := cms.Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "x"})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	again, err := cms.Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "x"})
	if err != nil {
		t.Fatalf("Apply again: %v", err)
	}
	if again.ResourceVersion != first.ResourceVersion {
		t.Errorf("unchanged re-apply: resourceVersion = %s, want %s (no write)", again.ResourceVersion, first.ResourceVersion)
	}

	other := corev1ac.ConfigMap("c", "default").WithData(map[string]string{"a": "2"})
	_, err = cms.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "y"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("Apply of a field another manager owns = %v, want a conflict", err)
	}
	if !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("conflict error %q does not name manager x", err)
	}
	forced, err := cms.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "y", Force: true})
	if err != nil {
		t.Fatalf("forced Apply: %v", err)
	}
	if forced.Data["a"] != "2" {
		t.Errorf("after forced apply, data a = %q, want 2", forced.Data["a"])
	}
}

// TestTokensAndRBAC checks that extra tokens authenticate as their user,
// and that RBAC authorizes: a user outside system:masters is forbidden.
func TestTokensAndRBAC(t *testing.T) {
	bin, err := Binary(context.Background(), TestLogger(t))
	if err != nil {
		t.Fatalf("Binary: %v", err)
	}
	dir := t.TempDir()
	opts := Options{Dir: dir, Log: TestLogger(t), Tokens: []Token{
		{Value: "root-token", User: "root", Groups: []string{"system:masters"}},
		{Value: "nobody-token", User: "nobody"},
	}}
	api, err := StartAPIServer(context.Background(), bin, opts)
	if err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		token     string
		forbidden bool
	}{{"root-token", false}, {"nobody-token", true}} {
		cs, err := kubernetes.NewForConfig(api.RESTConfig(tc.token))
		if err != nil {
			t.Fatalf("NewForConfig: %v", err)
		}
		_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if got := apierrors.IsForbidden(err); got != tc.forbidden || (!tc.forbidden && err != nil) {
			t.Errorf("List namespaces with %s = %v, want forbidden %v", tc.token, err, tc.forbidden)
		}
	}

	// The kubeconfig works as kubectl would read it.
	kc, err := Kubeconfig("sim", api.Endpoint, api.CAPEM, api.AdminToken)
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatalf("RESTConfigFromKubeConfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("kept"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create through the kubeconfig: %v", err)
	}

	// A restart on the same directory keeps the objects, the CA and the
	// admin token.
	endpoint, ca, admin := api.Endpoint, string(api.CAPEM), api.AdminToken
	if err := api.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "etcd")); err != nil {
		t.Fatalf("Stop removed Options.Dir: %v", err)
	}
	api, err = StartAPIServer(context.Background(), bin, opts)
	if err != nil {
		t.Fatalf("StartAPIServer again: %v", err)
	}
	t.Cleanup(func() { _ = api.Stop() })
	if string(api.CAPEM) != ca || api.AdminToken != admin {
		t.Errorf("restart changed the CA or the admin token")
	}
	if api.Endpoint == endpoint {
		t.Logf("restart took the same port %s", endpoint)
	}
	cs, err = kubernetes.NewForConfig(api.RESTConfig(""))
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("Get after restart: %v", err)
	}
}

func TestStartFailureReportsLog(t *testing.T) {
	bin, err := Binary(context.Background(), TestLogger(t))
	if err != nil {
		t.Fatalf("Binary: %v", err)
	}
	// A bad token file makes the server exit at once.
	_, err = StartAPIServer(context.Background(), bin, Options{Tokens: []Token{{Value: "t", User: "a,b"}}})
	if err == nil {
		t.Fatalf("StartAPIServer with a bad token = nil error")
	}
	start := time.Now()
	_, err = StartAPIServer(context.Background(), "/bin/false", Options{ReadyTimeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("StartAPIServer(/bin/false) = %v, want an exit error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("StartAPIServer(/bin/false) took %v, want the exit noticed at once", d)
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}
