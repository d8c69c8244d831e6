package agent

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

func keptTurn(t *testing.T, seq uint64, run string, msgs ...historyMessage) store.HistoryTurn {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return store.HistoryTurn{Seq: seq, RunID: run, Messages: b}
}

// A turn read again is served decoded, as first decoded, its tool call
// ids made unique by its Seq; the least recently read go once the JSON
// kept passes the bound; a turn that does not decode is an error and is
// not kept.
func TestDecodedTurns(t *testing.T) {
	d := newDecodedTurns(1000)
	call := historyMessage{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "demo/sales_report", Arguments: json.RawMessage(`{}`)}}}
	result := historyMessage{Role: RoleTool, Text: "ok", ToolCallID: "c1", ToolName: "demo/sales_report"}
	h := keptTurn(t, 7, "run-7", historyMessage{Role: RoleUser, Text: "hi", From: "Alice"}, call, result)
	want := []Message{
		{Role: RoleUser, Text: "hi", From: "Alice"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "h7_c1", Name: "demo/sales_report", Arguments: json.RawMessage(`{}`)}}},
		{Role: RoleTool, Text: "ok", ToolCallID: "h7_c1", ToolName: "demo/sales_report"},
	}
	for i := range 2 {
		got, err := d.get(h)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("read %d: messages (-want +got):\n%s", i+1, diff)
		}
	}
	if len(d.byKey) != 1 || d.size != len(h.Messages) {
		t.Fatalf("kept %d turns of %d bytes; want 1 of %d", len(d.byKey), d.size, len(h.Messages))
	}
	// The same turn with other bytes is decoded anew.
	changed := keptTurn(t, 7, "run-7", historyMessage{Role: RoleUser, Text: "changed"})
	if got, _ := d.get(changed); len(got) != 1 || got[0].Text != "changed" {
		t.Fatalf("a turn whose bytes changed read as %+v", got)
	}
	if len(d.byKey) != 1 || d.size != len(changed.Messages) {
		t.Fatalf("kept %d turns of %d bytes; want the changed one alone, %d bytes", len(d.byKey), d.size, len(changed.Messages))
	}
	h = changed
	// Another run's turn with the same Seq (a store restored from a
	// backup) is another turn.
	other := keptTurn(t, 7, "run-other", historyMessage{Role: RoleUser, Text: "bye"})
	if got, _ := d.get(other); len(got) != 1 || got[0].Text != "bye" {
		t.Fatalf("another run's turn of the same Seq read as %+v", got)
	}
	// Fill past the bound: the least recently read go first.
	d.get(h) // h is now the most recently read
	for i := range 20 {
		d.get(keptTurn(t, uint64(100+i), fmt.Sprint("run-", i), historyMessage{Role: RoleUser, Text: "padding padding padding"}))
	}
	if d.size > d.max {
		t.Errorf("kept %d bytes, over the bound of %d", d.size, d.max)
	}
	if _, ok := d.byKey[decodedKey{7, "run-other"}]; ok {
		t.Error("the least recently read turn is still kept")
	}
	if _, err := d.get(store.HistoryTurn{Seq: 9, RunID: "run-9", Messages: json.RawMessage(`{"not":"a list"}`)}); err == nil {
		t.Error("a turn that does not decode was read without an error")
	}
	if _, ok := d.byKey[decodedKey{9, "run-9"}]; ok {
		t.Error("a turn that does not decode was kept")
	}
}
