package cards

import (
	"strings"
	"time"

	"teamsbot/elicit"
)

// An MCP server's question to the person during a tool call
// (elicitation/create): a form of the requested fields, or an https
// address to open, with Submit (or Continue), Decline and Cancel. The bot
// sends it while the question waits and updates the same card when the
// question ends; from then on the card says how it ended and never shows
// what was entered, which others in a shared chat would read.
//
// Every input is Adaptive Card 1.2, as Teams mobile renders it: no label,
// isRequired or errorMessage (1.3), so each field's name, whether it is
// required, and what to correct after a wrong answer are texts around its
// input. Names, descriptions and messages from the server go in TextRuns;
// the names of choices, which a renderer may read as markdown in radio
// buttons and check boxes, also lose their link syntax.

// ElicitState is where a question is.
type ElicitState int

// The states of a question. A value not listed here reads as
// ElicitUnanswerable: the card then shows nothing of the question.
const (
	// ElicitAsking: waiting for the person. It is the zero value.
	ElicitAsking ElicitState = iota
	// ElicitAccepted: a form sent, or (URL mode) the person chose to go
	// on; the URL mode card then shows the Open button.
	ElicitAccepted
	// ElicitDeclined: the person declined.
	ElicitDeclined
	// ElicitCancelled: the person cancelled.
	ElicitCancelled
	// ElicitTimedOut: no answer in time (cancel).
	ElicitTimedOut
	// ElicitCompleted: URL mode, the server said the interaction at the
	// address is complete.
	ElicitCompleted
	// ElicitUnanswerable: nobody could answer (the run stopped, the
	// question could not be kept).
	ElicitUnanswerable
)

// Submit data of a question's buttons: every Action.Submit of the card
// carries ElicitKey: ElicitKind, ElicitIDKey: the question's id and
// ElicitActionKey: one of elicit.Accept, elicit.Decline, elicit.Cancel.
// Teams merges the inputs' values into the same object, each under its
// input's id, which is ElicitFieldPrefix and the field's name.
const (
	ElicitKey         = "teamsbot"
	ElicitKind        = "elicit"
	ElicitIDKey       = "elicitation"
	ElicitActionKey   = "action"
	ElicitFieldPrefix = "field:"
)

// Elicitation is a question to render.
type Elicitation struct {
	// ID is the question's id, in every button's data.
	ID string
	// Server and Tool are who asks, AgentName the agent the server is
	// one of (empty: Options.AgentName); PersonName whose answer it is
	// (a group chat shows it).
	Server, Tool, AgentName, PersonName string
	// Mode is elicit.ModeForm or elicit.ModeURL; anything else reads as
	// a form.
	Mode string
	// Message is the server's, hostile text.
	Message string
	Form    elicit.Form
	// URL is the https address of a URL mode question (anything else
	// gets no button).
	URL string
	// Values are what the person entered, shown again with Problems
	// after a wrong answer; never shown once the question has ended.
	Values   map[string]string
	Problems []elicit.Problem
	// Wait is how long the question waits for its answer; zero names no
	// length.
	Wait time.Duration
	// Deadline is when the wait ends, which the card writes out in the
	// reader's own time zone next to Wait; zero gives Wait alone.
	Deadline time.Time
	State    ElicitState
}

// maxParagraphs is the most lines of a server's message shown as lines;
// the rest are joined into the last.
const maxParagraphs = 20

// ElicitationCard renders a question, or how it ended.
//
// While it waits (ElicitAsking), a form shows who asks, the server's
// message, in a shared chat whose answer it is, one input per field with
// its name, description and the default or what was entered, what to
// correct after a wrong answer, what the server asked for that the form
// leaves out, how long it waits, and Submit, Decline and Cancel. When the
// form does not fit in one message, the fields' descriptions give way
// first, then the names of choices, then the message and the fields'
// names, then the choices past the first few of each field, and the card
// says so; a form that does not fit even then is not shown, and the card
// offers Decline and Cancel. A URL mode question writes out the https
// address and its host, and has Continue, Decline and Cancel; an address
// that is not https (or too long to show) is not shown, and only Decline
// and Cancel remain.
//
// Once the person went on with a URL mode question (ElicitAccepted), the
// card has the Open button to the address. Every other state is one
// sentence, with no button and nothing entered.
//
// Of Options it reads Shared, AgentName, MaxSize, Location and Locale.
func ElicitationCard(e Elicitation, o Options) Card {
	q := question{e: e, o: o, server: label(e.Server, maxName), limit: MaxCardSize}
	if q.server == "" {
		q.server = connectUnnamedServer
	}
	if o.MaxSize > 0 && o.MaxSize < q.limit {
		q.limit = o.MaxSize
	}
	switch e.State {
	case ElicitAsking:
		if e.Mode == elicit.ModeURL {
			return q.askURL()
		}
		return q.askForm()
	case ElicitAccepted:
		if e.Mode == elicit.ModeURL {
			return q.openPage()
		}
		return q.ended(elicitSentHeading(q.server), "Good", elicitSent(q.server))
	case ElicitCompleted:
		return q.ended(elicitEndedHeading(q.server, elicitHowDone), "Good", elicitCompleted(q.server))
	case ElicitDeclined:
		return q.ended(elicitEndedHeading(q.server, elicitHowDeclined), "", elicitDeclined(q.server))
	case ElicitCancelled:
		return q.ended(elicitEndedHeading(q.server, elicitHowCancelled), "", elicitCancelled(q.server))
	case ElicitTimedOut:
		return q.ended(elicitEndedHeading(q.server, elicitHowTimedOut), "Warning", elicitTimedOut(q.server, waitWords(e.Wait)))
	}
	return q.ended(elicitEndedHeading(q.server, elicitHowEnded), "Warning", elicitUnanswerable(q.server))
}

