package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxHTMLSetting is the environment variable that sets
// Options.MaxResourceBytes; refusals name it so that an operator knows what
// to raise.
const MaxHTMLSetting = "TICKETIQ_MCP_APPS_MAX_HTML_BYTES"

// ErrMessageTooLarge says that a server sent one message larger than the
// service reads: the connection is dropped at that point, before the rest
// is read.
var ErrMessageTooLarge = errors.New("agent: an MCP server's message is larger than the service reads")

// messageLimit is the most bytes of one JSON-RPC message (a stdio line, a
// JSON response body, one server-sent event) read from a server. The HTML
// of a view travels JSON-escaped or base64-encoded inside one message, so
// the limit leaves room for twice the HTML limit and the envelope; nothing
// larger could make a view, and reading it would only cost memory.
func messageLimit(maxHTML int) int64 { return 2*int64(maxHTML) + 1<<20 }

// cappedTransport caps every response body of a Streamable HTTP server:
// a JSON body at limit bytes in all, an event stream at limit bytes per
// event. The MCP client reads a JSON response whole before anything else
// can look at its size, so the cap must sit below it.
type cappedTransport struct {
	base  http.RoundTripper
	limit int64
	// cut counts the messages cut, for the caller whose request ended
	// without saying why (an event stream's error stays in the client).
	cut *atomic.Uint64
}

// RoundTrip implements http.RoundTripper.
func (t *cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > t.limit {
		t.cut.Add(1)
		resp.Body.Close()
		return nil, fmt.Errorf("%w: a response of %d bytes, more than %d (%s)", ErrMessageTooLarge, resp.ContentLength, t.limit, limitHint)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &cappedBody{rc: resp.Body, limit: t.limit, events: mt == "text/event-stream", cut: t.cut}
	return resp, nil
}

// limitHint tells an operator how the limit is set.
const limitHint = "twice " + MaxHTMLSetting + " and 1 MiB"

// cappedBody fails a read once more than limit bytes came without an end:
// the end of the body, or for an event stream the blank line that ends an
// event.
type cappedBody struct {
	rc     io.ReadCloser
	limit  int64
	events bool
	cut    *atomic.Uint64
	n      int64 // bytes since the last event ended
	lastNL bool  // the last byte that was not '\r' was '\n'
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.n >= b.limit {
		b.cut.Add(1)
		return 0, fmt.Errorf("%w: more than %d bytes in one message (%s)", ErrMessageTooLarge, b.limit, limitHint)
	}
	if rest := b.limit - b.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.rc.Read(p)
	if !b.events {
		b.n += int64(n)
		return n, err
	}
	for _, c := range p[:n] {
		switch c {
		case '\r':
		case '\n':
			if b.lastNL {
				b.n = 0 // an event ended; the next starts
			}
			b.lastNL = true
		default:
			b.lastNL = false
		}
		b.n++
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// stdioTransport runs a server as a child process and speaks
// newline-delimited JSON-RPC over its standard input and output, reading at
// most maxLine bytes of one line.
type stdioTransport struct {
	cmd       *exec.Cmd
	maxLine   int
	terminate time.Duration
	cut       *atomic.Uint64
}

// Connect implements mcp.Transport.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout of %s: %w", t.cmd.Path, err)
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin of %s: %w", t.cmd.Path, err)
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", t.cmd.Path, err)
	}
	it := &mcp.IOTransport{
		// Closing the session closes stdin and ends the child; stdout is
		// closed by the child's exit.
		Reader: io.NopCloser(&cappedLines{r: stdout, limit: t.maxLine, cut: t.cut}),
		Writer: &childInput{w: stdin, cmd: t.cmd, grace: t.terminate},
		// The SDK's own bound on one decoded value stays as a second
		// line, for a message spread over several lines; a little above
		// ours, so that a long line meets ours and its clearer error.
		MaxLineLength: t.maxLine + 64<<10,
	}
	return it.Connect(ctx)
}

// cappedLines fails a read once more than limit bytes came without a
// newline: a stdio server's message is one line.
type cappedLines struct {
	r     io.Reader
	limit int
	cut   *atomic.Uint64
	n     int // bytes since the last newline
}

func (c *cappedLines) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		c.cut.Add(1)
		return 0, fmt.Errorf("%w: a line of more than %d bytes (%s)", ErrMessageTooLarge, c.limit, limitHint)
	}
	if rest := c.limit - c.n; len(p) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		c.n = n - i - 1
	} else {
		c.n += n
	}
	return n, err
}

// tooLarge reports an error caused by a message over the limit. The MCP
// client passes a transport's error on as text, so the text is what is
// left to look at.
func tooLarge(err error) bool {
	return err != nil && (errors.Is(err, ErrMessageTooLarge) || strings.Contains(err.Error(), ErrMessageTooLarge.Error()))
}

// childInput is a stdio child's standard input. Closing it asks the child
// to end, as the MCP specification's stdio shutdown says: close its input,
// wait, then SIGTERM, then SIGKILL.
type childInput struct {
	w     io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration
}

func (c *childInput) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *childInput) Close() error {
	err := c.w.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case werr := <-done:
			return errors.Join(err, werr)
		case <-time.After(c.grace):
		}
		_ = c.cmd.Process.Signal(sig)
	}
	return errors.Join(err, <-done)
}
