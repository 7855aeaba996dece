package checks

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneWayToInjectTime holds the module to one way of injecting time:
// a k8s.io/utils/clock PassiveClock (or Clock, where timers are needed),
// through a WithClock option or a Clock field. Nothing exported (a
// function, a method of an exported type, an option, a struct field, an
// interface method, a type) takes, returns or holds a func() time.Time: a
// second way, however small, would come back one package at a time.
func TestOneWayToInjectTime(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "." {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			// Another module (emulators/kubeapiserver) is not this one.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, where := range nowFuncs(f) {
			found = append(found, fset.Position(where.pos).String()+": "+where.what)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the module's Go files: %v", err)
	}
	if files == 0 {
		t.Fatal("no Go file found")
	}
	for _, f := range found {
		t.Errorf("%s injects time as a func() time.Time: take a k8s.io/utils/clock PassiveClock instead (WithClock, or a Clock field)", f)
	}
}

// TestNowFuncs holds the check itself to what it finds and what it lets
// be: a clock's own Now method is the way, not a second one.
func TestNowFuncs(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want []string
	}{
		{"func WithNow(now func() time.Time) Option { return nil }", []string{"WithNow"}},
		{"func New(s string, now func() time.Time, opts ...Option) {}", []string{"New"}},
		{"func Clock() func() time.Time { return nil }", []string{"Clock"}},
		{"type Config struct { Name string; Now func() time.Time }", []string{"Config.Now"}},
		{"type Config struct { Inner struct { Now func() time.Time } }", []string{"Config.Now"}},
		{"type Clocks interface { Set(now func() time.Time) }", []string{"Clocks.Set"}},
		{"type NowFunc func() time.Time", []string{"type NowFunc"}},
		{"func (s *Server) At(now func() time.Time) {}", []string{"Server.At"}},
		{"type Config struct { now func() time.Time }", nil},
		{"func newThing(now func() time.Time) {}", nil},
		{"func (s *server) At(now func() time.Time) {}", nil},
		{"type Clock struct{}; func (Clock) Now() time.Time { return time.Time{} }", nil},
		{"type PassiveClock interface { Now() time.Time; Since(time.Time) time.Duration }", nil},
		{"func Since(t time.Time) time.Duration { return 0 }", nil},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package x\nimport \"time\"\n"+tt.src, 0)
		if err != nil {
			t.Fatalf("parse %q: %v", tt.src, err)
		}
		var got []string
		for _, u := range nowFuncs(f) {
			got = append(got, u.what)
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("nowFuncs(%q) = %q, want %q", tt.src, got, tt.want)
		}
	}
}

// nowUse is one exported place of a func() time.Time.
type nowUse struct {
	pos  token.Pos
	what string
}

// nowFuncs returns the exported declarations of f whose types hold a
// func() time.Time.
func nowFuncs(f *ast.File) []nowUse {
	timeName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	if timeName == "" || timeName == "_" || timeName == "." {
		return nil
	}
	holds := func(e ast.Node) bool {
		held := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncType:
				held = held || isNowFunc(x, timeName)
			case *ast.StructType, *ast.InterfaceType:
				// Their fields answer for themselves (fields).
				return false
			}
			return !held
		})
		return held
	}
	// signature reports whether a function's parameters or results hold
	// one (its own type is a Now() time.Time, a clock's method, and fine).
	signature := func(ft *ast.FuncType) bool {
		return (ft.Params != nil && holds(ft.Params)) || (ft.Results != nil && holds(ft.Results))
	}
	var uses []nowUse
	// fields reports the exported fields (and interface methods) of the
	// struct and interface types in e, at any depth.
	fields := func(e ast.Expr, owner string) {
		ast.Inspect(e, func(n ast.Node) bool {
			var list *ast.FieldList
			methods := false
			switch x := n.(type) {
			case *ast.StructType:
				list = x.Fields
			case *ast.InterfaceType:
				list, methods = x.Methods, true
			default:
				return true
			}
			for _, fld := range list.List {
				held := holds(fld.Type)
				if m, ok := fld.Type.(*ast.FuncType); ok && methods {
					held = signature(m)
				}
				for _, name := range fld.Names {
					if name.IsExported() && held {
						uses = append(uses, nowUse{name.Pos(), owner + "." + name.Name})
					}
				}
			}
			return true
		})
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				recv := receiverName(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				name = recv + "." + name
			}
			if d.Name.IsExported() && signature(d.Type) {
				uses = append(uses, nowUse{d.Name.Pos(), name})
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() {
					continue
				}
				if _, isFunc := ts.Type.(*ast.FuncType); isFunc && holds(ts.Type) {
					uses = append(uses, nowUse{ts.Name.Pos(), "type " + ts.Name.Name})
					continue
				}
				fields(ts.Type, ts.Name.Name)
			}
		}
	}
	return uses
}

// isNowFunc reports whether ft is func() time.Time, time being the name
// the file imports package time as.
func isNowFunc(ft *ast.FuncType, timeName string) bool {
	if ft.Params != nil && len(ft.Params.List) > 0 {
		return false
	}
	if ft.Results == nil || len(ft.Results.List) != 1 || len(ft.Results.List[0].Names) > 1 {
		return false
	}
	sel, ok := ft.Results.List[0].Type.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Time" {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == timeName
}

// receiverName is the type name of a method's receiver: T, *T, T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
