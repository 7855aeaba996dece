package gke

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/better-compute/kubernetes/shared/wait"
)

// TestKubernetesAuthReviews checks the webhook's answers to the API
// servers: who a token is, and whether they may act, from the project's
// IAM.
func TestKubernetesAuthReviews(t *testing.T) {
	e := iamEnv(t)
	g := e.srv.GServer
	tokens := []struct {
		name, project, token string
		wantUser             string // "": not authenticated
	}{
		{"the platform at home", project, "platform", platformSA},
		{"the tenant's provisioner in its project", "acme-prod", "tenant", tenantSA},
		{"the platform in the tenant's project", "acme-prod", "platform", ""},
		{"the tenant in the platform's project", project, "tenant", ""},
		{"an unknown token", project, "forged", ""},
		{"no token", project, "", ""},
		{"a project nobody is allowed in", "other", "platform", ""},
	}
	for _, c := range tokens {
		t.Run("TokenReview/"+c.name, func(t *testing.T) {
			var out authnv1.TokenReview
			review(t, func(w http.ResponseWriter, r *http.Request) { g.serveTokenReview(w, r, c.project) },
				authnv1.TokenReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}, Spec: authnv1.TokenReviewSpec{Token: c.token}}, &out)
			if out.APIVersion != "authentication.k8s.io/v1" || out.Kind != "TokenReview" {
				t.Errorf("answer is %s %s, want authentication.k8s.io/v1 TokenReview", out.APIVersion, out.Kind)
			}
			if got := out.Status.User.Username; out.Status.Authenticated != (c.wantUser != "") || got != c.wantUser {
				t.Errorf("authenticated %v as %q, want %q (error %q)", out.Status.Authenticated, got, c.wantUser, out.Status.Error)
			}
			if !out.Status.Authenticated && out.Status.Error == "" {
				t.Error("a refusal says nothing of why")
			}
		})
	}
	access := []struct {
		name, project, user string
		want                bool
	}{
		{"the platform at home", project, platformSA, true},
		{"the tenant's provisioner in its project", "acme-prod", tenantSA, true},
		{"the platform in the tenant's project", "acme-prod", platformSA, false},
		{"a service account of the cluster", project, "system:serviceaccount:default:x", false},
		{"nobody", project, "", false},
	}
	for _, c := range access {
		t.Run("SubjectAccessReview/"+c.name, func(t *testing.T) {
			var out authzv1.SubjectAccessReview
			review(t, func(w http.ResponseWriter, r *http.Request) { g.serveAccessReview(w, r, c.project) },
				authzv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
					Spec: authzv1.SubjectAccessReviewSpec{User: c.user, ResourceAttributes: &authzv1.ResourceAttributes{Verb: "list", Resource: "nodes"}}}, &out)
			if out.Status.Allowed != c.want || out.Status.Denied {
				t.Errorf("allowed %v (denied %v, %q), want allowed %v", out.Status.Allowed, out.Status.Denied, out.Status.Reason, c.want)
			}
		})
	}
	// An IAM change is felt at once by the webhook.
	if err := e.srv.SetProjectIAM("acme-prod", platformSA); err != nil {
		t.Fatal(err)
	}
	var out authnv1.TokenReview
	review(t, func(w http.ResponseWriter, r *http.Request) { g.serveTokenReview(w, r, "acme-prod") },
		authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "tenant"}}, &out)
	if out.Status.Authenticated {
		t.Error("the tenant's provisioner is still authenticated in acme-prod after the project's IAM dropped it")
	}
	rec := httptest.NewRecorder()
	g.serveTokenReview(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString("not json")), project)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("a body that is no review = %d, want 400", rec.Code)
	}
}

// review posts in to h as the API server would and decodes the answer
// into out.
func review(t *testing.T, h http.HandlerFunc, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(b)))
	if rec.Code != http.StatusOK {
		t.Fatalf("review answered %d: %s", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("decode the answer %s: %v", rec.Body, err)
	}
}

// TestKubernetesAuthenticatesAsGKE runs a cluster's real API server
// behind the webhook: a Google access token of an identity with access in
// the cluster's project is accepted, as that identity; the others are
// refused 401; the admin's and the static tokens still work; and a change
// of the project's IAM is felt within the servers' cache.
func TestKubernetesAuthenticatesAsGKE(t *testing.T) {
	tokens := map[string]string{"platform": platformSA, "tenant": tenantSA}
	e := newK8sEnv(t, t.TempDir(), WithIAM(IAM{
		Projects: map[string][]string{project: {platformSA}, "acme-prod": {tenantSA}},
		Identify: func(tok string) (string, bool) { who, ok := tokens[tok]; return who, ok },
	}))
	e.client = clientAs(t, e.srv, "platform")
	c := e.createCluster(t)
	ctx := e.ctx

	platform := kubeClient(t, c, "platform")
	var who *authnv1.SelfSubjectReview
	wait.For(t, "the cluster's API server, as the platform", func() (bool, string) {
		var err error
		who, err = platform.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return err == nil, errString(err)
	})
	if who.Status.UserInfo.Username != platformSA {
		t.Errorf("the platform's token stands for %q in the cluster, want %q", who.Status.UserInfo.Username, platformSA)
	}
	// What the substrates do: write objects, read Nodes.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "better-compute-system"}}
	if _, err := platform.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Errorf("create a Namespace as the platform: %v", err)
	}
	waitNodes(t, platform, map[string]int{"p0": 1})

	for _, tok := range []string{"tenant", "forged"} {
		_, err := kubeClient(t, c, tok).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("list Nodes with token %q of no identity with access in %s = %v, want 401 Unauthorized", tok, project, err)
		}
	}
	acc, err := e.srv.KubernetesAccess(clusterN)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(acc.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]kubernetes.Interface{"the admin's": admin, "the static": kubeClient(t, c, testToken)} {
		if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list Nodes with %s token: %v", name, err)
		}
	}

	// The project's IAM now allows the tenant's provisioner only.
	if err := e.srv.SetProjectIAM(project, tenantSA); err != nil {
		t.Fatal(err)
	}
	tenant := kubeClient(t, c, "tenant")
	wait.For(t, "the platform refused and the tenant accepted", func() (bool, string) {
		_, perr := platform.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		_, terr := tenant.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(perr) && terr == nil, "platform: " + errString(perr) + "; tenant: " + errString(terr)
	})
	if err := tenant.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the Namespace as the tenant: %v", err)
	}
}
