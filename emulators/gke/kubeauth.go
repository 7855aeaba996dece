package gke

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"

	"github.com/better-compute/kubernetes/emulators/kubesim"
)

// KubernetesAuthCacheTTL is how long a cluster's API server keeps the
// simulator's answer about a token or a request: a change of a project's
// IAM (Server.SetProjectIAM) is felt by its clusters' Kubernetes APIs
// within it, and a token that expired is refused within it. GKE's own
// caches hold answers for minutes; tests need seconds.
const KubernetesAuthCacheTTL = 2 * time.Second

// kubeAuth is the simulator's side of its clusters' authentication, as
// GKE's: one HTTPS service, started with the first API server that needs
// it, that answers their TokenReviews and SubjectAccessReviews from the
// simulator's IAM (WithIAM). Each cluster's API server calls it with its
// project in the path.
type kubeAuth struct {
	once sync.Once
	err  error
	ca   kubesim.CA
	base string // https://127.0.0.1:port
	srv  *http.Server
	done chan struct{}
}

// webhook returns how the API server of a cluster in project asks the
// simulator who its callers are, or nil without WithIAM: then the
// servers accept only their static tokens.
func (k *kubeCluster) webhook(project string) (*kubesim.Webhook, error) {
	g := k.g
	if g.iam == nil {
		return nil, nil
	}
	a := &k.env.auth
	a.once.Do(func() { a.err = a.start(g, k.env.log) })
	if a.err != nil {
		return nil, fmt.Errorf("the clusters' authentication webhook: %w", a.err)
	}
	p := a.base + "/projects/" + url.PathEscape(project)
	return &kubesim.Webhook{AuthenticateURL: p + "/authenticate", AuthorizeURL: p + "/authorize", CAPEM: a.ca.CertPEM, CacheTTL: KubernetesAuthCacheTTL}, nil
}

func (a *kubeAuth) start(g *GServer, log *slog.Logger) error {
	ca, err := kubesim.NewCA("gke-simulator-auth")
	if err != nil {
		return err
	}
	cert, err := ca.ServingCertificate()
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /projects/{project}/authenticate", func(w http.ResponseWriter, r *http.Request) {
		g.serveTokenReview(w, r, r.PathValue("project"))
	})
	mux.HandleFunc("POST /projects/{project}/authorize", func(w http.ResponseWriter, r *http.Request) {
		g.serveAccessReview(w, r, r.PathValue("project"))
	})
	a.ca, a.base, a.done = ca, "https://"+lis.Addr().String(), make(chan struct{})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		defer close(a.done)
		if err := a.srv.ServeTLS(lis, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("The clusters' authentication webhook stopped", "error", err)
		}
	}()
	log.Info("Serving the clusters' authentication webhook", "addr", lis.Addr().String())
	return nil
}

// close stops the service, if it started.
func (a *kubeAuth) close() {
	a.once.Do(func() { a.err = errors.New("closed") })
	if a.srv != nil {
		_ = a.srv.Close()
		<-a.done
	}
}

// hasKubernetesAccess reports whether who may use the Kubernetes APIs of
// project's clusters: whether the project's IAM allows it in.
func (s *GServer) hasKubernetesAccess(project, who string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.iam.projects[project], who)
}

// serveTokenReview answers a cluster's API server asking who a bearer
// token stands for: the identity of a Google access token (IAM.Identify)
// that has Kubernetes Engine access in the cluster's project, its email
// the Kubernetes user, as GKE names it. Any other token is not
// authenticated, and the API server answers its caller 401.
func (s *GServer) serveTokenReview(w http.ResponseWriter, r *http.Request, project string) {
	var tr authnv1.TokenReview
	if !decodeReview(w, r, &tr) {
		return
	}
	out := authnv1.TokenReview{TypeMeta: tr.TypeMeta}
	who, ok := s.iam.identify(tr.Spec.Token)
	switch {
	case !ok:
		out.Status.Error = "the token is not a valid Google access token"
	case !s.hasKubernetesAccess(project, who):
		s.log.Info("Refusing a Kubernetes API caller without access in the cluster's project", "project", project, "caller", who)
		out.Status.Error = fmt.Sprintf("%s has no Kubernetes Engine access in project %s", who, project)
	default:
		out.Status.Authenticated = true
		out.Status.User = authnv1.UserInfo{Username: who, Groups: []string{"system:authenticated"}}
	}
	writeReview(w, out)
}

// serveAccessReview answers whether a request RBAC does not allow is
// allowed: any request of an identity with Kubernetes Engine access in
// the cluster's project, as IAM's roles/container.admin gives; nothing of
// anyone else (service accounts of the cluster, for instance, which RBAC
// alone governs).
func (s *GServer) serveAccessReview(w http.ResponseWriter, r *http.Request, project string) {
	var sar authzv1.SubjectAccessReview
	if !decodeReview(w, r, &sar) {
		return
	}
	out := authzv1.SubjectAccessReview{TypeMeta: sar.TypeMeta}
	if user := sar.Spec.User; user != "" && s.hasKubernetesAccess(project, user) {
		out.Status.Allowed = true
		out.Status.Reason = fmt.Sprintf("%s has Kubernetes Engine access in project %s", user, project)
	} else {
		out.Status.Reason = fmt.Sprintf("%q has no Kubernetes Engine access in project %s", user, project)
	}
	writeReview(w, out)
}

// decodeReview reads a review from the API server, answering 400 when it
// is not one.
func decodeReview(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		http.Error(w, "not a review: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeReview(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
