package errs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestKindOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, Internal},
		{"plain", errors.New("boom"), Internal},
		{"domain", E(NotFound, "cluster %s", "kcl_x"), NotFound},
		{"wrapped", fmt.Errorf("get: %w", E(Conflict, "taken")), Conflict},
		{"with cause", Wrap(Unavailable, errors.New("dial"), "retry"), Unavailable},
		{"fields", InvalidFields([]FieldError{{Field: "name", Reason: "bad"}}), Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KindOf(tt.err); got != tt.want {
				t.Errorf("KindOf(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if Is(nil, Internal) {
		t.Errorf("Is(nil, Internal) = true, want false")
	}
}

func TestCodes(t *testing.T) {
	want := map[Kind]string{
		Internal: "INTERNAL", Invalid: "INVALID_INPUT", Unauthenticated: "UNAUTHENTICATED",
		PermissionDenied: "PERMISSION_DENIED", NotFound: "NOT_FOUND", Conflict: "CONFLICT",
		InvalidState: "INVALID_STATE", Quota: "QUOTA_EXCEEDED", Unsupported: "UNSUPPORTED",
		Unavailable: "UNAVAILABLE", Kind(99): "INTERNAL", Kind(-1): "INTERNAL",
	}
	for k, code := range want {
		if got := k.Code(); got != code {
			t.Errorf("Kind(%d).Code() = %q, want %q", int(k), got, code)
		}
	}
}

func TestErrorUnwrapsCause(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	err := Wrap(Unavailable, cause, "storage is unavailable")
	if !errors.Is(err, cause) {
		t.Errorf("errors.Is(%v, cause) = false, want true", err)
	}
}

// What a caller reads of an error never shows its kind or its cause.
func TestPublic(t *testing.T) {
	cause := errors.New("rpc error: code = Aborted desc = secret internals")
	for _, c := range []struct {
		err  error
		want string
	}{
		{E(InvalidState, "cluster c is being deleted"), "cluster c is being deleted"},
		{Wrap(Unavailable, cause, "storage is unavailable; retry"), "storage is unavailable; retry"},
		{fmt.Errorf("adopt: %w", E(InvalidState, "cluster c is adopted")), "cluster c is adopted"},
		{InvalidFields([]FieldError{{Field: "name", Reason: "required"}}), "invalid input; name: required"},
		{Wrap(Internal, cause, "internal error"), "fallback"},
		{cause, "fallback"},
	} {
		if got := Public(c.err, "fallback"); got != c.want {
			t.Errorf("Public(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestOutcomeUnknown: UNAVAILABLE, its one detail names no field, and
// the detail's JSON is the reason alone, as API.md §2 writes it.
func TestOutcomeUnknown(t *testing.T) {
	e := OutcomeUnknown(errors.New("commit: deadline exceeded"))
	if !Is(e, Unavailable) {
		t.Errorf("KindOf(OutcomeUnknown) = %v, want UNAVAILABLE", KindOf(e))
	}
	b, err := json.Marshal(e.Fields)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `[{"reason":"OUTCOME_UNKNOWN"}]`; got != want {
		t.Errorf("details = %s, want %s", got, want)
	}
	if got := Public(e, "x"); strings.Contains(got, ": OUTCOME") || !strings.HasSuffix(got, "; OUTCOME_UNKNOWN") {
		t.Errorf("Public = %q, want the message then the reason alone", got)
	}
}
