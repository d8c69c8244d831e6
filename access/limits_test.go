package access

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

const condHead = "permit (principal, action, resource) when { "

// overLimit is one text over a limit, where it is crossed and the words
// that name the limit.
type overLimit struct {
	name      string
	text      string
	line, col int
	want      string
}

func overLimits() []overLimit {
	deep := func(open, close string, n int) string {
		return condHead + strings.Repeat(open, n) + "true" + strings.Repeat(close, n) + " };"
	}
	// when { is one level: the 32nd bracket inside it is the 33rd.
	col := len(condHead) + 31*1 + 1
	return []overLimit{
		{"parentheses", deep("(", ")", 40), 1, col, "`(`, `[`, `{` and `if` are nested more than 32 deep here; at most 32 levels are allowed"},
		{"parentheses never closed", condHead + strings.Repeat("(", 250_000), 1, col, "nested more than 32 deep"},
		{"sets", deep("[", "]", 40), 1, col, "nested more than 32 deep"},
		{"records", deep("{a:", "}", 40), 1, len(condHead) + 31*3 + 1, "nested more than 32 deep"},
		{"ifs", condHead + strings.Repeat("if true then true else ", 40) + "true };", 1, len(condHead) + 31*23 + 1, "nested more than 32 deep"},
		{"else-if chain on many lines", condHead + "\n" + strings.Repeat("  if context.tool == \"x\" then false else\n", 40) + "  true };", 33, 3, "nested more than 32 deep"},
		{"function calls", deep("ip(", ")", 40), 1, len(condHead) + 31*3 + 3, "nested more than 32 deep"},
		{"methods", condHead + "[1]" + strings.Repeat(".contains(", 40) + "1" + strings.Repeat(")", 40) + " };", 1, len(condHead) + 3 + 31*10 + 10, "nested more than 32 deep"},
		{"negations", condHead + strings.Repeat("!", 2000) + "true };", 1, len(condHead) + 1025, "more than 1024 operators"},
		{"minus signs", condHead + strings.Repeat("- ", 2000) + "1 == 1 };", 1, len(condHead) + 2*1024 + 1, "more than 1024 operators"},
		{"&& chain", condHead + "true" + strings.Repeat(" && true", 2000) + " };", 1, len(condHead) + 4 + 1024*8 + 2, "more than 1024 operators"},
		{"|| chain", condHead + "false" + strings.Repeat("||false", 2000) + " };", 1, len(condHead) + 5 + 1024*7 + 1, "more than 1024 operators"},
		{"+ chain", condHead + "1" + strings.Repeat("+1", 2000) + " == 0 };", 1, len(condHead) + 1 + 1024*2 + 1, "more than 1024 operators"},
		{"attribute chain", condHead + "context" + strings.Repeat(".a", 2000) + " == 1 };", 1, len(condHead) + 7 + 1024*2 + 1, "more than 1024 operators"},
		{"conditions", "permit (principal, action, resource)" + strings.Repeat(" when { true }", 2000) + ";", 1, 0, "more than 1024 operators"},
		{"operators through brackets", condHead + strings.Repeat(strings.Repeat("!", 100)+"(", 20) + "true" + strings.Repeat(")", 20) + " };", 0, 0, "more than 1024 operators"},
		{"has path", condHead + "context has " + strings.Repeat("a.", 20) + "a };", 1, len(condHead) + 12 + 16*2 + 1, "`has` is followed by more than 16 attribute names joined by `.`; at most 16 are allowed"},
		{"entity type path", "permit (principal is " + strings.Repeat("A::", 20) + "A, action, resource);", 1, 22 + 16*3 - 2, "more than 16 names are joined by `::` here; at most 16 are allowed"},
		{"entity path", condHead + strings.Repeat("A::", 20) + "\"x\" == principal };", 1, len(condHead) + 16*3 - 1, "more than 16 names are joined by `::`"},
		{"like pattern", condHead + "context.tool like \"" + strings.Repeat("a", 1100) + "\" };", 1, len(condHead) + 19, "the `like` pattern is 1102 characters long; at most 1024 are allowed"},
		{"size", "// " + strings.Repeat("x", MaxPolicyBytes), 0, 0, "the text is 262,147 bytes long; policies may be at most 262,144 bytes (256 KiB) in all"},
	}
}