// question is a question on its way to a card; server is made safe.
type question struct {
	e      Elicitation
	o      Options
	server string
	limit  int // UTF-16 code units of the card
}

// card assembles a question's card under its heading.
func (q question) card(heading, summary string, els []element, lines []string) Card {
	head := bold(heading)
	head.Size = "Medium"
	return newCard(oneLine(summary, maxSummary), headed(heading, lines...), append([]element{rich(head)}, els...)...)
}

// ended is the card of a question that ended: its heading and one
// sentence, nothing of what was asked or entered.
func (q question) ended(heading, color, sentence string) Card {
	head := bold(heading)
	head.Size = "Medium"
	head.Color = color
	return newCard(oneLine(heading, maxSummary), headed(heading, sentence), rich(head), rich(run(sentence)))
}

// asking is the card of a question that waits: its heading, els, how long
// it waits, and the buttons, primary first unless it is "".
func (q question) asking(els []element, lines []string, primary string) Card {
	if wait := waitWords(q.e.Wait); wait != "" {
		shown, plain := elicitWaits(wait), elicitWaits(wait)
		if !q.e.Deadline.IsZero() {
			loc := q.o.Location
			if loc == nil {
				loc = time.UTC
			}
			shown = elicitWaitsUntil(wait, cardTime(q.e.Deadline))
			plain = elicitWaitsUntil(wait, formatTime(q.e.Deadline.In(loc), q.o.Locale))
		}
		els = append(els, subtleText(shown))
		lines = append(lines, plain)
	}
	if primary != "" {
		lines = append(lines, elicitFallbackHow)
	} else {
		lines = append(lines, elicitFallbackEnd)
	}
	data := func(action string) map[string]any {
		return map[string]any{ElicitKey: ElicitKind, ElicitIDKey: q.e.ID, ElicitActionKey: action}
	}
	var acts []any
	if primary != "" {
		acts = append(acts, submit{Type: "Action.Submit", Title: primary, Data: data(elicit.Accept)})
	}
	acts = append(acts,
		submit{Type: "Action.Submit", Title: elicitDecline, Data: data(elicit.Decline)},
		submit{Type: "Action.Submit", Title: elicitCancel, Data: data(elicit.Cancel)})
	set := buttons(acts...)
	set.Spacing = "Medium"
	person := ""
	if q.o.Shared {
		person = label(q.e.PersonName, maxName)
	}
	return q.card(elicitHeading(q.server), elicitSummary(person, q.server), append(els, set), lines)
}

// intro is what every waiting card says first: the tool call that asks,
// the server's message (at most message runes, cut says whether it was
// shortened) and, in a shared chat, whose answer it is.
func (q question) intro(message int) (els []element, lines []string, cut bool) {
	if tool := label(q.e.Tool, maxName); tool != "" {
		agent := label(q.e.AgentName, maxName)
		if agent == "" {
			agent = label(q.o.AgentName, maxName)
		}
		s := elicitDuring(agent, tool)
		els = append(els, rich(subtle(s)))
		lines = append(lines, s)
	}
	paras, cut := paragraphs(q.e.Message, message)
	for _, p := range paras {
		els = append(els, rich(run(p)))
	}
	if len(paras) > 0 {
		lines = append(lines, label(q.e.Message, maxMessage))
	}
	if q.o.Shared {
		s := elicitOnlyAsker
		if person := label(q.e.PersonName, maxName); person != "" {
			s = elicitOnly(person)
		}
		els = append(els, rich(run(s)))
		lines = append(lines, s)
	}
	return els, lines, cut
}

// paragraphs are the lines of a server's message, each made safe like a
// label, max runes in all; cut says whether the end was left out.
func paragraphs(s string, max int) ([]string, bool) {
	s = strings.TrimSpace(clean(s))
	short := capRunes(s, max)
	var out []string
	for _, l := range strings.Split(short, "\n") {
		if l = label(l, max); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > maxParagraphs {
		out = append(out[:maxParagraphs-1], strings.Join(out[maxParagraphs-1:], " "))
	}
	return out, short != s
}
