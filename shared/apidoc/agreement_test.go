package apidoc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/apidoc/apidoctest"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/input"
)

// decoders are the decoders of the request bodies, by the name of their
// schema in the document.
var decoders = map[string]func([]byte) error{
	"CreateNodePool": func(b []byte) error { _, err := input.DecodeCreateNodePool(b); return err },
	"UpdateNodePool": func(b []byte) error { _, err := input.DecodeUpdateNodePool(b); return err },
	"NodePoolRef":    func(b []byte) error { _, err := input.DecodeNodePoolRef(b); return err },
	"ClusterRef":     func(b []byte) error { _, err := input.DecodeClusterRef(b); return err },
	"CreateCluster":  func(b []byte) error { _, err := input.DecodeCreateCluster(b); return err },
	"ListClusters":   func(b []byte) error { _, err := input.DecodeListClusters(b); return err },

	"SubstrateRef":       func(b []byte) error { _, err := input.DecodeSubstrateRef(b); return err },
	"ListSubstrates":     func(b []byte) error { _, err := input.DecodeListSubstrates(b); return err },
	"ListSubstrateNodes": func(b []byte) error { _, err := input.DecodeListSubstrateNodes(b); return err },
	"Join":               func(b []byte) error { _, err := input.DecodeJoin(b); return err },
}

// planBody is the schema of kubernetesSubstrates.plan's body, which holds
// a pool event's data (PoolUpdated, with allOf and if/then that the
// corpus does not derive): TestPlanBodyAgreesWithDocument holds it to
// its decoder instead.
const planBody = "PlanSubstrate"

// TestDecodersAgreeWithDocument feeds each decoder a corpus of bodies
// derived from the document (its examples, each mutated at every member
// the schema names, with values at and beyond every bound, pattern, enum,
// length and count the schema states, of every wrong type, and with
// members missing or unknown) and checks that a decoder refuses exactly
// the bodies the document calls invalid: by its schema, or by one of the
// rules it lists under x-rules. A body refused for a member the schema
// constrains must be refused naming that member (or one under it).
func TestDecodersAgreeWithDocument(t *testing.T) {
	doc := loadDoc(t)
	seenRules := map[string]int{}
	total, refused := 0, 0
	for _, op := range apidoc.Operations() {
		if op.Request == planBody {
			continue
		}
		decode, ok := decoders[op.Request]
		if !ok {
			t.Fatalf("%s: no decoder for the schema %s: add it to decoders", op.ID(), op.Request)
		}
		if len(op.Examples) == 0 {
			t.Fatalf("%s has no example to derive a corpus from", op.ID())
		}
		ptr := "/components/schemas/" + op.Request
		root := doc.schema(op.Request)
		for _, exName := range sortedKeys(op.Examples) {
			base := mustParse(t, op.Examples[exName])
			g := &corpus{doc: doc}
			g.object(root, base.(map[string]any), nil)
			if len(g.cases) < 20 {
				t.Fatalf("%s/%s: only %d cases", op.ID(), exName, len(g.cases))
			}
			cases := append([]mutation{{what: "the example itself"}}, g.cases...)
			for _, m := range cases {
				body := apply(base, m)
				raw, err := json.Marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				inst := mustParse(t, string(raw))
				schemaErr := apidoctest.ValidateValue(apidoctest.OpenAPI, ptr, inst)
				broken := []string{}
				if schemaErr == nil {
					broken = doc.brokenRules(root, inst)
				}
				docValid := schemaErr == nil && len(broken) == 0
				for _, r := range broken {
					seenRules[r]++
				}
				decErr := decode(raw)
				total++
				if decErr != nil {
					refused++
				}
				switch {
				case docValid && decErr != nil:
					t.Errorf("%s/%s, %s: the document accepts %s, the decoder refuses it: %v", op.ID(), exName, m.what, raw, decErr)
				case !docValid && decErr == nil:
					why := fmt.Sprint(schemaErr)
					if schemaErr == nil {
						why = "rules " + strings.Join(broken, ", ")
					}
					t.Errorf("%s/%s, %s: the document refuses %s (%s), the decoder accepts it", op.ID(), exName, m.what, raw, why)
				case decErr != nil && schemaErr != nil && m.path != "" && !m.cross:
					if !namesPath(decErr, m.path) {
						t.Errorf("%s/%s, %s: the decoder's error %v names no field at or under %s", op.ID(), exName, m.what, decErr, m.path)
					}
				}
			}
		}
	}
	for _, id := range []string{input.RuleAutoscalingOrder, input.RuleNodeCountInBounds, input.RuleUniqueTaints, input.RuleUniquePoolNames} {
		if seenRules[id] == 0 {
			t.Errorf("no body of the corpus breaks the rule %s alone: the corpus does not test it", id)
		}
	}
	for id := range doc.rulesSeen {
		if _, ok := ruleChecks[id]; !ok {
			t.Errorf("the document lists the rule %s, which this test cannot check: add it to ruleChecks", id)
		}
	}
	t.Logf("%d bodies, %d refused by both", total, refused)
	if refused*4 < total || refused == total {
		t.Errorf("%d of %d bodies refused: the corpus is lopsided", refused, total)
	}
}

