package chain

import (
	"errors"
	"testing"
)

func TestAdmit(t *testing.T) {
	scale3 := &Intent{Action: "scale", Detail: "3"}
	for _, c := range []struct {
		name    string
		pending *Intent
		plan    Plan
		refused bool
	}{
		{"nothing pending", nil, Plan{Act: true, Intent: scale3}, false},
		{"nothing pending, no intent named", nil, Plan{Act: true}, false},
		{"pending, resolved", scale3, Plan{Act: true, Resolved: true, Intent: &Intent{Action: "scale", Detail: "5"}}, false},
		{"pending, a different call", scale3, Plan{Act: true, Intent: &Intent{Action: "delete"}}, true},
		{"pending, the same call again", scale3, Plan{Act: true, Intent: &Intent{Action: "scale", Detail: "3"}}, true},
		{"pending, no intent named", scale3, Plan{Act: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := admit(c.pending, c.plan)
			if got := errors.Is(err, ErrIntentPending); got != c.refused || (err != nil) != c.refused {
				t.Errorf("admit = %v, want refused %v", err, c.refused)
			}
		})
	}
}
