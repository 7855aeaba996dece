package console

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
)

// Kubernetes is what the GKE simulator's clusters' Kubernetes API servers
// are doing (Options.Kubernetes), as the devstack reads it from the
// simulator.
type Kubernetes struct {
	// Binary says whether the API server's binary is built, or how far
	// its build is.
	Binary string
	// Error, when set, is why nothing more is known.
	Error string
	// MaxRunning bounds the servers running or starting at once
	// (negative: no bound); Slots counts those taken, Peak the most ever
	// taken, Waiting the starts waiting for one.
	MaxRunning, Slots, Peak, Waiting int
	// IdleTimeout stops a server unused this long (negative: never).
	IdleTimeout time.Duration
	Servers     []KubeServer
}

// KubeServer is one simulated cluster's Kubernetes API server.
type KubeServer struct {
	// Cluster is the cluster's name at the provider,
	// projects/P/locations/L/clusters/C.
	Cluster, Endpoint string
	// State is down, idle, waiting, starting, "starting or stopping",
	// running or failed.
	State string
	// Since is when the state began, when known: running since its start
	// ended, idle since its last use, failed since the start failed.
	Since, LastUsed time.Time
	StartTook       time.Duration
	// Requests under way, connections open, its place among the starts
	// waiting for a slot (-1: none).
	Requests, Conns, Queue int
	Error                  string
}

// States counts the servers by state, in the order a person reads them.
func (k *Kubernetes) States() []stateCount {
	n := map[string]int{}
	for _, s := range k.Servers {
		n[s.State]++
	}
	var out []stateCount
	for _, st := range []string{"running", "starting", "starting or stopping", "waiting", "failed", "idle", "down"} {
		if n[st] > 0 {
			out = append(out, stateCount{st, n[st]})
			delete(n, st)
		}
	}
	for _, st := range slices.Sorted(maps.Keys(n)) {
		out = append(out, stateCount{st, n[st]})
	}
	return out
}

type stateCount struct {
	State string
	N     int
}

// kubeOf is the API server of the cluster, nil when the simulator says
// nothing of it.
func (c *Console) kubeOf(cl *model.Cluster) *KubeServer {
	if c.opt.Kubernetes == nil || cl.Spec.ProviderName == "" {
		return nil
	}
	k := c.opt.Kubernetes()
	if k == nil {
		return nil
	}
	name := fmt.Sprintf("projects/%s/locations/%s/clusters/%s", cl.Spec.Project, cl.Spec.Region, cl.Spec.ProviderName)
	for i := range k.Servers {
		if k.Servers[i].Cluster == name {
			return &k.Servers[i]
		}
	}
	return nil
}
