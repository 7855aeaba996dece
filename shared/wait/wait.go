// Package wait is the tests' one way to wait for a condition that other
// goroutines or processes bring about: poll it until it holds, and fail
// the test, naming what it waited for and what it last saw, when it does
// not hold in time.
//
// Every wait has the same generous deadline, sized for a cold 2-core
// machine that compiles and tests other packages meanwhile, with the race
// detector on: a condition that holds returns as soon as it does, so a
// long deadline costs only the tests that fail.
package wait

import (
	"testing"
	"time"
)

// Timeout bounds every wait. Waits that pass take milliseconds to a few
// seconds on a quiet machine; a loaded one has made those many times
// slower (a Kubernetes API server's start above all).
const Timeout = 2 * time.Minute

// For polls cond until it reports true, every few milliseconds (as often
// as the tests' own waits did, so that what they time keeps its
// resolution). After Timeout, or shortly before
// the test binary's own deadline, it fails t with what it waited for and
// cond's last description of what it saw.
func For(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is For with a deadline of its own, for the few waits that take
// minutes even when they pass (measurements of many simulated clusters).
func Within(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll(t, timeout, maxPause, what, cond)
}

// WithinEvery is Within with the pauses between its looks growing to
// pause rather than 25 ms: longer for a condition too costly to ask so
// often, such as a count over a whole fleet of simulated clusters that the
// wait would compete with; shorter for one whose moment matters, such as
// a share of calls half spent, when the test acts while calls go on.
func WithinEvery(t testing.TB, timeout, pause time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll(t, timeout, pause, what, cond)
}

// maxPause is the longest pause between two looks of For and Within.
const maxPause = 25 * time.Millisecond

// poll asks cond after pauses that double from a millisecond up to
// longest, until it holds or the deadline passes.
func poll(t testing.TB, timeout, longest time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	deadline := deadlineOf(t, start, timeout)
	for pause := min(time.Millisecond, longest); ; pause = min(2*pause, longest) {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; last: %s", time.Since(start).Round(time.Millisecond), what, last)
			return
		}
		time.Sleep(pause)
	}
}

// Until is For for a condition that has nothing to say but whether it
// holds.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	For(t, what, func() (bool, string) {
		return cond(), "it did not hold"
	})
}

// deadlineOf is when a wait begun at start gives up: after timeout, or a
// little before the test binary is killed (go test -timeout), so that the
// failure names the wait rather than dumping every goroutine.
func deadlineOf(t testing.TB, start time.Time, timeout time.Duration) time.Time {
	deadline := start.Add(timeout)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok && end.Add(-10*time.Second).Before(deadline) {
			deadline = end.Add(-10 * time.Second)
		}
	}
	return deadline
}

// Poll asks cond after pauses that double from a millisecond up to pause,
// until it holds or timeout has passed, and reports whether it held. It
// fails nothing: it is for the waits whose end is not the test's to judge,
// such as a client asking again while a killed server restarts (the
// caller returns the last answer) or a moment a test would rather act at
// but can act without.
func Poll(timeout, pause time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for p := min(time.Millisecond, pause); ; p = min(2*p, pause) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(p)
	}
}
