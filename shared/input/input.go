// Package input decodes and validates the request bodies of the Kubernetes
// API (API.md §1, §2, §5, §6), with no I/O.
//
// Each method has a Decode function taking the raw body. Decoding is strict:
// the body must be exactly one JSON object, with no unknown member, no member
// given twice, integers written without fraction or exponent, no null where a
// value is required. Every rule of the seed's tables is then checked, and a
// rejection is an *errs.Error of kind errs.Invalid listing every broken field
// by its JSON path (autoscaling.minNodes, taints[3].effect, labels["team"],
// nodePools[1].zones[0]), or, for a body that is not JSON at all, saying so
// in its message.
//
// What leaves the package for a node pool is its model.NodePoolSpec,
// the one shape the store records. What needs stored data is left to the
// caller: zones and regions of the account are the store's to check
// (lifecycle.AddNodePool, lifecycle.ClusterZones), and a resize against
// the stored pool is UpdateNodePool.Apply.
package input

import (
	"bytes"
	"errors"

	"github.com/better-compute/kubernetes/shared/errs"
)

// MaxBodyBytes is the largest request body the API accepts (1 MiB).
const MaxBodyBytes = 1 << 20

// errBodyTooLarge is the cause of the INVALID_INPUT error of a decoder
// given a body over MaxBodyBytes (the HTTP edge refuses those before; the
// decoders do not rely on it).
var errBodyTooLarge = errors.New("request body is larger than 1 MiB")

func tooLarge() *errs.Error {
	return errs.Wrap(errs.Invalid, errBodyTooLarge, "the request body must be at most 1 MiB")
}

// decode parses body as one JSON object and hands its members to read, which
// decodes them and runs the checks; the result is every problem found.
func decode(body []byte, read func(f *fields)) error {
	if len(body) > MaxBodyBytes {
		return tooLarge()
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return errs.E(errs.Invalid, "the request body is empty: it must be a JSON object")
	}
	r := newReport()
	v, err := parse(body)
	if err != nil {
		return syntaxError(err)
	}
	if _, ok := v.(*object); !ok {
		return errs.E(errs.Invalid, "the request body must be a JSON object%s", typeSuffix(v))
	}
	read(asObject(r, "", v))
	return r.err()
}
