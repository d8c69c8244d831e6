package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// documents lists README.md, CHANGELOG.md and every page of docs/, as
// paths from this folder.
func documents(t testing.TB) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("only %d pages in docs/", len(pages))
	}
	return append([]string{filepath.Join("..", "README.md"), filepath.Join("..", "CHANGELOG.md")}, pages...)
}

// prose is a document without its fenced code blocks, each of their lines
// left empty so that line numbers stay; a `#` there is a comment, not a
// heading, and a link there is an example.
func prose(doc string) []string {
	lines := strings.Split(doc, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence = l[:len(l)-len(trimmed)] + "```"
			lines[i] = ""
		case fence != "":
			if strings.TrimRight(l, " ") == fence {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

var (
	headingRe = regexp.MustCompile(`^(#{1,6}) +(.+?) *#*$`)
	// linkRe finds inline links and images: [text](target).
	linkRe = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]*)\)`)
	// codeSpanRe finds inline code, where brackets are no link.
	codeSpanRe = regexp.MustCompile("`[^`]*`")
)

// anchors returns the anchors of a document's headings as GitHub makes
// them: the heading's text, lowercased, without punctuation, spaces made
// hyphens, and -1, -2... after a repeated one.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(doc) {
		m := headingRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text := linkRe.ReplaceAllString(m[2], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// TestLinksResolve follows every relative link and image of README.md,
// CHANGELOG.md and docs/*.md: the file or folder must exist, and an
// #anchor must name a heading of the page it points to.
func TestLinksResolve(t *testing.T) {
	checked := 0
	for _, doc := range documents(t) {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range prose(string(raw)) {
			line = codeSpanRe.ReplaceAllString(line, "")
			for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
				target := m[2]
				if target == "" || regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
					continue // an address elsewhere
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.Join(filepath.Dir(doc), file)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: %s points to %s, which does not exist", doc, n+1, target, path)
					continue
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s:%d: %s: an anchor in a file that is no document", doc, n+1, target)
					continue
				}
				page, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(page))[anchor] {
					t.Errorf("%s:%d: %s: %s has no heading #%s", doc, n+1, target, path, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d links followed; the link finder is broken", checked)
	}
}

// TestAnchorsAsGitHubMakesThem holds the anchor rule to the cases these
// pages use: code, punctuation, a repeated heading, a link in a heading.
func TestAnchorsAsGitHubMakesThem(t *testing.T) {
	got := anchors("# Azure and Teams setup\n## Inside Teams (`TICKETIQ_TEAMS_TAB`)\n" +
		"## What the bot sends, and how\n## Notes\n## Notes\n## Run notes for people, details for operators\n" +
		"## The packages' benchmarks\n## See [the page](x.md)\n```sh\n# a comment\n```\n")
	for _, want := range []string{"azure-and-teams-setup", "inside-teams-ticketiq_teams_tab", "what-the-bot-sends-and-how",
		"notes", "notes-1", "run-notes-for-people-details-for-operators", "the-packages-benchmarks", "see-the-page"} {
		if !got[want] {
			t.Errorf("no anchor %s in %v", want, got)
		}
	}
	if got["a-comment"] {
		t.Error("a comment in a code block made an anchor")
	}
}

// TestReadmeIsALandingPage keeps README short: what the service is, the
// pictures, the two commands first, and a link to every page of docs/.
func TestReadmeIsALandingPage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	if n := strings.Count(readme, "\n"); n > 150 {
		t.Errorf("README has %d lines; what is not for a first look belongs in docs/", n)
	}
	shots, _ := filepath.Glob(filepath.Join("screenshots", "*.png"))
	if len(shots) < 4 {
		t.Errorf("docs/screenshots has %d pictures, want the playground, a view, the overview and the audit log", len(shots))
	}
	for _, s := range shots {
		if !strings.Contains(readme, "](docs/"+filepath.ToSlash(s)+")") {
			t.Errorf("README does not show docs/%s", filepath.ToSlash(s))
		}
	}
	var first []string
	for _, c := range fencedCommands(t, "README.md", readme) {
		first = append(first, c.text)
	}
	if len(first) < 2 || first[0] != "./run.sh" || first[1] != "./test.sh" {
		t.Errorf("README's commands are %q; ./run.sh and ./test.sh come first", first)
	}
	pages, _ := filepath.Glob("*.md")
	for _, p := range pages {
		if !strings.Contains(readme, "](docs/"+p+")") {
			t.Errorf("README does not link docs/%s", p)
		}
	}
	if !slices.ContainsFunc(strings.Split(readme, "\n"), func(l string) bool { return strings.Contains(l, "](CHANGELOG.md)") }) {
		t.Error("README does not link CHANGELOG.md")
	}
}
