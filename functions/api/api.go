// Package api serves the public methods of kubernetesNodePools,
// kubernetesClusters and kubernetesSubstrates (API.md §5, §6 and §9) over
// HTTP, one handler per method.
//
// Every handler decodes strictly, verifies the bearer token, validates,
// runs the method as one Firestore transaction (store), and after the
// commit hands the transaction's events to the relay and asks for a
// reconcile run, without waiting for either: the answer goes back at once.
// A commit whose answer was lost is resolved by the store before the
// handler answers (API.md §2): 200 when it was stored, exactly as if
// nothing went wrong, 503 UNAVAILABLE when it was not, and 503 with the
// detail OUTCOME_UNKNOWN when that cannot be learned; never 500 for a
// write that was stored.
// The substrates' methods read what their reconciler recorded; join checks
// a node's join token (join.Joiner).
package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/join"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// DefaultTimeout bounds one call's work after its token and input are
// checked, when Deps.Timeout is zero.
const DefaultTimeout = 20 * time.Second

// Store is what the API's methods call of the store: one call each,
// which admits and authorizes its caller (auth.Authorize) in its
// transaction or read.
type Store interface {
	CreateCluster(ctx context.Context, c auth.Principal, req store.CreateClusterRequest) (store.ClusterResult, error)
	GetCluster(ctx context.Context, c auth.Principal, clusterID string) (resource.Cluster, error)
	ListClusters(ctx context.Context, c auth.Principal, req store.ListClustersRequest) ([]resource.Cluster, string, error)
	DeleteCluster(ctx context.Context, c auth.Principal, clusterID string) (store.ClusterResult, error)
	CreateNodePool(ctx context.Context, c auth.Principal, req store.CreateNodePoolRequest) (store.NodePoolResult, error)
	ListNodePools(ctx context.Context, c auth.Principal, clusterID string) ([]resource.NodePool, error)
	UpdateNodePool(ctx context.Context, c auth.Principal, clusterID, nodePoolID string, resize model.Resize) (store.NodePoolResult, error)
	DeleteNodePool(ctx context.Context, c auth.Principal, clusterID, nodePoolID string) (store.NodePoolResult, error)
	GetSubstrate(ctx context.Context, c auth.Principal, id string) (resource.Substrate, error)
	ListSubstrates(ctx context.Context, c auth.Principal, poolID string) ([]resource.Substrate, error)
	ListSubstrateNodes(ctx context.Context, c auth.Principal, id string, pageSize int, pageToken string) ([]resource.SubstrateNode, string, error)
}

// Deps are the API's dependencies.
type Deps struct {
	Auth   httpapi.Authenticator
	Store  Store
	Events substrates.EventSender
	Kicker chain.Kicker
	// Previewer answers kubernetesSubstrates.plan; Joiner checks join
	// tokens and records joins.
	Previewer *substrates.Previewer
	Joiner    *join.Joiner
	// Timeout bounds one call's storage work and kick, so that a call
	// during a Firestore outage answers UNAVAILABLE instead of waiting
	// out the client's retries; zero means DefaultTimeout.
	Timeout time.Duration
}

// Method names one API method, POST /api/compute/{Resource}/{Verb}.
type Method struct {
	Resource string // kubernetesNodePools, kubernetesClusters, kubernetesSubstrates
	Verb     string // create, get, list, update, delete
}

// Function is the method's Functions Framework name, the FUNCTION_TARGET
// of its Cloud Run service: kubernetesNodePools-create, ...
func (m Method) Function() string { return m.Resource + "-" + m.Verb }

// Path is where the HTTPS entry serves the method (API.md §1).
func (m Method) Path() string { return "/api/compute/" + m.Resource + "/" + m.Verb }

// methods is every method with the constructor of its handler, in the
// order of API.md: the one list the functions are registered from.
var methods = []struct {
	Method
	handler func(a *api) (http.Handler, error)
}{
	{Method{"kubernetesNodePools", "create"}, handler((*api).createNodePool)},
	{Method{"kubernetesNodePools", "list"}, handler((*api).listNodePools)},
	{Method{"kubernetesNodePools", "update"}, handler((*api).updateNodePool)},
	{Method{"kubernetesNodePools", "delete"}, handler((*api).deleteNodePool)},
	{Method{"kubernetesClusters", "create"}, handler((*api).createCluster)},
	{Method{"kubernetesClusters", "get"}, handler((*api).getCluster)},
	{Method{"kubernetesClusters", "list"}, handler((*api).listClusters)},
	{Method{"kubernetesClusters", "delete"}, handler((*api).deleteCluster)},
	{Method{"kubernetesSubstrates", "get"}, handler((*api).getSubstrate)},
	{Method{"kubernetesSubstrates", "list"}, handler((*api).listSubstrates)},
	{Method{"kubernetesSubstrates", "listNodes"}, handler((*api).listSubstrateNodes)},
	{Method{"kubernetesSubstrates", "plan"}, handler((*api).planSubstrate)},
	{Method{"kubernetesSubstrates", "join"}, func(a *api) (http.Handler, error) { return a.join() }},
}

// handler makes the constructor of a method's handler: the method bounded
// by the call timeout, behind httpapi's checks.
func handler[In any](method func(*api) httpapi.Method[In]) func(a *api) (http.Handler, error) {
	return func(a *api) (http.Handler, error) {
		return httpapi.Handler(a.Auth, bounded(a.Timeout, method(a)))
	}
}

// Methods returns every API method, in the order of API.md.
func Methods() []Method {
	out := make([]Method, len(methods))
	for i, m := range methods {
		out[i] = m.Method
	}
	return out
}

// Route is one method: its Functions Framework name (the FUNCTION_TARGET
// on Cloud Run), its path, and its handler.
type Route struct {
	Function string
	Path     string
	Handler  http.Handler
}

type api struct{ Deps }

// Routes returns the handlers of every API method, in the order of
// Methods. The handlers give no request ID and recover no panic: serve
// them through httpapi.Edge.
func Routes(d Deps) ([]Route, error) {
	if d.Auth == nil || d.Store == nil || d.Events == nil || d.Kicker == nil || d.Previewer == nil || d.Joiner == nil {
		return nil, errors.New("api: Routes needs an authenticator, a store, an event sender, a kicker, the substrates' previewer and joiner")
	}
	if d.Timeout <= 0 {
		d.Timeout = DefaultTimeout
	}
	a := &api{d}
	routes := make([]Route, 0, len(methods))
	var err error
	for _, m := range methods {
		h, herr := m.handler(a)
		if herr != nil {
			err = errors.Join(err, fmt.Errorf("%s: %w", m.Function(), herr))
			continue
		}
		routes = append(routes, Route{Function: m.Function(), Path: m.Path(), Handler: h})
	}
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
func (a *api) afterCommit(ctx context.Context, events []event.Event, kick *chain.Kick) {
	a.Events.Send(events)
	if kick == nil {
		return
	}
	if err := a.Kicker.Kick(ctx, *kick); err != nil {
		logging.FromContext(ctx).Warn("Reconcile kick failed; the watchdog will restart the chain", "error", err)
	}
}
