package substrates

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// How a run's failures show on the substrate: a failure that will come
// again whatever the run does (objects that cannot be applied) at once, as
// the substrate's error; one that may pass, once it has lasted.

// objectsError is bcd's objects as the spec asks for them failing
// kubeapply.Validate: applying them would fail the same way every time.
type objectsError struct{ err error }

func (e *objectsError) Error() string { return e.err.Error() }
func (e *objectsError) Unwrap() error { return e.err }

// invalidObjects is the substrate's error when err is an *objectsError,
// "" otherwise.
func invalidObjects(err error) string {
	if oe, ok := errors.AsType[*objectsError](err); ok {
		return objectsRefusal(oe.err)
	}
	return ""
}

// objectsRefusal is the substrate's error when kubeapply.Validate refuses
// its objects (err): a run's and a preview's.
func objectsRefusal(err error) string {
	return "bcd's objects cannot be applied: " + strings.ReplaceAll(err.Error(), "\n", "; ")
}

// failed is the outcome of a run that failed for err, which may pass (the
// cluster's Kubernetes API unreachable, the store unavailable): the
// substrate keeps what the run did (a token it minted, objects it
// applied), records when its runs began to fail, and its next run comes
// after a backoff. Runs that have kept failing for longer than
// lifecycle.RetryShownAfter show the substrate in error with the reason,
// and the chain goes at the steady pace (a reason that lasts is not
// passing); a substrate being torn down stays deleting, its message saying
// "retrying since <time>: <reason>". The first run that does not fail
// plans as any other and clears the record. A lost lease or a canceled
// run is returned: nothing is saved.
func (u *run) failed(ctx context.Context, err error) (chain.Outcome, error) {
	if errors.Is(err, chain.ErrLeaseLost) || ctx.Err() != nil {
		return chain.Outcome{}, err
	}
	log := logging.FromContext(ctx)
	now := u.r.now().UTC().Truncate(time.Microsecond)
	msg := reason(err)
	d := Decision{Substrate: u.in.Substrate.Clone(), now: now}
	if u.minted.Hash != "" {
		// The store holds the token the run recorded.
		d.Substrate.Status.Token = u.minted
	}
	r := model.Retry{Since: now, Reason: msg}
	if prev := u.in.Substrate.Status.Retrying; prev != nil {
		r.Since = prev.Since
	}
	d.Substrate.Status.Retrying = &r
	out := chain.Outcome{Next: chain.Retry}
	switch {
	case now.Sub(r.Since) <= lifecycle.RetryShownAfter:
		log.Warn("Substrate run failed; retrying with backoff", "error", err)
	case d.Substrate.Spec.Deleting:
		// The pool's teardown stands, and no error state would help:
		// the substrate says what holds it up.
		log.Warn("Substrate teardown runs keep failing; retried at the steady pace", "error", err, "since", r.Since)
		d.setState(resource.StateDeleting, lifecycle.RetryMessage(r))
		out.Next = chain.Steady
	default:
		log.Warn("Substrate runs keep failing; the substrate shows the error and is retried at the steady pace",
			"error", err, "since", r.Since)
		d.fail(msg)
		out.Next = chain.Steady
	}
	before := &u.read.Substrate
	u.leave = store.SubstrateLeave{Substrate: d.Substrate, Events: d.Events}
	out.Changed = u.acted || !reflect.DeepEqual(d.Substrate.Status, before.Status) || len(d.Events) > 0
	return out, nil
}

// reason is a run's failure as the substrate's message says it: what the
// run did when the cluster's Kubernetes API refused or could not be
// reached, in its words; a failure of Better Compute's own services is
// said without its cause (which the logs have).
func reason(err error) string {
	var status apierrors.APIStatus
	api := errors.As(err, &status)
	_, reach := errors.AsType[*url.Error](err)
	kube := api || reach
	if e, ok := errors.AsType[*errs.Error](err); ok && !kube {
		if e.Kind == errs.Internal || e.Message == "" {
			return internalReason
		}
		return e.Message
	}
	if kube {
		return strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return internalReason
}

// internalReason is the message of a failure that the run cannot say more
// of without showing internals.
const internalReason = "Better Compute's run of the substrate failed; it is retried"