// Every construct that makes cedar-go recurse or grow faster than its
// text is refused over its limit before cedar-go sees it, with the line
// and column where the limit is crossed and the limit in words.
func TestPolicyLimitsRefuse(t *testing.T) {
	for _, tt := range overLimits() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicies(tt.text)
			var pe *PolicyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPolicyLimit) {
				t.Fatalf("ParsePolicies = %v, want a *PolicyError that is ErrPolicyLimit", err)
			}
			if tt.line != 0 && (pe.Line != tt.line || (tt.col != 0 && pe.Column != tt.col)) {
				t.Errorf("at line %d, column %d, want %d, %d (%v)", pe.Line, pe.Column, tt.line, tt.col, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Error() = %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "access:") {
				t.Errorf("Error() = %q carries the package prefix", err)
			}
		})
	}
}

// atLimits are texts right at each limit, which parse: the limits refuse
// only what goes past them.
func atLimits() map[string]string {
	deep := func(open, close string, n int) string {
		return condHead + strings.Repeat(open, n) + "true" + strings.Repeat(close, n) + " };"
	}
	alternatives := make([]string, 300)
	for i := range alternatives {
		alternatives[i] = fmt.Sprintf("context.tool == \"tool_%d\"", i)
	}
	return map[string]string{
		"32 levels":                    deep("(", ")", MaxPolicyNesting-1),
		"32 levels of sets":            condHead + strings.Repeat("[", MaxPolicyNesting-1) + strings.Repeat("]", MaxPolicyNesting-1) + ".isEmpty() };",
		"1020 negations":               condHead + strings.Repeat("!", MaxPolicyDepth-4) + "true };",
		"300 alternatives":             condHead + strings.Join(alternatives, " || ") + " };",
		"16 attribute names after has": condHead + "context has " + strings.Repeat("a.", MaxPolicyHasPath-1) + "a };",
		"16 names joined by ::":        "permit (principal is " + strings.Repeat("A::", MaxPolicyNamePath-1) + "A, action, resource);",
		"a like pattern of 1024":       condHead + "context.tool like \"" + strings.Repeat("*", MaxPolicyPattern-2) + "\" };",
		"256 KiB":                      DefaultPolicyText + "\n// " + strings.Repeat("x", MaxPolicyBytes-len(DefaultPolicyText)-4),
		// Brackets, `if` and operators in strings and comments are text,
		// not tokens.
		"brackets in strings and comments": condHead + `context.tool == "` + strings.Repeat("((([[[{{{if !!!&&||.", 300) + `"` +
			" // " + strings.Repeat("((([[[{{{if !!!&&||.", 300) + "\n" +
			" /* " + strings.Repeat("((([[[{{{if !!!&&||.\n", 300) + " */ };",
		"escaped quotes": condHead + `context.tool == "\"(((\\" && // ((((` + "\n" + strings.Repeat("(", 31) + "true" + strings.Repeat(")", 31) + " };",
	}
}

func TestPolicyLimitsAllowWhatIsWithin(t *testing.T) {
	for name, text := range atLimits() {
		t.Run(name, func(t *testing.T) {
			if _, err := ParsePolicies(text); err != nil {
				t.Errorf("ParsePolicies: %v", err)
			}
		})
	}
}

// memoryOf returns what parsing text and deciding one call with the
// result allocate, and how far they grow the stack of the goroutine that
// runs them, with the garbage collector off so that nothing allocated is
// given back in between: their sum bounds the memory they need at their
// peak, over what was in use before.
func memoryOf(text string) (heap, stack uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	done := make(chan struct{})
	go func() {
		defer close(done)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if p, err := ParsePolicies(text); err == nil {
			p.Decide(sampleInvoke)
		}
		runtime.ReadMemStats(&after)
		heap = after.TotalAlloc - before.TotalAlloc
		// Stacks are the process's: another goroutine's may have ended.
		stack = after.StackInuse - min(before.StackInuse, after.StackInuse)
	}()
	<-done
	return heap, stack
}

