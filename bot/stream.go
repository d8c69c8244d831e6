package bot

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/textclip"
)

// In a personal chat a slow run is shown as a Teams streaming message
// (Microsoft's "Stream bot messages", REST API): an informative update
// ("Working on: …", then "Calling sales_report on demo…" for each tool
// call), and the answer as the stream's final message, which may carry the
// card. The rules followed: typing activities with a streaminfo entity;
// the first answered 201 with the stream's id; streamSequence 1, 2, 3, …
// and none on the final message, whose streamType is final; one request
// at a time, each after the previous one succeeded; no faster than one a
// second; the final message within two minutes of the start, or Teams
// ends the stream.
const (
	// streamEvery is the least time between two updates of a stream.
	streamEvery = time.Second
	// streamMax is how long a stream may stay open before the service
	// closes it itself, well inside Teams' two minutes; the answer then
	// follows as a new message.
	streamMax = 100 * time.Second
	// streamQuiet is the longest a stream goes without an update: the
	// current one is sent again after it. Microsoft 365 Copilot ends a
	// stream after 45 seconds without one ("Implement asynchronous and
	// proactive messaging in custom engine agents"), and a tool call may
	// take longer.
	streamQuiet = 30 * time.Second
)

// streamEntity is the streaminfo entity of a streaming activity.
type streamEntity struct {
	Type           string `json:"type"`
	StreamID       string `json:"streamId,omitempty"`
	StreamType     string `json:"streamType"`
	StreamSequence int    `json:"streamSequence,omitempty"`
}

// progress is what a run is doing now, in words for the person; the agent
// sets it, the stream shows it.
type progress struct {
	mu   sync.Mutex
	text string
	// answer is the answer's text so far, as the model writes it.
	answer string
	wake   chan struct{} // signalled, without blocking, on each change
	// first, when set, is called once, on the answer's first words: a
	// personal chat opens its stream then, rather than wait.
	first     func()
	firstOnce sync.Once
}

// maxStreamText bounds the answer's text in one streaming update: the
// final message carries the whole answer in its card.
const maxStreamText = 4000

// delta is the agent's Request.Stream: the answer's words as they come.
func (p *progress) delta(d string) {
	if d == "" {
		return
	}
	p.mu.Lock()
	if len(p.answer) < maxStreamText {
		p.answer = textclip.Clip(p.answer+d, maxStreamText)
	}
	first := p.first
	p.mu.Unlock()
	if first != nil {
		p.firstOnce.Do(first)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// shown is what the stream shows now: the answer's words once there are
// some, the run's progress until then, and which of the two.
func (p *progress) shown() (text string, answering bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answer != "" {
		return p.answer, true
	}
	return p.text, false
}

func newProgress(question string) *progress {
	q := textclip.Clip(strings.Join(strings.Fields(question), " "), 80)
	text := cards.WorkingOnIt
	if q != "" {
		text = cards.StreamWorkingOn(q)
	}
	return &progress{text: text, wake: make(chan struct{}, 1)}
}

// step is the agent's Request.Progress.
func (p *progress) step(s agent.Step) {
	p.mu.Lock()
	p.text = cards.StreamCalling(textclip.Clip(s.Tool, 64), textclip.Clip(s.Server, 64))
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *progress) now() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.text
}

// stream is one open streaming message.
type stream struct {
	b        *Bot
	a        *schema.Activity
	id       string
	seq      int
	stopOnce sync.Once
	stopped  chan struct{} // closed by stop
	done     chan struct{} // closed when the updater has returned
	// closed is set by the updater when it had to end the stream itself
	// (its time ran out, or Teams refused an update): the answer then
	// goes out as ordinary new messages. Read after done.
	closed bool
}

// startStream opens a stream in a's personal chat with the run's current
// progress as its first informative update, and keeps it up to date until
// stop. It returns nil when Teams would not open one (the answer then
// takes the ordinary path).
func (b *Bot) startStream(ctx context.Context, a *schema.Activity, p *progress) *stream {
	s := &stream{b: b, a: a, seq: 1, stopped: make(chan struct{}), done: make(chan struct{})}
	last, answering := p.shown()
	id, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, "", s.update(last, answering))
	if err != nil || id == "" {
		b.logger.Warn("streaming message not started; using the working card", "conversation", a.Conversation.ID, "err", err)
		return nil
	}
	s.id = id
	go s.run(ctx, p, last)
	return s
}

// update is the next update carrying text: informative while the run
// works, streaming once the answer's words come (Teams shows those as
// the message itself, each update the whole text so far).
func (s *stream) update(text string, answering bool) *outActivity {
	out := s.b.outgoing(s.a, schema.Typing)
	out.Text = text
	kind := "informative"
	if answering {
		kind = "streaming"
	}
	out.Entities = []any{streamEntity{Type: "streaminfo", StreamID: s.id, StreamType: kind, StreamSequence: s.seq}}
	return out
}

// run sends the run's progress as it changes, at most once a second, and
// again when the stream has been quiet for the bot's streamQuiet, until
// stop; it closes the stream itself when streamMax has passed.
func (s *stream) run(ctx context.Context, p *progress, last string) {
	defer close(s.done)
	started, sent := time.Now(), time.Now()
	limit := time.NewTimer(streamMax)
	defer limit.Stop()
	quiet := time.NewTimer(s.b.streamQuiet)
	defer quiet.Stop()
	for {
		again := false
		select {
		case <-s.stopped:
			return
		case <-ctx.Done():
			return
		case <-limit.C:
			s.closed = true
			out := s.b.outgoing(s.a, schema.Message)
			out.Text = cards.StreamTakingAWhile
			out.Entities = []any{streamEntity{Type: "streaminfo", StreamID: s.id, StreamType: "final"}}
			if _, err := s.b.conn.Send(ctx, s.a.ServiceURL, s.a.Conversation.ID, "", out); err != nil {
				s.b.logger.Warn("closing the streaming message failed", "conversation", s.a.Conversation.ID, "err", err, "open_for", time.Since(started))
			}
			return
		case <-quiet.C:
			again = true
		case <-p.wake:
		}
		if wait := streamEvery - time.Since(sent); wait > 0 {
			select {
			case <-time.After(wait):
			case <-s.stopped:
				return
			case <-ctx.Done():
				return
			}
		}
		text, answering := p.shown()
		if text == last && !again {
			continue
		}
		s.seq++
		if _, err := s.b.conn.Send(ctx, s.a.ServiceURL, s.a.Conversation.ID, "", s.update(text, answering)); err != nil {
			// Teams refused the stream (its time ran out, or streaming
			// is not allowed): the answer goes out the ordinary way.
			s.b.logger.Warn("streaming update refused; the answer will be a new message", "conversation", s.a.Conversation.ID, "err", err)
			s.closed = true
			return
		}
		last, sent = text, time.Now()
		quiet.Reset(s.b.streamQuiet)
	}
}

// stop ends the updates and waits for the updater; it reports whether the
// stream is still open for its final message.
func (s *stream) stop() bool {
	s.stopOnce.Do(func() { close(s.stopped) })
	<-s.done
	return !s.closed
}

// final makes out the stream's final message.
func (s *stream) final(out *outActivity) {
	out.Entities = append(out.Entities, streamEntity{Type: "streaminfo", StreamID: s.id, StreamType: "final"})
}
