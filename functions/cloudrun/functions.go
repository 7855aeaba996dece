package cloudrun

import (
	"slices"
	"strings"

	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/functions/poolevents"
	"github.com/better-compute/kubernetes/shared/event"
)

// Function is one function of the project.
type Function struct {
	// Name is its Functions Framework name, the FUNCTION_TARGET of its
	// Cloud Run service.
	Name string
	// Path is where it is served beside the others: the HTTPS entry's
	// /api/compute/... for the API methods, /internal/... in the devstack
	// for the reconcile and watchdog functions (on Cloud Run those are
	// called on their own service's URL).
	Path string
	// Topics are the Pub/Sub topics whose messages a CloudEvent function
	// receives, pushed by a subscription; nil for an HTTP function.
	// Deployments create a subscription of each, which pushes to the
	// function's URL + /projects/P/topics/T (P the topic's project), as
	// the Functions Framework expects; the function is served there too.
	Topics []string
	kind   kind
}

type kind int

const (
	kindAPI kind = iota
	kindReconcile
	kindWatchdog
	kindConsumer // a CloudEvent function pushed by Pub/Sub subscriptions
)

// Function names of the reconciler's functions (FUNCTION_TARGET values).
const (
	ReconcileFunction = "reconcile"
	WatchdogFunction  = "watchdog"
	// PoolEventsFunction consumes the pools module's events (API.md §9).
	PoolEventsFunction = poolevents.Function
)

// registered is every function, in the order of API.md: the API's methods
// (api.Methods), then the reconciler's. Both the Functions Framework
// registration and App.Mux (the devstack's routes) are made from it.
var registered = func() []Function {
	var fs []Function
	for _, m := range api.Methods() {
		fs = append(fs, Function{Name: m.Function(), Path: m.Path(), kind: kindAPI})
	}
	return append(fs,
		Function{Name: ReconcileFunction, Path: "/internal/reconcile", kind: kindReconcile},
		Function{Name: WatchdogFunction, Path: "/internal/watchdog", kind: kindWatchdog},
		Function{Name: PoolEventsFunction, Path: "/internal/poolEvents", kind: kindConsumer,
			Topics: []string{event.PoolUpdated, event.PoolArchived}},
	)
}()

var functionByName = func() map[string]Function {
	m := make(map[string]Function, len(registered))
	for _, f := range registered {
		m[f.Name] = f
	}
	return m
}()

// Functions returns every function, in the order of API.md: their names
// are the values FUNCTION_TARGET may take.
func Functions() []Function {
	return append([]Function(nil), registered...)
}

// pushedTo says whether path is where a push subscription of one of f's
// topics delivers: /projects/P/topics/T, T one of f.Topics.
func (f Function) pushedTo(path string) bool {
	topic, ok := poolevents.PushTopic(path)
	if !ok {
		return false
	}
	name := topic[strings.LastIndex(topic, "/")+1:]
	return slices.Contains(f.Topics, name)
}
