package access

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParsePolicies feeds any text to ParsePolicies, as a tenant admin can
// through the console, the API or the tester. Every input is parsed, or
// refused with a *PolicyError in plain words at a place inside the text,
// within a memory ceiling that grows with the text only linearly: a
// construct that recursed without bound, or cost the square of its length,
// would cross it. A parsed text is decided once (its evaluation recurses
// over the same tree).
func FuzzParsePolicies(f *testing.F) {
	for _, tt := range overLimits() {
		if len(tt.text) <= 8<<10 {
			f.Add(tt.text)
		}
	}
	for _, text := range atLimits() {
		if len(text) <= 8<<10 {
			f.Add(text)
		}
	}
	f.Add(DefaultPolicyText)
	f.Add(tenPolicies())
	f.Fuzz(func(t *testing.T, text string) {
		heap, stack := memoryOf(text)
		if ceiling := fuzzHeapCeiling(len(text)); heap > ceiling || stack > parseStackCeiling {
			t.Errorf("%d bytes cost %d KiB allocated and %d KiB of stack, want at most %d KiB and %d KiB",
				len(text), heap>>10, stack>>10, ceiling>>10, parseStackCeiling>>10)
		}
		p, err := ParsePolicies(text)
		if err == nil {
			if d := p.Decide(sampleInvoke); d.Allowed && len(d.Errors) > 0 {
				t.Errorf("allowed with errors: %+v", d)
			}
			return
		}
		var pe *PolicyError
		if !errors.As(err, &pe) {
			t.Fatalf("error %v (%T), want a *PolicyError", err, err)
		}
		if pe.Line < 0 || pe.Line > strings.Count(text, "\n")+1 || pe.Column < 0 || (pe.Line == 0 && pe.Column != 0) {
			t.Errorf("refused at line %d, column %d of a text of %d lines: %v", pe.Line, pe.Column, strings.Count(text, "\n")+1, err)
		}
		// The words around the token found, which is the admin's text.
		words, _, _ := strings.Cut(pe.Msg, "; found `")
		for _, internal := range []string{"access:", "<input>", "parse error", "exact got", " want ", "ident", "primary", "strconv"} {
			if strings.Contains(words, internal) {
				t.Errorf("the refusal %q shows %q", pe.Msg, internal)
			}
		}
	})
}

// fuzzHeapCeiling is what parsing a text of n bytes may allocate: the
// worst texts the limits allow cost about 420 bytes for each of theirs
// (TestParsePoliciesMemoryCeiling), plus what any parse costs.
func fuzzHeapCeiling(n int) uint64 {
	return 1<<20 + 640*uint64(n)
}
