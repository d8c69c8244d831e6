package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// request_refund is the demo's tool that asks: during its call it asks the
// person for the refund's details (elicitation, form mode), so that a host
// shows how it puts a server's question to the person and hands the answer
// back. Nothing is refunded: the answer only says what would be.

// DefaultOrder is the order request_refund refunds when none is given.
const DefaultOrder = "A-1042"

// RefundCurrency is the currency of a refund's amount.
const RefundCurrency = "EUR"

// RefundSchema is the form request_refund asks the person to fill in, its
// properties in the order a host shows them: the amount (1 to 500, 49.9
// unless changed), the reason (one of four, required), details (free text,
// optional), where the money goes (original payment unless changed),
// whether a receipt is emailed (yes unless changed), and the confirmation
// (required).
const RefundSchema = `{
  "type": "object",
  "properties": {
    "amount": {"type": "number", "title": "Amount (EUR)", "minimum": 1, "maximum": 500, "default": 49.9},
    "reason": {"type": "string", "title": "Reason", "oneOf": [
      {"const": "damaged", "title": "Arrived damaged"},
      {"const": "late", "title": "Arrived late"},
      {"const": "wrong", "title": "Wrong item"},
      {"const": "other", "title": "Something else"}
    ]},
    "details": {"type": "string", "title": "Details", "maxLength": 500},
    "refund_to": {"type": "string", "title": "Refund to", "oneOf": [
      {"const": "original", "title": "Original payment"},
      {"const": "credit", "title": "Store credit"}
    ], "default": "original"},
    "notify": {"type": "boolean", "title": "Email me a receipt", "default": true},
    "confirm": {"type": "boolean", "title": "I confirm this refund"}
  },
  "required": ["reason", "confirm"]
}`

// Outcomes of request_refund, in Refund.Outcome.
const (
	RefundMade         = "refunded"
	RefundNotConfirmed = "not_confirmed"
	RefundDeclined     = "declined"
	RefundCancelled    = "cancelled"
)

// Refund is the structured content of request_refund: what became of the
// request. It never holds the details the person wrote, only whether they
// wrote any.
type Refund struct {
	Order    string `json:"order" jsonschema:"the order's id"`
	Outcome  string `json:"outcome" jsonschema:"refunded, not_confirmed, declined or cancelled"`
	Refunded bool   `json:"refunded" jsonschema:"whether the refund was made"`
	// The rest is set when the refund was made.
	Amount       float64 `json:"amount,omitempty" jsonschema:"the amount refunded"`
	Currency     string  `json:"currency,omitempty" jsonschema:"ISO 4217 currency of the amount"`
	Reason       string  `json:"reason,omitempty" jsonschema:"damaged, late, wrong or other"`
	RefundTo     string  `json:"refundTo,omitempty" jsonschema:"original (the original payment) or credit (store credit)"`
	Receipt      bool    `json:"receipt,omitempty" jsonschema:"whether a receipt is emailed"`
	DetailsGiven bool    `json:"detailsGiven,omitempty" jsonschema:"whether the person wrote details"`
}

// refundArgs are request_refund's arguments.
type refundArgs struct {
	Order string `json:"order,omitempty" jsonschema:"the order's id, such as A-1042 (the default)"`
}

