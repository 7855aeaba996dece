package infra

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfile is the Dockerfile, its continued lines joined, by stage.
type dockerfile struct {
	args   map[string]string // ARG defaults before the first FROM
	stages []stage
}

type stage struct {
	from, name string
	lines      []string // instructions after FROM
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("../functions/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{args: map[string]string{}}
	var cur strings.Builder
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			f := strings.Fields(rest)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			d.stages = append(d.stages, s)
			continue
		case "ARG":
			if len(d.stages) == 0 {
				k, v, _ := strings.Cut(rest, "=")
				d.args[k] = v
				continue
			}
		}
		if len(d.stages) == 0 {
			t.Fatalf("Dockerfile: %q before the first FROM", l)
		}
		s := &d.stages[len(d.stages)-1]
		s.lines = append(s.lines, l)
	}
	if len(d.stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and the final one", len(d.stages))
	}
	return d
}

// expand replaces ${ARG} by its default.
func (d dockerfile) expand(s string) string {
	return os.Expand(s, func(k string) string { return d.args[k] })
}

var goVersionRE = regexp.MustCompile(`(?m)^go (\S+)$`)

// TestDockerfileGoVersionIsGoMod checks that the image is built, and CI
// vets and tests, with the Go of go.mod.
func TestDockerfileGoVersionIsGoMod(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := goVersionRE.FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	want := string(m[1])
	d := readDockerfile(t)
	var builders int
	for _, s := range d.stages {
		from := d.expand(s.from)
		if img, ok := strings.CutPrefix(from, "golang:"); ok {
			builders++
			if v, _, _ := strings.Cut(img, "-"); v != want {
				t.Errorf("Dockerfile builds FROM %s, want Go %s as go.mod says", from, want)
			}
		}
	}
	if builders == 0 {
		t.Error("Dockerfile has no stage FROM the official Go image")
	}
	cb, err := os.ReadFile("../cloudbuild.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range regexp.MustCompile(`golang:([0-9][^\s"']*)`).FindAllStringSubmatch(string(cb), -1) {
		if v, _, _ := strings.Cut(img[1], "-"); v != want {
			t.Errorf("cloudbuild.yaml runs golang:%s, want Go %s as go.mod says", img[1], want)
		}
	}
}

// TestImageBuildsFromDockerfile runs the build stage's go build command
// on the files the build context holds (its ignore file applied), and
// checks that the binary is the one the final stage runs, static, and
// free of this machine's paths.
func TestImageBuildsFromDockerfile(t *testing.T) {
	d := readDockerfile(t)
	final := d.stages[len(d.stages)-1]
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") || !strings.HasSuffix(final.from, ":nonroot") {
		t.Errorf("the final stage is FROM %s, want a distroless static non-root image", final.from)
	}
	var from, src, dst, user, entry string
	for _, l := range final.lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "COPY":
			f := strings.Fields(rest)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") {
				from, src, dst = strings.TrimPrefix(f[0], "--from="), f[1], f[2]
			}
		case "USER":
			user = rest
		case "ENTRYPOINT":
			entry = rest
		}
	}
	if user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("the final stage runs as user %q, want a non-root one", user)
	}
	if entry != `["`+dst+`"]` {
		t.Errorf("ENTRYPOINT %s, want the binary copied to %s", entry, dst)
	}
	var build *stage
	for k := range d.stages {
		if d.stages[k].name == from {
			build = &d.stages[k]
		}
	}
	if build == nil {
		t.Fatalf("the final stage copies from %q, which is no stage", from)
	}
	var cmd string
	for _, l := range build.lines {
		if instr, rest, _ := strings.Cut(l, " "); strings.EqualFold(instr, "RUN") && strings.Contains(rest, "go build") {
			cmd = rest
		}
	}
	if cmd == "" {
		t.Fatal("the build stage has no RUN go build")
	}
	if !strings.Contains(cmd, " -o "+src+" ") {
		t.Fatalf("the build command %q does not write %s, which the final stage copies", cmd, src)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./functions/cmd/server"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("the build command %q lacks %s", cmd, want)
		}
	}

	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	context := filepath.Join(t.TempDir(), "src")
	copyContext(t, root, context)
	out := filepath.Join(t.TempDir(), "server")
	run := exec.Command("sh", "-c", strings.Replace(cmd, " -o "+src+" ", " -o "+out+" ", 1))
	run.Dir = context
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}

	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{root, context}
	if gomod, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil && len(bytes.TrimSpace(gomod)) > 0 {
		paths = append(paths, string(bytes.TrimSpace(gomod)))
	}
	for _, p := range paths {
		if bytes.Contains(bin, []byte(p)) {
			t.Errorf("the binary holds the build path %s: sourceLocation in logs would show it", p)
		}
	}
	info, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["-trimpath"] != "true" || settings["CGO_ENABLED"] != "0" {
		t.Errorf("build settings -trimpath=%q CGO_ENABLED=%q, want true and 0", settings["-trimpath"], settings["CGO_ENABLED"])
	}
	if info.Path != "github.com/better-compute/kubernetes/functions/cmd/server" {
		t.Errorf("the binary is %s, want the server command", info.Path)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary needs a dynamic loader, which a distroless static image has not")
		}
	}
}

// copyContext copies the files of root that functions/Dockerfile.dockerignore
// (the Dockerfile's own ignore file, which BuildKit reads) lets into the
// build context to dir.
func copyContext(t *testing.T, root, dir string) {
	t.Helper()
	ignore, err := os.ReadFile(filepath.Join(root, "functions", "Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []ignoreRule
	for _, l := range strings.Split(string(ignore), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		r := ignoreRule{}
		if r.negate = strings.HasPrefix(l, "!"); r.negate {
			l = l[1:]
		}
		r.re = globRE(strings.TrimPrefix(filepath.ToSlash(filepath.Clean(l)), "/"))
		rules = append(rules, r)
	}
	err = filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignored(rules, rel) {
			if e.IsDir() && !hasNegation(rules) {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() || !e.Type().IsRegular() {
			return nil
		}
		to := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		o, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(o, in); err != nil {
			o.Close()
			return err
		}
		return o.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// ignored applies the rules as Docker does: the last rule matching the
// path, or one of its parent directories, decides.
func ignored(rules []ignoreRule, rel string) bool {
	out := false
	for _, r := range rules {
		for p := rel; ; {
			if r.re.MatchString(p) {
				out = !r.negate
				break
			}
			i := strings.LastIndex(p, "/")
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	return out
}

func hasNegation(rules []ignoreRule) bool {
	for _, r := range rules {
		if r.negate {
			return true
		}
	}
	return false
}

// globRE turns a .dockerignore pattern (*, ?, **) into a regexp.
func globRE(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}
