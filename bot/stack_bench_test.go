package bot

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWaitingTurnStack reports how much stack a Teams turn uses while
// its model streams (stack-bytes/turn: from the outermost frame of the
// goroutine reading the answer to the frame that waits for the model's
// next words). Times thousands of slow turns at once this was most of the
// service's memory: Go shrinks a goroutine's stack, at a collection, only
// while what it uses, and 800 bytes more, is under a quarter of it, so a
// turn that waits using over 1,248 bytes keeps the 8 KiB stack its work
// between the waits grew, and one under it goes back to 4 KiB. The figure
// comes from the runtime's own traceback at GOTRACEBACK=system, which
// gives each frame's stack and frame pointers: a child process runs a
// turn against a slowly streaming model on loopback (HTTP/2) and quits
// with that traceback while the turn waits.
func BenchmarkWaitingTurnStack(b *testing.B) {
	if os.Getenv("TEAMSBOT_WAITING_TURN") == "1" {
		waitingTurnChild(b)
		return
	}
	var used int
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkWaitingTurnStack$", "-test.benchtime=1x")
		// The child's files go in a folder of the parent's, removed after
		// it: the child quits without cleaning up.
		cmd.Env = append(os.Environ(), "TEAMSBOT_WAITING_TURN=1", "GOTRACEBACK=system", "TMPDIR="+b.TempDir())
		out, _ := cmd.CombinedOutput() // it ends on SIGQUIT
		if used = waitingStack(out, waitingFrame); used == 0 {
			b.Fatalf("no traceback of a turn waiting for its model's words:\n%s", tail(out, 4000))
		}
	}
	b.ReportMetric(float64(used), "stack-bytes/turn")
}

// waitingTurnChild starts a turn whose model streams slowly and, once
// the turn waits for its words, quits with every goroutine's traceback.
func waitingTurnChild(b *testing.B) {
	// Over HTTP/2, as a real model's endpoint is reached.
	m := &tagModel{first: 400 * time.Millisecond, pace: 5 * time.Second, pieces: 3}
	model, client := m.serve(b, true)
	h := newHarness(b, setup{realClock: true, streamAfter: time.Millisecond, model: model, modelClient: client})
	if s, body := h.send(h.message("personal", "a:stack", "s-1", "q-1 how did the quarter go?")); s != http.StatusAccepted {
		b.Fatalf("%d %s", s, body)
	}
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(waitingFrame)) {
			time.Sleep(50 * time.Millisecond) // parked
			_ = syscall.Kill(os.Getpid(), syscall.SIGQUIT)
			time.Sleep(10 * time.Second)
		}
	}
	b.Fatal("the turn never waited for its model's words")
}

// waitingFrame is the frame of the model's client that waits for the
// answer's next bytes.
const waitingFrame = "(*answerRead).more"

var framePointers = regexp.MustCompile(`fp=0x([0-9a-f]+) sp=0x([0-9a-f]+)`)

// waitingStack finds, in a traceback with frame pointers, the goroutine
// whose stack holds frame, and returns the stack it uses: from its
// outermost frame's frame pointer to its innermost frame's stack pointer;
// zero when there is none.
func waitingStack(traceback []byte, frame string) int {
	for g := range bytes.SplitSeq(traceback, []byte("\n\n")) {
		if !bytes.HasPrefix(g, []byte("goroutine ")) || !bytes.Contains(g, []byte(frame)) {
			continue
		}
		var hi, lo uint64
		for _, m := range framePointers.FindAllSubmatch(g, -1) {
			fp, _ := strconv.ParseUint(string(m[1]), 16, 64)
			sp, _ := strconv.ParseUint(string(m[2]), 16, 64)
			if lo == 0 || sp < lo {
				lo = sp
			}
			hi = max(hi, fp)
		}
		if hi > lo {
			return int(hi - lo)
		}
	}
	return 0
}

// tail is the end of b, at most n bytes.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
