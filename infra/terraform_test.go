package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// This file reads the Terraform of this directory as far as the tests need:
// variables (their defaults, or the test's values), locals, and every
// resource and data source expanded by its for_each, with its top-level
// arguments evaluated. What Terraform only knows after apply (an account's
// email, a resource's id) is a placeholder string naming it, such as
// "google_service_account.api.email", so that two references to the same
// thing compare equal.

// module is the evaluated Terraform of a directory.
type module struct {
	vars      map[string]cty.Value
	locals    map[string]cty.Value
	resources map[string]*resource // by address: "google_pubsub_topic.events", "data.google_project.this"
	files     map[string][]byte
}

// resource is a resource or data block and its instances.
type resource struct {
	addr      string // type.name, data.type.name
	typ, name string
	body      *hclsyntax.Body
	forEach   bool
	instances map[string]*instance // by for_each key; "" without for_each
}

// instance is one instance of a resource.
type instance struct {
	res   *resource
	key   string
	each  cty.Value // {key, value}, or NilVal without for_each
	attrs map[string]cty.Value
}

// addr is the instance's address: type.name or type.name["key"].
func (i *instance) addr() string {
	if !i.res.forEach {
		return i.res.addr
	}
	return fmt.Sprintf("%s[%q]", i.res.addr, i.key)
}

// str returns the argument name as a string, or "" when it is unset or
// not a known string.
func (i *instance) str(name string) string {
	return str(i.attrs[name])
}

func str(v cty.Value) string {
	if v == cty.NilVal || !v.IsWhollyKnown() || v.IsNull() || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

// computed are the attributes that only exist after apply, which any
// reference may name besides those the block sets.
var computed = []string{"id", "name", "email", "uri", "number", "member", "location", "project", "self_link", "address", "project_id"}

// loadModule reads every .tf file of dir and evaluates it with the given
// values of variables (which override defaults).
func loadModule(t *testing.T, dir string, values map[string]cty.Value) *module {
	t.Helper()
	m := &module{vars: map[string]cty.Value{}, locals: map[string]cty.Value{}, resources: map[string]*resource{}, files: map[string][]byte{}}
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Terraform in %s: %v", dir, err)
	}
	localExprs := map[string]hcl.Expression{}
	referenced := map[string]map[string]bool{} // resource address → attributes referenced
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m.files[filepath.Base(p)] = src
		f, diags := hclsyntax.ParseConfig(src, p, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("parse %s: %v", p, diags)
		}
		body := f.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			switch b.Type {
			case "variable":
				name := b.Labels[0]
				if v, ok := values[name]; ok {
					m.vars[name] = v
				} else if a, ok := b.Body.Attributes["default"]; ok {
					v, diags := a.Expr.Value(nil)
					if diags.HasErrors() {
						t.Fatalf("variable %s: default: %v", name, diags)
					}
					m.vars[name] = v
				} else {
					t.Fatalf("variable %s has no default: give the test a value", name)
				}
			case "locals":
				for name, a := range b.Body.Attributes {
					localExprs[name] = a.Expr
				}
			case "resource", "data":
				r := &resource{typ: b.Labels[0], name: b.Labels[1], body: b.Body}
				r.addr = r.typ + "." + r.name
				if b.Type == "data" {
					r.addr = "data." + r.addr
				}
				_, r.forEach = b.Body.Attributes["for_each"]
				m.resources[r.addr] = r
			}
		}
		// Attributes that references read of each resource.
		_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			e, ok := n.(*hclsyntax.ScopeTraversalExpr)
			if !ok {
				return nil
			}
			addr, attr := referencedAttr(e.Traversal)
			if addr != "" && attr != "" {
				if referenced[addr] == nil {
					referenced[addr] = map[string]bool{}
				}
				referenced[addr][attr] = true
			}
			return nil
		})
	}
	for _, r := range m.resources {
		for _, a := range computed {
			if referenced[r.addr] == nil {
				referenced[r.addr] = map[string]bool{}
			}
			referenced[r.addr][a] = true
		}
	}

	// Evaluate until nothing more becomes known: locals and resources
	// may refer to each other in any order.
	last := -1
	for range 20 {
		ctx := m.evalContext()
		for name, e := range localExprs {
			if v, diags := e.Value(ctx); !diags.HasErrors() && v.IsWhollyKnown() {
				m.locals[name] = v
			}
		}
		for _, r := range m.resources {
			m.expand(r, ctx, referenced[r.addr])
		}
		n := len(m.locals)
		for _, r := range m.resources {
			for _, i := range r.instances {
				n += 1 + len(i.attrs)
			}
		}
		if n == last {
			break
		}
		last = n
	}
	for name := range localExprs {
		if _, ok := m.locals[name]; !ok {
			_, diags := localExprs[name].Value(m.evalContext())
			t.Errorf("local.%s cannot be evaluated: %v", name, diags)
		}
	}
	for _, r := range m.resources {
		if r.instances == nil {
			_, diags := r.body.Attributes["for_each"].Expr.Value(m.evalContext())
			t.Errorf("%s: for_each cannot be evaluated: %v", r.addr, diags)
		}
	}
	return m
}

