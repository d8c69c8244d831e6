package testenv

import "strings"

// ShellWords splits the commands a document gives into shell words, as
// far as those commands need: quotes are taken off, a backslash-newline
// is a space, a newline parts words like a space, and a # that starts a
// word outside quotes starts a comment to the end of its line.
func ShellWords(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote, comment := false, rune(0), false
	for _, r := range strings.ReplaceAll(s, "\\\n", " ") {
		switch {
		case comment:
			comment = r != '\n'
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '#' && !in:
			comment = true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
