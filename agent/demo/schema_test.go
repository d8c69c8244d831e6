package demo_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent/demo"
)

// The demo answers its calls without checking each output against its
// tool's output schema (that walk was most of a call's cost); this test is
// that check, once, for every tool, over every kind of answer it gives.
func TestEveryOutputMatchesItsSchema(t *testing.T) {
	// request_refund's questions are answered in turn: a refund made,
	// then declined.
	answers := []*mcp.ElicitResult{
		{Action: "accept", Content: map[string]any{"amount": 20.0, "reason": "late", "confirm": true}},
		{Action: "decline"},
	}
	var asked atomic.Int32
	cs := connectAsking(t, demo.Options{}, func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return answers[int(asked.Add(1)-1)%len(answers)], nil
	})
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string][]map[string]any{
		demo.ToolSalesReport:    {{}, {"region": "EMEA", "quarter": "2025-Q4"}, {"region": "APAC"}},
		demo.ToolRefreshSales:   {{}, {"region": "Americas", "revision": 3}},
		demo.ToolLookupCustomer: {{"customer": "C-1001"}, {"customer": "Fabrikam"}},
		demo.ToolFeedbackForm:   {{}, {"topic": "the demo"}},
		demo.ToolSubmitFeedback: {{"rating": 5}, {"rating": 1, "comment": "slow", "topic": "the demo"}},
		demo.ToolRequestRefund:  {{}, {"order": "B-7"}},
	}
	for _, tool := range list.Tools {
		args, ok := calls[tool.Name]
		if !ok {
			t.Errorf("tool %s: no calls to check it with", tool.Name)
			continue
		}
		b, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema jsonschema.Schema
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		resolved, err := schema.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		for _, a := range args {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: a})
			if err != nil || res.IsError {
				t.Errorf("%s %v: %v %+v", tool.Name, a, err, res)
				continue
			}
			sb, _ := json.Marshal(res.StructuredContent)
			var out any
			if err := json.Unmarshal(sb, &out); err != nil {
				t.Fatal(err)
			}
			if err := resolved.Validate(out); err != nil {
				t.Errorf("%s %v: output %s does not match its schema: %v", tool.Name, a, sb, err)
			}
		}
	}
}

// Arguments are still checked on every call against the input schema,
// with the words a model or view author sees from any go-sdk server.
func TestArgumentsAreValidatedOnEveryCall(t *testing.T) {
	cs := connect(t, demo.Options{})
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{demo.ToolSalesReport, map[string]any{"region": 7}, `validating "arguments": validating root: validating /properties/region: type: 7 has type "integer", want "string"`},
		{demo.ToolSalesReport, map[string]any{"extra": 1}, `validating "arguments": validating root: unexpected additional properties ["extra"]`},
		{demo.ToolSalesReport, map[string]any{"Region": "EMEA"}, `validating "arguments": validating root: unexpected additional properties ["Region"]`},
		{demo.ToolLookupCustomer, map[string]any{}, `validating "arguments": validating root: required: missing properties: ["customer"]`},
		{demo.ToolSubmitFeedback, map[string]any{"rating": "five"}, `validating "arguments": validating root: validating /properties/rating: type: five has type "string", want "integer"`},
		{demo.ToolRequestRefund, map[string]any{"order": 1042}, `validating "arguments": validating root: validating /properties/order: type: 1042 has type "integer", want "string"`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s %v: %v", tc.tool, tc.args, err)
		}
		text := ""
		if len(res.Content) == 1 {
			if tx, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tx.Text
			}
		}
		if !res.IsError || text != tc.want {
			t.Errorf("%s %v: isError=%v %q, want the error %q", tc.tool, tc.args, res.IsError, text, tc.want)
		}
	}
}
