package cards

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestWordsLiveInWords keeps every word a person reads in Teams in
// words.go. It parses the Go files of cards and bot (tests aside) and fails
// on a string literal outside words.go that reads as words for a person,
// by either of two rules:
//
//   - Words: a letter next to a space, or with only punctuation between,
//     once format verbs are taken out. It catches text("Answered below."),
//     out.Text = "Working on it…", fmt.Sprintf("Calling %s on %s…", tool,
//     server), "View: " + title and subtle("Only "); it lets "%w: %w",
//     " (", "• ", "Action.OpenUrl" and `json:"fallbackText"` pass.
//   - Text: a literal with a letter that goes straight (alone or joined
//     with +) into a card helper (text, heading, run, bold, subtle,
//     subtleText, boldText, newCard, label, plural) or into a Text,
//     Title, Summary, FallbackText or Abstract field. It catches the lone
//     words the first rule cannot: subtle("Open"), Title: "Open".
//
// Words for operators pass, told apart by where they go rather than by
// what they say: see operatorCall, operatorName and operatorFunc. What
// neither rule sees is a lone word that reaches a person through a
// variable (name = "Assistant"); words.go is where those belong too.
func TestWordsLiveInWords(t *testing.T) {
	fset := token.NewFileSet()
	var files int
	for _, dir := range []string{".", "../bot"} {
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") || (dir == "." && filepath.Base(path) == "words.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, w := range teamsWords(f) {
				t.Errorf("%s: %s %q: words for a person belong in cards/words.go", fset.Position(w.pos), w.rule, w.text)
			}
		}
	}
	if files < 10 {
		t.Fatalf("read %d files of cards and bot; the test no longer finds them", files)
	}
}

// TestWordsRule shows what TestWordsLiveInWords catches and what it lets
// pass, so that a change to the rule that blinds it fails here.
func TestWordsRule(t *testing.T) {
	tests := []struct {
		code string
		want []string // the literals caught, in order
	}{
		{`text("Answered below.")`, []string{"Answered below."}},
		{`out.Text = "Working on it…"`, []string{"Working on it…"}},
		{`p.text = fmt.Sprintf("Calling %s on %s…", tool, server)`, []string{"Calling %s on %s…"}},
		{`out.text = "Sources: " + strings.Join(refs, " ")`, []string{"Sources: "}},
		{`rich(subtle("Only "), run(owner))`, []string{"Only "}},
		{`buttons(openURL{Type: "Action.OpenUrl", Title: "Open"})`, []string{"Open"}},
		{`subtle("Open")`, []string{"Open"}},
		{`m := map[string]any{"value": "Nothing to do here."}`, []string{"Nothing to do here."}},
		{`b.logger.Warn("card not sent", "conversation", id)`, nil},
		{`s.b.logger.Info("turn done", "status", "answered")`, nil},
		{`return fmt.Errorf("%w: no conversation id", ErrBadActivity)`, nil},
		{`err := errors.New("bot: no store configured")`, nil},
		{`return web.NewError(413, fmt.Sprintf("activity larger than %d bytes", n))`, nil},
		{`b.refuse(authErr(ReasonMissingToken, "no Authorization header"), req)`, nil},
		{`req.Header.Set("Authorization", "Bearer "+tok)`, nil},
		{`panic("cards: marshal card: " + err.Error())`, nil},
		{"re := regexp.MustCompile(`(?m)^[ \\t]*(?:[-*+])[ \\t]+`)", nil},
		{`f := func() string { return "a sentence in a closure" }`, []string{"a sentence in a closure"}},
		{`func (e *AuthError) Error() string { return "bot: unauthorized: " + e.Reason }`, nil},
		{`func fromBrowserPage() string { return "the request comes from a web page" }`, nil},
		{`func viewFallback() string { return "View: " + title }`, []string{"View: "}},
		{`o := prometheus.CounterOpts{Name: "turns_total", Help: "Message turns by outcome."}`, nil},
		{`turns := d.CounterVec("turns_total", "Message turns by outcome.", "outcome")`, nil},
		{`r := &refusal{reason: RefusedTenant, detail: "tenant " + id + " is not served"}`, nil},
		{`reason := "The app was removed from this conversation."`, nil},
		{`box("accent", rich(bold(triggeredRun), run(p.trigger)))`, nil},
		{`s = fmt.Sprintf("%w: %w", a, b) + " (" + x + ")" + "• "`, nil},
		{`ctx, span := b.tracer.Start(ctx, "triggered run")`, nil},
		{`telemetry.Fail(span, "turn", "the turn failed")`, nil},
	}
	for _, tt := range tests {
		src := "package p\nfunc f() {\n" + tt.code + "\n}\n"
		if strings.HasPrefix(tt.code, "func ") {
			src = "package p\n" + tt.code + "\n"
		}
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", tt.code, err)
		}
		var got []string
		for _, w := range teamsWords(f) {
			got = append(got, w.text)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: caught %q, want %q", tt.code, got, tt.want)
		}
	}

	// Struct tags are never words.
	src := "package p\ntype T struct {\n\tA string `json:\"a,omitempty\" xml:\"a b\"`\n}\n"
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	if got := teamsWords(f); len(got) > 0 {
		t.Errorf("struct tag: caught %v, want nothing", got)
	}
}

