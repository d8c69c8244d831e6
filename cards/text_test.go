package cards

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAnswerMarkdown: the model's markdown keeps its formatting, but links
// follow the rule for names: no link hides its address, and no address,
// e-mail or text function ({{DATE()}}) stays live; no heading shows as raw
// hashes.
func TestAnswerMarkdown(t *testing.T) {
	const z = zwsp
	cases := []struct{ in, want string }{
		{"plain **bold** _it_\n- a\n- b", "plain **bold** _it_\n- a\n- b"},
		{"see [the report](https://evil.example/x)", "see the report (https:" + z + "//evil.example/x)"},
		{`see [r](https://e.example/x "title")`, "see r (https:" + z + "//e.example/x)"},
		{"see [](https://e.example/x)", "see https:" + z + "//e.example/x"},
		{"see [https://a.example](https://a.example)", "see https:" + z + "//a.example"},
		{"![img](https://e.example/p.png)", "img (https:" + z + "//e.example/p.png)"},
		{"[x](javascript:alert(1))", "[x] (javascript:alert(1))"},
		{"<https://e.example/auto>", "https:" + z + "//e.example/auto"},
		{"<www.e.example>", "www" + z + ".e.example"},
		{"<mailto:a@e.example>", "mailto:a" + z + "@e.example"},
		{"[a [b](https://e.example)](https://f.example)", "[a b (https:" + z + "//e.example)] (https:" + z + "//f.example)"},
		{"[ref]: https://e.example\n[x][ref]", "[ref] : https:" + z + "//e.example\n[x][ref]"},
		{"due {{DATE(2026-01-01T00:00:00Z, SHORT)}} at {{TIME(2026-01-01T00:00:00Z)}}",
			"due {" + z + "{DATE(2026-01-01T00:00:00Z, SHORT)}} at {" + z + "{TIME(2026-01-01T00:00:00Z)}}"},
		{"{{{DATE(2026-01-01T00:00:00Z)}}", "{" + z + "{" + z + "{DATE(2026-01-01T00:00:00Z)}}"},
		{"# Title\n## Sub ##\ntext", "**Title**\n**Sub**\ntext"},
		{"a\u202eb\u2066c\x00d\r\ne", "abcd\ne"},
		{"  \n  ", ""},
	}
	for _, c := range cases {
		got := answerMarkdown(c.in)
		if got != c.want {
			t.Errorf("answerMarkdown(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, live := range []string{"](", "://", "www.", "{{"} {
			if strings.Contains(got, live) {
				t.Errorf("answerMarkdown(%q) = %q still holds %q", c.in, got, live)
			}
		}
	}
}

// TestDefuseOnce: text defused twice reads as text defused once, so that
// text made safe on its way in can pass another rule without growing.
func TestDefuseOnce(t *testing.T) {
	for _, s := range []string{"a@b.example https://x.example www.y.example {{DATE(2026-01-01T00:00:00Z)}}", "@@", zwsp + "@", "{{{{"} {
		once := defuse(s)
		if twice := defuse(once); twice != once {
			t.Errorf("defuse(defuse(%q)) = %q, want %q", s, twice, once)
		}
	}
}

// TestLabel: names from servers and tools become one plain line that Teams
// cannot turn into a link or a date.
func TestLabel(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Tickets by week", "Tickets by week"},
		{"  two\n\nlines\tand  spaces ", "two lines and spaces"},
		{"see https://evil.example", "see https:" + zwsp + "//evil.example"},
		{"www.evil.example", "www" + zwsp + ".evil.example"},
		{"mail@evil.example", "mail" + zwsp + "@evil.example"},
		{"{{DATE(2020-01-01T00:00:00Z)}}", "{" + zwsp + "{DATE(2020-01-01T00:00:00Z)}}"},
		{"{{{{TIME(2020-01-01T00:00:00Z)}}", "{" + zwsp + "{" + zwsp + "{" + zwsp + "{TIME(2020-01-01T00:00:00Z)}}"},
		{"abc\u202Egnp.exe", "abcgnp.exe"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{strings.Repeat("é", 200), strings.Repeat("é", maxName-1) + "…"},
	}
	for _, c := range cases {
		if got := label(c.in, maxName); got != c.want {
			t.Errorf("label(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestCutBytes never splits a character and prefers a word boundary.
func TestCutBytes(t *testing.T) {
	s := strings.Repeat("😀𝒳é", 50)
	for n := range len(s) + 2 {
		got := cutBytes(s, n)
		if !utf8.ValidString(got) || len(got) > n || !strings.HasPrefix(s, got) {
			t.Fatalf("cutBytes(%d) = %q", n, got)
		}
	}
	if got := cutBytes("hello wonderful world", 15); got != "hello" {
		t.Errorf("cutBytes = %q, want %q", got, "hello")
	}
}

// TestCapRunes counts characters, not bytes.
func TestCapRunes(t *testing.T) {
	if got := capRunes("😀😀😀", 3); got != "😀😀😀" {
		t.Errorf("got %q", got)
	}
	if got := capRunes("😀😀😀😀", 3); got != "😀😀…" {
		t.Errorf("got %q", got)
	}
}
