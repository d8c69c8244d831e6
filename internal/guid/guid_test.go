package guid

import "testing"

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"72f988bf-86f1-41af-91ab-2d7cd011db47":  true,
		"72F988BF-86F1-41AF-91AB-2D7CD011DB47":  true,
		"72f988bf86f141af91ab2d7cd011db47":      false,
		"72f988bf-86f1-41af-91ab-2d7cd011db4":   false,
		"72f988bf-86f1-41af-91ab-2d7cd011db4g":  false,
		"72f988bf_86f1-41af-91ab-2d7cd011db47":  false,
		"{72f988bf-86f1-41af-91ab-2d7cd011db4}": false,
		"":                                      false,
	} {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}