// sampleInvoke is a complete call to decide.
var sampleInvoke = Invoke{
	Principal: Principal{TenantID: "tenant-1", UserID: "user-1", Groups: []string{"group-1"}, Permissions: []string{PermRun}},
	AgentID:   "default", AgentTenantID: "tenant-1", Server: "crm", Tool: "lookup", Caller: CallerView, ViewID: "view-1",
}

// What the worst text the limits allow may cost at its peak: measured at
// 109 MiB allocated (a 256 KiB set of records) and 2 MiB of stack, on
// Go 1.26 with cedar-go v1.9.2. Before the limits, 250,000 nested `(`
// took over 1 GB and a few million ended the process.
const (
	parseHeapCeiling  = 160 << 20
	parseStackCeiling = 8 << 20
	// refusedCeiling is what refusing a text over a limit may cost: the
	// limits are checked by reading the text once, keeping only the
	// open brackets.
	refusedCeiling = 1 << 20
)

// The worst texts the limits still allow: the deepest tree (every level
// of brackets full of operators), and 256 KiB of each construct that costs
// the most memory for its length.
func worstAllowed() map[string]string {
	fill := func(head, unit, sep, tail string) string {
		var b strings.Builder
		b.WriteString(head)
		for i := 0; ; i++ {
			u := strings.ReplaceAll(unit, "#", fmt.Sprint(i))
			if b.Len()+len(sep)+len(u)+len(tail) > MaxPolicyBytes {
				break
			}
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(u)
		}
		b.WriteString(tail)
		return b.String()
	}
	deepest := condHead + strings.Repeat(strings.Repeat("!", 30)+"(", MaxPolicyNesting-1) + "true" + strings.Repeat(")", MaxPolicyNesting-1) + " };"
	return map[string]string{
		"deepest tree":           deepest,
		"deepest trees":          fill("", deepest, "\n", ""),
		"a set of numbers":       fill(condHead+"[", "1", ",", "].isEmpty() };"),
		"a set of empty sets":    fill(condHead+"[", "[]", ",", "].isEmpty() };"),
		"a set of records":       fill(condHead+"[", "{}", ",", "].isEmpty() };"),
		"a record":               fill(condHead+"{", "a#:1", ",", "} == {} };"),
		"negations":              fill(condHead+"[", strings.Repeat("!", 1000)+"true", ",", "].isEmpty() };"),
		"has paths":              fill("", condHead+"context has "+strings.Repeat("a.", MaxPolicyHasPath-1)+"a };", "\n", ""),
		"name paths":             fill("", condHead+strings.Repeat("A::", MaxPolicyNamePath-1)+"\"x\" == principal };", "\n", ""),
		"patterns":               fill(condHead+"[", `"`+strings.Repeat("a", 2000)+`" like "*`+strings.Repeat("a", MaxPolicyPattern-4)+`b"`, ",", "].isEmpty() };"),
		"policies":               fill("", "permit(principal,action,resource);", "\n", ""),
		"the same after a fault": fill(condHead+"[", "[]", ",", "].isEmpty() } ; oops"),
	}
}

// The memory a parse needs at its peak stays under a ceiling for the
// worst texts the limits allow, and refusing a text over a limit costs
// next to nothing, however deep it is.
func TestParsePoliciesMemoryCeiling(t *testing.T) {
	for name, text := range worstAllowed() {
		if len(text) > MaxPolicyBytes {
			t.Fatalf("%s: %d bytes, over the limit", name, len(text))
		}
		heap, stack := memoryOf(text)
		t.Logf("%-24s %7d bytes: %4d MiB allocated, stack grown %2d MiB", name, len(text), heap>>20, stack>>20)
		if heap > parseHeapCeiling || stack > parseStackCeiling {
			t.Errorf("%s: %d MiB allocated and the stack grown by %d MiB, want at most %d and %d",
				name, heap>>20, stack>>20, parseHeapCeiling>>20, parseStackCeiling>>20)
		}
	}
	for _, tt := range overLimits() {
		heap, stack := memoryOf(tt.text)
		if heap+stack > refusedCeiling {
			t.Errorf("refusing %s (%d bytes) cost %d KiB allocated and %d KiB of stack, want at most %d KiB in all",
				tt.name, len(tt.text), heap>>10, stack>>10, refusedCeiling>>10)
		}
	}
}
