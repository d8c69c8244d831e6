package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// heldModel is an asker whose replies wait for the test: each Ask is
// answered, on a goroutine of its own, with the next of replies once
// release lets it go.
type heldModel struct {
	release chan struct{}
	replies []Message
	asked   chan Turn
}

func (m *heldModel) Next(ctx context.Context, t Turn) (Message, error) {
	done := make(chan Message, 1)
	var err error
	m.Ask(ctx, t, func(r Message, e error) { err = e; done <- r })
	return <-done, err
}

func (m *heldModel) Ask(ctx context.Context, t Turn, done func(Message, error)) {
	m.asked <- t
	reply := m.replies[0]
	m.replies = m.replies[1:]
	go func() {
		select {
		case <-m.release:
			done(reply, nil)
		case <-ctx.Done():
			done(Message{}, ctx.Err())
		}
	}()
}

// RunThen returns while the model has not answered, with no goroutine of
// the caller's waiting, and then hears the run's end once, with the
// answer written; a model's tool calls are run between two asks.
func TestRunThenReturnsBeforeTheModelAnswers(t *testing.T) {
	cfg := Config{Agents: []AgentConfig{{ID: "a"}}}
	s, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.agent("a")
	if err != nil {
		t.Fatal(err)
	}
	m := &heldModel{release: make(chan struct{}), asked: make(chan Turn, 4), replies: []Message{
		{ToolCalls: []ToolCall{{ID: "c1", Name: "nowhere/missing", Arguments: []byte(`{}`)}}},
		{Text: "the quarter went well"},
	}}
	a.model = m
	req := &Request{Person: Person{TenantID: "t"}, Text: "how did the quarter go?"}
	var ans Answer
	ended := make(chan error, 2)
	s.RunThen(context.Background(), req, &ans, func(err error) { ended <- err })
	select {
	case <-m.asked:
	default:
		t.Fatal("RunThen returned before the model was asked")
	}
	select {
	case err := <-ended:
		t.Fatalf("the run ended (%v) before the model answered", err)
	case <-time.After(50 * time.Millisecond):
	}
	m.release <- struct{}{} // the tool call
	turn := <-m.asked
	if n := len(turn.Messages); n != 3 || turn.Messages[2].Role != RoleTool || turn.Messages[2].ToolCallID != "c1" {
		t.Fatalf("the second round was asked with %d messages: %+v", n, turn.Messages)
	}
	close(m.release)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if ans.Text != "the quarter went well" || ans.RunID == "" {
		t.Errorf("answer %q, run %q", ans.Text, ans.RunID)
	}
	select {
	case err := <-ended:
		t.Errorf("then was called twice, again with %v", err)
	case <-time.After(50 * time.Millisecond):
	}
}

// A run whose ctx ends while its model is asked ends in the model's
// failure, once, as RunRequest's does.
func TestRunThenEndsWhenItsContextEnds(t *testing.T) {
	s, err := New(context.Background(), Config{Agents: []AgentConfig{{ID: "a"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := s.agent("a")
	a.model = &heldModel{release: make(chan struct{}), asked: make(chan Turn, 1), replies: []Message{{Text: "never"}}}
	ctx, cancel := context.WithCancel(context.Background())
	var ans Answer
	ended := make(chan error, 1)
	s.RunThen(ctx, &Request{Person: Person{TenantID: "t"}, Text: "hi"}, &ans, func(err error) { ended <- err })
	cancel()
	if err := <-ended; !errors.Is(err, ErrModel) && !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if ans.Text == "" || ans.Text == "never" {
		t.Errorf("answer %q: want the run's own word that it did not finish", ans.Text)
	}
}
