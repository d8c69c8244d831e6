package bot

import (
	"bytes"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// While a turn's model streams, the only goroutine of the turn is the one
// reading the answer: the turn's own goroutine has returned (the agent's
// RunThen), so thousands of slow turns hold no stacks but those. The
// answer still comes, as the stream's final message.
func TestWaitingTurnKeepsNoGoroutineOfItsOwn(t *testing.T) {
	m := &tagModel{first: 200 * time.Millisecond, pace: 1500 * time.Millisecond, pieces: 2}
	model, client := m.serve(t, true)
	h := newHarness(t, setup{realClock: true, streamAfter: time.Millisecond, model: model, modelClient: client})
	if s, body := h.send(h.message("personal", "a:waiting", "w-1", "q-7 how did the quarter go?")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, body)
	}
	var dump []byte
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if d := buf[:runtime.Stack(buf, true)]; bytes.Contains(d, []byte(waitingFrame)) {
			dump = bytes.Clone(d)
			break
		}
	}
	if dump == nil {
		t.Fatal("no goroutine read the model's answer")
	}
	var readers int
	for g := range bytes.SplitSeq(dump, []byte("\n\n")) {
		if bytes.Contains(g, []byte(waitingFrame)) {
			readers++
		}
		for _, f := range []string{"(*Bot).runTurn", "(*Bot).onMessage", "(*Service).RunRequest", "(*conversation)."} {
			if bytes.Contains(g, []byte(f)) {
				t.Errorf("a goroutine of the turn waits with %s on its stack while the model streams:\n%s", f, g)
			}
		}
	}
	if readers != 1 {
		t.Errorf("%d goroutines read the answer, want 1", readers)
	}
	h.conn.waitFor(t, "the stream's final message", func(c []received) bool {
		return slices.ContainsFunc(c, func(x received) bool {
			return strings.Contains(string(x.Raw), `"streamType":"final"`) && strings.Contains(string(x.Raw), "q-7")
		})
	})
}
