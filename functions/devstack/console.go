package devstack

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/httpapi"
)

// consoleRoutes serves the console (API.md §8) at /console, once the
// functions' clients it reads through are built (startConsole).
func (s *Stack) consoleRoutes(mux *http.ServeMux) {
	serve := func(w http.ResponseWriter, r *http.Request) {
		h := s.consoleHandler.Load()
		if h == nil {
			httpapi.WriteError(r.Context(), w, errs.E(errs.Unavailable, "the console is starting; retry"))
			return
		}
		(*h).ServeHTTP(w, r)
	}
	mux.HandleFunc("GET "+console.Path, serve)
	mux.HandleFunc(console.Path+"/", serve)
}

// startConsole builds the console on the stack's own clients and has it
// observe the event topics' publications.
func (s *Stack) startConsole(ctx context.Context) error {
	c, err := console.New(console.Options{
		Firestore:           s.FirestoreClient,
		Published:           s.PubSub.OnPublish,
		Topics:              event.Types,
		Queues:              s.consoleQueues,
		Operations:          s.GKE.Operations,
		Instances:           s.consoleInstances,
		Kubernetes:          s.consoleKubernetes,
		Faults:              s.consoleFaults,
		Devstack:            s.handler,
		Token:               s.Token,
		Poll:                s.cfg.ConsolePoll,
		FromStart:           s.cfg.ConsoleFromStart,
		Zones:               s.seedZones(),
		MaxStreams:          s.cfg.ConsoleMaxStreams,
		MaxStreamsPerClient: s.cfg.ConsoleMaxStreamsPerClient,
		Log:                 s.log,
		Logs:                s.logTap,
		Requests:            s.requests,
	})
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	s.console = c
	h := c.Handler()
	s.consoleHandler.Store(&h)
	return nil
}

// Console is the stack's web console (nil until the stack started).
func (s *Stack) Console() *console.Console { return s.console }

func (s *Stack) consoleQueues() []console.Queue {
	var out []console.Queue
	for _, q := range []string{s.cfg.Queue(), s.cfg.SteadyQueue()} {
		out = append(out, console.Queue{Name: q, Tasks: s.Tasks.Tasks(q)})
	}
	return out
}

// consoleFaults is the emulators' active faults of the fault API.
func (s *Stack) consoleFaults() []console.Fault {
	var out []console.Fault
	for _, f := range s.Faults() {
		out = append(out, console.Fault{ID: f.ID, Service: f.Service, Method: f.Method, Action: f.Action,
			Code: f.Code, Latency: f.Latency, Count: f.Count, Share: f.Share, Seed: f.Seed, Hits: f.Hits})
	}
	return out
}

func (s *Stack) consoleInstances() []console.Instance {
	var out []console.Instance
	for _, i := range s.Instances() {
		out = append(out, console.Instance(i))
	}
	return out
}

// consoleKubernetes is what the GKE simulator's clusters' Kubernetes API
// servers are doing, and the build of their binary.
func (s *Stack) consoleKubernetes() *console.Kubernetes {
	if s.kube == nil {
		return nil
	}
	ready, progress := s.kube.builder.Status()
	k := &console.Kubernetes{Binary: fmt.Sprintf("API server binary ready: %v (%s)", ready, progress)}
	st, err := s.GKE.KubernetesStatus()
	if err != nil {
		k.Error = err.Error()
		return k
	}
	k.MaxRunning, k.IdleTimeout, k.Slots, k.Peak, k.Waiting = st.MaxRunning, st.IdleTimeout, st.Slots, st.Peak, st.Waiting
	for _, sv := range st.Servers {
		k.Servers = append(k.Servers, console.KubeServer{Cluster: sv.Cluster, Endpoint: sv.Endpoint, State: string(sv.State),
			Since: sv.Since, LastUsed: sv.LastUsed, StartTook: sv.StartTook, Requests: sv.Requests, Conns: sv.Conns,
			Queue: sv.Queue, Error: sv.Error})
	}
	return k
}

// seedZones are the zones of the seed's accounts: the only ones a cluster
// of the devstack can have nodes in.
func (s *Stack) seedZones() []string {
	if s.cfg.Seed == nil {
		return nil
	}
	var zones []string
	for _, a := range s.cfg.Seed.Accounts {
		for _, zs := range a.Regions {
			for _, z := range zs {
				if !slices.Contains(zones, z) {
					zones = append(zones, z)
				}
			}
		}
	}
	slices.Sort(zones)
	return zones
}
