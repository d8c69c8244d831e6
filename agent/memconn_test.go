package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent/demo"
)

// memSession connects a demo server and a client over the given pair of
// transports (client end first).
func memSession(t *testing.T, ct, st mcp.Transport) (*mcp.ClientSession, *mcp.ServerSession) {
	t.Helper()
	ctx := context.Background()
	ss, err := demo.New(demo.Options{Now: func() time.Time { return time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC) }}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "memconn-test", Version: "1.0.0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs, ss
}

// The in-memory session answers exactly what the SDK's own in-memory
// transport, which encodes every message to JSON, answers: the same tool
// list, results, resources and errors.
func TestMemTransportAnswersAsTheWireDoes(t *testing.T) {
	ctx := context.Background()
	wc, ws := mcp.NewInMemoryTransports()
	wire, _ := memSession(t, wc, ws)
	mc, ms := newMemTransports()
	mem, _ := memSession(t, mc, ms)

	type outcome struct {
		Result any
		Err    string
	}
	asJSON := func(v any, err error) outcome {
		o := outcome{}
		if err != nil {
			o.Err = err.Error()
			return o
		}
		b, merr := json.Marshal(v)
		if merr != nil {
			t.Fatal(merr)
		}
		if err := json.Unmarshal(b, &o.Result); err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, tc := range []struct {
		name string
		do   func(cs *mcp.ClientSession) outcome
	}{
		{"tools/list", func(cs *mcp.ClientSession) outcome { return asJSON(cs.ListTools(ctx, nil)) }},
		{"resources/list", func(cs *mcp.ClientSession) outcome { return asJSON(cs.ListResources(ctx, nil)) }},
		{"sales_report", func(cs *mcp.ClientSession) outcome {
			return asJSON(cs.CallTool(ctx, &mcp.CallToolParams{Name: demo.ToolSalesReport, Arguments: map[string]any{"region": "EMEA"}}))
		}},
		{"bad arguments", func(cs *mcp.ClientSession) outcome {
			return asJSON(cs.CallTool(ctx, &mcp.CallToolParams{Name: demo.ToolSalesReport, Arguments: map[string]any{"region": 7}}))
		}},
		{"unknown tool", func(cs *mcp.ClientSession) outcome {
			return asJSON(cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}))
		}},
		{"unknown resource", func(cs *mcp.ClientSession) outcome {
			return asJSON(cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ui://demo/nothing"}))
		}},
		{"resource", func(cs *mcp.ClientSession) outcome {
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				return asJSON(nil, err)
			}
			for _, tool := range tools.Tools {
				if tool.Name == demo.ToolSalesReport {
					ui, _ := tool.Meta["ui"].(map[string]any)
					uri, _ := ui["resourceUri"].(string)
					return asJSON(cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}))
				}
			}
			return outcome{Err: "no sales_report tool"}
		}},
	} {
		w, m := tc.do(wire), tc.do(mem)
		if diff := cmp.Diff(w, m); diff != "" {
			t.Errorf("%s: in memory differs from the wire (-wire +memory):\n%s", tc.name, diff)
		}
		if tc.name == "unknown tool" || tc.name == "unknown resource" {
			if m.Err == "" {
				t.Errorf("%s: no error", tc.name)
			}
		} else if m.Err != "" {
			t.Errorf("%s: %s", tc.name, m.Err)
		}
	}
}

// Many calls at once all get their own answer: none waits for another
// to be read first.
func TestMemTransportConcurrentCalls(t *testing.T) {
	mc, ms := newMemTransports()
	cs, _ := memSession(t, mc, ms)
	regions := []string{"Global", "EMEA", "Americas", "APAC"}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			region := regions[i%len(regions)]
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: demo.ToolSalesReport, Arguments: map[string]any{"region": region}})
			if err != nil {
				errs <- err
				return
			}
			b, _ := json.Marshal(res.StructuredContent)
			if res.IsError || !json.Valid(b) || !strings.Contains(string(b), region) {
				errs <- fmt.Errorf("call %d (%s): %s", i, region, b)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Closing the client ends the server's session, and an end that was
// closed reads io.EOF and refuses writes.
func TestMemTransportCloseEndsBothEnds(t *testing.T) {
	mc, ms := newMemTransports()
	ctx := context.Background()
	ss, err := demo.New(demo.Options{}).Connect(ctx, ms, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, mc, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs.Close()
	ended := make(chan struct{})
	go func() { ss.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's session did not end when the client closed")
	}

	c, s := newMemTransports()
	cc, _ := c.Connect(ctx)
	sc, _ := s.Connect(ctx)
	sc.Close()
	if _, err := cc.Read(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Read after the other end closed: %v, want io.EOF", err)
	}
	if err := cc.Write(ctx, &jsonrpc.Request{Method: "ping"}); !errors.Is(err, errMemClosed) {
		t.Errorf("Write after close: %v, want %v", err, errMemClosed)
	}
}

// What one end wrote cannot be changed by it afterwards, nor reach the
// other end with what never goes over the wire (Extra, a Go error value).
func TestMemTransportCopiesAsTheWire(t *testing.T) {
	ctx := context.Background()
	c, s := newMemTransports()
	cc, _ := c.Connect(ctx)
	sc, _ := s.Connect(ctx)
	id, _ := jsonrpc.MakeID(float64(7))
	req := &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"a"}`), Extra: "secret"}
	if err := cc.Write(ctx, req); err != nil {
		t.Fatal(err)
	}
	copy(req.Params, `{"name":"b"}`)
	got, err := sc.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := got.(*jsonrpc.Request)
	if string(r.Params) != `{"name":"a"}` || r.Extra != nil || r.Method != "tools/call" || r.ID != id {
		t.Errorf("received %+v (params %s), want the request as written, without Extra", r, r.Params)
	}

	type handlerError struct{ error }
	if err := sc.Write(ctx, &jsonrpc.Response{ID: id, Error: handlerError{errors.New("boom")}}); err != nil {
		t.Fatal(err)
	}
	got, err = cc.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wireErr *jsonrpc.Error
	if resp := got.(*jsonrpc.Response); !errors.As(resp.Error, &wireErr) || wireErr.Message != "boom" {
		t.Errorf("error response arrived as %T %v, want its wire form with the message", resp.Error, resp.Error)
	}
}
