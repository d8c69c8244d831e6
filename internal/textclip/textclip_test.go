package textclip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 4, "hell…"},
		{"hello", 0, "…"},
		{"hello", -1, "…"},
		{"", 0, ""},
		{"héllo", 2, "h…"},       // é is two bytes: not split
		{"héllo", 3, "hé…"},      // whole
		{"日本語", 4, "日…"},         // three-byte characters
		{"日本語", 5, "日…"},         //
		{"日本語", 6, "日本…"},        //
		{"a😀b", 4, "a…"},         // a four-byte character is kept whole or not at all
		{"a😀b", 5, "a😀…"},        //
		{"\xff\xfe", 1, "\xff…"}, // invalid input stays as it was, cut at the byte
	} {
		if got := Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestClipNeverSplitsACharacter(t *testing.T) {
	s := strings.Repeat("añ日😀", 50)
	for n := 0; n <= len(s)+1; n++ {
		p := Prefix(s, n)
		if len(p) > n || !utf8.ValidString(p) {
			t.Fatalf("Prefix(s, %d) = %d bytes, valid=%v", n, len(p), utf8.ValidString(p))
		}
		if c := Clip(s, n); !utf8.ValidString(c) {
			t.Fatalf("Clip(s, %d) is not valid UTF-8", n)
		}
	}
}
