package viewpage

import (
	"strings"
	"testing"
)

// The guard goes where it runs before anything of the view's and changes
// nothing of how the document is parsed: after the doctype (a script
// before it would switch the document to quirks mode), after a byte-order
// mark and leading comments, and at the start of a document without one.
func TestWithGuardPlacement(t *testing.T) {
	g := "<script>" + guardJS + "</script>"
	cases := []struct{ name, html, want string }{
		{"doctype", "<!doctype html><html><p>x", "<!doctype html>" + g + "<html><p>x"},
		{"doctype in capitals, with space before", "\n  <!DOCTYPE html>\n<html>", "\n  <!DOCTYPE html>" + g + "\n<html>"},
		{"legacy doctype", `<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01//EN" "http://www.w3.org/TR/html4/strict.dtd"><p>`,
			`<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01//EN" "http://www.w3.org/TR/html4/strict.dtd">` + g + "<p>"},
		{"byte-order mark", "\xef\xbb\xbf<!doctype html><p>", "\xef\xbb\xbf<!doctype html>" + g + "<p>"},
		{"comments before the doctype", "<!-- a -- b --><!--> <!---> <!-- c --!><!doctype html><p>", "<!-- a -- b --><!--> <!---> <!-- c --!><!doctype html>" + g + "<p>"},
		{"an XML declaration", `<?xml version="1.0"?><!doctype html><p>`, `<?xml version="1.0"?><!doctype html>` + g + "<p>"},
		{"a comment that hides a doctype", "<!-- <!doctype html> --><p>", "<!-- <!doctype html> -->" + g + "<p>"},
		{"no doctype", "<html><p>x", g + "<html><p>x"},
		{"no doctype, a comment first", "<!-- c -->\n<p>", "<!-- c -->\n" + g + "<p>"},
		{"an unterminated comment", "<!-- never ends", g + "<!-- never ends"},
		{"empty", "", g},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(withGuard([]byte(c.html))); got != c.want {
				t.Errorf("withGuard(%q) =\n%.200q\nwant\n%.200q", c.html, got, c.want)
			}
		})
	}
}

// The guard is one inline script: nothing in it may end the script
// element, nor open the escaped state in which "<script" would matter.
func TestGuardScriptStaysOneScript(t *testing.T) {
	low := strings.ToLower(guardJS)
	for _, bad := range []string{"</script", "<!--"} {
		if strings.Contains(low, bad) {
			t.Errorf("the guard contains %q, which would end or escape its script element", bad)
		}
	}
}
