package cards

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"teamsbot/elicit"
)

// An MCP server's question to the person during a tool call
// (elicitation): a form of the requested fields, or an https address to
// open, with Submit (or Continue), Decline and Cancel. Once answered, the
// same card says how it ended and never shows the values.

// ElicitState is where a question is.
type ElicitState int

// The states of a question.
const (
	// ElicitAsking: waiting for the person.
	ElicitAsking ElicitState = iota
	// ElicitAccepted: a form sent, or (URL mode) the person chose to go
	// on; the URL mode card then shows the Open button.
	ElicitAccepted
	ElicitDeclined
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
	// one of; PersonName whose answer it is (a group chat shows it).
	Server, Tool, AgentName, PersonName string
	// Mode is elicit.ModeForm or elicit.ModeURL.
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
	// Wait is how long the question waits for its answer.
	Wait  time.Duration
	State ElicitState
}

// ElicitationCard renders a question, or how it ended.
func ElicitationCard(e Elicitation, o Options) Card {
	server := label(e.Server, maxName)
	if server == "" {
		server = unnamed
	}
	person := label(e.PersonName, maxName)
	var lines []string
	var els []element
	say := func(s string) {
		lines = append(lines, s)
		els = append(els, rich(run(s)))
	}
	head := bold(elicitHeading(server))
	summary := elicitHeading(server)
	switch e.State {
	case ElicitAccepted:
		if e.Mode == elicit.ModeURL {
			say(elicitURLAccepted(server))
			if u, ok := httpsURL(e.URL); ok {
				say(u)
				els = append(els, buttons(openURL{Type: "Action.OpenUrl", Title: elicitOpen, URL: u}))
			}
		} else {
			head.Color = "Good"
			say(elicitSent(server))
		}
	case ElicitCompleted:
		head.Color = "Good"
		say(elicitCompleted(server))
	case ElicitDeclined:
		say(elicitDeclined(server))
	case ElicitCancelled:
		say(elicitCancelled(server))
	case ElicitTimedOut:
		head.Color = "Warning"
		say(elicitTimedOut(server, waitWords(e.Wait)))
	case ElicitUnanswerable:
		head.Color = "Warning"
		say(elicitUnanswerable(server))
	default:
		if msg := strings.TrimSpace(e.Message); msg != "" {
			say(label(msg, elicit.MaxMessage))
		}
		if o.Shared && person != "" {
			say(elicitOnly(person))
		}
		if e.Mode == elicit.ModeURL {
			if u, ok := httpsURL(e.URL); ok {
				say(elicitURLAsk(server, u))
			}
		} else {
			els = append(els, formInputs(e)...)
		}
		if w := waitWords(e.Wait); w != "" {
			lines = append(lines, elicitWaits(w))
			els = append(els, subtleText(elicitWaits(w)))
		}
		data := func(action string) map[string]any {
			return map[string]any{ElicitKey: ElicitKind, ElicitIDKey: e.ID, ElicitActionKey: action}
		}
		primary := elicitSubmit
		if e.Mode == elicit.ModeURL {
			primary = elicitContinue
		}
		els = append(els, buttons(
			submit{Type: "Action.Submit", Title: primary, Data: data(elicit.Accept)},
			submit{Type: "Action.Submit", Title: elicitDecline, Data: data(elicit.Decline)},
			submit{Type: "Action.Submit", Title: elicitCancel, Data: data(elicit.Cancel)},
		))
	}
	head.Size = "Medium"
	return newCard(oneLine(summary, maxSummary), headed(head.Text, lines...), append([]element{rich(head)}, els...)...)
}

// httpsURL returns u when it is an absolute https address.
func httpsURL(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "https" || p.Host == "" || p.User != nil {
		return "", false
	}
	return p.String(), true
}

// input is an Adaptive Card 1.2 input: Input.Text, Input.Number,
// Input.Date, Input.Toggle or Input.ChoiceSet (1.2 has no label on an
// input, so a text above each names it).
type input struct {
	Type          string   `json:"type"`
	ID            string   `json:"id"`
	Value         string   `json:"value,omitempty"`
	Placeholder   string   `json:"placeholder,omitempty"`
	Style         string   `json:"style,omitempty"`
	MaxLength     int      `json:"maxLength,omitempty"`
	Min           any      `json:"min,omitempty"`
	Max           any      `json:"max,omitempty"`
	Title         string   `json:"title,omitempty"`
	ValueOn       string   `json:"valueOn,omitempty"`
	ValueOff      string   `json:"valueOff,omitempty"`
	Choices       []choice `json:"choices,omitempty"`
	IsMultiSelect bool     `json:"isMultiSelect,omitempty"`
	Spacing       string   `json:"spacing,omitempty"`
}

type choice struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

func (input) isElement() {}

// formInputs are a form's fields: each named (required ones marked), its
// description, its input with the value entered or the default, and
// what to correct.
func formInputs(e Elicitation) []element {
	var els []element
	problems := map[string]string{}
	for _, p := range e.Problems {
		problems[p.Field] = p.Message
	}
	for _, f := range e.Form.Fields {
		name := label(f.Label(), elicit.MaxTitle)
		runs := []textRun{bold(name)}
		if f.Required {
			runs = append(runs, run(elicitRequired))
		}
		els = append(els, rich(runs...))
		if d := label(f.Description, elicit.MaxDescription); d != "" {
			r := subtle(d)
			els = append(els, rich(r))
		}
		v, entered := e.Values[f.Name]
		if !entered {
			v = defaultText(f.Default)
		}
		in := input{ID: ElicitFieldPrefix + f.Name, Value: v}
		switch f.Kind {
		case elicit.KindNumber, elicit.KindInteger:
			in.Type = "Input.Number"
			if f.Minimum != nil {
				in.Min = *f.Minimum
			}
			if f.Maximum != nil {
				in.Max = *f.Maximum
			}
		case elicit.KindBoolean:
			in.Type, in.Title, in.ValueOn, in.ValueOff = "Input.Toggle", name, "true", "false"
			if in.Value == "" {
				in.Value = "false"
			}
		case elicit.KindChoice, elicit.KindChoices:
			in.Type = "Input.ChoiceSet"
			in.IsMultiSelect = f.Kind == elicit.KindChoices
			in.Style = "compact"
			if len(f.Options) <= 5 {
				in.Style = "expanded"
			}
			for _, op := range f.Options {
				in.Choices = append(in.Choices, choice{Title: label(op.Title, elicit.MaxTitle), Value: op.Value})
			}
		default:
			in.Type = "Input.Text"
			switch f.Format {
			case "email":
				in.Style = "Email"
			case "uri":
				in.Style = "Url"
			case "date":
				in.Type = "Input.Date"
			case "date-time":
				in.Placeholder = elicitDateTimeExample
			}
			if f.MaxLength != nil && *f.MaxLength > 0 && in.Type == "Input.Text" {
				in.MaxLength = *f.MaxLength
			}
		}
		els = append(els, in)
		if msg, ok := problems[f.Name]; ok {
			r := run(label(msg, maxName*4))
			r.Color = "Attention"
			els = append(els, rich(r))
		}
	}
	return els
}

// defaultText is a default as an input's value.
func defaultText(d any) string {
	switch v := d.(type) {
	case string:
		return v
	case bool:
		if v {
			return "true"
		}
		return "false"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []string:
		return strings.Join(v, ",")
	}
	return ""
}
