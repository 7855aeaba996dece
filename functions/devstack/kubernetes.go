package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/emulators/kubesim"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/model"
)

// kubeSide is what Config.Kubernetes adds to the stack: the API server's
// build, in the background.
type kubeSide struct {
	builder *kubesim.Builder
}

// startKubernetes starts building the API server in the background, so
// that /healthz does not wait for it: the first cluster that is reached
// waits instead, and /healthz/kubernetes tells how far the build is. The
// build stops when the stack closes (the emulators close in reverse, so
// this one, added first, goes last).
func (s *Stack) startKubernetes() {
	if !s.cfg.Kubernetes {
		return
	}
	b := kubesim.NewBuilder(s.log)
	b.Start()
	s.kube = &kubeSide{builder: b}
	s.emulators = append(s.emulators, func() error { b.Close(); return nil })
}

// kubernetesOptions give the GKE simulator's clusters a Kubernetes API
// server each. With a data file, their state lives beside it, so that a
// restart keeps their objects. They take no static token but their
// administrator's: the functions present Google access tokens, which the
// simulator's IAM accepts as GKE's does (API.md §8): the reconciler's own
// (EMULATOR_ACCESS_TOKEN) in the platform's projects, the tenant's
// impersonated service account's in a tenant's.
func (s *Stack) kubernetesOptions() []gke.Option {
	if s.kube == nil {
		return nil
	}
	k := gke.Kubernetes{Binary: s.kube.builder.Wait, JoinURLs: []string{s.joinURL()}}
	if s.cfg.DataFile != "" {
		k.Dir = s.cfg.DataFile + ".kubernetes"
	}
	k.AtCreate = s.cfg.KubernetesAtCreate
	k.IdleTimeout, k.MaxRunning = s.cfg.KubernetesIdleTimeout, s.cfg.KubernetesMaxRunning
	return []gke.Option{gke.WithKubernetes(k)}
}

// kubernetesRoutes serves /healthz/kubernetes and the clusters'
// kubeconfigs (API.md §8).
func (s *Stack) kubernetesRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz/kubernetes", s.healthzKubernetes)
	mux.HandleFunc("GET /dev/clusters/{clusterId}/kubeconfig", s.kubeconfig)
}

// healthzKubernetes answers 200 once simulated clusters can be given a
// Kubernetes API (the binary is built), 503 meanwhile, with what is
// happening: {"ready": bool, "progress": "..."}.
func (s *Stack) healthzKubernetes(w http.ResponseWriter, _ *http.Request) {
	ready, progress := false, "the devstack runs without Kubernetes (-kubernetes=false)"
	if s.kube != nil {
		ready, progress = s.kube.builder.Status()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(struct {
		Ready    bool   `json:"ready"`
		Progress string `json:"progress"`
	}{ready, progress})
}

// kubeconfig answers a kubeconfig with the administrator's credentials
// for a cluster's Kubernetes API, or NOT_FOUND until the cluster runs at
// the GKE simulator.
func (s *Stack) kubeconfig(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("clusterId")
	if s.kube == nil {
		httpapi.WriteError(ctx, w, errs.E(errs.NotFound, "the devstack runs without Kubernetes (-kubernetes=false)"))
		return
	}
	cl, err := s.providerCluster(r, id)
	if err != nil {
		httpapi.WriteError(ctx, w, err)
		return
	}
	acc, err := s.GKE.KubernetesAccess(cl.name())
	if errors.Is(err, gke.ErrNoKubernetes) {
		httpapi.WriteError(ctx, w, errs.E(errs.NotFound, "cluster %s is not running at the GKE simulator yet", id))
		return
	}
	if err != nil {
		httpapi.WriteError(ctx, w, fmt.Errorf("kubeconfig of cluster %s: %w", id, err))
		return
	}
	// gcloud's name for a cluster's context.
	b, err := acc.Kubeconfig(fmt.Sprintf("gke_%s_%s_%s", cl.Spec.Project, cl.Spec.Region, cl.Spec.ProviderName))
	if err != nil {
		httpapi.WriteError(ctx, w, fmt.Errorf("kubeconfig of cluster %s: %w", id, err))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// storedCluster is a cluster as the store holds it, which names it at
// the provider.
type storedCluster struct{ model.Cluster }

// name is the cluster's name at the GKE simulator.
func (c storedCluster) name() string {
	return fmt.Sprintf("projects/%s/locations/%s/clusters/%s", c.Spec.Project, c.Spec.Region, c.Spec.ProviderName)
}

// providerCluster reads the cluster's document through the store. The
// URL does not name the tenant: the store finds the cluster by its ID.
func (s *Stack) providerCluster(r *http.Request, id string) (storedCluster, error) {
	cl, err := s.Store.ClusterByID(r.Context(), id)
	if err != nil {
		return storedCluster{}, fmt.Errorf("find cluster %s: %w", id, err)
	}
	if cl == nil {
		return storedCluster{}, errs.E(errs.NotFound, "cluster %s not found", id)
	}
	if cl.Spec.ProviderName == "" {
		return storedCluster{}, errs.E(errs.NotFound, "cluster %s has no provider cluster yet", id)
	}
	return storedCluster{*cl}, nil
}
