package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/elicit"
)

// person is who answers a question in these tests: it records what it
// was asked and answers with reply.
type person struct {
	mu    sync.Mutex
	asked []agent.Question
	reply func(agent.Question) agent.Reply
}

func (p *person) Elicit(ctx context.Context, q agent.Question) (agent.Reply, error) {
	p.mu.Lock()
	p.asked = append(p.asked, q)
	p.mu.Unlock()
	if p.reply == nil {
		<-ctx.Done()
		return agent.Reply{}, ctx.Err()
	}
	return p.reply(q), nil
}

// questioningServer is an in-memory server whose tool "ask" asks for a form
// whose properties are written in an order that is neither alphabetical
// nor the required one; before asking, and again before answering, it
// waits for gate, when set.
func questioningServer(gate func()) func() *mcp.Server {
	schema := json.RawMessage(`{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer","minimum":1},"mid":{"type":"boolean","default":true}},"required":["mid"]}`)
	return func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1.0.0"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks the person"},
			func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				if gate != nil {
					gate()
				}
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which one?", RequestedSchema: schema})
				if err != nil {
					return nil, nil, err
				}
				if gate != nil {
					gate()
				}
				content, _ := json.Marshal(res.Content)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %s", res.Action, content)}}}, nil, nil
			})
		return s
	}
}

// On a session without per-call streams (in memory here, stdio alike),
// a question belongs to the one run with a call under way: its person is
// asked, the form in the server's order, the call's own timeout stopped
// meanwhile.
func TestQuestionOfTheOneRunOnTheSession(t *testing.T) {
	st := openStore(t)
	s := newService(t, oneAgent(agent.ServerConfig{Name: "asking", Builtin: "asking", Timeout: "1s"}),
		agent.Options{Store: st, Builtins: map[string]func() *mcp.Server{"asking": questioningServer(nil)}})
	p := &person{reply: func(q agent.Question) agent.Reply {
		time.Sleep(1500 * time.Millisecond) // longer than the server's timeout
		return agent.Reply{Action: elicit.Accept, Content: map[string]any{"zeta": "z", "alpha": "3", "mid": "false"}}
	}}
	ans, err := s.Run(context.Background(), agent.Request{Person: alice, Text: "/ask {}", Elicit: p})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.ToolErrors) != 0 {
		t.Fatalf("tool errors %+v: the person's time counted against the server's timeout", ans.ToolErrors)
	}
	if !strings.Contains(ans.Text, `accept {"alpha":3,"mid":false,"zeta":"z"}`) {
		t.Errorf("answer %q", ans.Text)
	}
	if len(p.asked) != 1 {
		t.Fatalf("asked %d times", len(p.asked))
	}
	q := p.asked[0]
	if q.Person.UserID != alice.UserID || q.Server != "asking" || q.Tool != "ask" || q.Message != "Which one?" || q.Mode != elicit.ModeForm {
		t.Errorf("question %+v", q)
	}
	if got := strings.Join(q.Form.FieldNames(), ","); got != "zeta,alpha,mid" {
		t.Errorf("fields %s, want the server's order zeta,alpha,mid", got)
	}
}

// Two people's calls under way on one session that cannot tell them
// apart: nobody can say whose a question is, so nobody is asked.
func TestQuestionOfSeveralRunsOnTheSessionIsDeclined(t *testing.T) {
	// Both calls ask while both are under way, and neither answers
	// before both were answered.
	var mu sync.Mutex
	arrived := 0
	barriers := []chan struct{}{make(chan struct{}), make(chan struct{})}
	gate := func() {
		mu.Lock()
		b := barriers[arrived/2]
		arrived++
		if arrived%2 == 0 {
			close(b)
		}
		mu.Unlock()
		<-b
	}
	s := newService(t, oneAgent(agent.ServerConfig{Name: "asking", Builtin: "asking"}),
		agent.Options{Store: openStore(t), Builtins: map[string]func() *mcp.Server{"asking": questioningServer(gate)}})
	p := &person{reply: func(agent.Question) agent.Reply { return agent.Reply{Action: elicit.Accept} }}
	bob := alice
	bob.UserID, bob.Name = "bob-oid", "Bob"
	var wg sync.WaitGroup
	answers := make([]agent.Answer, 2)
	for i, who := range []agent.Person{alice, bob} {
		wg.Go(func() {
			ans, err := s.Run(context.Background(), agent.Request{Person: who, Text: "/ask {}", Elicit: p})
			if err != nil {
				t.Error(err)
			}
			answers[i] = ans
		})
	}
	wg.Wait()
	for _, ans := range answers {
		if !strings.Contains(ans.Text, "decline") {
			t.Errorf("answer %q, want decline", ans.Text)
		}
	}
	if len(p.asked) != 0 {
		t.Errorf("someone was asked: %+v", p.asked)
	}
}

// A server that asks while nobody's call is under way is declined.
func TestQuestionOutsideACallIsDeclined(t *testing.T) {
	asked := make(chan *mcp.ServerSession, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "late", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "later", Description: "asks after it answered"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			asked <- req.Session
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	s := newService(t, oneAgent(agent.ServerConfig{Name: "late", Builtin: "late"}),
		agent.Options{Store: openStore(t), Builtins: map[string]func() *mcp.Server{"late": func() *mcp.Server { return srv }}})
	p := &person{reply: func(agent.Question) agent.Reply { return agent.Reply{Action: elicit.Accept} }}
	run := func() { _, _ = s.Run(context.Background(), agent.Request{Person: alice, Text: "/later {}", Elicit: p}) }
	run()
	ss := <-asked
	res, err := ss.Elicit(context.Background(), &mcp.ElicitParams{Message: "And now?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)})
	if err != nil || res.Action != elicit.Decline {
		t.Errorf("a question outside any call: %+v %v, want decline", res, err)
	}
	if len(p.asked) != 0 {
		t.Errorf("someone was asked: %+v", p.asked)
	}
}

// A schema the service does not take as a form is refused with the
// specification's invalid-params error and audited as refused.
func TestQuestionWithANestedSchemaIsRefused(t *testing.T) {
	st := openStore(t)
	srv := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1.0.0"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "odd", Description: "asks for too much"},
			func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				// A format go-sdk lets through and the specification does
				// not list for elicitation is checked here.
				_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","enum":["x","x"]}}}`)})
				text := "no error"
				if err != nil {
					text = err.Error()
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
			})
		return s
	}
	s := newService(t, oneAgent(agent.ServerConfig{Name: "odd", Builtin: "odd"}), agent.Options{Store: st, Builtins: map[string]func() *mcp.Server{"odd": srv}})
	p := &person{reply: func(agent.Question) agent.Reply { return agent.Reply{Action: elicit.Accept} }}
	ans, err := s.Run(context.Background(), agent.Request{Person: alice, Text: "/odd {}", Elicit: p})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ans.Text, "twice") || len(p.asked) != 0 {
		t.Errorf("answer %q, asked %d", ans.Text, len(p.asked))
	}
	recs := audit(t, st, agent.AuditElicitationOutcome)
	if len(recs) != 1 || recs[0].Fields["outcome"] != "refused" {
		t.Errorf("outcome records %+v", recs)
	}
}
