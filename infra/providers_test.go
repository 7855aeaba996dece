package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// The Google provider's releases both modules must accept (the last 6.x
// and a 7.x that infra/ validates and plans with, see README.md) and the
// next major, which nothing here has been tried with.
var (
	googleAccepted = []string{"6.50.0", "7.0.0", "7.45.0"}
	googleRefused  = []string{"8.0.0"}
)

// TestGoogleProviderVersions checks that required_providers of infra/ and
// infra/tenant/ admit the Google provider's current major (7.x) and the
// last 6.x, and not an untried 8.x.
func TestGoogleProviderVersions(t *testing.T) {
	for _, dir := range []string{".", "tenant"} {
		source, constraint := googleRequirement(t, dir)
		if source != "hashicorp/google" {
			t.Errorf("%s: google's source = %q, want hashicorp/google", dir, source)
		}
		for _, v := range googleAccepted {
			if ok, err := admits(constraint, v); err != nil || !ok {
				t.Errorf("%s: google version %q admits %s = %v (%v), want true", dir, constraint, v, ok, err)
			}
		}
		for _, v := range googleRefused {
			if ok, err := admits(constraint, v); err != nil || ok {
				t.Errorf("%s: google version %q admits %s = %v (%v), want false", dir, constraint, v, ok, err)
			}
		}
	}
}

// TestVersionConstraints holds admits to Terraform's rules, so that the
// test above fails for a constraint that leaves 7.x out.
func TestVersionConstraints(t *testing.T) {
	tests := []struct {
		constraint, version string
		want                bool
	}{
		{"~> 6.0", "6.50.0", true},
		{"~> 6.0", "7.0.0", false},
		{"~> 6.1.0", "6.1.9", true},
		{"~> 6.1.0", "6.2.0", false},
		{">= 6.0, < 8.0", "7.45.0", true},
		{">= 6.0, < 8.0", "8.0.0", false},
		{">= 6.0, < 8.0", "5.45.0", false},
		{">= 5.0", "8.0.0", true},
		{"< 7", "7.0.0", false},
		{"= 7.2.0", "7.2.0", true},
		{"7.2.0", "7.2.1", false},
		{"!= 7.2.0", "7.2.0", false},
		{"> 7.2", "7.2.1", true},
		{"<= 7.2", "7.2.1", false},
	}
	for _, tt := range tests {
		if got, err := admits(tt.constraint, tt.version); err != nil || got != tt.want {
			t.Errorf("admits(%q, %s) = %v, %v; want %v", tt.constraint, tt.version, got, err, tt.want)
		}
	}
}

// googleRequirement returns the source and version of the google entry of
// the terraform block's required_providers in dir.
func googleRequirement(t *testing.T, dir string) (source, version string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Terraform in %s: %v", dir, err)
	}
	found := false
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, diags := hclsyntax.ParseConfig(src, p, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("parse %s: %v", p, diags)
		}
		for _, tb := range f.Body.(*hclsyntax.Body).Blocks {
			if tb.Type != "terraform" {
				continue
			}
			for _, rp := range tb.Body.Blocks {
				if rp.Type != "required_providers" {
					continue
				}
				a, ok := rp.Body.Attributes["google"]
				if !ok {
					continue
				}
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() || !v.Type().IsObjectType() || !v.Type().HasAttribute("source") || !v.Type().HasAttribute("version") {
					t.Fatalf("%s: google's requirement is not {source, version}: %v", p, diags)
				}
				source, version, found = str(v.GetAttr("source")), str(v.GetAttr("version")), true
			}
		}
	}
	if !found {
		t.Fatalf("%s: no required_providers entry for google", dir)
	}
	return source, version
}

// admits reports whether a Terraform version constraint ("~> 6.0",
// ">= 6.0, < 8.0", ...) admits version, by Terraform's rules for released
// versions: a missing part is zero, and "~>" lets only the rightmost given
// part grow.
func admits(constraint, version string) (bool, error) {
	v, _, err := parseVersion(version)
	if err != nil {
		return false, err
	}
	for _, c := range strings.Split(constraint, ",") {
		c = strings.TrimSpace(c)
		op := "="
		for _, o := range []string{"~>", ">=", "<=", "!=", ">", "<", "="} {
			if strings.HasPrefix(c, o) {
				op, c = o, strings.TrimSpace(c[len(o):])
				break
			}
		}
		w, given, err := parseVersion(c)
		if err != nil {
			return false, fmt.Errorf("constraint %q: %w", constraint, err)
		}
		cmp := compareVersions(v, w)
		var ok bool
		switch op {
		case "=":
			ok = cmp == 0
		case "!=":
			ok = cmp != 0
		case ">":
			ok = cmp > 0
		case ">=":
			ok = cmp >= 0
		case "<":
			ok = cmp < 0
		case "<=":
			ok = cmp <= 0
		case "~>":
			// At least w, with the parts before the last given one equal.
			ok = cmp >= 0
			for i := 0; i < given-1; i++ {
				ok = ok && v[i] == w[i]
			}
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// parseVersion parses MAJOR[.MINOR[.PATCH]], returning how many parts
// were given.
func parseVersion(s string) ([3]int, int, error) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return v, 0, fmt.Errorf("version %q: more than three parts", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, 0, fmt.Errorf("version %q: part %q is not a number", s, p)
		}
		v[i] = n
	}
	return v, len(parts), nil
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
