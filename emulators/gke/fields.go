package gke

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Partial responses. Compute Engine, as every Google JSON API, answers
// only the fields a request selects with the standard fields parameter
// (the fields query parameter, or the X-Goog-FieldMask header, the same
// system parameter), in the partial-response syntax: a comma-separated
// list of selections, each a path of members separated by / (or .), *
// for every member of an object (a map's keys included), and a
// parenthesized sub-selection, as in
// "items/*/instanceGroupManagers(name,zone,targetSize),nextPageToken"
// (Compute Engine's "Improve performance" guide; the form clients such as
// Prometheus' and OpenShift's use on instances' aggregatedList). A
// selection of an array applies to each of its elements.

// fieldSel is a parsed field selection: the members selected, each with
// its own sub-selection, nil when the member is selected whole.
type fieldSel map[string]fieldSel

// fieldsOf is the selection r makes, nil when it selects everything.
func fieldsOf(r *http.Request) (fieldSel, error) {
	f := r.URL.Query().Get("fields")
	if f == "" {
		f = r.Header.Get("X-Goog-FieldMask")
	}
	if strings.TrimSpace(f) == "" {
		return nil, nil
	}
	return parseFields(f)
}

// parseFields parses a partial-response selection.
func parseFields(s string) (fieldSel, error) {
	p := &fieldParser{s: s}
	sel, err := p.list()
	if err == nil && p.i < len(p.s) {
		err = fmt.Errorf("unexpected %q", p.s[p.i])
	}
	if err != nil {
		return nil, fmt.Errorf("Invalid field selection %s: %w", s, err)
	}
	return sel, nil
}

type fieldParser struct {
	s string
	i int
}

// list := item ("," item)*
func (p *fieldParser) list() (fieldSel, error) {
	sel := fieldSel{}
	for {
		if err := p.item(sel); err != nil {
			return nil, err
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return sel, nil
		}
		p.i++
	}
}

// item := name (("/" | ".") name)* ["(" list ")"], merged into sel.
func (p *fieldParser) item(sel fieldSel) error {
	var path []string
	for {
		start := p.i
		for p.i < len(p.s) && isFieldChar(p.s[p.i]) {
			p.i++
		}
		if p.i == start {
			if p.i >= len(p.s) {
				return errors.New("a fieldSel ends without a field")
			}
			return fmt.Errorf("unexpected %q", p.s[p.i])
		}
		path = append(path, strings.TrimSpace(p.s[start:p.i]))
		if p.i < len(p.s) && (p.s[p.i] == '/' || p.s[p.i] == '.') {
			p.i++
			continue
		}
		break
	}
	var sub fieldSel
	if p.i < len(p.s) && p.s[p.i] == '(' {
		p.i++
		var err error
		if sub, err = p.list(); err != nil {
			return err
		}
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return errors.New("missing )")
		}
		p.i++
	}
	// Walk the path into sel, a whole member absorbing any narrower
	// selection of it.
	for i, name := range path {
		cur, seen := sel[name]
		if seen && cur == nil {
			return nil
		}
		if i == len(path)-1 {
			if sub == nil || (seen && cur == nil) {
				sel[name] = nil
				return nil
			}
			if cur == nil {
				cur = fieldSel{}
			}
			for k, v := range sub {
				cur.merge(k, v)
			}
			sel[name] = cur
			return nil
		}
		if cur == nil {
			cur = fieldSel{}
			sel[name] = cur
		}
		sel = cur
	}
	return nil
}

// merge adds member k, sub-selected by v, to s.
func (s fieldSel) merge(k string, v fieldSel) {
	cur, seen := s[k]
	switch {
	case seen && cur == nil:
	case v == nil || !seen:
		s[k] = v
	default:
		for kk, vv := range v {
			cur.merge(kk, vv)
		}
	}
}

func isFieldChar(c byte) bool {
	return c == '_' || c == '*' || c == ' ' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// member is the sub-selection of member name in sel, and whether it is
// selected.
func (s fieldSel) member(name string) (fieldSel, bool) {
	if sub, ok := s[name]; ok {
		return sub, true
	}
	sub, ok := s["*"]
	return sub, ok
}

// partial is the part of v (what the API answers, encoded as JSON by its
// json tags) that sel selects: v itself when sel is nil.
func partial(v any, sel fieldSel) any {
	if sel == nil {
		return v
	}
	return prune(reflect.ValueOf(v), sel)
}

func prune(v reflect.Value, sel fieldSel) any {
	// The generic JSON shapes the server builds its lists of, without
	// reflecting on each member.
	if sel != nil && v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if sel != nil && v.CanInterface() {
		switch m := v.Interface().(type) {
		case map[string]any:
			out := make(map[string]any, len(m))
			for k, mv := range m {
				if sub, ok := sel.member(k); ok {
					out[k] = prune(reflect.ValueOf(&mv).Elem(), sub)
				}
			}
			return out
		case []any:
			out := make([]any, len(m))
			for i := range m {
				out[i] = prune(reflect.ValueOf(&m[i]).Elem(), sel)
			}
			return out
		}
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if sel == nil {
		return v.Interface()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = prune(v.Index(i), sel)
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			if sub, ok := sel.member(it.Key().String()); ok {
				out[it.Key().String()] = prune(it.Value(), sub)
			}
		}
		return out
	case reflect.Struct:
		out := map[string]any{}
		for _, f := range jsonFieldsOf(v.Type()) {
			fv := v.Field(f.index)
			if f.omitEmpty && fv.IsZero() {
				continue
			}
			if sub, ok := sel.member(f.name); ok {
				out[f.name] = prune(fv, sub)
			}
		}
		return out
	}
	// A sub-selection of a scalar selects nothing within it.
	return v.Interface()
}

// jsonField is a struct field as encoding/json names it.
type jsonField struct {
	index     int
	name      string
	omitEmpty bool
}

// jsonFields caches jsonFieldsOf: a listing prunes the same few types
// many times over.
var jsonFields sync.Map // reflect.Type -> []jsonField

// jsonFieldsOf is the fields of struct type t that encoding/json encodes,
// by their JSON names.
func jsonFieldsOf(t reflect.Type) []jsonField {
	if fs, ok := jsonFields.Load(t); ok {
		return fs.([]jsonField)
	}
	var fs []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs = append(fs, jsonField{index: i, name: name, omitEmpty: strings.Contains(opts, "omitempty")})
	}
	jsonFields.Store(t, fs)
	return fs
}

// checkFields refuses a selection that names a member the answer's
// message md does not have, as Compute Engine refuses it: 400
// invalidParameter, "Invalid field selection MachineType" (quoted in
// openshift/installer#7096 of a selection naming a field in the wrong
// case). A map's members are its keys, any of them; a sub-selection of a
// member that is not a message is not checked.
func checkFields(sel fieldSel, md protoreflect.MessageDescriptor) error {
	for name, sub := range sel {
		if name == "*" {
			continue
		}
		fd := md.Fields().ByJSONName(name)
		if fd == nil {
			return fmt.Errorf("Invalid field selection %s", name)
		}
		if sub == nil {
			continue
		}
		switch {
		case fd.IsMap():
			vd := fd.MapValue().Message()
			for _, s := range sub {
				if s == nil || vd == nil {
					continue
				}
				if err := checkFields(s, vd); err != nil {
					return err
				}
			}
		case fd.Message() != nil:
			if err := checkFields(sub, fd.Message()); err != nil {
				return err
			}
		}
	}
	return nil
}
