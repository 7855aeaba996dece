package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
)

// DecodeJSON decodes body, one JSON object, into v (a pointer to a struct
// or a map) strictly: no unknown member, nothing after the object. Its
// error is an errs.Invalid that names the broken member by its JSON path
// and says what JSON it must be, never a Go type (API.md §2): for the
// small bodies of endpoints that have no decoder of package input.
func DecodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errs.E(errs.Invalid, "the request body is empty: it must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errs.E(errs.Invalid, "malformed JSON: data after the object")
	}
	return nil
}

// decodeError turns an error of encoding/json into one for the caller.
func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return errs.Wrap(errs.Invalid, err, "malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errs.Wrap(errs.Invalid, err, "malformed JSON: unexpected end of the body")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errs.Wrap(errs.Invalid, err, "the request body must be %s, not %s", jsonKind(typ.Type), jsonValue(typ.Value))
		}
		e := errs.InvalidFields([]errs.FieldError{{Field: typ.Field, Reason: fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type), jsonValue(typ.Value))}})
		e.Err = err
		return e
	}
	// encoding/json has no type for an unknown member.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		e := errs.InvalidFields([]errs.FieldError{{Field: strings.Trim(name, `"`), Reason: "unknown field"}})
		e.Err = err
		return e
	}
	return errs.Wrap(errs.Invalid, err, "malformed JSON")
}

// jsonKind names what JSON decodes into a value of type t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "another JSON value"
}

// jsonValue names the JSON encoding/json found (its UnmarshalTypeError's
// Value: "array", "number 1.5", ...).
func jsonValue(v string) string {
	switch v {
	case "array":
		return "an array"
	case "object":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "number":
		return "a number"
	}
	return v
}