// referencedAttr returns the resource a traversal refers to and the
// attribute it reads, if any.
func referencedAttr(tr hcl.Traversal) (addr, attr string) {
	var names []string
	for _, s := range tr {
		switch s := s.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		case hcl.TraverseIndex:
			names = append(names, "[]")
		}
	}
	if len(names) == 0 {
		return "", ""
	}
	switch names[0] {
	case "var", "local", "each", "count", "path", "terraform", "self":
		return "", ""
	case "data":
		if len(names) < 3 {
			return "", ""
		}
		addr, names = "data."+names[1]+"."+names[2], names[3:]
	default:
		if len(names) < 2 {
			return "", ""
		}
		addr, names = names[0]+"."+names[1], names[2:]
	}
	if len(names) > 0 && names[0] == "[]" {
		names = names[1:]
	}
	if len(names) > 0 {
		attr = names[0]
	}
	return addr, attr
}

// expand evaluates r's instances as far as ctx allows.
func (m *module) expand(r *resource, ctx *hcl.EvalContext, referenced map[string]bool) {
	keys := map[string]cty.Value{"": cty.NilVal}
	if r.forEach {
		v, diags := r.body.Attributes["for_each"].Expr.Value(ctx)
		if diags.HasErrors() || !v.IsWhollyKnown() || !v.CanIterateElements() {
			return
		}
		keys = map[string]cty.Value{}
		for it := v.ElementIterator(); it.Next(); {
			k, val := it.Element()
			if v.Type().IsSetType() {
				k = val
			}
			keys[k.AsString()] = cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})
		}
	}
	if r.instances == nil {
		r.instances = map[string]*instance{}
	}
	for k, each := range keys {
		i := r.instances[k]
		if i == nil {
			i = &instance{res: r, key: k, each: each, attrs: map[string]cty.Value{}}
			r.instances[k] = i
		}
		ictx := withEach(ctx, each)
		for name, a := range r.body.Attributes {
			if v, diags := a.Expr.Value(ictx); !diags.HasErrors() && v.IsWhollyKnown() {
				i.attrs[name] = v
			}
		}
		for name := range referenced {
			if _, set := r.body.Attributes[name]; !set {
				i.attrs[name] = cty.StringVal(i.addr() + "." + name)
			}
		}
	}
}

func withEach(ctx *hcl.EvalContext, each cty.Value) *hcl.EvalContext {
	if each == cty.NilVal {
		return ctx
	}
	c := ctx.NewChild()
	c.Variables = map[string]cty.Value{"each": each}
	return c
}

// evalContext is what expressions see now: var, local, every resource and
// data source known so far, and Terraform's functions the files call.
func (m *module) evalContext() *hcl.EvalContext {
	vars := map[string]cty.Value{
		"var":   cty.ObjectVal(m.vars),
		"local": cty.ObjectVal(m.locals),
	}
	types := map[string]map[string]cty.Value{}
	data := map[string]map[string]cty.Value{}
	for _, r := range m.resources {
		if r.instances == nil {
			continue
		}
		var v cty.Value
		if r.forEach {
			objs := map[string]cty.Value{}
			for k, i := range r.instances {
				objs[k] = cty.ObjectVal(i.attrs)
			}
			v = cty.ObjectVal(objs)
		} else {
			v = cty.ObjectVal(r.instances[""].attrs)
		}
		into := types
		if strings.HasPrefix(r.addr, "data.") {
			into = data
		}
		if into[r.typ] == nil {
			into[r.typ] = map[string]cty.Value{}
		}
		into[r.typ][r.name] = v
	}
	for typ, byName := range types {
		vars[typ] = cty.ObjectVal(byName)
	}
	dataVals := map[string]cty.Value{}
	for typ, byName := range data {
		dataVals[typ] = cty.ObjectVal(byName)
	}
	vars["data"] = cty.ObjectVal(dataVals)
	return &hcl.EvalContext{Variables: vars, Functions: functions}
}

