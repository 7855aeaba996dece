package pubsub

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// An Avro schema (avro.apache.org/docs/current/specification) parsed from
// its JSON form, enough to check a schema and a message in Avro's JSON
// encoding against it. Logical types are checked as their underlying
// types; defaults are not checked against their fields' types.

var avroPrimitives = map[string]bool{"null": true, "boolean": true, "int": true, "long": true,
	"float": true, "double": true, "bytes": true, "string": true}

// avroType is a parsed schema: a primitive or named type's name, a union,
// or a complex type.
type avroType struct {
	kind    string // a primitive, "record", "enum", "array", "map", "fixed", "union"
	name    string
	fields  []avroField
	symbols []string
	items   *avroType // array items, map values
	union   []*avroType
	size    int
}

type avroField struct {
	name       string
	t          *avroType
	hasDefault bool
}

// parseAvro parses and checks an Avro schema.
func parseAvro(def string) (*avroType, error) {
	var v any
	if err := json.Unmarshal([]byte(def), &v); err != nil {
		return nil, fmt.Errorf("the definition is not JSON: %v", err)
	}
	named := map[string]*avroType{}
	return avroParse(v, named, "")
}

func avroParse(v any, named map[string]*avroType, ns string) (*avroType, error) {
	switch x := v.(type) {
	case string:
		if avroPrimitives[x] {
			return &avroType{kind: x}, nil
		}
		for _, n := range []string{x, ns + "." + x} {
			if t := named[n]; t != nil {
				return t, nil
			}
		}
		return nil, fmt.Errorf("unknown type %q", x)
	case []any:
		u := &avroType{kind: "union"}
		for _, b := range x {
			t, err := avroParse(b, named, ns)
			if err != nil {
				return nil, err
			}
			if t.kind == "union" {
				return nil, fmt.Errorf("a union may not contain a union")
			}
			u.union = append(u.union, t)
		}
		return u, nil
	case map[string]any:
		kind, _ := x["type"].(string)
		if kind == "" {
			if inner, ok := x["type"]; ok {
				return avroParse(inner, named, ns)
			}
			return nil, fmt.Errorf("a schema object needs a \"type\"")
		}
		t := &avroType{kind: kind}
		switch kind {
		case "record", "error", "enum", "fixed":
			name, _ := x["name"].(string)
			if name == "" {
				return nil, fmt.Errorf("a %s needs a \"name\"", kind)
			}
			if space, ok := x["namespace"].(string); ok && space != "" && !strings.Contains(name, ".") {
				name = space + "." + name
			}
			if i := strings.LastIndex(name, "."); i >= 0 {
				ns = name[:i]
			}
			t.name = name
			named[name] = t
			named[name[strings.LastIndex(name, ".")+1:]] = t
		}
		switch kind {
		case "record", "error":
			t.kind = "record"
			fields, ok := x["fields"].([]any)
			if !ok {
				return nil, fmt.Errorf("record %s needs \"fields\"", t.name)
			}
			for _, f := range fields {
				fm, ok := f.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("a field of record %s is not an object", t.name)
				}
				name, _ := fm["name"].(string)
				if name == "" {
					return nil, fmt.Errorf("a field of record %s has no name", t.name)
				}
				ft, err := avroParse(fm["type"], named, ns)
				if err != nil {
					return nil, fmt.Errorf("field %s: %w", name, err)
				}
				_, hasDefault := fm["default"]
				t.fields = append(t.fields, avroField{name: name, t: ft, hasDefault: hasDefault})
			}
		case "enum":
			syms, ok := x["symbols"].([]any)
			if !ok {
				return nil, fmt.Errorf("enum %s needs \"symbols\"", t.name)
			}
			for _, s := range syms {
				str, ok := s.(string)
				if !ok {
					return nil, fmt.Errorf("a symbol of enum %s is not a string", t.name)
				}
				t.symbols = append(t.symbols, str)
			}
		case "array", "map":
			key := map[string]string{"array": "items", "map": "values"}[kind]
			inner, err := avroParse(x[key], named, ns)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", kind, key, err)
			}
			t.items = inner
		case "fixed":
			size, ok := x["size"].(float64)
			if !ok || size < 0 || size != math.Trunc(size) {
				return nil, fmt.Errorf("fixed %s needs a \"size\"", t.name)
			}
			t.size = int(size)
		default:
			if !avroPrimitives[kind] {
				return avroParse(kind, named, ns)
			}
		}
		return t, nil
	}
	return nil, fmt.Errorf("a schema is a string, an array or an object, not %T", v)
}

// checkAvroJSON checks a message in Avro's JSON encoding against t.
func checkAvroJSON(t *avroType, data []byte) error {
	var v any
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("the message is not JSON: %v", err)
	}
	return avroCheck(t, v, "message")
}

func avroCheck(t *avroType, v any, at string) error {
	bad := func() error { return fmt.Errorf("%s: %v is not a valid %s", at, v, t.kind) }
	switch t.kind {
	case "null":
		if v != nil {
			return bad()
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case "int", "long":
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		if _, err := n.Int64(); err != nil {
			return bad()
		}
	case "float", "double":
		if _, ok := v.(json.Number); !ok {
			return bad()
		}
	case "string", "bytes":
		if _, ok := v.(string); !ok {
			return bad()
		}
	case "fixed":
		if s, ok := v.(string); !ok || len([]rune(s)) != t.size {
			return bad()
		}
	case "enum":
		s, _ := v.(string)
		for _, sym := range t.symbols {
			if s == sym {
				return nil
			}
		}
		return bad()
	case "array":
		a, ok := v.([]any)
		if !ok {
			return bad()
		}
		for i, x := range a {
			if err := avroCheck(t.items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "map":
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for k, x := range m {
			if err := avroCheck(t.items, x, at+"."+k); err != nil {
				return err
			}
		}
	case "record":
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for _, f := range t.fields {
			x, ok := m[f.name]
			if !ok {
				if f.hasDefault {
					continue
				}
				return fmt.Errorf("%s: field %s is missing", at, f.name)
			}
			if err := avroCheck(f.t, x, at+"."+f.name); err != nil {
				return err
			}
		}
	case "union":
		// JSON encoding: null, or an object of one member, the branch's
		// type name to its value.
		if v == nil {
			for _, b := range t.union {
				if b.kind == "null" {
					return nil
				}
			}
			return bad()
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return fmt.Errorf("%s: a union's value is null or {\"type\": value}", at)
		}
		for name, x := range m {
			for _, b := range t.union {
				if b.kind == name || (b.name != "" && (b.name == name || strings.HasSuffix(b.name, "."+name))) {
					return avroCheck(b, x, at)
				}
			}
			return fmt.Errorf("%s: %s is not a branch of the union", at, name)
		}
	}
	return nil
}
