package bot

import (
	"context"
	"errors"
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
	// streamPatience is how long an update may wait for its place under
	// Teams' rate limits before it is left for the next one.
	streamPatience = time.Second
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
	// changed, when set, is called on each change, outside mu: the
	// stream's look at what to send.
	changed func()
	// first, when set, is called once, on the answer's first words: a
	// personal chat opens its stream then, rather than wait.
	first     func()
	firstOnce sync.Once
}

// watch makes f the progress's changed.
func (p *progress) watch(f func()) {
	p.mu.Lock()
	p.changed = f
	p.mu.Unlock()
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
	first, changed := p.first, p.changed
	p.mu.Unlock()
	if first != nil {
		p.firstOnce.Do(first)
	}
	if changed != nil {
		changed()
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
	return &progress{text: text}
}

// step is the agent's Request.Progress.
func (p *progress) step(s agent.Step) {
	p.mu.Lock()
	p.text = cards.StreamCalling(textclip.Clip(s.Tool, 64), textclip.Clip(s.Server, 64))
	changed := p.changed
	p.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// asking says a server's question waits for the person; the step that
// follows replaces it.
func (p *progress) asking(server string) {
	p.mu.Lock()
	p.text = cards.StreamAsking(textclip.Clip(server, 64))
	changed := p.changed
	p.mu.Unlock()
	if changed != nil {
		changed()
	}
}

func (p *progress) now() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.text
}

// stream is one open streaming message. It has no goroutine of its own
// while it waits: a change of the run's progress, or one of its timers,
// looks at what to send (look), and an update waits for its place under
// the rate limits in the pacer's queues, and goes out in a goroutine that
// lives as long as its request. Thousands of slow runs at once hold
// thousands of streams, and each goroutine held its stack.
type stream struct {
	b       *Bot
	a       *schema.Activity
	p       *progress
	ctx     context.Context
	id      string
	started time.Time

	mu      sync.Mutex
	seq     int
	last    string    // the text of the last update sent
	sent    time.Time // when it was sent
	sending bool      // an update, or the closing message, is on its way
	again   bool      // the stream was quiet for streamQuiet: send the current update again
	waiting bool      // next is set for the next update's time
	expired bool      // streamMax has passed: the stream closes itself
	halted  bool      // stop was called or ctx ended: nothing more is sent
	// closed is set when the stream had to end itself (its time ran
	// out, or Teams refused an update): the answer then goes out as
	// ordinary new messages. Read after stop.
	closed             bool
	next, quiet, limit *time.Timer
	stopWatch          func() bool // ends the watch of ctx
	sends              sync.WaitGroup
}

// openStream opens a stream in a's personal chat with the run's current
// progress as its first informative update, keeps it up to date until
// stop, and calls then, in a goroutine of its own, with it once Teams has
// answered, or with nil when Teams would not open one (the answer then
// takes the ordinary path). The first update waits for its place under
// the rate limits without a goroutine (SendLater), as the later ones do.
func (b *Bot) openStream(ctx context.Context, a *schema.Activity, p *progress, then func(*stream)) {
	s := &stream{b: b, a: a, p: p, ctx: ctx, seq: 1, started: time.Now()}
	last, answering := p.shown()
	b.conn.SendLater(ctx, a.ServiceURL, a.Conversation.ID, s.update(last, answering), func(id string, err error) {
		if err != nil || id == "" {
			b.logger.Warn("streaming message not started; using the working card", "conversation", a.Conversation.ID, "err", err)
			then(nil)
			return
		}
		s.mu.Lock()
		s.id, s.last, s.sent = id, last, time.Now()
		s.limit = time.AfterFunc(b.streamMax, s.expire)
		s.quiet = time.AfterFunc(b.streamQuiet, s.quieted)
		s.stopWatch = context.AfterFunc(ctx, s.halt)
		s.mu.Unlock()
		p.watch(s.changed)
		s.changed() // what changed while the stream opened
		then(s)
	})
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

// changed is the progress's changed: the run's progress moved on.
func (s *stream) changed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.look()
}

// quieted is the quiet timer's: the current update goes again.
func (s *stream) quieted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.again = true
	s.look()
}