var functions = map[string]function.Function{
	"concat":     stdlib.ConcatFunc,
	"contains":   stdlib.ContainsFunc,
	"distinct":   stdlib.DistinctFunc,
	"flatten":    stdlib.FlattenFunc,
	"floor":      stdlib.FloorFunc,
	"format":     stdlib.FormatFunc,
	"join":       stdlib.JoinFunc,
	"jsonencode": stdlib.JSONEncodeFunc,
	"keys":       stdlib.KeysFunc,
	"length":     stdlib.LengthFunc,
	"lookup":     stdlib.LookupFunc,
	"lower":      stdlib.LowerFunc,
	"merge":      stdlib.MergeFunc,
	"range":      stdlib.RangeFunc,
	"replace":    stdlib.ReplaceFunc,
	"setproduct": stdlib.SetProductFunc,
	"tolist":     stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
	"tomap":      stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
	"toset":      stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
	"values":     stdlib.ValuesFunc,
}

// ofType returns the instances of every resource of type typ (data
// sources as "data.TYPE"), in address order.
func (m *module) ofType(typ string) []*instance {
	var out []*instance
	for _, r := range m.resources {
		if r.typ == typ && !strings.HasPrefix(r.addr, "data.") || "data."+r.typ == typ && strings.HasPrefix(r.addr, "data.") {
			for _, i := range r.instances {
				out = append(out, i)
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].addr() < out[b].addr() })
	return out
}

// instanceWith returns the instance of type typ whose attribute attr is
// value, or nil.
func (m *module) instanceWith(typ, attr, value string) *instance {
	for _, i := range m.ofType(typ) {
		if i.str(attr) == value {
			return i
		}
	}
	return nil
}

// blocks returns the nested blocks of type typ of body, static and
// dynamic, each with the context its arguments evaluate in (for a dynamic
// block, its iterator variable is set).
func blocks(body *hclsyntax.Body, typ string, ctx *hcl.EvalContext) ([]*hclsyntax.Body, []*hcl.EvalContext, error) {
	var bodies []*hclsyntax.Body
	var ctxs []*hcl.EvalContext
	for _, b := range body.Blocks {
		switch {
		case b.Type == typ:
			bodies, ctxs = append(bodies, b.Body), append(ctxs, ctx)
		case b.Type == "dynamic" && b.Labels[0] == typ:
			fe, ok := b.Body.Attributes["for_each"]
			if !ok {
				return nil, nil, fmt.Errorf("dynamic %q has no for_each", typ)
			}
			v, diags := fe.Expr.Value(ctx)
			if diags.HasErrors() {
				return nil, nil, fmt.Errorf("dynamic %q: for_each: %v", typ, diags)
			}
			var content *hclsyntax.Body
			for _, c := range b.Body.Blocks {
				if c.Type == "content" {
					content = c.Body
				}
			}
			for it := v.ElementIterator(); it.Next(); {
				k, val := it.Element()
				if v.Type().IsSetType() {
					k = val
				}
				c := ctx.NewChild()
				c.Variables = map[string]cty.Value{typ: cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})}
				bodies, ctxs = append(bodies, content), append(ctxs, c)
			}
		}
	}
	return bodies, ctxs, nil
}

// nested evaluates the arguments of the blocks at path under an instance
// (e.g. "template", "containers", "env"), one map per block.
func (m *module) nested(i *instance, path ...string) ([]map[string]cty.Value, error) {
	ctx := withEach(m.evalContext(), i.each)
	bodies, ctxs := []*hclsyntax.Body{i.res.body}, []*hcl.EvalContext{ctx}
	for _, typ := range path {
		var nb []*hclsyntax.Body
		var nc []*hcl.EvalContext
		for k, b := range bodies {
			bs, cs, err := blocks(b, typ, ctxs[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", i.addr(), err)
			}
			nb, nc = append(nb, bs...), append(nc, cs...)
		}
		bodies, ctxs = nb, nc
	}
	out := make([]map[string]cty.Value, len(bodies))
	for k, b := range bodies {
		out[k] = map[string]cty.Value{}
		for name, a := range b.Attributes {
			v, diags := a.Expr.Value(ctxs[k])
			if diags.HasErrors() {
				return nil, fmt.Errorf("%s: %s.%s: %v", i.addr(), strings.Join(path, "."), name, diags)
			}
			out[k][name] = v
		}
	}
	return out, nil
}

// strings returns the elements of a list or set of strings.
func stringsOf(v cty.Value) []string {
	if v == cty.NilVal || v.IsNull() || !v.IsWhollyKnown() || !v.CanIterateElements() {
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, str(e))
	}
	return out
}
