package outbox

import (
	"fmt"

	"github.com/better-compute/kubernetes/shared/event"
)

// SequenceField is the field of a chain's subject document (a cluster, a
// substrate) that counts the events written for it: the last ce-sequence
// given. It is read and written in the transaction that writes the events,
// so that two transactions never give the same number and a failed one
// gives none.
const SequenceField = "sequence"

// sequenceDigits is the width of ce-sequence: zero-padded so that string
// order is numeric order (API.md §7).
const sequenceDigits = 20

// Number gives events, in order, the places after last in their chain's
// sequence, and returns the new last. The caller writes it to the
// subject's SequenceField in the same transaction as the events.
func Number(events []event.Event, last int64) int64 {
	for i := range events {
		last++
		events[i].Sequence = last
	}
	return last
}

// FormatSequence is n as ce-sequence: twenty decimal digits.
func FormatSequence(n int64) string {
	return fmt.Sprintf("%0*d", sequenceDigits, n)
}