// namesPath reports whether the *errs.Error names path, or a field under
// it, or the object holding it.
func namesPath(err error, path string) bool {
	var e *errs.Error
	if !errors.As(err, &e) {
		return false
	}
	for _, f := range e.Fields {
		if f.Field == path || under(f.Field, path) || under(path, f.Field) {
			return true
		}
	}
	return false
}

func under(p, parent string) bool {
	return parent == "" || strings.HasPrefix(p, parent+".") || strings.HasPrefix(p, parent+"[")
}

// ruleChecks check the rules across fields the document lists under
// x-rules, on an instance that passed the schema.
var ruleChecks = map[string]func(obj map[string]any) bool{
	input.RuleAutoscalingOrder: func(o map[string]any) bool {
		return num(o["minNodes"]) <= num(o["maxNodes"])
	},
	input.RuleNodeCountInBounds: func(o map[string]any) bool {
		a, ok := o["autoscaling"].(map[string]any)
		n, has := o["nodeCount"]
		if !ok || !has || num(a["minNodes"]) > num(a["maxNodes"]) {
			return true
		}
		return num(a["minNodes"]) <= num(n) && num(n) <= num(a["maxNodes"])
	},
	input.RuleUniqueTaints: func(o map[string]any) bool {
		seen := map[string]bool{}
		ts, _ := o["taints"].([]any)
		for _, t := range ts {
			m := t.(map[string]any)
			k := fmt.Sprint(m["key"], "\x00", m["effect"])
			if seen[k] {
				return false
			}
			seen[k] = true
		}
		return true
	},
	input.RuleUniquePoolNames: func(o map[string]any) bool {
		seen := map[string]bool{}
		ps, _ := o["nodePools"].([]any)
		for _, p := range ps {
			n := fmt.Sprint(p.(map[string]any)["name"])
			if seen[n] {
				return false
			}
			seen[n] = true
		}
		return true
	},
}

func num(v any) float64 {
	switch n := v.(type) {
	case json.Number:
		f, _ := n.Float64()
		return f
	case float64:
		return n
	}
	return 0
}

// document is the OpenAPI document as plain JSON, for walking its schemas.
type document struct {
	schemas   map[string]any
	rulesSeen map[string]bool
}

func loadDoc(t *testing.T) *document {
	t.Helper()
	var d struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI(), &d); err != nil {
		t.Fatal(err)
	}
	return &document{schemas: d.Components.Schemas, rulesSeen: map[string]bool{}}
}

func (d *document) schema(name string) map[string]any { return d.schemas[name].(map[string]any) }

// resolve follows $ref, and of a oneOf takes the alternative that is not
// null (UpdateNodePool's autoscaling).
func (d *document) resolve(s map[string]any) map[string]any {
	for {
		if ref, ok := s["$ref"].(string); ok {
			s = d.schema(strings.TrimPrefix(ref, "#/components/schemas/"))
			continue
		}
		if alts, ok := s["oneOf"].([]any); ok {
			for _, a := range alts {
				if am := a.(map[string]any); am["type"] != "null" {
					s = am
					break
				}
			}
			continue
		}
		return s
	}
}

