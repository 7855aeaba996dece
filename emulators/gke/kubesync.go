package gke

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/better-compute/kubernetes/emulators/kubesim"
)

// syncState is what a cluster's sync loop remembers between passes.
type syncState struct {
	// applied is the hash of what was last applied to each Node.
	applied map[string]string
	// joins is bcd's state on each Node it selects.
	joins map[string]*joinState
	// warned is the last warning of each step and when it was logged, so
	// that a condition that lasts is logged again only now and then.
	warned map[string]warning
}

type warning struct {
	msg string
	at  time.Time
}

// rewarn is how often a warning that does not change is logged again.
const rewarn = 30 * time.Second

// pending reports whether the simulator has work undone in the cluster:
// a step failing, or a Node that bcd selects and has not joined.
func (st *syncState) pending() bool {
	if len(st.warned) > 0 {
		return true
	}
	for _, j := range st.joins {
		if j.token == "" {
			return true
		}
	}
	return false
}

func newSyncState() *syncState {
	return &syncState{applied: map[string]string{}, joins: map[string]*joinState{}, warned: map[string]warning{}}
}

// syncer brings one API server in line with the simulator.
type syncer struct {
	api *kubesim.APIServer
	cs  kubernetes.Interface
	dyn dynamic.Interface
	st  *syncState
}

func newSyncer(api *kubesim.APIServer, st *syncState) (*syncer, error) {
	cfg := api.RESTConfig("")
	// Deprecation warnings (v1 Endpoints, which finalizing a namespace
	// deletes) would go to stderr through klog.
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &syncer{api: api, cs: cs, dyn: dyn, st: st}, nil
}

// syncFirst registers the Nodes of a server that has just started, before
// any client reaches it: in GKE a running cluster's Nodes are there when
// a client first looks. A failure is left to the loop.
func (k *kubeCluster) syncFirst(sy *syncer) {
	want, live := k.g.kubeNodes(k)
	if !live {
		return
	}
	ctx, cancel := context.WithTimeout(k.ctx, time.Minute)
	defer cancel()
	k.step(ctx, sy.st, "nodes", k.syncNodes(ctx, sy.cs, sy.st, want))
}

// syncLoop keeps the API server in line with the simulator until runCtx
// ends (the server is stopped, or the cluster's Kubernetes API closes) or
// the server exits: every SyncInterval, it registers and removes Nodes,
// plays bcd, and finalizes deleted Namespaces. Each step that fails is
// retried at the next pass; while one fails, or a Node bcd selects has
// not joined, the server counts as in use, so that it is not stopped for
// idleness with the simulator's own work undone.
func (k *kubeCluster) syncLoop(runCtx context.Context, sy *syncer, done chan struct{}) {
	defer k.env.wg.Done()
	defer close(done)
	st, cs := sy.st, sy.cs
	t := time.NewTicker(k.env.cfg.SyncInterval)
	defer t.Stop()
	for {
		want, live := k.g.kubeNodes(k)
		if !live {
			return // the cluster has gone; its teardown follows
		}
		ctx, cancel := context.WithTimeout(runCtx, time.Minute)
		k.step(ctx, st, "nodes", k.syncNodes(ctx, cs, st, want))
		k.step(ctx, st, "bcd", k.syncBCD(ctx, cs, st))
		k.step(ctx, st, "namespaces", k.finalizeNamespaces(ctx, cs, cs.Discovery(), sy.dyn))
		cancel()
		if st.pending() {
			k.touch()
		}
		k.passes.Add(1)
		select {
		case <-runCtx.Done():
			return
		case <-sy.api.Exited():
			k.crashed(sy.api)
			return
		case <-t.C:
		}
	}
}

// step logs a step's failure, unless the pass was cut (the server is
// stopping or the simulator closing): at warn, since the next pass
// retries it, and once per condition and rewarn.
func (k *kubeCluster) step(ctx context.Context, st *syncState, name string, err error) {
	if err == nil {
		delete(st.warned, name)
		return
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	k.warn(st, name, "Syncing the cluster's Kubernetes API failed; retrying", "step", name, "error", err)
}

// warn logs msg once per key until its text changes or rewarn passes.
func (k *kubeCluster) warn(st *syncState, key, msg string, args ...any) {
	text := fmt.Sprint(msg, args)
	if w, ok := st.warned[key]; ok && w.msg == text && time.Since(w.at) < rewarn {
		return
	}
	st.warned[key] = warning{msg: text, at: time.Now()}
	k.log.Warn(msg, args...)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