// expire is the limit timer's: the stream closes itself with a word that
// the answer follows.
func (s *stream) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expired = true
	s.look()
}

// tick is the next timer's: an update's time has come.
func (s *stream) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = false
	s.look()
}

// look decides, with s.mu held, what the stream sends next: nothing while
// an update is on its way (it looks again when it is done) or once halted;
// the closing message once expired; otherwise the run's progress when it
// changed (or the quiet time passed), at most once every streamEvery:
// sooner, the next timer is set for its time. Teams takes one request of
// a stream at a time, each after the previous one succeeded.
func (s *stream) look() {
	if s.sending || s.halted {
		return
	}
	if s.expired {
		s.halted, s.closed = true, true
		s.stopTimers()
		out := s.b.outgoing(s.a, schema.Message)
		out.Text = cards.StreamTakingAWhile
		out.Entities = []any{streamEntity{Type: "streaminfo", StreamID: s.id, StreamType: "final"}}
		s.post(s.ctx, out, "", true)
		return
	}
	text, answering := s.p.shown()
	if text == s.last && !s.again {
		return
	}
	if wait := streamEvery - time.Since(s.sent); wait > 0 {
		if !s.waiting {
			s.waiting = true
			if s.next == nil {
				s.next = time.AfterFunc(wait, s.tick)
			} else {
				s.next.Reset(wait)
			}
		}
		return
	}
	ctx := s.ctx
	if !s.again {
		// The update waits for its place under the rate limits no
		// longer than streamPatience: the next one would carry its
		// text, and the tenant's other turns need the places for their
		// answers. A repeat of a quiet stream waits as long as it
		// takes, or the stream would end.
		ctx = withPatience(ctx, streamPatience)
	}
	s.again = false
	s.seq++
	s.post(ctx, s.update(text, answering), text, false)
}

// post sends out, an update showing text or the closing message, with
// s.mu held; done looks again once it is sent. It waits for its place
// under the rate limits without a goroutine (SendLater).
func (s *stream) post(ctx context.Context, out *outActivity, text string, closing bool) {
	s.sending = true
	s.sends.Add(1)
	s.b.conn.SendLater(ctx, s.a.ServiceURL, s.a.Conversation.ID, out, func(_ string, err error) {
		defer s.sends.Done()
		s.done(err, text, closing)
	})
}

// done is the end of a send post began.
func (s *stream) done(err error, text string, closing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sending = false
	switch {
	case !closing && errors.Is(err, errPaceBusy):
		// Not sent, and not numbered: the next look, a second on,
		// sends what the run shows then.
		s.seq--
		s.b.metrics.streamUpdatesSkipped.Inc()
		s.sent = time.Now()
		s.look()
		return
	case closing:
		if err != nil {
			s.b.logger.Warn("closing the streaming message failed", "conversation", s.a.Conversation.ID, "err", err, "open_for", time.Since(s.started))
		}
		return
	case err != nil:
		// Teams refused the stream (its time ran out, or streaming is
		// not allowed): the answer goes out the ordinary way.
		s.b.logger.Warn("streaming update refused; the answer will be a new message", "conversation", s.a.Conversation.ID, "err", err)
		s.halted, s.closed = true, true
		s.stopTimers()
		return
	}
	s.last, s.sent = text, time.Now()
	s.quiet.Reset(s.b.streamQuiet)
	s.look()
}

// halt ends the updates (stop, or ctx's end) without waiting for one on
// its way.
func (s *stream) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.halted = true
	s.stopTimers()
}

// stopTimers stops the stream's timers, with s.mu held.
func (s *stream) stopTimers() {
	for _, t := range []*time.Timer{s.next, s.quiet, s.limit} {
		if t != nil {
			t.Stop()
		}
	}
}

// stop ends the updates and waits for the one on its way, if any; it
// reports whether the stream is still open for its final message.
func (s *stream) stop() bool {
	s.p.watch(nil)
	s.halt()
	s.sends.Wait()
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed
}

// final makes out the stream's final message.
func (s *stream) final(out *outActivity) {
	out.Entities = append(out.Entities, streamEntity{Type: "streaminfo", StreamID: s.id, StreamType: "final"})
}
