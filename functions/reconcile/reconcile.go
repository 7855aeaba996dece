// Package reconcile serves the reconciler's two functions: the reconcile
// run that Cloud Tasks calls for one cluster, and the watchdog that Cloud
// Scheduler calls every minute to restart dead chains and drain the outbox.
package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// Runner runs one cluster (reconcile.Reconciler).
type Runner interface {
	Run(ctx context.Context, k store.Kick, task string) error
}

// Handler serves the reconcile function: the body is a tasks.Payload, the
// caller Cloud Tasks with an OIDC token. A 2xx ends the task; anything else
// makes Cloud Tasks retry it with backoff.
func Handler(auth httpapi.Authenticator, r Runner) (http.Handler, error) {
	if auth == nil || r == nil {
		return nil, errors.New("reconcile: Handler needs an authenticator and a runner")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			httpapi.WriteJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]string{"code": "INVALID_INPUT", "message": "use POST"}})
			return
		}
		if _, err := auth.Verify(ctx, req.Header.Get("Authorization")); err != nil {
			httpapi.WriteError(ctx, w, err)
			return
		}
		var p tasks.Payload
		body, err := io.ReadAll(io.LimitReader(req.Body, 64<<10))
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			err = dec.Decode(&p)
		}
		if err != nil || p.TenantID == "" || p.ClusterID == "" || p.Token == "" {
			// A malformed task never gets better and Cloud Tasks retries
			// every non-2xx answer: drop it, loudly.
			logging.FromContext(ctx).Error("Malformed reconcile task dropped", "error", err)
			httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "dropped"})
			return
		}
		task := req.Header.Get("X-CloudTasks-TaskName")
		err = r.Run(ctx, store.Kick{TenantID: p.TenantID, ClusterID: p.ClusterID, Token: p.Token}, task)
		if err != nil {
			if !errors.Is(err, store.ErrBusy) {
				logging.FromContext(ctx).Warn("Reconcile run failed; Cloud Tasks will retry it", "error", err)
			}
			httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, err, "reconcile run did not finish; retry"))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}), nil
}

// Kicker starts a cluster's chain (tasks.Queue).
type Kicker interface {
	Kick(ctx context.Context, k store.Kick) error
}

// Drainer publishes outbox events older than an age (outbox.Relay).
type Drainer interface {
	Drain(ctx context.Context, olderThan time.Duration, limit int) (int, error)
}

// Watchdog restarts the chains of clusters whose next run is overdue, and
// drains outbox events whose publish failed or whose process died.
type Watchdog struct {
	Store  *store.Store
	Kicker Kicker
	Events Drainer
	// Grace is how late a run may be before its chain counts as dead.
	Grace time.Duration
	// DrainAge is how old an outbox event must be before the watchdog
	// publishes it (younger ones are the relay's).
	DrainAge time.Duration
	Now      func() time.Time
}

// Result is what one watchdog pass did.
type Result struct {
	Restarted int `json:"restarted"`
	Drained   int `json:"drained"`
}

// Tick runs one watchdog pass.
func (w *Watchdog) Tick(ctx context.Context) (Result, error) {
	log := logging.FromContext(ctx)
	var res Result
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	before := now().Add(-w.Grace)
	overdue, err := w.Store.Overdue(ctx, before, 100)
	var errList []error
	if err != nil {
		errList = append(errList, err)
	}
	for _, c := range overdue {
		k, err := w.Store.Rekick(ctx, c.TenantID, c.ID, before)
		if err != nil {
			errList = append(errList, fmt.Errorf("restart chain of %s: %w", c.ID, err))
			continue
		}
		if k == nil {
			continue
		}
		log.Info("Restarting a dead reconcile chain", "tenantId", c.TenantID, "clusterId", c.ID, "overdueSince", c.Reconcile.NextAt)
		if err := w.Kicker.Kick(ctx, *k); err != nil {
			errList = append(errList, fmt.Errorf("kick %s: %w", c.ID, err))
			continue
		}
		res.Restarted++
	}
	n, err := w.Events.Drain(ctx, w.DrainAge, 500)
	res.Drained = n
	if err != nil {
		errList = append(errList, err)
	}
	return res, errors.Join(errList...)
}

// Handler serves the watchdog function (Cloud Scheduler's target).
func (w *Watchdog) Handler(auth httpapi.Authenticator) (http.Handler, error) {
	if auth == nil || w.Store == nil || w.Kicker == nil || w.Events == nil {
		return nil, errors.New("reconcile: watchdog needs an authenticator, a store, a kicker and a drainer")
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		if _, err := auth.Verify(ctx, req.Header.Get("Authorization")); err != nil {
			httpapi.WriteError(ctx, rw, err)
			return
		}
		res, err := w.Tick(ctx)
		if err != nil {
			httpapi.WriteError(ctx, rw, errs.Wrap(errs.Unavailable, err, "watchdog pass incomplete"))
			return
		}
		httpapi.WriteJSON(rw, http.StatusOK, res)
	}), nil
}
