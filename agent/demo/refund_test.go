package demo_test

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent/demo"
	"teamsbot/elicit"
)

// asker is a client's side of request_refund's question: it keeps what
// the server asked and answers with the reply it is given.
type asker struct {
	mu     sync.Mutex
	asked  []*mcp.ElicitParams
	answer *mcp.ElicitResult
}

func (a *asker) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req.Params)
	return a.answer, nil
}

// protocols are the versions request_refund is asked on: the SDK's latest
// (2026-07-28), where the question comes back in the call's result
// (inputRequests) and the client calls again with the answer, and
// 2025-11-25, which the service speaks to the built-in server in memory,
// where the server asks with elicitation/create during the call.
var protocols = []string{"", "2025-11-25"}

// TestRequestRefund asks request_refund as a client that takes the
// server's questions: the question is the order's, with the refund's form;
// a confirmed answer is a refund whose words name the amount, the reason
// and where the money goes, and say whether details were given without
// repeating them; an answer not confirmed, a decline and a cancel make no
// refund and say why.
func TestRequestRefund(t *testing.T) {
	for _, protocol := range protocols {
		t.Run("protocol "+cmp.Or(protocol, "latest"), func(t *testing.T) { testRequestRefund(t, protocol) })
	}
}

func testRequestRefund(t *testing.T, protocol string) {
	a := &asker{}
	cs := connectSpeaking(t, demo.Options{}, protocol, a.handle)
	const details = "The box was soaked through and the lid was cracked."
	for _, tc := range []struct {
		name   string
		args   map[string]any
		answer *mcp.ElicitResult
		want   demo.Refund
		says   []string
	}{
		{
			name: "refunded",
			answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{
				"amount": 42.5, "reason": "damaged", "details": details, "refund_to": "credit", "notify": false, "confirm": true}},
			want: demo.Refund{Order: "A-1042", Outcome: demo.RefundMade, Refunded: true, Amount: 42.5, Currency: "EUR",
				Reason: "damaged", RefundTo: "credit", DetailsGiven: true},
			says: []string{"Refunded EUR 42.50 for order A-1042 (Arrived damaged) to store credit.", "No receipt is sent.",
				"The person gave details (51 characters)"},
		},
		{
			// What the person left as it was comes as the schema's
			// defaults.
			name:   "refunded with the defaults",
			args:   map[string]any{"order": " B-7 "},
			answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"reason": "late", "confirm": true}},
			want: demo.Refund{Order: "B-7", Outcome: demo.RefundMade, Refunded: true, Amount: 49.9, Currency: "EUR",
				Reason: "late", RefundTo: "original", Receipt: true},
			says: []string{"Refunded EUR 49.90 for order B-7 (Arrived late) to the original payment.", "A receipt is emailed", "The person gave no details."},
		},
		{
			name:   "not confirmed",
			answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"amount": 10.0, "reason": "wrong", "confirm": false}},
			want:   demo.Refund{Order: "A-1042", Outcome: demo.RefundNotConfirmed},
			says:   []string{"No refund was made for order A-1042: the person did not confirm it."},
		},
		{
			name:   "declined",
			answer: &mcp.ElicitResult{Action: "decline"},
			want:   demo.Refund{Order: "A-1042", Outcome: demo.RefundDeclined},
			says:   []string{"No refund was made for order A-1042: the person declined to give its details."},
		},
		{
			name:   "cancelled",
			answer: &mcp.ElicitResult{Action: "cancel"},
			want:   demo.Refund{Order: "A-1042", Outcome: demo.RefundCancelled},
			says:   []string{"No refund was made for order A-1042: the question was cancelled, or no answer came in time."},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.mu.Lock()
			a.asked, a.answer = nil, tc.answer
			a.mu.Unlock()
			res := call(t, cs, demo.ToolRequestRefund, tc.args)
			if res.IsError {
				t.Fatalf("IsError: %s", text(res))
			}
			if diff := gocmp.Diff(tc.want, structured[demo.Refund](t, res)); diff != "" {
				t.Errorf("structured content (-want +got):\n%s", diff)
			}
			for _, s := range tc.says {
				if !strings.Contains(text(res), s) {
					t.Errorf("the answer %q does not say %q", text(res), s)
				}
			}
			if sc, _ := json.Marshal(res.StructuredContent); strings.Contains(text(res), "soaked") || strings.Contains(string(sc), "soaked") {
				t.Errorf("the answer repeats the details: %q %s", text(res), sc)
			}

			a.mu.Lock()
			asked := a.asked
			a.mu.Unlock()
			if len(asked) != 1 {
				t.Fatalf("the person was asked %d times, want once", len(asked))
			}
			order := tc.want.Order
			if asked[0].Message != "Refund order "+order+": which refund should I make?" || asked[0].Mode != "form" {
				t.Errorf("asked %q in mode %q", asked[0].Message, asked[0].Mode)
			}
			var schema any
			if err := json.Unmarshal([]byte(demo.RefundSchema), &schema); err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(schema, asJSON(t, asked[0].RequestedSchema)); diff != "" {
				t.Errorf("the form asked (-want +got):\n%s", diff)
			}
		})
	}
}