// brokenRules returns the ids of the x-rules that inst breaks, wherever
// the schema that lists them applies in inst.
func (d *document) brokenRules(s map[string]any, inst any) []string {
	s = d.resolve(s)
	var out []string
	if obj, ok := inst.(map[string]any); ok {
		rules, _ := s["x-rules"].([]any)
		for _, r := range rules {
			id := r.(map[string]any)["id"].(string)
			d.rulesSeen[id] = true
			if check, ok := ruleChecks[id]; ok && !check(obj) {
				out = append(out, id)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for _, k := range sortedKeys(obj) {
			if ps, ok := props[k].(map[string]any); ok {
				out = append(out, d.brokenRules(ps, obj[k])...)
			}
		}
	}
	if arr, ok := inst.([]any); ok {
		if items, ok := s["items"].(map[string]any); ok {
			for _, v := range arr {
				out = append(out, d.brokenRules(items, v)...)
			}
		}
	}
	return out
}

// seg is one step of a path into a body: a member or an index.
type seg struct {
	key    string
	index  int  // when key == ""
	mapKey bool // a key of a map (labels), which paths always quote
}

// mutation changes a body at a path: sets the value there, or deletes it.
type mutation struct {
	what   string
	segs   []seg
	path   string // the JSON path as the decoders report it
	value  any
	delete bool
	// cross marks a change whose refusal may be reported at another
	// field (a rule across fields, or the mode's node pools).
	cross bool
}

type corpus struct {
	doc   *document
	cases []mutation
}

func (g *corpus) add(segs []seg, what string, value any, del, cross bool) {
	g.cases = append(g.cases, mutation{what: what, segs: slices.Clone(segs), path: pathOf(segs), value: value, delete: del, cross: cross})
}

// crossMembers are members whose value other members' rules depend on.
var crossMembers = map[string]bool{"mode": true, "nodeCount": true, "autoscaling": true, "minNodes": true, "maxNodes": true, "nodePools": true}

// object adds the mutations of the object inst under schema s at segs.
func (g *corpus) object(s map[string]any, inst map[string]any, segs []seg) {
	s = g.doc.resolve(s)
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		g.mapping(s, inst, segs)
		return
	}
	for _, name := range sortedKeys(props) {
		ps := g.doc.resolve(props[name].(map[string]any))
		at := append(slices.Clone(segs), seg{key: name})
		cross := crossMembers[name]
		if v, ok := inst[name]; ok {
			g.add(at, "without "+pathOf(at), nil, true, cross)
			switch v := v.(type) {
			case map[string]any:
				g.object(ps, v, at)
			case []any:
				g.array(ps, v, at)
			}
		}
		for i, c := range g.values(ps, inst[name]) {
			g.add(at, fmt.Sprintf("%s = candidate %d", pathOf(at), i), c, false, cross)
		}
	}
	if s["additionalProperties"] == false {
		at := append(slices.Clone(segs), seg{key: "unknownMember"})
		g.add(at, "an unknown member at "+pathOf(at), "x", false, false)
		for _, name := range []string{"Name", "node_count", "tenantID"} {
			at := append(slices.Clone(segs), seg{key: name})
			g.add(at, "a misspelt member "+pathOf(at), "x", false, false)
		}
	}
}

// mapping adds the mutations of a map (labels): keys and values from the
// pools, and one entry more than allowed.
func (g *corpus) mapping(s map[string]any, inst map[string]any, segs []seg) {
	valueSchema := g.doc.resolve(s["additionalProperties"].(map[string]any))
	for _, k := range labelKeys() {
		at := append(slices.Clone(segs), seg{key: k, mapKey: true})
		g.add(at, "label key "+strconv.Quote(k), "v", false, false)
	}
	for _, k := range sortedKeys(inst) {
		at := append(slices.Clone(segs), seg{key: k, mapKey: true})
		for i, v := range g.values(valueSchema, inst[k]) {
			g.add(at, fmt.Sprintf("%s = candidate %d", pathOf(at), i), v, false, false)
		}
	}
	if max, ok := s["maxProperties"].(float64); ok {
		for _, n := range []int{int(max), int(max) + 1} {
			m := map[string]any{}
			for i := range n {
				m[fmt.Sprintf("k%d", i)] = "v"
			}
			g.add(segs, fmt.Sprintf("%s with %d entries", pathOf(segs), n), m, false, false)
		}
	}
}

// array adds the mutations of the elements of an array present in the
// example.
func (g *corpus) array(s map[string]any, inst []any, segs []seg) {
	items := g.doc.resolve(s["items"].(map[string]any))
	for i, v := range inst {
		at := append(slices.Clone(segs), seg{index: i})
		switch v := v.(type) {
		case map[string]any:
			g.object(items, v, at)
		default:
			for j, c := range g.values(items, v) {
				g.add(at, fmt.Sprintf("%s = candidate %d", pathOf(at), j), c, false, false)
			}
		}
	}
}

// values are the candidate values of a member of schema s whose value in
// the example is cur (nil when absent): every wrong type, and values at
// and beyond each constraint the schema states.
func (g *corpus) values(s map[string]any, cur any) []any {
	out := []any{nil, true, false, json.Number("7"), json.Number("1.5"), json.Number("-1"), "s", []any{}, map[string]any{}}
	if enum, ok := s["enum"].([]any); ok {
		out = append(out, enum...)
		out = append(out, "bogus", strings.ToUpper(fmt.Sprint(enum[0])))
	}
	switch s["type"] {
	case "integer":
		for _, k := range []string{"minimum", "maximum"} {
			if b, ok := s[k].(float64); ok {
				for _, d := range []float64{-1, 0, 1} {
					out = append(out, json.Number(strconv.FormatFloat(b+d, 'f', -1, 64)))
				}
			}
		}
		out = append(out, json.Number("1000000000000000000000"))
	case "string":
		if _, ok := s["pattern"]; ok || s["allOf"] != nil {
			out = append(out, stringPool()...)
			if c, ok := cur.(string); ok {
				out = append(out, c+"-", "-"+c, strings.ToUpper(c), c+"_x", c+" ", c+"é")
			}
		}
		if ml, ok := s["maxLength"].(float64); ok {
			out = append(out, strings.Repeat("a", int(ml)), strings.Repeat("a", int(ml)+1))
		}
	case "array":
		items := g.doc.resolve(s["items"].(map[string]any))
		for i, v := range g.values(items, nil) {
			if i%3 == 0 || items["type"] == "string" { // every string, a third of the rest
				out = append(out, []any{v})
			}
		}
		n := 12
		if mi, ok := s["maxItems"].(float64); ok {
			n = int(mi)
		}
		sizes := []int{1, 10, 11, n, n + 1}
		slices.Sort(sizes)
		for _, k := range slices.Compact(sizes) {
			out = append(out, g.samples(items, k))
		}
		two := g.samples(items, 1).([]any)
		out = append(out, append(two, two[0])) // a duplicate
	case "object":
		if s["properties"] != nil {
			out = append(out, g.sample(s, 0), g.sample(s, 1))
			withExtra := g.sample(s, 0).(map[string]any)
			withExtra["extra"] = 1
			out = append(out, withExtra)
			if req, ok := s["required"].([]any); ok {
				for _, r := range req {
					m := g.sample(s, 0).(map[string]any)
					delete(m, r.(string))
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// samples returns n distinct valid values of the item schema s.
func (g *corpus) samples(s map[string]any, n int) any {
	out := make([]any, n)
	for i := range out {
		out[i] = g.sample(s, i)
	}
	return out
}

// sample returns the i-th of a series of distinct values valid for s.
func (g *corpus) sample(s map[string]any, i int) any {
	s = g.doc.resolve(s)
	switch s["type"] {
	case "integer":
		if m, ok := s["minimum"].(float64); ok {
			return json.Number(strconv.FormatFloat(m, 'f', -1, 64))
		}
		return json.Number("0")
	case "boolean":
		return i%2 == 0
	case "string":
		if enum, ok := s["enum"].([]any); ok {
			return enum[i%len(enum)]
		}
		return "a" + strconv.Itoa(i)
	case "object":
		m := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			m[r.(string)] = g.sample(props[r.(string)].(map[string]any), i)
		}
		return m
	}
	return nil
}

// stringPool are strings near the edges of the document's patterns.
func stringPool() []any {
	const b32 = "0123456789abcdefghjkmnpqrstvwxyz"
	id := func(prefix string, n int) string {
		var sb strings.Builder
		sb.WriteString(prefix)
		for i := range n {
			sb.WriteByte(b32[i%len(b32)])
		}
		return sb.String()
	}
	pool := []string{
		"", "a", "A", "0", "a0", "0a", "a-", "-a", "a--b", "a_b", "a.b", "a:b", "a b", "a/b", "é", "a\u0000",
		"acme", "e2-standard-4", "g2-standard-8", "us-central1", "us-central1-a", "nvidia-l4", "pd-balanced", "fra-1",
		id("kcl_", 26), id("kcl_", 25), id("kcl_", 52), id("kcl_", 53), id("kcl_", 25) + "u", id("kcl_", 25) + "i", id("KCL_", 26),
		id("knp_", 26), id("knp_", 25), id("knp_", 52), id("knp_", 53), id("knp_", 25) + "o", id("kcl-", 26),
		id("ksb_", 26), id("ksb_", 25), id("ksb_", 52), id("ksb_", 53), id("ksb_", 25) + "l", id("KSB_", 26),
		// Node names: DNS subdomains.
		"gke-bc-pool-l4-1a2b-x7k2", "node-1.example", "node-1..example", "node-1.-example", "Node-1", "node_1", ".node", "node.",
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61),
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62),
	}
	for _, n := range []int{2, 38, 39, 40, 41, 61, 62, 63, 64, 127, 128, 129, 1024, 1025} {
		pool = append(pool, strings.Repeat("a", n), "a"+strings.Repeat("-", n-2)+"a", strings.Repeat("Z", n))
	}
	out := make([]any, len(pool))
	for i, s := range pool {
		out[i] = s
	}
	return out
}

// labelKeys are keys near the edges of Kubernetes' label key rules.
func labelKeys() []string {
	sub := func(n int) string { // a DNS subdomain of n characters
		parts := []string{}
		for l := 0; l < n; {
			k := min(n-l, 9)
			if l > 0 {
				k = min(n-l-1, 9)
				if k <= 0 {
					parts[len(parts)-1] += strings.Repeat("b", n-l)
					break
				}
				l++
			}
			parts = append(parts, strings.Repeat("a", k))
			l += k
		}
		return strings.Join(parts, ".")
	}
	return []string{
		"team", "Team", "TEAM_1", "a.b", "a-b", "a_b", "-a", "a-", "_a", ".a", "a b", "é",
		"example.com/team", "Example.com/team", "example.com/", "/team", "a/b/c", "ex_ample.com/team", "-ex.com/team",
		strings.Repeat("a", 63), strings.Repeat("a", 64), sub(253) + "/x", sub(254) + "/x", "x/" + strings.Repeat("a", 63), "x/" + strings.Repeat("a", 64),
		"kubernetes.io/x", "node.kubernetes.io/x", "k8s.io/x", "a.k8s.io/x", "xk8s.io/x", "kubernetes.io.example.com/x",
		"cloud.google.com/gke-nodepool", "node.cloud.google.com/x", "xcloud.google.com/x", "google.com/x", "cloud.google.com.example.com/x",
	}
}

// pathOf renders segs as the decoders render paths.
func pathOf(segs []seg) string {
	var b strings.Builder
	for _, s := range segs {
		switch {
		case s.key == "":
			fmt.Fprintf(&b, "[%d]", s.index)
		case !s.mapKey && identifier.MatchString(s.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			var q bytes.Buffer
			enc := json.NewEncoder(&q)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s.key)
			fmt.Fprintf(&b, "[%s]", bytes.TrimSpace(q.Bytes()))
		}
	}
	return b.String()
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// apply returns a deep copy of base changed by m.
func apply(base any, m mutation) any {
	root := deepCopy(base)
	if len(m.segs) == 0 {
		return root
	}
	parent := root
	for _, s := range m.segs[:len(m.segs)-1] {
		switch p := parent.(type) {
		case map[string]any:
			parent = p[s.key]
		case []any:
			parent = p[s.index]
		}
	}
	last := m.segs[len(m.segs)-1]
	switch p := parent.(type) {
	case map[string]any:
		if m.delete {
			delete(p, last.key)
		} else {
			p[last.key] = deepCopy(m.value)
		}
	case []any:
		p[last.index] = deepCopy(m.value)
	}
	return root
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = deepCopy(x)
		}
		return a
	}
	return v
}

func mustParse(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
