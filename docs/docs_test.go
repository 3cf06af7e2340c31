// Package docs holds the design notes (Markdown); this test keeps the
// code's citations of them honest.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	citation = regexp.MustCompile(`docs/([a-z-]+)\.md §([0-9]+(?:\.[0-9]+)?)`)
	// A design document cited without the docs/ prefix is one that is not
	// in the repository.
	foreign = regexp.MustCompile(`(?:^|[^/\w])((?:core|durable|sandbox|go-anchors|style|performance-notes|machine-feasibility)\.md)`)
)

// TestCitationsResolve checks that every "docs/X.md §N" in a Go comment
// names a document of this directory and a section heading in it.
func TestCitationsResolve(t *testing.T) {
	sections := map[string]map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#{2,3} ([0-9]+(?:\.[0-9]+)?)\.? `)
	mds, _ := filepath.Glob("*.md")
	for _, md := range mds {
		b, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		for _, m := range heading.FindAllSubmatch(b, -1) {
			set[string(m[1])] = true
		}
		sections[strings.TrimSuffix(md, ".md")] = set
	}
	cited := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && d.Name() != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "//") {
				continue
			}
			comment := line[strings.Index(line, "//"):]
			for _, m := range citation.FindAllStringSubmatch(comment, -1) {
				cited++
				if !sections[m[1]][m[2]] {
					t.Errorf("%s:%d cites docs/%s.md §%s, which does not exist", path, i+1, m[1], m[2])
				}
			}
			if m := foreign.FindStringSubmatch(comment); m != nil && path != filepath.Join("..", "docs", "docs_test.go") {
				t.Errorf("%s:%d cites %s, which is not in docs/", path, i+1, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 25 {
		t.Errorf("found only %d citations of docs/; is the walk reading the repository?", cited)
	}
}
