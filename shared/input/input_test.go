package input

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

func TestReadBody(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		tooLarge bool
	}{
		{"empty", 0, false},
		{"1 MiB", MaxBodyBytes, false},
		{"1 MiB + 1", MaxBodyBytes + 1, true},
		{"2 MiB", 2 * MaxBodyBytes, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ReadBody(bytes.NewReader(make([]byte, tt.size)))
			if tt.tooLarge {
				if !errs.Is(err, errs.Invalid) || !errors.Is(err, ErrBodyTooLarge) || b != nil {
					t.Fatalf("ReadBody(%d bytes) = %d bytes, %v; want INVALID_INPUT wrapping ErrBodyTooLarge", tt.size, len(b), err)
				}
				return
			}
			if err != nil || len(b) != tt.size {
				t.Fatalf("ReadBody(%d bytes) = %d bytes, %v; want all of it", tt.size, len(b), err)
			}
		})
	}
	failing := io.MultiReader(bytes.NewReader([]byte("{")), iotestErr{})
	if _, err := ReadBody(failing); !errors.Is(err, errRead) || errs.Is(err, errs.Invalid) {
		t.Errorf("ReadBody(failing reader) = %v, want the read error, not INVALID_INPUT", err)
	}
}

var errRead = errors.New("connection reset")

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errRead }

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
