package cards

import (
	"regexp"
	"strings"
	"teamsbot/internal/netaddr"
	"time"
)

// Answer is what the agent answered for one run, as the cards need it. The
// bot fills it from agent.Answer: the field names and types of Refusal and
// ToolError match the agent's, so a plain conversion copies them.
type Answer struct {
	// Text is the model's answer, markdown.
	Text string
	// Views are the views the run made, in the order they were made.
	Views []View
	// Refusals are views that were not made.
	Refusals []Refusal
	// ToolErrors are tool calls that failed.
	ToolErrors []ToolError
	// Notes are the run notes, such as tools not offered to the model.
	Notes []string
	// Trigger, when set, is what started a run that had no person: the
	// first card says so, and who may open the run's views.
	Trigger *Trigger
}

// Trigger names what started a run without a person.
type Trigger struct {
	// Name is the trigger's name, as the tenant admin gave it: a
	// schedule's, or an API key's for a run started through the API.
	Name string
	// Scheduled is true for a schedule, false for an API key.
	Scheduled bool
}

// View is a view as its block on a card names it. The bot fills it from the
// stored view record; cards needs nothing else of it.
type View struct {
	// ID is the view's id, the last segment of its page's address.
	ID string
	// Title is the tool's title, Tool its name and Server the MCP server
	// it came from.
	Title, Tool, Server string
	// ExpiresAt is when the view can no longer be opened; a view past it
	// gets no Open button. Zero: the card names no time.
	ExpiresAt time.Time
}

// Refusal is a view that was not made, and why.
type Refusal struct {
	// Server, Tool and ResourceURI name the view that was refused.
	Server, Tool, ResourceURI string
	// Reason is one of mcpapps.RefusedError's reasons: scheme, mime, size,
	// content, read.
	Reason string
	// Ref is the reference of the checker's detail, which operators find in
	// the log and the run record; the card shows it small. The detail
	// itself (it may quote the server) never reaches a card.
	Ref string
}

// ToolError is a tool call that failed.
type ToolError struct {
	// Server and Tool name the call; Message is what it failed with, in
	// words a person may read (the tool's own error text, or the agent's
	// words and a reference).
	Server, Tool, Message string
}

// Options are what the cards need to know about the service and the moment.
type Options struct {
	// PublicBaseURL is where people reach the service
	// (TICKETIQ_PUBLIC_BASE_URL). Open buttons appear only when it is an
	// https:// address; see ViewURL.
	PublicBaseURL netaddr.Origin
	// Now, when set, marks views that have already expired: they get no
	// Open button.
	Now time.Time
	// Location is the time zone of times written out in fallback text and
	// summaries (the person's, from Teams' localTimezone); nil means UTC.
	// Inside the card, times are Adaptive Card DATE()/TIME() functions,
	// which Teams shows in the reader's own zone and locale.
	Location *time.Location
	// Locale is the person's locale as Teams sends it ("en-US", "de-DE"),
	// for the order of written-out dates; the words stay English.
	Locale string
	// Shared says the answer goes to a group chat or a channel, where
	// others read it: each view's block then says who may open it.
	Shared bool
	// Owner is the display name of the person the run was for, whom a
	// shared answer names as the one who may open its views; empty says
	// "the person who asked".
	Owner string
	// MaxSize, when set and smaller than MaxCardSize, is the most one card
	// of AnswerCards may take (UTF-16 code units of its JSON): the bot
	// asks for smaller cards when Teams refused a message as too large.
	MaxSize int
	// AgentName is the name the welcome card introduces; empty means
	// "Assistant".
	AgentName string
	// StageView opens views inside Teams (TICKETIQ_TEAMS_TAB): a view's
	// Open button becomes the Stage View action of Microsoft's "Open
	// content in Stageview" (an Action.Submit whose msteams invoke is
	// tab/tabInfoAction), and a second button, an Action.OpenUrl, opens
	// the same page in the browser for the clients that show no Stage
	// View.
	StageView bool
	// Local is the local development service (the playground): its
	// person's browser is on the same machine, so a Connect button may
	// lead to a loopback http address, where Teams could open none.
	// Views' Open buttons stay https only.
	Local bool
}

