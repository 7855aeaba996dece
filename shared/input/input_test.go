package input

import (
	"errors"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

func TestTooManyFieldErrors(t *testing.T) {
	// 500 bad zones: the report is bounded and says how much it left out.
	zones := list(500, func(int) string { return "Bad Zone" })
	body := marshal(t, with(createPool, obj{"zones": zones, "labels": labelsN(0)}))
	_, err := DecodeCreateNodePool(body)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("DecodeCreateNodePool(500 bad zones) = %v, want INVALID_INPUT", err)
	}
	// zones over 10 stops the element checks; only duplicates are reported.
	if len(e.Fields) != MaxFieldErrors {
		t.Errorf("DecodeCreateNodePool(500 bad zones) lists %d fields, want %d", len(e.Fields), MaxFieldErrors)
	}
	if e.Message == "invalid input" {
		t.Errorf("DecodeCreateNodePool(500 bad zones) message %q does not say fields were left out", e.Message)
	}
}
