package cloudrun

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestMainAloneReadsTheEnvironment holds what Main's comment says: of all
// the project's code the server runs (functions/cmd/server and every
// package of this module it links), Main is the one place that reads the
// process's environment, once; everything else is given a lookup or a
// Config. A getter of the environment anywhere else would make that
// package configurable behind the Config's back, and its tests depend on
// the environment they run in.
func TestMainAloneReadsTheEnvironment(t *testing.T) {
	const module = "github.com/better-compute/kubernetes"
	gobin := "go"
	if _, err := exec.LookPath(gobin); err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(gobin, "list", "-deps",
		"-f", `{{if .Module}}{{if eq .Module.Path "`+module+`"}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{"\n"}}{{end}}{{end}}`,
		module+"/functions/cmd/server").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var reads []string
	packages := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		packages++
		dir := fields[0]
		for _, name := range fields[1:] {
			reads = append(reads, environmentReads(t, filepath.Join(dir, name))...)
		}
	}
	if packages < 10 {
		t.Fatalf("go list found %d of the module's packages in the server, want its whole closure:\n%s", packages, out)
	}
	want := filepath.Join("functions", "cloudrun", "main.go") + ": Main: os.LookupEnv"
	if len(reads) != 1 || !strings.HasSuffix(reads[0], want) {
		t.Errorf("the server's code reads the environment at %d places, want one, %s:\n%s", len(reads), want, strings.Join(reads, "\n"))
	}
}

// environGetters are the standard library's readers of the process's
// environment, by package.
var environGetters = map[string]map[string]bool{
	"os":      {"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true},
	"syscall": {"Getenv": true, "Environ": true},
}

// environmentReads returns each use of an environGetter in the file, as
// "path: function: pkg.Name".
func environmentReads(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // local name → import path, for os and syscall
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if environGetters[p] == nil {
			continue
		}
		local := p
		if imp.Name != nil {
			local = imp.Name.Name
		}
		names[local] = p
	}
	if len(names) == 0 {
		return nil
	}
	var reads []string
	for _, d := range f.Decls {
		fn := "(package level)"
		if fd, ok := d.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
		}
		ast.Inspect(d, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if p, ok := names[id.Name]; ok && environGetters[p][sel.Sel.Name] {
				reads = append(reads, fmt.Sprintf("%s: %s: %s.%s", path, fn, p, sel.Sel.Name))
			}
			return true
		})
	}
	return reads
}
