// Package errs is the one error vocabulary of the domain. Errors carry a
// Kind, checked with errors.As (KindOf); the function layer maps kinds to
// HTTP statuses and the emulators never see them.
package errs

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies an error by what the caller can do about it.
type Kind int

// The kinds, one per public error code of API.md §2.
const (
	Internal         Kind = iota // a bug; never shown in detail
	Invalid                      // INVALID_INPUT
	Unauthenticated              // UNAUTHENTICATED
	PermissionDenied             // PERMISSION_DENIED
	NotFound                     // NOT_FOUND
	Conflict                     // CONFLICT
	InvalidState                 // INVALID_STATE
	Quota                        // QUOTA_EXCEEDED
	Unsupported                  // UNSUPPORTED
	Unavailable                  // UNAVAILABLE: transient, safe to retry
)

var codes = [...]string{
	Internal:         "INTERNAL",
	Invalid:          "INVALID_INPUT",
	Unauthenticated:  "UNAUTHENTICATED",
	PermissionDenied: "PERMISSION_DENIED",
	NotFound:         "NOT_FOUND",
	Conflict:         "CONFLICT",
	InvalidState:     "INVALID_STATE",
	Quota:            "QUOTA_EXCEEDED",
	Unsupported:      "UNSUPPORTED",
	Unavailable:      "UNAVAILABLE",
}

// Code is the public error code of the kind (API.md §2).
func (k Kind) Code() string {
	if k < 0 || int(k) >= len(codes) {
		return codes[Internal]
	}
	return codes[k]
}

func (k Kind) String() string { return k.Code() }

// FieldError names one broken input field by its JSON path
// (taints[3].effect, labels["team"]) and says why. A detail that names no
// field (OUTCOME_UNKNOWN) has a Reason alone.
type FieldError struct {
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

// String is the detail as messages show it: "field: reason", or the
// reason alone.
func (f FieldError) String() string {
	if f.Field == "" {
		return f.Reason
	}
	return f.Field + ": " + f.Reason
}

// ReasonOutcomeUnknown is the reason of the one detail of an UNAVAILABLE
// mutation whose outcome could not be learned (API.md §2).
const ReasonOutcomeUnknown = "OUTCOME_UNKNOWN"

// OutcomeUnknown returns the UNAVAILABLE error of a mutation that may or
// may not have been stored: its storage call's answer was lost, and so
// was the reading back of what it would have written. err is the cause.
// A retry with the same idempotency key is safe.
func OutcomeUnknown(err error) *Error {
	return &Error{
		Kind:    Unavailable,
		Message: "storage did not say whether the call was stored; retry with the same idempotencyKey",
		Fields:  []FieldError{{Reason: ReasonOutcomeUnknown}},
		Err:     err,
	}
}

// Error is a domain error. Message is safe to show to the caller; Err, if
// any, is the cause, kept for logs.
type Error struct {
	Kind    Kind
	Message string
	Fields  []FieldError
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Code())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	for _, f := range e.Fields {
		b.WriteString("; ")
		b.WriteString(f.String())
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Public is what a caller may read of err: the message of its first
// *Error and the fields that names, never its kind or its cause (those
// are for the logs); fallback when err holds no *Error or only an
// internal one.
func Public(err error, fallback string) string {
	var e *Error
	if !errors.As(err, &e) || e.Kind == Internal || e.Message == "" {
		return fallback
	}
	var b strings.Builder
	b.WriteString(e.Message)
	for _, f := range e.Fields {
		b.WriteString("; ")
		b.WriteString(f.String())
	}
	return b.String()
}

// E returns an error of the kind with a formatted message for the caller.
func E(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of the kind whose cause is err; the message is for
// the caller, err for the logs.
func Wrap(kind Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Err: err}
}

// InvalidFields returns an INVALID_INPUT error naming every broken field.
func InvalidFields(fields []FieldError) *Error {
	return &Error{Kind: Invalid, Message: "invalid input", Fields: fields}
}

// KindOf returns the kind of the first *Error in err's chain, or Internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Is reports whether err's kind is kind.
func Is(err error, kind Kind) bool { return err != nil && KindOf(err) == kind }
