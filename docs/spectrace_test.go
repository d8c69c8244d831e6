// Package docs holds the project's documents; its test keeps
// spec-trace.md honest: every test it cites must exist.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestSpecTraceNamesExistingTests(t *testing.T) {
	trace, err := os.ReadFile("spec-trace.md")
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`([a-z/]+)\\.((?:Test|Fuzz)[A-Za-z0-9_]+)(/[^`]*)?`").FindAllStringSubmatch(string(trace), -1)
	if len(cited) < 50 {
		t.Fatalf("only %d tests cited; the trace is damaged", len(cited))
	}
	sources := map[string]string{}
	for _, m := range cited {
		pkg, name := m[1], m[2]
		src, ok := sources[pkg]
		if !ok {
			files, _ := filepath.Glob(filepath.Join("..", pkg, "*_test.go"))
			var b strings.Builder
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(data)
			}
			src = b.String()
			sources[pkg] = src
		}
		if !strings.Contains(src, "func "+name+"(") {
			t.Errorf("spec-trace.md cites %s.%s, which does not exist", pkg, name)
		}
		if sub := strings.TrimPrefix(m[3], "/"); sub != "" {
			// Subtest names are written with underscores for spaces, as go test prints them.
			first := strings.SplitN(sub, "/", 2)[0]
			if !strings.Contains(src, `"`+first) && !strings.Contains(src, `"`+strings.ReplaceAll(first, "_", " ")) {
				t.Errorf("spec-trace.md cites subtest %s of %s.%s, which does not exist", sub, pkg, name)
			}
		}
	}
	rows := regexp.MustCompile(`(?m)^\| (\d+)(?:–(\d+))? \|`).FindAllStringSubmatch(string(trace), -1)
	next := 1
	for _, r := range rows {
		first, _ := strconv.Atoi(r[1])
		if first != next {
			t.Fatalf("sentence rows out of order: expected %d, found %d", next, first)
		}
		next = first + 1
		if r[2] != "" {
			last, _ := strconv.Atoi(r[2])
			next = last + 1
		}
	}
	if next != 75 {
		t.Errorf("the trace covers sentences 1–%d; the specification has 74", next-1)
	}
}
