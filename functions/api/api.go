// Package api serves the public methods of kubernetesNodePools and
// kubernetesClusters (API.md §5-6) over HTTP, one handler per method.
//
// Every handler decodes strictly, verifies the bearer token, validates,
// runs the method as one Firestore transaction (store), and after the
// commit hands the transaction's events to the relay and asks for a
// reconcile run, without waiting for either: the answer goes back at once.
package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/store"
)

// EventSender takes committed events for publishing (outbox.Relay).
type EventSender interface {
	Send(events []outbox.Event)
}

// Kicker asks for a reconcile run of a cluster now (a Cloud Task).
type Kicker interface {
	Kick(ctx context.Context, k chain.Kick) error
}

// DefaultTimeout bounds one call's work after its token and input are
// checked, when Deps.Timeout is zero.
const DefaultTimeout = 20 * time.Second

// Deps are the API's dependencies.
type Deps struct {
	Auth   httpapi.Authenticator
	Store  *store.Store
	Events EventSender
	Kicker Kicker
	// Timeout bounds one call's storage work and kick, so that a call
	// during a Firestore outage answers UNAVAILABLE instead of waiting
	// out the client's retries; zero means DefaultTimeout.
	Timeout time.Duration
}

// Route is one method: its Functions Framework name (the FUNCTION_TARGET
// on Cloud Run), its path, and its handler.
type Route struct {
	Function string
	Path     string
	Handler  http.Handler
}

type api struct{ Deps }

// Routes returns the handlers of every API method.
func Routes(d Deps) ([]Route, error) {
	if d.Auth == nil || d.Store == nil || d.Events == nil || d.Kicker == nil {
		return nil, errors.New("api: Routes needs an authenticator, a store, an event sender and a kicker")
	}
	if d.Timeout <= 0 {
		d.Timeout = DefaultTimeout
	}
	a := &api{d}
	var routes []Route
	var err error
	add := func(resource, method string, h http.Handler, herr error) {
		if herr != nil {
			err = errors.Join(err, herr)
			return
		}
		routes = append(routes, Route{
			Function: resource + "-" + method,
			Path:     "/api/compute/" + resource + "/" + method,
			Handler:  h,
		})
	}
	h, herr := httpapi.Handler(d.Auth, bounded(d.Timeout, a.createNodePool()))
	add("kubernetesNodePools", "create", h, herr)
	h, herr = httpapi.Handler(d.Auth, bounded(d.Timeout, a.listNodePools()))
	add("kubernetesNodePools", "list", h, herr)
	h, herr = httpapi.Handler(d.Auth, bounded(d.Timeout, a.updateNodePool()))
	add("kubernetesNodePools", "update", h, herr)
	h, herr = httpapi.Handler(d.Auth, bounded(d.Timeout, a.deleteNodePool()))
	add("kubernetesNodePools", "delete", h, herr)
	h, herr = httpapi.Handler(d.Auth, bounded(d.Timeout, a.createCluster()))
	add("kubernetesClusters", "create", h, herr)
	h, herr = httpapi.Handler(d.Auth, bounded(d.Timeout, a.getCluster()))
	add("kubernetesClusters", "get", h, herr)
	h, herr = httpapi.Handler(d.Auth, bounded(d.Timeout, a.listClusters()))
	add("kubernetesClusters", "list", h, herr)
	h, herr = httpapi.Handler(d.Auth, bounded(d.Timeout, a.deleteCluster()))
	add("kubernetesClusters", "delete", h, herr)
	if err != nil {
		return nil, err
	}
	return routes, nil
}

// bounded gives each call of m at most d.
func bounded[In any](d time.Duration, m httpapi.Method[In]) httpapi.Method[In] {
	call := m.Call
	if call == nil {
		return m
	}
	m.Call = func(ctx context.Context, principal string, in In) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return call(ctx, principal, in)
	}
	return m
}

// afterCommit hands the committed events to the relay and asks for a
// reconcile run. Neither may fail the call: the events wait in the outbox
// for a drain, and the watchdog restarts a chain whose kick was lost.
func (a *api) afterCommit(ctx context.Context, events []outbox.Event, kick *chain.Kick) {
	a.Events.Send(events)
	if kick == nil {
		return
	}
	if err := a.Kicker.Kick(ctx, *kick); err != nil {
		logging.FromContext(ctx).Warn("Reconcile kick failed; the watchdog will restart the chain", "error", err)
	}
}
