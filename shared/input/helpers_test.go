package input

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

var (
	clusterID  = "kcl_" + strings.Repeat("0", 26)
	nodePoolID = "knp_" + strings.Repeat("0", 26)
)

// obj is a JSON object under construction.
type obj = map[string]any

// raw is a JSON value written as is: 1e2, 1.5, null.
func raw(s string) json.RawMessage { return json.RawMessage(s) }

// marshal renders v as a body.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%v): %v", v, err)
	}
	return b
}

// with returns a copy of base with the members of set replaced; a member
// set to deleteMember is removed.
func with(base obj, set obj) obj {
	out := obj{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range set {
		if v == deleteMember {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

type deleteMarker struct{}

var deleteMember = deleteMarker{}

// paths returns the sorted field paths of err, failing the test unless err
// is nil or an INVALID_INPUT *errs.Error.
func paths(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("error %v (%T) is not an INVALID_INPUT *errs.Error", err, err)
	}
	out := []string{}
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

// reasonOf returns the reason given for path in err, or "".
func reasonOf(err error, path string) string {
	var e *errs.Error
	if !errors.As(err, &e) {
		return ""
	}
	for _, f := range e.Fields {
		if f.Field == path {
			return f.Reason
		}
	}
	return ""
}

// sorted returns the paths sorted, nil for none (valid).
func sorted(p ...string) []string {
	if len(p) == 0 {
		return nil
	}
	out := slices.Clone(p)
	slices.Sort(out)
	return out
}

func rep(s string, n int) string { return strings.Repeat(s, n) }

// list returns n distinct strings made by f(i).
func list(n int, f func(i int) string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// labelsN returns n valid labels.
func labelsN(n int) obj {
	out := obj{}
	for i := range n {
		out["k"+strconv.Itoa(i)] = "v"
	}
	return out
}

// taintsN returns n valid taints with distinct keys.
func taintsN(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = obj{"key": "k" + strconv.Itoa(i), "effect": "NoSchedule"}
	}
	return out
}
