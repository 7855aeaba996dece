package wait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a test whose binary ends at end, recording its failure.
type recorder struct {
	testing.TB
	end    time.Time
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func (r *recorder) Deadline() (time.Time, bool) { return r.end, true }

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	For(t, "the third call", func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprintf("%d calls", calls)
	})
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}

// A wait that times out names what it waited for and what it last saw,
// before the test binary's deadline.
func TestForFailsWithTheLastDescription(t *testing.T) {
	r := &recorder{TB: t, end: time.Now().Add(10*time.Second + 50*time.Millisecond)}
	calls := 0
	For(r, "the pool ready", func() (bool, string) {
		calls++
		return false, fmt.Sprintf("state provisioning after %d looks", calls)
	})
	want := fmt.Sprintf("for the pool ready; last: state provisioning after %d looks", calls)
	if !strings.Contains(r.failed, want) {
		t.Errorf("failure = %q, want it to contain %q", r.failed, want)
	}
	if time.Now().After(r.end) {
		t.Errorf("gave up after the binary's deadline")
	}
}

func TestUntilFails(t *testing.T) {
	r := &recorder{TB: t, end: time.Now().Add(10 * time.Second)}
	Until(r, "never", func() bool { return false })
	if !strings.Contains(r.failed, "for never; last: it did not hold") {
		t.Errorf("failure = %q, want the condition named", r.failed)
	}
}

// WithinEvery asks no more often than its pause once its first looks
// found the condition false, and fails as Within does.
func TestWithinEveryPaces(t *testing.T) {
	const every = 100 * time.Millisecond
	var looks []time.Time
	WithinEvery(t, Timeout, every, "the twelfth look", func() (bool, string) {
		looks = append(looks, time.Now())
		return len(looks) == 12, fmt.Sprintf("%d looks", len(looks))
	})
	// Pauses of 1, 2, 4, ... 64 ms, then of every.
	for i := 8; i < len(looks); i++ {
		if gap := looks[i].Sub(looks[i-1]); gap < every {
			t.Errorf("look %d came %v after the one before, want at least %v", i+1, gap, every)
		}
	}

	r := &recorder{TB: t, end: time.Now().Add(10*time.Second + 50*time.Millisecond)}
	WithinEvery(r, time.Minute, 20*time.Millisecond, "the count", func() (bool, string) { return false, "3 of 4" })
	if !strings.Contains(r.failed, "for the count; last: 3 of 4") {
		t.Errorf("failure = %q, want the condition and its last description named", r.failed)
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	if !Poll(time.Minute, 10*time.Millisecond, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Errorf("Poll of a condition that holds at the third call: %d calls, want true after 3", calls)
	}
	start := time.Now()
	if Poll(50*time.Millisecond, 10*time.Millisecond, func() bool { return false }) {
		t.Errorf("Poll of a condition that never holds = true, want false")
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("Poll gave up after %v, want its timeout of 50ms at least", took)
	}
}
