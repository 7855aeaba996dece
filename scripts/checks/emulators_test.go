package checks

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// emulatorsModule is the module whose emulators the test reads.
const emulatorsModule = "github.com/better-compute/kubernetes"

// The emulators stand in for Google's services and for bcd, and know
// nothing of the product that uses them, as pstest knows nothing of its
// users: a simulator that read the product's names would agree with any
// mistake in them. So no package under emulators/, nor any of its tests,
// may depend on a package under shared/ or functions/, directly or
// through another package. The one exception is testWait.
func TestEmulatorsKnowNothingOfTheProduct(t *testing.T) {
	pkgs := goListPackages(t, "ImportPath,Deps", "-deps", "-test", "./emulators/...")
	var emulators int
	var offenders []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, emulatorsModule+"/emulators/") {
			continue
		}
		emulators++
		var product []string
		for _, d := range p.Deps {
			if isProductPackage(d) {
				product = append(product, d)
			}
		}
		if len(product) > 0 {
			offenders = append(offenders, p.ImportPath+" depends on "+strings.Join(product, ", "))
		}
	}
	// A listing that named no emulator would pass whatever they import.
	if emulators == 0 {
		t.Fatalf("go list named no package under %s/emulators/", emulatorsModule)
	}
	slices.Sort(offenders)
	for _, o := range offenders {
		t.Errorf("%s", o)
	}
}

// testWait is the tests' one way to wait for a condition, which the
// emulators' tests use as the product's do rather than keep copies of
// it. It may stay under shared/ because it knows nothing of the product:
// it imports only the standard library and names nothing of any service,
// so an emulator that waits with it learns no name of the product's.
// Were it to import a package of the product, that package would appear
// among the emulators' dependencies and fail this test.
const testWait = emulatorsModule + "/shared/wait"

// isProductPackage reports whether import path p (perhaps a test variant,
// "p [q.test]") names a package of the product: one under shared/ or
// functions/, testWait apart.
func isProductPackage(p string) bool {
	p, _, _ = strings.Cut(p, " ")
	if p == testWait {
		return false
	}
	return strings.HasPrefix(p, emulatorsModule+"/shared/") || strings.HasPrefix(p, emulatorsModule+"/functions/")
}

// listedPackage is what the repository's tests read of go list's
// description of a package (the fields they ask for are set).
type listedPackage struct {
	ImportPath   string
	Deps         []string // every package it depends on, transitively
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// goListPackages runs go list -json=fields with args in the module's root
// and decodes the packages it describes.
func goListPackages(t *testing.T, fields string, args ...string) []listedPackage {
	t.Helper()
	cmd := exec.Command(goCommand(t), append([]string{"list", "-json=" + fields}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// goCommand is the go command: the one on PATH, or else the one of the
// toolchain that built this test.
func goCommand(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("no go command on PATH nor at %s: %v", p, err)
	}
	return p
}
