package gke

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// KubernetesServerState is what a simulated cluster's Kubernetes API
// server is doing (KubernetesStatus).
type KubernetesServerState string

const (
	// KubernetesDown: the cluster's create has not ended, so it has no
	// control plane yet and its endpoint refuses connections.
	KubernetesDown KubernetesServerState = "down"
	// KubernetesIdle: no server runs; its state is kept, and the next
	// request to the endpoint starts it (as at the first one).
	KubernetesIdle KubernetesServerState = "idle"
	// KubernetesWaiting: a start waits for a slot of Kubernetes.MaxRunning.
	KubernetesWaiting KubernetesServerState = "waiting"
	// KubernetesStarting: a start is under way.
	KubernetesStarting KubernetesServerState = "starting"
	// KubernetesChanging: a start or a stop is under way; which is not
	// kept (a stop with a request waiting behind it shows as starting).
	KubernetesChanging KubernetesServerState = "starting or stopping"
	// KubernetesRunning: the server runs and serves the endpoint.
	KubernetesRunning KubernetesServerState = "running"
	// KubernetesFailed: its last start failed, and requests fail with
	// that error for a little while before the next one tries again.
	KubernetesFailed KubernetesServerState = "failed"
)

// KubernetesServer is one simulated cluster's Kubernetes API server.
type KubernetesServer struct {
	// Cluster is the cluster's name, projects/P/locations/L/clusters/C,
	// and ID its ID (the name of its directory).
	Cluster, ID string
	// Endpoint is the cluster's endpoint, host:port.
	Endpoint string
	State    KubernetesServerState
	// Since is when the state began, when that is known: running, since
	// its start ended; idle, since its last use (the end of the last
	// request, or of what the simulator last did in it), zero when nothing
	// used it yet; failed, since the start failed. Zero otherwise.
	Since time.Time
	// LastUsed is the end of its last request (or of the simulator's last
	// work in it); zero when nothing used it yet.
	LastUsed time.Time
	// StartTook is how long its last start took (zero before one).
	StartTook time.Duration
	// Requests counts the requests to the endpoint under way now; Conns
	// the connections open to it (idle keep-alive ones included).
	Requests, Conns int
	// Queue is its place among the starts waiting for a slot, 0 the next;
	// -1 when it waits for none.
	Queue int
	// Error is why its last start failed, until a start succeeds (in
	// KubernetesFailed, and after it, while the server is idle again).
	Error string
}

// KubernetesStatus is what the simulator's clusters' Kubernetes API
// servers are doing, and the bound on how many run at once.
type KubernetesStatus struct {
	// MaxRunning bounds the servers running or starting at once
	// (Kubernetes.MaxRunning); negative: no bound.
	MaxRunning int
	// IdleTimeout stops a server unused that long (Kubernetes.IdleTimeout);
	// negative: never.
	IdleTimeout time.Duration
	// Slots counts the servers running or starting: the slots of
	// MaxRunning taken. Peak is the most ever taken at once.
	Slots, Peak int
	// Waiting counts the starts waiting for a slot.
	Waiting int
	// Servers are the clusters' servers, by cluster name; a cluster being
	// deleted has none.
	Servers []KubernetesServer
}

// KubernetesStatus returns what every cluster's Kubernetes API server is
// doing now, for a person to look at (the devstack's console): it only
// reads, and starts or stops nothing. It fails with ErrNoKubernetes when
// the simulator runs without WithKubernetes.
func (s *Server) KubernetesStatus() (KubernetesStatus, error) {
	g := s.GServer
	type entry struct {
		name string
		k    *kubeCluster
		up   bool
	}
	g.mu.Lock()
	e := g.kube
	if e == nil {
		g.mu.Unlock()
		return KubernetesStatus{}, fmt.Errorf("%w: the simulator runs without WithKubernetes", ErrNoKubernetes)
	}
	g.settle()
	var all []entry
	for key, c := range g.clusters {
		if c.kube != nil && !c.gone {
			all = append(all, entry{key.String(), c.kube, c.kube.up})
		}
	}
	g.mu.Unlock()
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.name, b.name) })

	// The order of the locks is the bound's (e.mu, then a cluster's), and
	// neither is taken with g.mu held.
	e.mu.Lock()
	defer e.mu.Unlock()
	out := KubernetesStatus{MaxRunning: e.cfg.MaxRunning, IdleTimeout: e.cfg.IdleTimeout, Slots: e.running, Peak: e.peak, Waiting: len(e.queue)}
	now := time.Now()
	for _, en := range all {
		out.Servers = append(out.Servers, en.k.status(en.name, en.up, e.position(en.k), now))
	}
	return out, nil
}

// status is k's server as KubernetesStatus shows it; queue is its place
// among the starts waiting for a slot (-1: none). Must be called with
// k.env.mu held.
func (k *kubeCluster) status(name string, up bool, queue int, now time.Time) KubernetesServer {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := KubernetesServer{Cluster: name, ID: k.id, Endpoint: k.endpoint(), LastUsed: k.lastUsed, StartTook: k.startTook,
		Requests: k.active, Conns: len(k.conns), Queue: queue}
	if !k.failedAt.IsZero() && k.lastErr != nil {
		st.Error = k.lastErr.Error()
	}
	// A server may run before the control plane is up: with
	// Kubernetes.AtCreate, it starts while the cluster provisions.
	switch {
	case k.run != nil:
		st.State, st.Since = KubernetesRunning, k.startedAt
	case queue >= 0:
		st.State = KubernetesWaiting
	case k.busy != nil && (k.startedAt.IsZero() || k.active > 0):
		// No stop comes before a first start, and a request under way
		// waits for a start.
		st.State = KubernetesStarting
	case k.busy != nil:
		st.State = KubernetesChanging
	case !k.failedAt.IsZero() && now.Sub(k.failedAt) < startRetry:
		st.State, st.Since = KubernetesFailed, k.failedAt
	case !up:
		st.State = KubernetesDown
	default:
		st.State, st.Since = KubernetesIdle, k.lastUsed
	}
	return st
}