// orderPattern is what an order id may be: it goes into the question the
// person reads.
var orderPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$`)

// The names a person reads of the schema's choices.
var (
	refundReasons = map[string]string{"damaged": "Arrived damaged", "late": "Arrived late", "wrong": "Wrong item", "other": "Something else"}
	refundPlaces  = map[string]string{"original": "the original payment", "credit": "store credit"}
)

// refundMessage is the question request_refund asks about order.
func refundMessage(order string) string {
	return fmt.Sprintf("Refund order %s: which refund should I make?", order)
}

// refundQuestion is the key of request_refund's question in its input
// requests, and of the answer in the call's input responses.
const refundQuestion = "refund"

// requestRefund asks its question the way every protocol allows: it
// answers the first call with the question as an input request (MCP
// 2026-07-28, multi round-trip), and the client calls again with the
// person's answer. For a client of an earlier protocol the SDK asks with
// elicitation/create during the call and calls the handler again itself.
func (s *server) requestRefund(ctx context.Context, req *mcp.CallToolRequest, in refundArgs) (*mcp.CallToolResult, Refund, error) {
	order := strings.TrimSpace(in.Order)
	if order == "" {
		order = DefaultOrder
	}
	if !orderPattern.MatchString(order) {
		return nil, Refund{}, fmt.Errorf("%w: order %q is not an order id such as %s", ErrBadArgument, order, DefaultOrder)
	}
	if len(req.Params.InputResponses) == 0 {
		s.called(ctx, ToolRequestRefund)
		if !canAsk(req.Session) {
			return nil, Refund{}, fmt.Errorf("%w, so no refund was made for order %s: the client takes no questions (elicitation)", ErrCannotAsk, order)
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{refundQuestion: &mcp.ElicitParams{
			Mode: "form", Message: refundMessage(order), RequestedSchema: json.RawMessage(RefundSchema)}}}, Refund{}, nil
	}
	res, ok := req.Params.InputResponses[refundQuestion].(*mcp.ElicitResult)
	if !ok || res == nil {
		return nil, Refund{}, fmt.Errorf("%w: the call carries no answer to the refund's question, so no refund was made for order %s", ErrBadArgument, order)
	}
	r := Refund{Order: order}
	switch res.Action {
	case "accept":
		content, err := refundAnswer(res.Content)
		if err != nil {
			return nil, Refund{}, fmt.Errorf("%w, so no refund was made for order %s: %v", ErrBadArgument, order, err)
		}
		if confirmed, _ := content["confirm"].(bool); !confirmed {
			r.Outcome = RefundNotConfirmed
			return textResult(fmt.Sprintf("No refund was made for order %s: the person did not confirm it.", order)), r, nil
		}
		return refund(r, content)
	case "decline":
		r.Outcome = RefundDeclined
		return textResult(fmt.Sprintf("No refund was made for order %s: the person declined to give its details.", order)), r, nil
	default:
		r.Outcome = RefundCancelled
		return textResult(fmt.Sprintf("No refund was made for order %s: the question was cancelled, or no answer came in time.", order)), r, nil
	}
}

// canAsk reports whether the client of a session said it takes a
// server's questions in form mode.
func canAsk(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	// Neither mode named means form, as the specification's first
	// version of elicitation had it.
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// refundSchema is RefundSchema, resolved once.
var refundSchema = sync.OnceValue(func() *jsonschema.Resolved {
	var schema jsonschema.Schema
	if err := json.Unmarshal([]byte(RefundSchema), &schema); err != nil {
		panic(fmt.Sprintf("demo: RefundSchema: %v", err))
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("demo: RefundSchema: %v", err))
	}
	return resolved
})

// refundAnswer checks an accepted answer against RefundSchema and fills
// in the defaults of what it leaves out: the answer comes from the
// client, which need not have done either.
func refundAnswer(content map[string]any) (map[string]any, error) {
	if content == nil {
		content = map[string]any{}
	}
	// Through JSON, as the answer would come over the wire: the schema
	// checks JSON values.
	b, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	if err := refundSchema().Validate(v); err != nil {
		// Not the validator's words: they may quote the details.
		return nil, errors.New("the answer does not fit the form")
	}
	if err := refundSchema().ApplyDefaults(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// refund makes (in words only) the refund the person confirmed, from the
// form's content, checked and with its defaults.
func refund(r Refund, content map[string]any) (*mcp.CallToolResult, Refund, error) {
	r.Amount, _ = content["amount"].(float64)
	r.Reason, _ = content["reason"].(string)
	r.RefundTo, _ = content["refund_to"].(string)
	r.Receipt, _ = content["notify"].(bool)
	details, _ := content["details"].(string)
	details = strings.TrimSpace(details)
	r.DetailsGiven = details != ""
	reason, place := refundReasons[r.Reason], refundPlaces[r.RefundTo]
	r.Outcome, r.Refunded, r.Currency = RefundMade, true, RefundCurrency
	var b strings.Builder
	fmt.Fprintf(&b, "Refunded %s %.2f for order %s (%s) to %s.", RefundCurrency, r.Amount, r.Order, reason, place)
	if r.Receipt {
		b.WriteString(" A receipt is emailed to the person.")
	} else {
		b.WriteString(" No receipt is sent.")
	}
	// The details are the person's own words, which others in a shared
	// chat would read in the answer: only their length is told.
	if r.DetailsGiven {
		fmt.Fprintf(&b, " The person gave details (%d characters).", utf8.RuneCountInString(details))
	} else {
		b.WriteString(" The person gave no details.")
	}
	b.WriteString(" Demo only: no money moved.")
	return textResult(b.String()), r, nil
}
