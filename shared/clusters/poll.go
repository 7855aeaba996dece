package clusters

import (
	"time"

	"github.com/better-compute/kubernetes/shared/model"
)

// How soon a run looks again at a provider operation in flight. The
// provider tells nobody when an operation ends: the run that made the
// call, and the ones after it, poll it. At the converging pace (30 s) a
// short operation would be seen done half an interval late on average,
// and everything waiting on the cluster (its substrate above all) with
// it; polling every second would cost a minutes-long operation hundreds
// of calls. So the next look comes after a tenth of the time the
// operation has run, no sooner than minOpPoll and no later than the
// converging interval (the runner's cap): an operation is seen done within
// about a tenth of its time, or a second, for some 40 looks at a
// five-minute one.
const (
	minOpPoll  = time.Second
	opPollPart = 10
)

// opPoll is when the run after d looks at the operation d leaves in
// flight (chain.Outcome.Poll); zero when none is, or its start is not
// recorded.
func opPoll(d *Decision, now time.Time) time.Duration {
	since, ok := time.Time{}, false
	note := func(op string, in *model.Intent) {
		if op == "" || in == nil || in.At.IsZero() {
			return
		}
		if !ok || in.At.Before(since) {
			since, ok = in.At, true
		}
	}
	pr := &d.Cluster.Status.Provider
	note(pr.Operation, pr.Intent)
	for i := range d.Pools {
		pp := &d.Pools[i].Status.Provider
		note(pp.Operation, pp.Intent)
	}
	if !ok {
		return 0
	}
	return max(minOpPoll, now.Sub(since)/opPollPart)
}
