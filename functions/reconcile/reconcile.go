// Package reconcile serves the reconcile chains' two functions: the run
// that Cloud Tasks calls for one subject (a cluster or a substrate), and
// the watchdog that Cloud Scheduler calls every minute to restart the dead
// chains of both and drain the outbox. The work is package chain's; this
// is its HTTP edge. Both accept only POST, the method of Cloud Tasks'
// tasks and of the Scheduler's job (infra/), and answer any other 405 in
// the API's error envelope.
package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// Runner runs one subject (chain.Runner).
type Runner interface {
	Run(ctx context.Context, k chain.Kick, task string) error
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
		if !httpapi.Allow(w, req, http.MethodPost) {
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
		if err != nil || p.Kind == "" || p.TenantID == "" || p.ID == "" || p.Token == "" {
			// A malformed task never gets better and Cloud Tasks retries
			// every non-2xx answer: drop it, loudly.
			logging.FromContext(ctx).Error("Malformed reconcile task dropped", "error", err)
			httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "dropped"})
			return
		}
		task := req.Header.Get("X-CloudTasks-TaskName")
		k := p.Kick()
		k.Link = tasks.LinkFrom(req.Header)
		k.Hint = req.Header.Get(tasks.HintHeader)
		err = r.Run(ctx, k, task)
		if err != nil {
			if !errors.Is(err, chain.ErrBusy) {
				logging.FromContext(ctx).Warn("Reconcile run failed; Cloud Tasks will retry it", "error", err)
			}
			httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, err, "reconcile run did not finish; retry"))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}), nil
}

// Ticker runs one watchdog pass (chain.Watchdog).
type Ticker interface {
	Tick(ctx context.Context) (chain.Pass, error)
}

// WatchdogHandler serves the watchdog function (Cloud Scheduler's target).
func WatchdogHandler(auth httpapi.Authenticator, w Ticker) (http.Handler, error) {
	if auth == nil || w == nil {
		return nil, errors.New("reconcile: WatchdogHandler needs an authenticator and a watchdog")
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		if !httpapi.Allow(rw, req, http.MethodPost) {
			return
		}
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
