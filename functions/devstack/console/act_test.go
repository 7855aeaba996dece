package console

import "testing"

// TestReasonOf says an error answer of the devstack's as its message and
// the fields it names.
func TestReasonOf(t *testing.T) {
	for _, tt := range []struct{ answer, want string }{
		{`{"error":{"code":"INVALID_INPUT","message":"invalid input","details":[{"field":"count","reason":"must be from 1 to 1000"}]}}`, "invalid input: count must be from 1 to 1000"},
		{`{"error":{"code":"NOT_FOUND","message":"cluster nope not found"}}`, "cluster nope not found"},
		{`not json`, "not json"},
		{``, "no answer"},
	} {
		if got := reasonOf(tt.answer); got != tt.want {
			t.Errorf("reasonOf(%s) = %q, want %q", tt.answer, got, tt.want)
		}
	}
}