// operatorCall says where the words in a call of fun go when they are for
// operators, not for a person in Teams; it is "" otherwise. It matches the
// function's name, the last two parts of a method call, or a receiver
// with any method.
func operatorCall(fun ast.Expr) string {
	name := dotted(fun)
	parts := strings.Split(name, ".")
	last2, recv := "", ""
	if n := len(parts); n >= 2 {
		last2, recv = parts[n-2]+"."+parts[n-1], parts[n-2]
	}
	switch {
	case last2 == "fmt.Errorf", last2 == "errors.New":
		return "an error"
	case name == "panic":
		return "a programming error"
	case name == "authErr":
		return "why an inbound request was refused, logged and counted"
	case last2 == "web.NewError":
		return "the HTTP answer to the Bot Connector"
	case recv == "logger":
		return "a log line"
	case last2 == "Header.Set":
		return "an HTTP header"
	case last2 == "regexp.MustCompile":
		return "a pattern"
	case last2 == "telemetry.Fail":
		return "a failed span's status, in operators' traces"
	case recv == "tracer" && parts[len(parts)-1] == "Start":
		return "a span's name, in operators' traces"
	}
	switch parts[len(parts)-1] {
	case "Counter", "CounterVec", "Gauge", "Histogram":
		return "a metric's name and help text (internal/prom)"
	}
	return ""
}

// operatorName says where the words given to a field or variable of this
// name go when they are for operators; it is "" otherwise.
func operatorName(name string) string {
	switch name {
	case "Help":
		return "a metric's help text"
	case "detail":
		return "a refusal's detail, logged and audited"
	case "reason":
		return "a paused trigger's reason, shown in the admin console"
	case "auditWhy":
		return "why something was done, in its audit record"
	}
	return ""
}

// operatorFunc says where the words of a function of this name go when
// they are all for operators; it is "" otherwise.
func operatorFunc(name string) string {
	switch name {
	case "Error":
		return "an error's text"
	case "fromBrowserPage":
		return "why local mode refused a request, logged"
	}
	return ""
}

// cardHelper reports whether a function of cards takes text for a card.
func cardHelper(name string) bool {
	switch name {
	case "text", "heading", "run", "bold", "subtle", "subtleText", "boldText", "newCard", "label", "plural":
		return true
	}
	return false
}

// textField reports whether a field (or variable) of this name holds
// text that a person reads.
func textField(name string) bool {
	switch strings.ToLower(name) {
	case "text", "title", "summary", "fallbacktext", "abstract":
		return true
	}
	return false
}

// word is a literal caught by a rule.
type word struct {
	pos  token.Pos
	rule string // "words" or "text"
	text string
}

