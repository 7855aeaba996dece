package checks

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestMarkdownLinksResolve holds every relative link of the repository's
// Markdown pages to a file that exists and, when it names a heading
// (#...), to a heading of that file as GitHub anchors it: the front page
// and the pages beside the code link to each other, and a page moved or a
// heading renamed would otherwise leave a link that goes nowhere.
func TestMarkdownLinksResolve(t *testing.T) {
	pages := markdownPages(t)
	if len(pages) == 0 {
		t.Fatal("no Markdown page found")
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range relativeLinks(string(b)) {
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: no such file %s", page, target, path)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", page, target)
				continue
			}
			if !anchorsOf(path)[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
	if links == 0 {
		t.Error("no relative link found: the link pattern no longer matches the pages")
	}
}

// markdownPages lists the tracked Markdown files, outside the Kubernetes
// sources that emulators/kubesim copies.
func markdownPages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	var pages []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "emulators/kubesim/apiserver-src/") {
			continue
		}
		pages = append(pages, filepath.FromSlash(p))
	}
	return pages
}

var (
	// fence matches a fenced code block, whose text holds no links.
	fence = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	// codeSpan matches an inline code span.
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	// link matches an inline link or image, [text](target) or
	// ![alt](target); the text may hold code spans, removed before.
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// relativeLinks returns the targets of the page's links that are not
// URLs: a path relative to the page, with or without an anchor, or an
// anchor alone.
func relativeLinks(page string) []string {
	page = fence.ReplaceAllString(page, "")
	page = codeSpan.ReplaceAllString(page, "code")
	var targets []string
	for _, m := range link.FindAllStringSubmatch(page, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		targets = append(targets, target)
	}
	return targets
}

// headingAnchors returns the anchors GitHub gives the page's ATX headings:
// lower case, every character but letters, digits, spaces, hyphens and
// underscores dropped, spaces made hyphens, and -1, -2, ... after a
// repeated one.
func headingAnchors(page string) map[string]bool {
	page = fence.ReplaceAllString(page, "")
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(page, "\n") {
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") || len(line)-len(strings.TrimLeft(line, "#")) > 6 {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
