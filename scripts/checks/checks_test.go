// Package checks holds the repository's own structure checks: every
// relative link of the Markdown pages resolves (docs_test.go), imports run
// one way through the layers (layers_test.go), the emulators import
// nothing of the product (emulators_test.go), and time is injected one way
// (clocks_test.go). It has tests only; they read the repository from its
// root, so that what they name is named as from there.
package checks

import (
	"fmt"
	"os"
	"testing"
)

// root is the repository's root, from this package's directory (where go
// test runs its tests).
const root = "../.."

func TestMain(m *testing.M) {
	if err := os.Chdir(root); err != nil {
		fmt.Fprintf(os.Stderr, "checks: the repository's root: %v\n", err)
		os.Exit(2)
	}
	if _, err := os.Stat("go.mod"); err != nil {
		fmt.Fprintf(os.Stderr, "checks: %s is not the repository's root: %v\n", root, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
