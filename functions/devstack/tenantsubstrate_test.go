package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// tenantPolicy is a pool whose substrate creates its cluster on the
// seed's tenant-owned account, acc-acme: in the tenant's project.
func tenantPolicy(id string, version int, flavors ...map[string]any) map[string]any {
	return map[string]any{"id": id, "tenantId": "acme", "version": version,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-acme",
			"cluster": map[string]any{"create": map[string]any{"region": "us-central1", "zones": []string{"us-central1-a", "us-central1-b"}}}}},
		"flavors": flavors}
}

// TestSubstrateInTenantProject runs a substrate on the tenant's own
// account: its cluster in the tenant's project is reached only as the
// tenant's impersonated provisioner, whose token the cluster's Kubernetes
// API accepts while it refuses the platform's own. When the tenant
// revokes the reconciler's grant on the provisioner, the substrate goes
// error naming the grant, announced once; granted again, it is ready.
func TestSubstrateInTenantProject(t *testing.T) {
	t.Parallel()
	// Short tokens, so that the revoke is felt within seconds: a token
	// minted before it stays valid until it expires, as a real one does.
	e := kubeEnv(t, func(cfg *devstack.Config) { cfg.ImpersonationTokenLifetime = 4 * time.Second })
	start := time.Now()
	pool := fmt.Sprintf("pool-t%d", poolSeq.Add(1))
	putPool(t, e, tenantPolicy(pool, 1, flavor("cpu", 1)))
	// cpu: one node in each of two zones, both joined.
	s := e.api.waitSubstrate(t, pool, "ready with 2 nodes joined", readyWith(2))
	t.Logf("ready with every node joined after %v", time.Since(start).Round(time.Millisecond))
	cl, err := e.api.getCluster(s.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.GKE.Cluster(fmt.Sprintf("projects/%s/locations/us-central1/clusters/%s", tenantProject, cl.ProviderName)); err != nil {
		t.Fatalf("the substrate's cluster is not in the tenant's project: %v", err)
	}
	admin := adminClient(t, e, cl.ID)
	if n := len(nodesOf(t, admin, s.NodePools[0].Name)); n != 2 || s.JoinedNodes != int64(n) {
		t.Errorf("%d Nodes in the cluster, %d joined; want 2, all joined", n, s.JoinedNodes)
	}
	substrateObjects(t, admin, pool)

	// The cluster's Kubernetes API knows the tenant's provisioner, not
	// the platform.
	platform := kubeAs(t, e, cl.ID, accessToken(t, e, ""))
	if _, err := platform.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("list Nodes in the tenant's cluster with the platform's own token = %v, want 401 Unauthorized", err)
	}
	tenant := kubeAs(t, e, cl.ID, accessToken(t, e, provisioner))
	if _, err := tenant.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("list Nodes in the tenant's cluster as the tenant's provisioner: %v", err)
	}
	if r, err := tenant.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil || r.Status.UserInfo.Username != provisioner {
		t.Errorf("the provisioner's token stands for %+v (%v), want %s", r, err, provisioner)
	}
	// No other identity is accepted there (the functions hold no static
	// token): bcd's objects, read above, were written as the provisioner.

	// The tenant revokes the grant.
	e.IAM.Revoke(provisioner, reconciler)
	revoked := time.Now()
	want := "cluster " + cl.Name + ": Better Compute cannot act in project acme-prod: grant roles/iam.serviceAccountTokenCreator on " + provisioner + " to " + reconciler
	e.api.waitSubstrate(t, pool, "in error with what to grant", func(s resource.Substrate) bool {
		return s.State == resource.StateError && s.Message == want
	})
	t.Logf("error %v after the revoke", time.Since(revoked).Round(time.Millisecond))
	// The chains keep looking: two more refused mints, and still one
	// announcement.
	refusals := e.IAM.Calls("GenerateAccessToken")
	wait.For(t, "two more refused runs", func() (bool, string) {
		n := e.IAM.Calls("GenerateAccessToken")
		return n >= refusals+2, fmt.Sprintf("%d GenerateAccessToken calls since the error", n-refusals)
	})
	e.waitEvents(t, cl.ID, map[string]int{event.SubstrateError: 1})
	if n := e.events.count(cl.ID, event.SubstrateError, ""); n != 1 {
		t.Errorf("%s events = %d, want 1 (all: %s)", event.SubstrateError, n, e.events.summary(cl.ID))
	}
	if got := e.api.waitSubstrate(t, pool, "still in error", func(resource.Substrate) bool { return true }); got.State != resource.StateError || got.Message != want {
		t.Errorf("substrate while the grant is missing = %s %q, want error %q", got.State, got.Message, want)
	}

	// The tenant grants it again: ready, with its nodes.
	e.IAM.Grant(provisioner, reconciler)
	granted := time.Now()
	e.api.waitSubstrate(t, pool, "ready again with 2 nodes joined", readyWith(2))
	t.Logf("ready %v after the grant came back", time.Since(granted).Round(time.Millisecond))
	e.waitEvents(t, cl.ID, map[string]int{event.SubstrateUpdated: 1})
	if n := e.events.count(cl.ID, event.SubstrateError, ""); n != 1 {
		t.Errorf("%s events after recovering = %d, want 1 (all: %s)", event.SubstrateError, n, e.events.summary(cl.ID))
	}

	// Its teardown removes bcd's objects and the cluster as the tenant too.
	archivePool(t, e, pool, 2)
	wait.For(t, "substrate deleted", func() (bool, string) {
		list, err := e.api.substrates(pool)
		return err == nil && len(list) == 0, jsonOf(list)
	})
}

// accessToken is an access token of principal (the reconciler when
// empty) from the devstack's POST /dev/access-token.
func accessToken(t *testing.T, e *env, principal string) string {
	t.Helper()
	body := "{}"
	if principal != "" {
		body = fmt.Sprintf(`{"principal": %q}`, principal)
	}
	resp, err := http.Post(e.URL+devstack.AccessTokenPath, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", devstack.AccessTokenPath, err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		t.Fatalf("POST %s = %s, %v", devstack.AccessTokenPath, resp.Status, err)
	}
	return out.AccessToken
}

// kubeAs is a clientset for the cluster's Kubernetes API (its endpoint
// and CA from the kubeconfig) that presents token.
func kubeAs(t *testing.T, e *env, clusterID, token string) *kubernetes.Clientset {
	t.Helper()
	status, kc := getKubeconfig(t, e.URL, clusterID)
	if status != http.StatusOK {
		t.Fatalf("kubeconfig of %s = %d %s", clusterID, status, kc)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	rc = rest.AnonymousClientConfig(rc)
	rc.BearerToken = token
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
