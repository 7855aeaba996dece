package gke

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseFields(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fieldSel
	}{
		{"name", fieldSel{"name": nil}},
		{"a,b", fieldSel{"a": nil, "b": nil}},
		{"a/b/c", fieldSel{"a": {"b": {"c": nil}}}},
		{"a.b", fieldSel{"a": {"b": nil}}},
		{"items/*/instanceGroupManagers(name,zone,currentActions/none),nextPageToken",
			fieldSel{"items": {"*": {"instanceGroupManagers": {"name": nil, "zone": nil, "currentActions": {"none": nil}}}}, "nextPageToken": nil}},
		{"a(b(c,d)),a/e", fieldSel{"a": {"b": {"c": nil, "d": nil}, "e": nil}}},
		// A member selected whole absorbs narrower selections of it,
		// whichever comes first.
		{"a,a/b", fieldSel{"a": nil}},
		{"a/b,a", fieldSel{"a": nil}},
		{"a(b), c", fieldSel{"a": {"b": nil}, "c": nil}},
	} {
		got, err := parseFields(tc.in)
		if err != nil {
			t.Errorf("parseFields(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseFields(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"a(", "a(b", "a)", "a/", ",a", "a,,b", "a(b))", "()"} {
		if _, err := parseFields(bad); err == nil {
			t.Errorf("parseFields(%q) took it, want an error", bad)
		}
	}
}

func TestPartial(t *testing.T) {
	m := instanceGroupManager{Kind: "compute#instanceGroupManager", ID: "1", Name: "g", Zone: "z", TargetSize: 3, CurrentActions: currentActions{None: 2, Creating: 1}}
	list := map[string]any{"kind": "k", "items": map[string]any{"zones/a": map[string]any{"instanceGroupManagers": []instanceGroupManager{m}}, "zones/b": map[string]any{"warning": "none here"}}}
	for _, tc := range []struct {
		fields string
		v      any
		want   string
	}{
		{"name,targetSize", m, `{"name":"g","targetSize":3}`},
		{"currentActions/none", m, `{"currentActions":{"none":2}}`},
		{"items/*/instanceGroupManagers(name,currentActions/none)", list,
			`{"items":{"zones/a":{"instanceGroupManagers":[{"currentActions":{"none":2},"name":"g"}]},"zones/b":{}}}`},
		{"kind,nextPageToken", list, `{"kind":"k"}`},
	} {
		sel, err := parseFields(tc.fields)
		if err != nil {
			t.Fatalf("parseFields(%q): %v", tc.fields, err)
		}
		b, err := json.Marshal(partial(tc.v, sel))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("partial(%s) = %s, want %s", tc.fields, b, tc.want)
		}
	}
}