// teamsWords returns the string literals of f that read as words for a
// person, in the order they appear.
func teamsWords(f *ast.File) []word {
	// A fmt verb with its flags, width and precision, and words: a letter
	// next to a space, or with only punctuation between.
	formatVerb := regexp.MustCompile(`%[-+# 0]*(?:\[\d+\])?[0-9*]*(?:\.[0-9*]*)?[a-zA-Z%]`)
	wordsLike := regexp.MustCompile(`\pL[\pP\pS]*\s|\s[\pP\pS]*\pL`)
	var found []word
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return false
		}
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && !isTag(lit, stack) {
			s, err := strconv.Unquote(lit.Value)
			switch {
			case err != nil, forOperators(lit, stack):
			case wordsLike.MatchString(formatVerb.ReplaceAllString(s, "")):
				found = append(found, word{lit.Pos(), "words", s})
			case strings.ContainsFunc(s, unicode.IsLetter) && intoText(lit, stack):
				found = append(found, word{lit.Pos(), "text", s})
			}
		}
		stack = append(stack, n)
		return true
	})
	return found
}

// isTag reports whether lit is a struct field's tag (or an import's path,
// which holds no words either).
func isTag(lit *ast.BasicLit, stack []ast.Node) bool {
	switch p := stack[len(stack)-1].(type) {
	case *ast.Field:
		return p.Tag == lit
	case *ast.ImportSpec:
		return true
	}
	return false
}

// forOperators reports whether the literal lit, with its ancestors stack
// (the nearest last), goes to operators rather than to a person.
func forOperators(lit ast.Node, stack []ast.Node) bool {
	child := lit
	for i := len(stack) - 1; i >= 0; i-- {
		switch n := stack[i].(type) {
		case *ast.CallExpr:
			if operatorCall(n.Fun) != "" {
				return true
			}
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && n.Value == child && operatorName(k.Name) != "" {
				return true
			}
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && operatorName(id.Name) != "" {
					return true
				}
			}
		case *ast.FuncDecl:
			return operatorFunc(n.Name.Name) != ""
		case *ast.FuncLit:
			return false
		}
		child = stack[i]
	}
	return false
}

// dotted writes a name or a chain of selectors (b.logger.Warn); anything
// else gives "".
func dotted(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return dotted(x.X) + "." + x.Sel.Name
	}
	return ""
}

// intoText reports whether lit goes straight, alone or joined with +, into
// a card helper's argument or a text field.
func intoText(lit ast.Node, stack []ast.Node) bool {
	child := lit
	for i := len(stack) - 1; i >= 0; i-- {
		switch n := stack[i].(type) {
		case *ast.BinaryExpr:
			if n.Op != token.ADD {
				return false
			}
		case *ast.ParenExpr:
		case *ast.CallExpr:
			id, ok := n.Fun.(*ast.Ident)
			return ok && cardHelper(id.Name) && slices.Contains(n.Args, child.(ast.Expr))
		case *ast.KeyValueExpr:
			k, ok := n.Key.(*ast.Ident)
			return ok && n.Value == child && textField(k.Name)
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok && textField(sel.Sel.Name) {
					return true
				}
			}
			return false
		default:
			return false
		}
		child = stack[i]
	}
	return false
}

// TestBotWords pins the words the bot sends outside a card, which no
// golden card holds: moving them here changed none of them.
func TestBotWords(t *testing.T) {
	tests := []struct{ got, want string }{
		{WorkingOnIt, "Working on it…"},
		{StreamWorkingOn("Show the sales"), "Working on: Show the sales…"},
		{StreamCalling("sales_report", "demo"), "Calling sales_report on demo…"},
		{StreamTakingAWhile, "This is taking a while: the answer will follow as a new message."},
		{CitationName("sales_report", "demo"), "sales_report on demo"},
		{CitationAbstract("sales_report", "demo"), "The result of the tool sales_report of the MCP server demo, which the answer relies on."},
		{CitationAbstractView("sales_report", "demo"), "The result of sales_report on demo; its view opens from this link."},
		{SourcesLine(0), ""},
		{SourcesLine(1), "Sources: [1]"},
		{SourcesLine(3), "Sources: [1] [2] [3]"},
		{CardActionReply, "Nothing to do here: open a view with its Open button, or write to me."},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
