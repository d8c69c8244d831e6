package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolHandler is a demo tool: typed arguments in, a result and its typed
// structured content out.
type toolHandler[In, Out any] func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)

// addTool registers a tool with the input and output schemas derived from
// In and Out, as mcp.AddTool does, and answers its calls as mcp.AddTool's
// handler does, with one difference: the output is not validated against
// its own schema on every call. That check decodes and walks the whole
// result each time, which was most of a call's cost; the output types are
// this package's own, and TestEveryOutputMatchesItsSchema checks them
// once. The arguments, which come from a model or a view, are validated
// on every call, with the same words.
func addTool[In, Out any](srv *mcp.Server, t *mcp.Tool, h toolHandler[In, Out]) {
	in := schemaFor[In]()
	resolved, err := in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("demo: tool %s: input schema: %v", t.Name, err))
	}
	tt := *t
	tt.InputSchema = in
	tt.OutputSchema = schemaFor[Out]()
	srv.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := checkArguments[In](req.Params.Arguments, resolved)
		if err != nil {
			var res mcp.CallToolResult
			res.SetError(err)
			return &res, nil
		}
		res, out, err := h(ctx, req, args)
		if err != nil {
			var res mcp.CallToolResult
			res.SetError(err)
			return &res, nil
		}
		if res != nil && res.InputRequests != nil {
			// A question for the person (multi round-trip): the
			// answer comes with the next call, and only the questions
			// may be in this result.
			return res, nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		res.StructuredContent = json.RawMessage(b)
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		}
		return res, nil
	})
}

// schemaFor is the JSON Schema of T as mcp.AddTool derives it.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.ForType(reflect.TypeFor[T](), &jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("demo: schema of %v: %v", reflect.TypeFor[T](), err))
	}
	return s
}

// checkArguments validates raw arguments against the tool's input schema
// (no arguments count as {}) and decodes them.
func checkArguments[In any](raw json.RawMessage, resolved *jsonschema.Resolved) (In, error) {
	var in In
	v := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return in, fmt.Errorf("unmarshaling arguments: %w", err)
		}
	}
	var value any = v
	if err := resolved.Validate(&value); err != nil {
		return in, fmt.Errorf("validating \"arguments\": %v", err)
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &in); err != nil {
			return in, err
		}
	}
	return in, nil
}