// maxOpenTitle bounds an Open button's title: Teams shows a button's title
// on one line and cuts what does not fit.
const maxOpenTitle = 40

// notesID is the id of the hidden container of run notes.
const notesID = "runNotes"

// While a card is made to fit, this many run notes and bytes of answer text
// are kept as long as anything else can still give way.
const (
	keptNotes  = 5
	keptText   = 500
	keptIssues = 5
)

// listMarker is a markdown list item's marker, left out of summaries.
var listMarker = regexp.MustCompile(`(?m)^[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+`)

// viewInfo is a view reduced to what its block shows, every string already
// made safe.
type viewInfo struct {
	title, server, tool string // tool is empty when it equals the title
	url                 string // empty: no Open button
	id                  string // the view's id
	expires             time.Time
	expired             bool
}

// prepared is an answer made safe once, from which cards of any size are
// built while searching for one that fits.
type prepared struct {
	o          Options
	loc        *time.Location
	trigger    string // the trigger banner's text; empty: a person's run
	text       string // neutralised markdown, possibly already cut
	textCut    bool
	gist       string // the text on one line, for the summary
	views      []viewInfo
	refusals   []issue
	toolErrors []issue
	notes      []string // made safe, at most maxNote runes
	base       bool     // PublicBaseURL allows buttons
}

// issue is a refusal or a tool error made safe: names, and a message of at
// most maxMessage runes (a refusal's reference, a tool error's message).
type issue struct {
	name, server, reason, message string
}

// shape says how much of a prepared answer one card shows.
type shape struct {
	textBytes  int // bytes of text kept; len(text) keeps it all
	noteCap    int // runes per note
	notes      int // notes shown
	issueCap   int // runes per refusal detail or error message
	issues     int // refusals and tool errors shown, each list
	first      bool
	views      []viewInfo
	viewFrom   int // index of views[0] among all views (continuation cards)
	moreViews  int // views in later cards
	totalViews int
}

// AnswerCards renders an answer as Adaptive Cards, to be sent in order, one
// per message. It is one card unless the views cannot all fit in one
// message: then every view still gets its block and its button, and the
// views that do not fit follow in continuation cards.
//
// Each card stays within MaxCardSize. To get there, run notes are shortened
// and folded first, then the answer text is shortened (to no less than half
// a card), then refusal details and error messages; only then do views move
// to the next message, and the text gives up the rest. Whatever was cut says
// "…(shortened)". A view's block is never dropped.
func AnswerCards(a Answer, o Options) []Card {
	p := prepare(a, o)
	all := shape{
		textBytes: len(p.text), noteCap: maxNote, notes: len(p.notes),
		issueCap: maxMessage, issues: max(len(p.refusals), len(p.toolErrors)),
		first: true, views: p.views, totalViews: len(p.views),
	}
	limit := MaxCardSize
	if o.MaxSize > 0 && o.MaxSize < limit {
		limit = o.MaxSize
	}
	fits := func(s shape) bool { return p.card(s).Size() <= limit }
	if fits(all) {
		return []Card{p.card(all)}
	}
	s := all
	// Each step gives up a little more, least useful first, until the card
	// fits. A floor keeps part of something while later steps still can
	// give way.
	shrink := func(get func(*shape) *int, floor int) func() {
		return func() {
			f := min(floor, *get(&s))
			*get(&s) = max(f, largest(f, *get(&s), func(n int) bool { t := s; *get(&t) = n; return fits(t) }))
		}
	}
	notes := func(s *shape) *int { return &s.notes }
	textBytes := func(s *shape) *int { return &s.textBytes }
	issues := func(s *shape) *int { return &s.issues }
	steps := []func(){
		func() { s.noteCap = 120 },
		shrink(notes, keptNotes),
		shrink(textBytes, limit/2),
		shrink(notes, 0),
		func() { s.issueCap = 100 },
		shrink(issues, keptIssues),
		// Views that do not fit move to the next message; the answer text
		// keeps its room.
		func() {
			k := max(0, largest(0, len(p.views), func(n int) bool { t := s; t.views, t.moreViews = p.views[:n], len(p.views)-n; return fits(t) }))
			s.views, s.moreViews = p.views[:k], len(p.views)-k
		},
		shrink(textBytes, keptText),
		shrink(issues, 0),
		shrink(textBytes, 0),
	}
	for _, step := range steps {
		step()
		if fits(s) {
			break
		}
	}
	out := []Card{p.card(s)}
	// The views that did not fit follow, as many per card as fit, at least
	// one: a block's size is bounded by the caps on its names.
	for from := len(s.views); from < len(p.views); {
		c := shape{viewFrom: from, totalViews: len(p.views)}
		k := largest(1, len(p.views)-from, func(n int) bool {
			t := c
			t.views, t.moreViews = p.views[from:from+n], len(p.views)-from-n
			return fits(t)
		})
		k = max(k, 1)
		c.views, c.moreViews = p.views[from:from+k], len(p.views)-from-k
		out = append(out, p.card(c))
		from += k
	}
	return out
}