// The form is one a host shows as it is: every field read, in the order
// written, with its kind, bounds, choices and defaults; the reason and the
// confirmation required.
func TestRefundFormAsAHostReadsIt(t *testing.T) {
	raw := json.RawMessage(demo.RefundSchema)
	form, err := elicit.Parse(raw, elicit.PropertyOrder(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(form.Clipped) != 0 {
		t.Errorf("a host leaves out %q", form.Clipped)
	}
	type field struct {
		Name, Kind, Label string
		Required          bool
		Default           any
		Options           string
	}
	var got []field
	for _, f := range form.Fields {
		var opts []string
		for _, o := range f.Options {
			opts = append(opts, o.Value+"="+o.Title)
		}
		got = append(got, field{f.Name, f.Kind, f.Label(), f.Required, f.Default, strings.Join(opts, ", ")})
	}
	want := []field{
		{"amount", elicit.KindNumber, "Amount (EUR)", false, 49.9, ""},
		{"reason", elicit.KindChoice, "Reason", true, nil, "damaged=Arrived damaged, late=Arrived late, wrong=Wrong item, other=Something else"},
		{"details", elicit.KindText, "Details", false, nil, ""},
		{"refund_to", elicit.KindChoice, "Refund to", false, "original", "original=Original payment, credit=Store credit"},
		{"notify", elicit.KindBoolean, "Email me a receipt", false, true, ""},
		{"confirm", elicit.KindBoolean, "I confirm this refund", true, nil, ""},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("the form as a host reads it (-want +got):\n%s", diff)
	}
	amount, details := form.Fields[0], form.Fields[2]
	if amount.Minimum == nil || *amount.Minimum != 1 || amount.Maximum == nil || *amount.Maximum != 500 {
		t.Errorf("amount bounds %v %v, want 1 to 500", amount.Minimum, amount.Maximum)
	}
	if details.MaxLength == nil || *details.MaxLength != 500 {
		t.Errorf("details max length %v, want 500", details.MaxLength)
	}
	// What a card sends for a form left as it was but the reason and the
	// confirmation is an answer the tool takes.
	content, problems := form.Check(map[string]any{"amount": "49.9", "reason": "other", "refund_to": "original", "notify": "true", "confirm": "true"})
	if problems != nil || content["amount"] != 49.9 || content["confirm"] != true {
		t.Errorf("a card's answer: %v, problems %v", content, problems)
	}
}

// A client that takes no questions, or an order that is not one, makes no
// refund: a result with IsError that says so.
func TestRequestRefundRefused(t *testing.T) {
	for _, protocol := range protocols {
		t.Run("protocol "+cmp.Or(protocol, "latest"), func(t *testing.T) {
			cs := connectSpeaking(t, demo.Options{}, protocol, nil)
			res := call(t, cs, demo.ToolRequestRefund, nil)
			if !res.IsError || !strings.Contains(text(res), "could not be asked, so no refund was made for order A-1042") {
				t.Errorf("without questions: IsError %t, text %q", res.IsError, text(res))
			}
			a := &asker{answer: &mcp.ElicitResult{Action: "decline"}}
			cs = connectSpeaking(t, demo.Options{}, protocol, a.handle)
			for _, order := range []string{"A 1042", strings.Repeat("9", 33), "-1", "<b>x</b>"} {
				res := call(t, cs, demo.ToolRequestRefund, map[string]any{"order": order})
				if !res.IsError || !strings.Contains(text(res), "is not an order id") {
					t.Errorf("order %q: IsError %t, text %q", order, res.IsError, text(res))
				}
			}
			if len(a.asked) != 0 {
				t.Errorf("a bad order was asked about: %v", a.asked)
			}
		})
	}
}

// A client that answers what the form does not allow makes no refund,
// and the words of the refusal do not quote the answer.
func TestRequestRefundChecksTheAnswer(t *testing.T) {
	const secret = "my card number is 4111"
	// The SDK's own client checks the answer before the server sees it;
	// a call that carries its own answer, as another client's may, is
	// checked by the tool.
	cs := connect(t, demo.Options{})
	for _, content := range []map[string]any{
		{"reason": "because", "confirm": true, "details": secret},
		{"reason": "late", "confirm": true, "amount": 900, "details": secret},
		{"reason": "late", "confirm": true, "details": strings.Repeat(secret, 50)},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: demo.ToolRequestRefund,
			InputResponses: mcp.InputResponseMap{"refund": &mcp.ElicitResult{Action: "accept", Content: content}}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(text(res), "no refund was made") || strings.Contains(text(res), "4111") {
			t.Errorf("answer %v: IsError %t, text %q", content, res.IsError, text(res))
		}
	}
}
