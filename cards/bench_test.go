package cards

import (
	"strings"
	"testing"
)

// BenchmarkAnswerCardsTypical renders an ordinary answer with two views.
func BenchmarkAnswerCardsTypical(b *testing.B) {
	a := Answer{Text: answerText, Views: twoViews(), Notes: []string{"one note"}}
	o := Options{PublicBaseURL: httpsBase, Now: now}
	for b.Loop() {
		AnswerCards(a, o)
	}
}

// BenchmarkAnswerCardsHuge renders an answer that must be shortened: 400 KB
// of text, 200 notes, 30 views.
func BenchmarkAnswerCardsHuge(b *testing.B) {
	a := Answer{Text: strings.Repeat("The answer goes on and on. 😀 ", 15_000), Views: manyViews(30)}
	for i := range 200 {
		a.Notes = append(a.Notes, strings.Repeat("note ", 100)+string(rune('a'+i%26)))
	}
	o := Options{PublicBaseURL: httpsBase, Now: now}
	for b.Loop() {
		AnswerCards(a, o)
	}
}
