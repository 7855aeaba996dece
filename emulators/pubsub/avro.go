package pubsub

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// An Avro schema (avro.apache.org/docs/current/specification) parsed from
// its JSON form, enough to check a schema as CreateSchema and
// ValidateSchema do. Logical types are checked as their underlying types;
// defaults are not checked against their fields' types.

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
