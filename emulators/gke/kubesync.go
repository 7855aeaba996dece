package gke

import (
	"context"
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

func newSyncState() *syncState {
	return &syncState{applied: map[string]string{}, joins: map[string]*joinState{}, warned: map[string]warning{}}
}

// syncLoop keeps the API server in line with the simulator until the
// cluster's Kubernetes API closes or the server exits: every
// SyncInterval, it registers and removes Nodes, plays bcd, and finalizes
// deleted Namespaces. Each step that fails is retried at the next pass.
func (k *kubeCluster) syncLoop(api *kubesim.APIServer, done chan struct{}) {
	defer k.env.wg.Done()
	defer close(done)
	cfg := api.RESTConfig("")
	// Deprecation warnings (v1 Endpoints, which finalizing a namespace
	// deletes) would go to stderr through klog.
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err == nil {
		var dyn *dynamic.DynamicClient
		if dyn, err = dynamic.NewForConfig(cfg); err == nil {
			k.runSync(api, cs, dyn)
			return
		}
	}
	k.log.Error("Cannot sync the cluster's Kubernetes API", "error", err)
}

func (k *kubeCluster) runSync(api *kubesim.APIServer, cs *kubernetes.Clientset, dyn dynamic.Interface) {
	st := newSyncState()
	t := time.NewTicker(k.env.cfg.SyncInterval)
	defer t.Stop()
	for {
		want, live := k.g.kubeNodes(k)
		if !live {
			return // the cluster has gone; its teardown follows
		}
		ctx, cancel := context.WithTimeout(k.ctx, time.Minute)
		k.step(st, "nodes", k.syncNodes(ctx, cs, st, want))
		k.step(st, "bcd", k.syncBCD(ctx, cs, st))
		k.step(st, "namespaces", k.finalizeNamespaces(ctx, cs, cs.Discovery(), dyn))
		cancel()
		k.passes.Add(1)
		select {
		case <-k.ctx.Done():
			return
		case <-api.Exited():
			k.crashed(api)
			return
		case <-t.C:
		}
	}
}

// step logs a step's failure, unless the simulator is closing: at warn,
// since the next pass retries it, and once per condition and rewarn.
func (k *kubeCluster) step(st *syncState, name string, err error) {
	if err == nil {
		delete(st.warned, name)
		return
	}
	if k.ctx.Err() != nil {
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
