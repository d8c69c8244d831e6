// Package suggest finds the known word a person most likely meant when
// they typed one the program does not know: a command, a setting's name, a
// key of the configuration file. It imports only the standard library, so
// that any package may use it.
package suggest

import (
	"strings"
	"unicode/utf8"
)

// Closest returns the word of known nearest to typed, ignoring case, and
// true; or "" and false when none is near enough to be the one meant.
// Near enough is an edit distance (insertions, deletions, substitutions
// and swaps of two neighbouring characters) of at most a third of the
// longer word, and never more than 3: "modle" finds "model", and
// "TICKETIQ_PUBLIC_BASEURL" finds "TICKETIQ_PUBLIC_BASE_URL", but "x"
// finds nothing. Of two known words equally near, the first in known wins.
func Closest(typed string, known []string) (string, bool) {
	best, bestDist := "", -1
	t := strings.ToLower(typed)
	for _, k := range known {
		d := Distance(t, strings.ToLower(k))
		limit := min(3, max(utf8.RuneCountInString(typed), utf8.RuneCountInString(k))/3)
		if d > limit || d == 0 && typed == k {
			continue
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	return best, bestDist >= 0
}

// Distance is the optimal string alignment distance between a and b,
// counted in characters: the fewest insertions, deletions, substitutions
// and swaps of two neighbouring characters that turn a into b. A swap
// counts once, since it is the commonest slip of the fingers ("modle").
func Distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows: the one before the previous one is needed for swaps.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
