package docs

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rules is what the tables of architecture.md allow: for each project
// package, the project packages it may import besides the shared ones;
// which packages are shared (every package may import them) and which are
// for tests only; and the third-party packages kept to a few packages.
type rules struct {
	mayImport map[string][]string
	shared    []string
	testsOnly []string
	onlyIn    map[string][]string
}

const module = "teamsbot/"

// backticked finds `code` spans.
var backticked = regexp.MustCompile("`([^`]+)`")

// readRules reads the layout table and the table of third-party packages
// from the document at path. A folder row with an empty last column (a
// folder of scripts or documents) sets no rule.
func readRules(t testing.TB, path string) rules {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := rules{mayImport: map[string][]string{}, onlyIn: map[string][]string{}}
	layout := tableAfter(t, string(doc), "| folder | owns | may import (of this project) |")
	for _, cells := range layout {
		folder := strings.Trim(cells[0], "` ")
		if !strings.HasSuffix(folder, "/") {
			continue // a document's row
		}
		pkg := module + strings.TrimSuffix(folder, "/")
		rule := strings.TrimSpace(cells[2])
		var allowed []string
		switch {
		case rule == "":
			continue
		case rule == "everything":
			allowed = []string{"*"}
		case rule == "nothing":
		case rule == "anyone":
			r.shared = append(r.shared, pkg)
		default:
			if strings.Contains(rule, "tests only") {
				r.testsOnly = append(r.testsOnly, pkg)
			}
			for _, m := range backticked.FindAllStringSubmatch(rule, -1) {
				allowed = append(allowed, module+strings.TrimSuffix(m[1], "/"))
			}
			if len(allowed) == 0 && !strings.Contains(rule, "tests only") {
				t.Errorf("%s: the layout row of %s says %q, which is no rule", path, folder, rule)
			}
		}
		if _, twice := r.mayImport[pkg]; twice {
			t.Errorf("%s: the layout table has %s twice", path, folder)
		}
		r.mayImport[pkg] = allowed
	}
	for _, cells := range tableAfter(t, string(doc), "| third-party package | only in |") {
		dep := strings.Trim(cells[0], "` ")
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			r.onlyIn[dep] = append(r.onlyIn[dep], module+m[1])
		}
	}
	if len(r.mayImport) < 10 || len(r.shared) < 3 || len(r.onlyIn) < 3 {
		t.Fatalf("%s: only %d layout rows, %d shared packages and %d third-party rows read; the tables are damaged", path, len(r.mayImport), len(r.shared), len(r.onlyIn))
	}
	return r
}

// tableAfter returns the cells of the rows of the Markdown table whose
// header line is header.
func tableAfter(t testing.TB, doc, header string) [][]string {
	t.Helper()
	i := strings.Index(doc, header+"\n")
	if i < 0 {
		t.Fatalf("no table %q", header)
	}
	var rows [][]string
	for _, line := range strings.Split(doc[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != strings.Count(header, " | ")+1 {
			t.Fatalf("a row of %d cells under %q: %s", len(cells), header, line)
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestLayoutImports fails when a package imports what the layout table of
// architecture.md does not allow it, when a third-party package is
// imported outside the packages its table names, or when a package is
// missing from the table or the table names one that does not exist.
func TestLayoutImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	r := readRules(t, "architecture.md")
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "teamsbot/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	listed := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		listed[pkg] = true
		allowed, ok := r.mayImport[pkg]
		if !ok {
			t.Errorf("package %s is not in the layout table: add it to docs/architecture.md", pkg)
			continue
		}
		for _, imp := range imports {
			if strings.HasPrefix(imp, module) {
				switch {
				case slices.Contains(r.testsOnly, imp) && !slices.Contains(allowed, imp):
					t.Errorf("%s imports %s, which only tests may", pkg, imp)
				case slices.Contains(allowed, "*"), slices.Contains(allowed, imp), slices.Contains(r.shared, imp):
				default:
					t.Errorf("%s imports %s, which the layout does not allow", pkg, imp)
				}
				continue
			}
			for dep, owners := range r.onlyIn {
				if (imp == dep || strings.HasPrefix(imp, dep+"/")) && !slices.Contains(owners, pkg) {
					t.Errorf("%s imports %s, which only %v may", pkg, imp, owners)
				}
			}
		}
	}
	for pkg := range r.mayImport {
		if !listed[pkg] {
			t.Errorf("the layout table names %s, which is no package", pkg)
		}
	}
}

// TestServiceLinksNoTestTools checks the binary's whole dependency graph:
// nothing the layout keeps for tests (the packages for tests only, and
// the third-party packages only they may import) ends up in the service.
func TestServiceLinksNoTestTools(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	r := readRules(t, "architecture.md")
	bad := slices.Clone(r.testsOnly)
	for dep, owners := range r.onlyIn {
		if !slices.ContainsFunc(owners, func(o string) bool { return !slices.Contains(r.testsOnly, o) }) {
			bad = append(bad, dep)
		}
	}
	if len(bad) < 4 {
		t.Fatalf("only %v are kept for tests; the tables are damaged", bad)
	}
	out, err := exec.Command("go", "list", "-deps", "teamsbot/cmd/teamsbot").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.SplitSeq(string(out), "\n") {
		for _, b := range bad {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("the service links %s", dep)
			}
		}
	}
}
