package chain

import (
	"errors"
	"fmt"
	"time"
)

// Intent is a provider call a run is about to make, recorded in the chain
// under the lease before the call (Plan.Intent), so that a call whose
// answer was lost is not made again blindly: the next run is told of it
// (Intending) and must resolve it by looking at the provider before the
// loop lets it call anything.
type Intent struct {
	// Action names the call ("scale").
	Action string `firestore:"action"`
	// Detail is what the call asks, as the kind writes it ("3").
	Detail string `firestore:"detail,omitempty"`
	// At is when the loop recorded it.
	At time.Time `firestore:"at"`
}

// Intending is a Run told the chain's pending intent, nil for none,
// before each Plan: its plan resolves it by looking at the provider
// (Plan.Resolved).
type Intending interface {
	Pending(in *Intent)
}

// ErrIntentPending: a run planned a provider call while the chain's
// intent was pending and its plan did not resolve it. The run fails as
// a transient failure, the intent kept, and is retried with backoff.
var ErrIntentPending = errors.New("a recorded provider call is not resolved")

// tell gives run the chain's pending intent, if it wants it.
func tell(run Run, pending *Intent) {
	if i, ok := run.(Intending); ok {
		i.Pending(pending)
	}
}

// admit decides whether a run whose plan acts may call the provider
// while pending is the chain's intent: only when none is pending or the
// plan resolved it. Even the same call again is refused, since the first
// may have been done (ARCHITECTURE rule 8: resolved before anything is
// called again).
func admit(pending *Intent, pl Plan) error {
	if pending == nil || pl.Resolved {
		return nil
	}
	return fmt.Errorf("%w: %s %s, recorded at %s", ErrIntentPending, pending.Action, pending.Detail, pending.At.Format(time.RFC3339))
}
