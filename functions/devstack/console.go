package devstack

import (
	"context"
	"fmt"
	"net/http"

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
		Firestore:  s.FirestoreClient,
		Published:  s.PubSub.OnPublish,
		Topics:     event.Types,
		Queues:     s.consoleQueues,
		Operations: s.GKE.Operations,
		Instances:  s.consoleInstances,
		Kubernetes: s.consoleKubernetes,
		Devstack:   s.http.Handler,
		Token:      s.Token,
		Poll:       s.cfg.ConsolePoll,
		Log:        s.log,
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

func (s *Stack) consoleInstances() []console.Instance {
	var out []console.Instance
	for _, i := range s.Instances() {
		out = append(out, console.Instance(i))
	}
	return out
}

func (s *Stack) consoleKubernetes() []string {
	if s.kube == nil {
		return nil
	}
	ready, progress := s.kube.builder.Status()
	return []string{fmt.Sprintf("API server binary ready: %v (%s)", ready, progress)}
}