// largest returns the largest n in [lo, hi] for which ok(n) holds, given
// that ok is true up to some n and false after it, or lo-1 if none.
func largest(lo, hi int, ok func(int) bool) int {
	if hi < lo || !ok(lo) {
		return lo - 1
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// prepare makes everything in the answer safe once.
func prepare(a Answer, o Options) *prepared {
	p := &prepared{o: o, loc: o.Location}
	if p.loc == nil {
		p.loc = time.UTC
	}
	p.base = o.PublicBaseURL.HTTPS()
	// Text longer than this can never fit: every three bytes of UTF-8 take
	// at least one UTF-16 code unit of JSON. Cutting first bounds the work.
	raw := a.Text
	if len(raw) > 3*MaxCardSize {
		raw, p.textCut = cutBytes(raw, 3*MaxCardSize), true
	}
	p.text = answerMarkdown(raw)
	// The summary needs only the start of the text.
	start := cutBytes(p.text, 8*maxSummary)
	p.gist = oneLine(strings.NewReplacer("**", "", "__", "", "`", "").Replace(listMarker.ReplaceAllString(start, "")), maxSummary)
	if len(start) < len(p.text) && !strings.HasSuffix(p.gist, "…") {
		p.gist += "…"
	}
	if a.Trigger != nil {
		name := label(a.Trigger.Name, maxName)
		if name == "" {
			name = unnamed
		}
		p.trigger = triggerLine(name, a.Trigger.Scheduled)
	}
	for _, n := range a.Notes {
		if n = label(n, maxNote); n != "" {
			p.notes = append(p.notes, n)
		}
	}
	for _, r := range a.Refusals {
		p.refusals = append(p.refusals, issue{
			name: label(r.Tool, maxName), server: label(r.Server, maxName),
			reason: refusalReason(r.Reason), message: label(r.Ref, maxName),
		})
	}
	for _, e := range a.ToolErrors {
		p.toolErrors = append(p.toolErrors, issue{
			name: label(e.Tool, maxName), server: label(e.Server, maxName), message: label(e.Message, maxMessage),
		})
	}
	for _, v := range a.Views {
		vi := viewInfo{
			id:      v.ID,
			title:   label(v.Title, maxTitle),
			server:  label(v.Server, maxName),
			tool:    label(v.Tool, maxName),
			expires: v.ExpiresAt,
		}
		switch {
		case vi.title == "" && vi.tool == "":
			vi.title = untitledView
		case vi.title == "":
			vi.title, vi.tool = vi.tool, ""
		case vi.title == vi.tool:
			vi.tool = ""
		}
		if vi.server == "" {
			vi.server = unnamed
		}
		vi.expired = !o.Now.IsZero() && !vi.expires.IsZero() && !o.Now.Before(vi.expires)
		if u, ok := ViewURL(o.PublicBaseURL, v.ID); ok && !vi.expired {
			vi.url = u
		}
		p.views = append(p.views, vi)
	}
	return p
}

// card builds one card of the given shape.
func (p *prepared) card(s shape) Card {
	var fallback []string
	var els []element
	if s.first && p.trigger != "" {
		els = append(els, box("accent", rich(bold(triggeredRun), run(p.trigger))))
		fallback = append(fallback, triggeredRun+p.trigger)
	}
	if s.first {
		t := p.shownText(s.textBytes)
		els = append(els, text(t))
		fallback = append(fallback, capRunes(t, maxFallback))
	} else {
		first, last := s.viewFrom+1, s.viewFrom+len(s.views)
		els = append(els, heading(moreViewsHeading))
		els = append(els, subtleText(moreViewsRange(first, last, s.totalViews)))
		fallback = append(fallback, moreViewsPlain(first, last, s.totalViews))
	}
	for _, v := range s.views {
		els = append(els, p.viewBlock(v))
		fallback = append(fallback, p.viewFallback(v))
	}
	if s.moreViews > 0 {
		els = append(els, subtleText(moreViewsFollow(s.moreViews)))
		fallback = append(fallback, moreViewsFollowPlain(s.moreViews))
	}
	if s.first {
		if b, ok := p.refusalBlock(s); ok {
			els = append(els, b)
			fallback = append(fallback, refusalsPlain(len(p.refusals)))
		}
		if b, ok := p.toolErrorBlock(s); ok {
			els = append(els, b)
			fallback = append(fallback, toolErrorsPlain(len(p.toolErrors)))
		}
		els = append(els, p.notesBlock(s)...)
	}
	return newCard(p.summary(s), strings.Join(fallback, "\n"), els...)
}

// shownText is the answer text cut to n bytes, marked when cut.
func (p *prepared) shownText(n int) string {
	t, cut := p.text, p.textCut
	if n < len(t) {
		t, cut = cutBytes(t, n), true
	}
	if strings.TrimSpace(t) == "" && !cut {
		return noWrittenAnswer
	}
	if cut {
		// A cut just after a list marker would leave an empty item.
		t = strings.TrimRight(t, " \n\t")
		if i := strings.LastIndexByte(t, '\n'); i >= 0 && bareListMarker.MatchString(t[i+1:]) {
			t = strings.TrimRight(t[:i], " \n\t")
		}
		t += "\n\n" + Shortened
	}
	return t
}

// bareListMarker is a list item's marker with nothing after it.
var bareListMarker = regexp.MustCompile(`^\s*(?:[-*+]|\d{1,9}[.)])$`)

// summary is the notification line of a card.
func (p *prepared) summary(s shape) string {
	if !s.first {
		return moreViewsSummary(s.viewFrom+1, s.viewFrom+len(s.views), s.totalViews)
	}
	t := p.gist
	switch {
	case t == "" && len(p.views) == 0:
		return answeredNothing
	case t == "":
		return answeredViews(len(p.views))
	}
	return t
}

// viewBlock is the block that names a view and opens it.
func (p *prepared) viewBlock(v viewInfo) container {
	where := []textRun{subtle(interactiveViewFrom), run(v.server)}
	if v.tool != "" {
		where = append(where, subtle(viewTool), run(v.tool))
	}
	items := []element{rich(bold(v.title)), rich(where...)}
	if !v.expires.IsZero() {
		when := cardTime(v.expires)
		if v.expired {
			items = append(items, subtleText(viewExpired(when)))
		} else {
			items = append(items, subtleText(viewOpenUntil(when)))
		}
	}
	if p.o.Shared && !v.expired {
		// Others in the conversation see the button too; only the owner
		// gets past it.
		if owner := label(p.o.Owner, maxName); owner != "" {
			items = append(items, rich(subtle(onlyOwner), run(owner), subtle(ownerCanOpen)))
		} else {
			items = append(items, subtleText(onlyAskerCanOpen))
		}
	}
	switch {
	case v.url != "":
		// The title names the view, so that a screen reader does not read
		// "Open, Open, Open" for an answer with several. Teams shows no
		// positive or destructive button style, so none is set.
		open := openURL{Type: "Action.OpenUrl", Title: label(openViewTitle(v.title), maxOpenTitle), URL: v.url}
		if p.o.StageView {
			items = append(items, buttons(stageView(v, open),
				openURL{Type: "Action.OpenUrl", Title: label(openInBrowserTitle(v.title), maxOpenTitle), URL: v.url}))
			break
		}
		items = append(items, buttons(open))
	case !v.expired && p.base:
		// Only an id that cannot make a safe address ends here.
		items = append(items, subtleText(viewNoAddress))
	case !v.expired:
		items = append(items, subtleText(viewNeedsHTTPS))
	}
	b := box("emphasis", items...)
	b.Spacing = "Medium"
	return b
}

// viewFallback is a view in plain text.
func (p *prepared) viewFallback(v viewInfo) string {
	s := viewPlain(v.title, v.server)
	if !v.expires.IsZero() {
		at := formatTime(v.expires.In(p.loc), p.o.Locale)
		if v.expired {
			return s + viewPlainExpired(at)
		}
		s += viewPlainUntil(at)
	}
	switch {
	case v.url != "":
		return s + ": " + v.url
	case p.base:
		return s + viewPlainNoAddress
	}
	return s + viewPlainNeedsHTTPS
}

// refusalBlock lists the views that were not made.
func (p *prepared) refusalBlock(s shape) (container, bool) {
	head := boldText(refusalsHeading(len(p.refusals)))
	return issueBlock("warning", head, p.refusals, s.issues, unnamedRefusal, func(r issue) []textRun {
		runs := []textRun{run(refusalWhy(r.reason))}
		if r.message != "" {
			runs = append(runs, subtle(refusalRef(shorten(r.message, s.issueCap))))
		}
		return runs
	}, refusalsDontMatter)
}

// toolErrorBlock shows failed tool calls as errors.
func (p *prepared) toolErrorBlock(s shape) (container, bool) {
	head := boldText(toolErrorsHeading(len(p.toolErrors)))
	head.Color = "Attention"
	return issueBlock("attention", head, p.toolErrors, s.issues, unnamedToolError, func(e issue) []textRun {
		msg := shorten(e.message, s.issueCap)
		if msg == "" {
			msg = toolReturnedError
		}
		m := run(toolErrorWhy(msg))
		m.Color = "Attention"
		return []textRun{m}
	}, toolErrorsMatter)
}

// issueBlock is a box of the given style listing refusals or tool errors:
// the heading, one line per issue for the first shown (its name, or
// unnamed when it has none, its server, then what why adds), a count of
// the rest, and a closing line. It is false when there is nothing to list.
func issueBlock(style string, head textBlock, list []issue, shown int, unnamed string, why func(issue) []textRun, closing string) (container, bool) {
	if len(list) == 0 {
		return container{}, false
	}
	items := []element{head}
	for i, is := range list {
		if i >= shown {
			items = append(items, subtleText(issuesNotListed(len(list)-i)))
			break
		}
		name := is.name
		if name == "" {
			name = unnamed
		}
		runs := []textRun{bold(name)}
		if is.server != "" {
			runs = append(runs, run(issueFrom), run(is.server))
		}
		items = append(items, rich(append(runs, why(is)...)...))
	}
	items = append(items, subtleText(closing))
	b := box(style, items...)
	b.Spacing = "Medium"
	return b, true
}

// notesBlock is a button that shows the run notes, folded away by default
// because they are for the curious, not the answer.
func (p *prepared) notesBlock(s shape) []element {
	if len(p.notes) == 0 {
		return nil
	}
	var items []element
	for _, n := range p.notes[:s.notes] {
		items = append(items, rich(run("• "+shorten(n, s.noteCap))))
	}
	if hidden := len(p.notes) - s.notes; hidden > 0 {
		items = append(items, subtleText(notesNotShown(hidden)))
	}
	hide := false
	notes := container{Type: "Container", ID: notesID, IsVisible: &hide, Items: items}
	set := buttons(toggle{
		Type:           "Action.ToggleVisibility",
		Title:          runNotesTitle(len(p.notes)),
		TargetElements: []string{notesID},
	})
	set.Spacing = "Medium"
	return []element{set, notes}
}

// shorten cuts a label to max runes, marking the cut with Shortened.
func shorten(s string, max int) string {
	if len([]rune(s)) <= max {
		return s
	}
	return strings.TrimSuffix(capRunes(s, max), "…") + " " + Shortened
}

// subtleText is a subtle TextBlock of our own words.
func subtleText(s string) textBlock { t := text(s); t.IsSubtle = true; t.Spacing = "Small"; return t }

// boldText is a bold TextBlock of our own words.
func boldText(s string) textBlock { t := text(s); t.Weight = "Bolder"; return t }
