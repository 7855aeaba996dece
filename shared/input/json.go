package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
)

// maxDepth bounds the nesting of a body. The deepest valid body (a cluster's
// node pool's taint) is five levels deep; the bound stops a 1 MiB body of
// brackets from recursing a million times.
const maxDepth = 16

// object is a JSON object that keeps its keys in the order they came, so
// errors are reported in the order of the body.
type object struct {
	keys []string
	vals map[string]any
	dups []string // keys given more than once
}

// parse reads body as exactly one JSON value into a tree of nil, bool,
// json.Number, string, []any and *object. A syntax error, trailing data or
// too deep a nesting is an error; of a key given twice the first value is
// kept and the key noted, to be reported with the path of its reader.
func parse(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	switch d {
	case '{':
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key %v is not a string", kt)
			}
			v, err := parseValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[key]; dup {
				o.dups = append(o.dups, key)
				continue
			}
			o.keys = append(o.keys, key)
			o.vals[key] = v
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, err
		}
		return o, nil
	case '[':
		var a []any
		for dec.More() {
			v, err := parseValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.Token(); err != nil { // the closing bracket
			return nil, err
		}
		if a == nil {
			a = []any{}
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// syntaxError turns a parse failure into the caller's INVALID_INPUT.
func syntaxError(err error) *errs.Error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return errs.E(errs.Invalid, "malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errs.E(errs.Invalid, "malformed JSON: unexpected end of the body")
	default:
		return errs.E(errs.Invalid, "malformed JSON: %s", err.Error())
	}
}

// keyPath is the JSON path of a member of the object at path: a dot for
// names that read as identifiers, a quoted key in brackets otherwise.
func keyPath(path, key string) string {
	if !isIdent(key) {
		return mapPath(path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapPath is the JSON path of an entry of a map: labels["team"].
func mapPath(path, key string) string {
	return path + "[" + quote(key) + "]"
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// quote renders s as a JSON string, without the HTML escaping of
// json.Marshal, so paths read as the caller wrote them.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return strconv.Quote(s) // a string always encodes; kept for safety
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fields reads the members of one JSON object, reporting to r every member
// of the wrong type, every required member missing and, in rest, every member
// nobody asked for.
type fields struct {
	r    *report
	path string
	obj  *object
	used map[string]bool
}

// asObject returns the reader of v, or nil after reporting to r when v is not
// an object.
func asObject(r *report, path string, v any) *fields {
	o, ok := v.(*object)
	if !ok {
		r.broke(path, "must be an object"+typeSuffix(v))
		return nil
	}
	for _, k := range o.dups {
		r.add(keyPath(path, k), duplicate)
	}
	return &fields{r: r, path: path, obj: o, used: map[string]bool{}}
}

// typeSuffix names a wrong JSON type in a reason: ", not null".
func typeSuffix(v any) string {
	switch v.(type) {
	case nil:
		return ", not null"
	case bool:
		return ", not a boolean"
	case json.Number:
		return ", not a number"
	case string:
		return ", not a string"
	case []any:
		return ", not an array"
	case *object:
		return ", not an object"
	}
	return ""
}

// get returns the member key and whether it is present, marking it read.
// A missing required member is reported.
func (f *fields) get(key string, required bool) (any, bool) {
	f.used[key] = true
	v, ok := f.obj.vals[key]
	if !ok && required {
		f.r.broke(keyPath(f.path, key), "is required")
	}
	return v, ok
}

// present reports whether the body has the member key, without reading it.
func (f *fields) present(key string) bool {
	_, ok := f.obj.vals[key]
	return ok
}

// str reads a string member. An optional member given as "" is reported
// unless allowEmpty: an empty string never matches the patterns, and saying
// "omit it" is clearer than the pattern.
func (f *fields) str(key string, required, allowEmpty bool) (string, bool) {
	v, ok := f.get(key, required)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		f.r.broke(keyPath(f.path, key), "must be a string"+typeSuffix(v))
		return "", false
	}
	if s == "" && !required && !allowEmpty {
		f.r.broke(keyPath(f.path, key), "must not be empty: omit the field instead")
		return "", false
	}
	return s, true
}

// int reads an integer member: a JSON number without fraction or exponent.
// Integers beyond the platform's range are saturated, so the range check
// that follows reports them plainly.
func (f *fields) int(key string, required bool) (int, bool) {
	v, ok := f.get(key, required)
	if !ok {
		return 0, false
	}
	return asInt(f.r, keyPath(f.path, key), v)
}

func asInt(r *report, path string, v any) (int, bool) {
	n, isNum := v.(json.Number)
	if !isNum {
		r.broke(path, "must be an integer"+typeSuffix(v))
		return 0, false
	}
	if strings.ContainsAny(string(n), ".eE") {
		r.broke(path, "must be an integer, without a fraction or an exponent")
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			r.broke(path, "must be an integer")
			return 0, false
		}
		// ParseInt saturated i to the nearest bound.
	}
	if i > math.MaxInt {
		i = math.MaxInt
	} else if i < math.MinInt {
		i = math.MinInt
	}
	return int(i), true
}

// bool reads an optional boolean member.
func (f *fields) bool(key string) bool {
	v, ok := f.get(key, false)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		f.r.broke(keyPath(f.path, key), "must be a boolean"+typeSuffix(v))
	}
	return b
}

// object reads an object member; nil when absent or not an object.
func (f *fields) object(key string, required bool) *fields {
	v, ok := f.get(key, required)
	if !ok {
		return nil
	}
	return asObject(f.r, keyPath(f.path, key), v)
}

// array reads an optional array member; nil when absent or not an array.
func (f *fields) array(key string) []any {
	v, ok := f.get(key, false)
	if !ok {
		return nil
	}
	a, isArr := v.([]any)
	if !isArr {
		f.r.broke(keyPath(f.path, key), "must be an array"+typeSuffix(v))
		return nil
	}
	return a
}

// strings reads an optional array of strings. An element of the wrong type is
// reported and kept as "", so indexes stay those of the body.
func (f *fields) strings(key string) []string {
	a := f.array(key)
	if a == nil {
		return nil
	}
	out := make([]string, len(a))
	for i, v := range a {
		s, ok := v.(string)
		if !ok {
			f.r.broke(indexPath(keyPath(f.path, key), i), "must be a string"+typeSuffix(v))
		}
		out[i] = s
	}
	return out
}

// stringMap reads an optional object of strings (labels).
func (f *fields) stringMap(key string) map[string]string {
	v, ok := f.get(key, false)
	if !ok {
		return nil
	}
	p := keyPath(f.path, key)
	o, isObj := v.(*object)
	if !isObj {
		f.r.broke(p, "must be an object of strings"+typeSuffix(v))
		return nil
	}
	for _, k := range o.dups {
		f.r.add(mapPath(p, k), duplicate)
	}
	out := make(map[string]string, len(o.keys))
	for _, k := range o.keys {
		s, ok := o.vals[k].(string)
		if !ok {
			f.r.broke(mapPath(p, k), "must be a string"+typeSuffix(o.vals[k]))
		}
		out[k] = s
	}
	return out
}

// rest reports every member that was not read, with the reason why(key).
func (f *fields) rest(why func(key string) string) {
	for _, k := range f.obj.keys {
		if !f.used[k] {
			f.r.broke(keyPath(f.path, k), why(k))
		}
	}
}

const duplicate = "is given more than once"

// unknown is the reason for a member no method takes.
func unknown(string) string { return "unknown field" }
