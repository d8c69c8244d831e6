package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"teamsbot/internal/dialgate"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/offstack"
	"teamsbot/internal/textclip"
)

// OpenAIModel is a model behind an OpenAI-compatible Chat Completions API
// with tool calling: OpenAI itself, Azure OpenAI, or a compatible server,
// reached through OpenAI's Go client (github.com/openai/openai-go/v3).
//
// The client retries a request that failed to connect or was answered 408,
// 409, 429 or 5xx at most twice, after the wait the answer's Retry-After
// (or Retry-After-Ms) asks for, else after half a second, then one; a wait
// that would pass the run's deadline (its ctx) is not begun, and the answer
// that asked for it is the error. Each attempt is bounded by
// ModelConfig.Timeout, reading a streamed answer included.
//
// With Turn.Stream set the answer is asked for as a stream of server-sent
// events, and each piece of text is handed to Stream as it arrives. The
// Chat Completions API does not say ahead whether a reply will call tools:
// text a model writes before the tool calls of the same reply is heard too
// (the Message carries it in Text, beside the calls); nothing is heard once
// a tool call has begun.
type OpenAIModel struct {
	client  openai.Client
	model   string
	host    string // the endpoint's host, the only part of its URL an error names
	timeout time.Duration
	token   func(ctx context.Context, scope string) (string, error)
}

// OpenAIOptions are what an OpenAIModel is given besides its configuration.
type OpenAIOptions struct {
	// Key is the API key, sent as Authorization: Bearer, or in the api-key
	// header for Azure OpenAI. Empty sends none (local servers need none).
	Key string
	// Token, when set, is asked for an Entra ID access token for
	// CognitiveServicesScope before each request, which then carries it as
	// Authorization: Bearer (and no key).
	Token func(ctx context.Context, scope string) (string, error)
	// Transport carries the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

// CognitiveServicesScope is the scope of an Entra ID token for Azure
// OpenAI, as Microsoft's "How to configure Azure OpenAI in Azure AI
// Foundry Models with Microsoft Entra ID authentication" gives it.
const CognitiveServicesScope = "https://cognitiveservices.azure.com/.default"

// Bounds of what the model's server may send, so that it cannot exhaust
// the service: a whole answer, one server-sent event of a streamed one, a
// streamed answer in all, the tool calls of one streamed reply, and what is
// kept of an error answer to quote.
const (
	maxModelResponseBytes = 8 << 20
	maxModelEventBytes    = 1 << 20
	maxModelStreamBytes   = 32 << 20
	maxStreamedToolCalls  = 4 * MaxToolCallsPerRound
	maxModelErrorBytes    = 64 << 10
	// maxModelRetries is how many times the client tries a request again.
	maxModelRetries = 2
)

// NewOpenAIModel returns a model for cfg.
func NewOpenAIModel(cfg ModelConfig, o OpenAIOptions) (*OpenAIModel, error) {
	root := cfg.BaseURL
	if root == "" {
		root = DefaultOpenAIBaseURL
	}
	root = strings.TrimRight(root, "/")
	u, err := url.Parse(root)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("model baseURL %s: not an absolute URL", netaddr.RedactURLCredentials(root))
	}
	timeout, err := parseTimeout(cfg.Timeout, DefaultModelTimeout)
	if err != nil {
		return nil, fmt.Errorf("model timeout: %w", err)
	}
	transport := o.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	if t, ok := transport.(*http.Transport); ok && t.DialTLSContext == nil && t.DialTLS == nil {
		// Every run's answer is a long request to this one host: a
		// burst of them shares HTTP/2 connections instead of dialling
		// one each.
		transport = dialgate.New(t.Clone())
	}
	opts := []option.RequestOption{
		option.WithBaseURL(root),
		// The key (api-key or Authorization) and the conversation are for
		// the configured endpoint only: Go's client would copy api-key to
		// any host a redirect names, and Authorization to another port.
		option.WithHTTPClient(&http.Client{Transport: transport, CheckRedirect: netaddr.SameOriginRedirects}),
		option.WithMaxRetries(maxModelRetries),
		option.WithRequestTimeout(timeout),
	}
	// The client's platform headers (its language and version, the OS,
	// the architecture, Go's version) tell the model's server nothing it
	// needs, and Go's HTTP/2 client keeps every header of a request for as
	// long as its answer streams: without them a request's headers fit
	// Go's smallest map.
	for _, h := range platformHeaders {
		opts = append(opts, option.WithHeaderDel(h))
	}
	if cfg.APIVersion != "" {
		opts = append(opts, option.WithQuery("api-version", cfg.APIVersion))
	}
	switch {
	case o.Token != nil, o.Key == "":
	case cfg.Azure || cfg.APIVersion != "":
		opts = append(opts, option.WithHeader("api-key", o.Key))
	default:
		opts = append(opts, option.WithAPIKey(o.Key))
	}
	// A Client made with its options alone, unlike openai.NewClient, reads
	// no OPENAI_* variable: the configuration alone says where the model
	// is and which key it gets.
	return &OpenAIModel{
		client:  openai.Client{Options: opts},
		model:   cfg.Model,
		host:    u.Host,
		timeout: timeout,
		token:   o.Token,
	}, nil
}

// platformHeaders are the headers the client adds to describe its
// platform, which are not sent.
var platformHeaders = []string{"X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS", "X-Stainless-Arch", "X-Stainless-Runtime", "X-Stainless-Runtime-Version"}

var openAIName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolNames maps each offered tool to a name the API accepts
// (^[a-zA-Z0-9_-]{1,64}$) and back. "server/tool" becomes "server__tool"
// with other characters replaced by "_"; a name that is too long or taken
// is shortened and given a hash of the original, so the mapping stays
// one-to-one and the same from turn to turn.
func toolNames(tools []ToolSpec) (map[string]string, map[string]string) {
	to := make(map[string]string, len(tools))
	from := make(map[string]string, len(tools))
	for _, t := range tools {
		name := sanitize(t.Server) + "__" + sanitize(t.Tool)
		if len(name) > 64 || from[name] != "" || !openAIName.MatchString(name) {
			sum := sha256.Sum256([]byte(t.Name))
			h := hex.EncodeToString(sum[:4])
			if len(name) > 55 {
				name = name[:55]
			}
			name += "_" + h
		}
		to[t.Name] = name
		from[name] = t.Name
	}
	return to, from
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// Next implements Model.
//
// A streamed answer may take minutes, and the goroutine reading it waits
// for it all that time with every frame below it on its stack; thousands
// of runs at once hold thousands of such stacks. So the stream is read by
// the small frames of read and more, which wait for the answer's next
// bytes right above the body's own; the request is built and sent
// (start), and the events read and decoded (take), by callees that have
// returned by then. Go halves a waiting goroutine's stack while it uses
// under a quarter of it: these frames keep it at 4 KiB, however deep the
// work between the waits went.
func (m *OpenAIModel) Next(ctx context.Context, t Turn) (reply Message, err error) {
	m.start(ctx, t).read(func(r Message, e error) { reply, err = r, e })
	return reply, err
}

// Ask implements asker. The request is sent on a goroutine of its own,
// whose stack grows to 8 KiB for the client's round trip, and the answer
// read on another, which starts small, hands the reply to done and goes
// on with the run: under a burst thousands of requests wait for their
// answers' headers, and each keeps the one goroutine sending it.
func (m *OpenAIModel) Ask(ctx context.Context, t Turn, done func(Message, error)) {
	go func() {
		r := m.start(ctx, t)
		go r.read(done)
	}()
}

// start sends t's request. An answer that streams is left unread in the
// answerRead; any other answer, or the failure, is read here.
func (m *OpenAIModel) start(ctx context.Context, t Turn) *answerRead {
	// x follows this request through the client's attempts; its context
	// ends the attempts early when waiting for another would be in vain.
	ctx, stop := context.WithCancelCause(ctx)
	r := &answerRead{ctx: ctx, x: &exchange{cancel: stop}, answer: streamedAnswer{m: m, hear: t.Stream}}
	var c *modelCall
	var err error
	offstack.Run(func() { c, err = m.prepare(ctx, t, r.x) })
	if err != nil {
		r.err = err
		return r
	}
	if t.Stream == nil {
		r.reply, r.err = m.once(ctx, r.x, c)
		return r
	}
	// The body is not kept while the answer streams.
	raw, err := m.open(ctx, c)
	c.body = nil
	if err != nil {
		r.err = m.failure(ctx, r.x, err)
		return r
	}
	if !isEventStream(raw.Header) {
		// A server that does not stream answers in one piece: read it so.
		r.reply, r.err = m.whole(ctx, r.x, raw.Body, c.from, t.Stream)
		raw.Body.Close()
		return r
	}
	r.from, r.src.body = c.from, raw.Body
	r.events.src = &r.src
	return r
}

// answerRead is a streamed answer being read: as server-sent events (the
// Chat Completions API's stream: true), each piece of text handed to the
// turn's Stream as it arrives, the tool calls assembled from their deltas
// by index, their arguments concatenated. A stream that ends before a
// chunk gave a finish_reason was cut, and is an error.
//
// The events are read here (the format of "Create chat completion" with
// stream: true: data lines of chunk JSON, an error object in place of a
// chunk on failure, then data: [DONE]), in a buffer that grows only as an
// event needs and into the few fields the service uses.
type answerRead struct {
	ctx  context.Context
	x    *exchange
	from map[string]string
	// src reads the answer's body while it streams; its body is nil when
	// start read the answer.
	src    arrived
	events eventReader
	answer streamedAnswer
	// reply and err are the answer, or its failure, once read.
	reply Message
	err   error
}

// read reads the answer to its end and hands it, or its failure, to
// done. Its frame holds no reply while the answer streams: then does.
func (r *answerRead) read(done func(Message, error)) {
	for r.more() {
	}
	r.then(done)
}

// more waits for the answer's next bytes, then reads the events they
// complete, and reports whether the answer goes on. It waits with a read
// of one byte in its own small frame; the event reader then takes that
// byte before what else the body holds.
func (r *answerRead) more() bool {
	if r.src.body == nil || r.err != nil {
		return false
	}
	if r.src.empty() && r.events.drained() {
		n, err := r.src.body.Read(r.src.first[:])
		r.src.got, r.src.err = n, err
	}
	return r.take()
}

// take reads and absorbs the events that have arrived, and reports
// whether the answer goes on. An event whose end has not arrived yet is
// waited for here.
//
//go:noinline
func (r *answerRead) take() bool {
	for !r.answer.done {
		data, err := r.events.next()
		if err == io.EOF {
			return false
		}
		if err == nil {
			err = r.answer.absorb(r.ctx, data)
		}
		if err != nil {
			r.err = r.answer.m.failure(r.ctx, r.x, err)
			return false
		}
		if r.src.empty() && r.events.drained() {
			r.events.rest()
			return !r.answer.done
		}
	}
	return false
}

// then hands the answer, or its failure, to done.
//
//go:noinline
func (r *answerRead) then(done func(Message, error)) {
	r.x.cancel(nil) // the request's context, which ends with the answer
	if r.src.body != nil {
		r.src.body.Close()
		r.events.rest()
		if r.err == nil {
			r.reply, r.err = r.answer.message(r.from)
		}
	}
	done(r.reply, r.err)
}

// arrived is what the event reader reads: the byte more waited for, then
// the answer's body.
type arrived struct {
	body  io.ReadCloser
	first [1]byte
	got   int   // bytes of first not yet read: 0 or 1
	err   error // the body's error with them
}

// empty says whether nothing waited for is left to read.
func (a *arrived) empty() bool { return a.got == 0 && a.err == nil }

func (a *arrived) Read(p []byte) (int, error) {
	switch {
	case len(p) == 0:
		return 0, nil
	case a.got > 0:
		p[0], a.got = a.first[0], 0
		return 1, nil
	case a.err != nil:
		err := a.err
		a.err = nil
		return 0, err
	}
	return a.body.Read(p)
}

// modelCall is one request to the model: its body (the Chat Completions
// parameters, encoded), the client's options for it, and the offered
// tools' names as the API has them.
type modelCall struct {
	body []byte
	opts []option.RequestOption
	from map[string]string
}

// chatPath is the Chat Completions endpoint under the base URL (Azure
// OpenAI's client middleware maps it to the deployment's).
const chatPath = "chat/completions"

// prepare builds t's request, with an Entra ID token when the model takes
// one. The parameters are encoded here, so that no frame below holds
// them (ChatCompletionNewParams is a few kilobytes by value) while the
// request is sent and its answer awaited.
func (m *OpenAIModel) prepare(ctx context.Context, t Turn, x *exchange) (*modelCall, error) {
	to, from := toolNames(t.Tools)
	body, err := m.params(t, to).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: the request to %s could not be encoded: %w", ErrModel, m.host, err)
	}
	if t.Stream != nil {
		body = streamed(body)
	}
	c := &modelCall{body: body, from: from, opts: []option.RequestOption{option.WithMiddleware(x.attempt)}}
	if m.token != nil {
		tok, err := m.token(ctx, CognitiveServicesScope)
		if err != nil {
			return nil, fmt.Errorf("%w: no Entra ID token for the model: %w", ErrModel, err)
		}
		c.opts = append(c.opts, option.WithHeader("Authorization", "Bearer "+tok))
	}
	return c, nil
}

// once asks for the answer in one piece.
//
//go:noinline
func (m *OpenAIModel) once(ctx context.Context, x *exchange, c *modelCall) (Message, error) {
	resp := &openai.ChatCompletion{}
	if err := m.client.Post(ctx, chatPath, c.body, resp, c.opts...); err != nil {
		return Message{}, m.failure(ctx, x, err)
	}
	noteUsage(ctx, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	return m.message(resp, c.from)
}

// streamed is the encoded request body b (a JSON object) asking for the
// answer as a stream ("stream": true, which the parameters' type leaves
// to the call that streams).
func streamed(b []byte) []byte {
	if len(b) < 2 || b[0] != '{' {
		return b // not an object: a server that does not stream is read whole
	}
	out := make([]byte, 0, len(b)+len(`"stream":true,`))
	out = append(out, `{"stream":true`...)
	if rest := bytes.TrimSpace(b[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, b[1:]...)
}

// params is the Chat Completions request of a turn; to maps the offered
// tools' names to the API's.
func (m *OpenAIModel) params(t Turn, to map[string]string) *openai.ChatCompletionNewParams {
	p := &openai.ChatCompletionNewParams{Model: shared.ChatModel(m.model)}
	p.Messages = make([]openai.ChatCompletionMessageParamUnion, 0, len(t.Messages)+1)
	p.Messages = append(p.Messages, openai.SystemMessage(systemPrompt(t.AgentName)))
	for _, msg := range t.Messages {
		switch msg.Role {
		case RoleUser:
			text := msg.Text
			if msg.From != "" {
				// A conversation several people share: the model is told
				// who said what (the API's own name field takes only
				// [A-Za-z0-9_-], which most names are not).
				text = msg.From + ": " + text
			}
			p.Messages = append(p.Messages, openai.UserMessage(text))
		case RoleAssistant:
			am := &openai.ChatCompletionAssistantMessageParam{}
			if msg.Text != "" || len(msg.ToolCalls) == 0 {
				am.Content.OfString = param.NewOpt(msg.Text)
			}
			for _, c := range msg.ToolCalls {
				name := to[c.Name]
				if name == "" {
					name = sanitize(c.Name)
				}
				am.ToolCalls = append(am.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: string(c.Arguments)},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: am})
		case RoleTool:
			text := msg.Text
			if msg.IsError {
				text = "Error: " + text
			}
			p.Messages = append(p.Messages, openai.ToolMessage(text, msg.ToolCallID))
		}
	}
	for _, s := range t.Tools {
		desc := s.Description
		if s.Title != "" && s.Title != s.Tool {
			desc = s.Title + ". " + desc
		}
		fn := shared.FunctionDefinitionParam{Name: to[s.Name], Parameters: schemaParams(s.InputSchema)}
		if desc != "" {
			fn.Description = param.NewOpt(desc)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	switch {
	case len(p.Tools) == 0:
	case t.Final:
		// The tools stay described (the history names them), but none may
		// be called now.
		p.ToolChoice.OfAuto = param.NewOpt("none")
	default:
		p.ToolChoice.OfAuto = param.NewOpt("auto")
	}
	return p
}

// schemaParams is a tool's input schema as the API's parameters: an object
// schema with no properties when the tool has none.
func schemaParams(schema any) shared.FunctionParameters {
	switch s := schema.(type) {
	case nil:
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	case map[string]any:
		return s
	}
	var out shared.FunctionParameters
	if b, err := json.Marshal(schema); err == nil && json.Unmarshal(b, &out) == nil && out != nil {
		return out
	}
	return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
}

// message turns a whole answer into the assistant's message.
func (m *OpenAIModel) message(resp *openai.ChatCompletion, from map[string]string) (Message, error) {
	if len(resp.Choices) == 0 {
		return Message{}, fmt.Errorf("%w: the answer from %s has no choices", ErrModel, m.host)
	}
	cm := resp.Choices[0].Message
	out := Message{Role: RoleAssistant, Text: cm.Content}
	for _, tc := range cm.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, modelToolCall(tc.ID, tc.Function.Name, tc.Function.Arguments, from))
	}
	return out, nil
}

// modelToolCall is one call the model asked for, named as offered.
func modelToolCall(id, name, args string, from map[string]string) ToolCall {
	offered := from[name]
	if offered == "" {
		offered = name // not offered: the run refuses it
	}
	raw := json.RawMessage(args)
	if strings.TrimSpace(args) == "" {
		raw = json.RawMessage("{}")
	}
	return ToolCall{ID: id, Name: offered, Arguments: raw}
}

// streamedCall is a tool call being assembled from a stream's deltas.
type streamedCall struct {
	id, name string
	args     strings.Builder
}

// open sends a streamed request and returns its answer unread.
//
//go:noinline
func (m *OpenAIModel) open(ctx context.Context, c *modelCall) (*http.Response, error) {
	var raw *http.Response
	// The answer is taken as it came (WithResponseInto), unread: stream
	// reads it.
	err := m.client.Post(ctx, chatPath, c.body, nil, append(c.opts, option.WithResponseInto(&raw))...)
	if err != nil {
		if raw != nil && raw.Body != nil {
			raw.Body.Close()
		}
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: no answer from %s", ErrModel, m.host)
	}
	return raw, nil
}

// streamedAnswer gathers a streamed answer's chunks.
type streamedAnswer struct {
	m        *OpenAIModel
	hear     func(string)
	text     strings.Builder
	calls    map[int64]*streamedCall
	finished bool // a chunk gave a finish_reason
	done     bool // data: [DONE] came
}

// absorb takes one event's data.
//
//go:noinline
func (a *streamedAnswer) absorb(ctx context.Context, data []byte) error {
	if bytes.HasPrefix(data, []byte("[DONE]")) {
		a.done = true
		return nil
	}
	var chunk chatChunk
	if err := chunk.decode(data); err != nil {
		return fmt.Errorf("%w: the stream from %s sent an event that is not a chunk: %w", ErrModel, a.m.host, err)
	}
	if len(chunk.Error) > 0 && !bytes.Equal(chunk.Error, []byte("null")) {
		return &ssestream.StreamError{Message: "received error while streaming", Event: ssestream.Event{Data: bytes.Clone(data)}}
	}
	// Usage comes in a chunk of its own, when the server sends it.
	noteUsage(ctx, chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens)
	for _, c := range chunk.Choices {
		if c.Index != 0 {
			continue // n is 1: other choices are not asked for
		}
		if d := c.Delta.Content; d != "" {
			a.text.WriteString(d)
			if len(a.calls) == 0 {
				a.hear(d)
			}
		}
		for _, tc := range c.Delta.ToolCalls {
			sc := a.calls[tc.Index]
			if sc == nil {
				if len(a.calls) == maxStreamedToolCalls {
					return fmt.Errorf("%w: the answer from %s asks for more than %d tool calls", ErrModel, a.m.host, maxStreamedToolCalls)
				}
				if a.calls == nil {
					a.calls = map[int64]*streamedCall{}
				}
				sc = &streamedCall{}
				a.calls[tc.Index] = sc
			}
			if sc.id == "" {
				sc.id = tc.ID
			}
			if sc.name == "" {
				sc.name = tc.Function.Name
			}
			sc.args.WriteString(tc.Function.Arguments)
		}
		if c.FinishReason != "" {
			a.finished = true
		}
	}
	return nil
}

// message is the streamed answer as the assistant's message, its tool
// calls in the order of their indices.
//
//go:noinline
func (a *streamedAnswer) message(from map[string]string) (Message, error) {
	if !a.finished {
		return Message{}, fmt.Errorf("%w: the answer from %s ended before it was complete", ErrModel, a.m.host)
	}
	out := Message{Role: RoleAssistant, Text: a.text.String()}
	indices := make([]int64, 0, len(a.calls))
	for i := range a.calls {
		indices = append(indices, i)
	}
	slices.Sort(indices)
	for _, i := range indices {
		sc := a.calls[i]
		out.ToolCalls = append(out.ToolCalls, modelToolCall(sc.id, sc.name, sc.args.String(), from))
	}
	return out, nil
}

// eventReader reads the data of server-sent events ("text/event-stream"
// in the HTML standard): the data lines of an event joined by newlines,
// an event ending at a blank line; comments, other fields and events
// without data are skipped. Its buffer starts small and grows only as a
// line needs. It fails once one event (its lines, their ends counted)
// passes maxModelEventBytes or the stream passes maxModelStreamBytes, so
// that a server cannot make it gather without end.
//
// A model streams a few pieces over seconds, and thousands of answers
// stream at once: between pieces, once all that arrived was read, the
// reader gives its buffers back (rest), and takes them again when the
// next piece comes.
type eventReader struct {
	src   io.Reader
	r     *bufio.Reader // nil while resting
	data  []byte
	event int // bytes of the current event's lines so far
	total int // bytes of the stream so far
}

// eventBuffers are the resting readers' buffers.
var eventBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 512) }}

// drained says whether all that was read from src was taken.
func (e *eventReader) drained() bool { return e.r == nil || e.r.Buffered() == 0 }

// rest gives the buffers back when drained: the answer waits for more.
func (e *eventReader) rest() {
	if !e.drained() {
		return
	}
	if e.r != nil {
		e.r.Reset(nil)
		eventBuffers.Put(e.r)
		e.r = nil
	}
	e.data = nil
}

// next returns the next event's data, valid until the next call, or
// io.EOF at the end of the stream (an event not ended by a blank line is
// dropped, as the standard says).
func (e *eventReader) next() ([]byte, error) {
	if e.r == nil {
		e.r = eventBuffers.Get().(*bufio.Reader)
		e.r.Reset(e.src)
	}
	e.data = e.data[:0]
	e.event = 0
	has := false
	for {
		line, err := e.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return e.data, nil
			}
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(name) == 0 {
			continue // a comment
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(name) == "data" {
			if has {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, value...)
			has = true
		}
	}
}

// line reads one line without its end (LF or CRLF); the last line of a
// stream may have none.
func (e *eventReader) line() ([]byte, error) {
	line, err := e.r.ReadSlice('\n')
	if cerr := e.count(len(line)); cerr != nil {
		return nil, cerr
	}
	if err == bufio.ErrBufferFull {
		// A long line: gather it beyond the buffer, within the bounds.
		long := bytes.Clone(line)
		for err == bufio.ErrBufferFull {
			line, err = e.r.ReadSlice('\n')
			if cerr := e.count(len(line)); cerr != nil {
				return nil, cerr
			}
			long = append(long, line...)
		}
		line = long
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// count adds n bytes read to the event's and the stream's, and fails past
// their bounds.
func (e *eventReader) count(n int) error {
	e.event += n
	e.total += n
	switch {
	case e.event > maxModelEventBytes:
		return &sizeError{"one event of the stream", maxModelEventBytes}
	case e.total > maxModelStreamBytes:
		return &sizeError{"the stream", maxModelStreamBytes}
	}
	return nil
}

// whole reads an answer in one piece to a request for a stream, and hands
// its text to hear at once.
func (m *OpenAIModel) whole(ctx context.Context, x *exchange, body io.Reader, from map[string]string, hear func(string)) (Message, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return Message{}, m.failure(ctx, x, err)
	}
	var resp openai.ChatCompletion
	if err := json.Unmarshal(data, &resp); err != nil {
		return Message{}, fmt.Errorf("%w: the answer from %s is neither a stream of events nor Chat Completions JSON", ErrModel, m.host)
	}
	noteUsage(ctx, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	msg, err := m.message(&resp, from)
	if err == nil && msg.Text != "" && len(msg.ToolCalls) == 0 {
		hear(msg.Text)
	}
	return msg, err
}

func systemPrompt(agent string) string {
	if agent == "" {
		agent = "an assistant"
	}
	return "You are " + agent + ". Use the tools offered when they help answer. " +
		"Some tool results are also shown to the person as an interactive view; describe the result in words."
}

// failure is the error of a request that failed: it wraps ErrModel and
// says what happened in words an operator reads (the status and the API's
// own message, the host), never the key, a token or the URL's path and
// query.
func (m *OpenAIModel) failure(ctx context.Context, x *exchange, err error) error {
	if x.stopped != nil {
		// The exchange ended the attempts itself: what made it is the error.
		err = x.stopped
	}
	var (
		aerr *openai.Error
		serr *ssestream.StreamError
		size *sizeError
		uerr *url.Error
	)
	switch {
	case errors.As(err, &aerr) || (x.status >= 400 && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)):
		status := x.status
		if aerr != nil {
			status = aerr.StatusCode
		}
		msg := errorText(x.body)
		if x.tooLong > 0 {
			msg += fmt.Sprintf(" (it asked to be tried again in %s, after the run's deadline)", x.tooLong.Round(time.Second))
		}
		return fmt.Errorf("%w: HTTP %d from %s: %s", ErrModel, status, m.host, msg)
	case errors.As(err, &size):
		return fmt.Errorf("%w: the answer from %s was cut: %w", ErrModel, m.host, size)
	case errors.As(err, &serr):
		return fmt.Errorf("%w: the stream from %s reported an error: %s", ErrModel, m.host, errorText(serr.Event.Data))
	case errors.Is(err, context.DeadlineExceeded) && context.Cause(ctx) == nil:
		return fmt.Errorf("%w: no complete answer from %s within %s", ErrModel, m.host, m.timeout)
	case errors.As(err, &uerr):
		// Keep the chain (a cancelled run's context.Canceled among it) but
		// not the URL's path and query.
		return fmt.Errorf("%w: %w", ErrModel, &url.Error{Op: uerr.Op, URL: netaddr.Redact(uerr.URL), Err: uerr.Err})
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the answer from %s broke off: %w", ErrModel, m.host, err)
	}
	return fmt.Errorf("%w: %w", ErrModel, err)
}

// errorText is the API's own message in an error body, with its code, or
// the body itself when it is not the API's error JSON; clipped.
func errorText(body []byte) string {
	var ce struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &ce) == nil && ce.Error.Message != "" {
		msg = ce.Error.Message
		if code := fmt.Sprint(ce.Error.Code); ce.Error.Code != nil && code != "" {
			msg += " (" + code + ")"
		}
	}
	if msg == "" {
		msg = "no message"
	}
	return textclip.Clip(msg, 300)
}

// exchange follows one model request through the client's attempts: it
// bounds what each answer may send, keeps the last error answer to quote,
// and stops the retries that would wait past the deadline.
type exchange struct {
	cancel context.CancelCauseFunc
	// stopped is the error on which the exchange ended the attempts.
	stopped error
	// status and body are the last attempt's HTTP status (0 when it had
	// no answer) and, for an error status, the start of its body.
	status int
	body   []byte
	// tooLong is the wait a retry asked for that the deadline cut short.
	tooLong time.Duration
}

// stop ends the attempts on err: the client sees its context cancelled,
// and failure reports err.
func (x *exchange) stop(err error) {
	x.stopped = err
	x.cancel(err)
}

// attempt is a middleware of the client: it runs around each attempt,
// retries included.
func (x *exchange) attempt(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	x.status, x.body, x.tooLong = 0, nil, 0
	// Go's HTTP/2 client holds the request for as long as its answer
	// streams, and with it the body, a few kilobytes that were sent in
	// the first milliseconds: the body lets go of them once sent, and
	// GetBody (net/http's to send it again on another connection) once
	// the answer came. The client's own retries make a new request.
	var again *bodyAgain
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &sentOnce{rc: req.Body}
		if req.GetBody != nil {
			again = &bodyAgain{get: req.GetBody}
			req.GetBody = again.body
		}
	}
	res, err := next(req)
	again.release()
	if err != nil {
		// A redirect elsewhere, refused, comes back with its 3xx answer,
		// which the client does not try again; a failure to connect it
		// does, unless the wait would pass the deadline.
		if d, ok := req.Context().Deadline(); ok && req.Context().Err() == nil && time.Now().Add(retryWait(nil, req)).After(d) {
			x.stop(err)
		}
		return res, err
	}
	if res == nil || res.Body == nil {
		return res, err
	}
	x.status = res.StatusCode
	if res.StatusCode >= 400 {
		data, rerr := io.ReadAll(io.LimitReader(res.Body, maxModelErrorBytes))
		_ = res.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		x.body = data
		res.Body = io.NopCloser(bytes.NewReader(data))
		if d, ok := req.Context().Deadline(); ok {
			if wait := retryWait(res, req); time.Now().Add(wait).After(d) {
				// The client honours x-should-retry over the status: the
				// answer is the error now, rather than the deadline's.
				res.Header.Set("X-Should-Retry", "false")
				x.tooLong = wait
			}
		}
		return res, nil
	}
	if !isEventStream(res.Header) {
		// A stream is bounded as it is read (eventReader).
		res.Body = &bodyBound{rc: res.Body, left: maxModelResponseBytes}
	}
	return res, nil
}

// retryWait is how long the client waits before trying req again after
// res (nil: no answer): what Retry-After-Ms or Retry-After ask for, else
// its longest backoff for this retry (half a second, doubled each time).
func retryWait(res *http.Response, req *http.Request) time.Duration {
	if res != nil {
		if v, err := strconv.ParseFloat(res.Header.Get("Retry-After-Ms"), 64); err == nil && v >= 0 {
			return clampWait(v * float64(time.Millisecond))
		}
		if v := res.Header.Get("Retry-After"); v != "" {
			if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
				return clampWait(s * float64(time.Second))
			}
			if at, err := http.ParseTime(v); err == nil {
				return max(time.Until(at), 0)
			}
		}
	}
	n, _ := strconv.Atoi(req.Header.Get("X-Stainless-Retry-Count"))
	return clampWait(0.5 * float64(time.Second) * math.Pow(2, float64(n)))
}

// clampWait keeps a wait in nanoseconds within a day, far past any
// deadline, so that a huge Retry-After cannot overflow.
func clampWait(ns float64) time.Duration {
	if math.IsNaN(ns) || ns > float64(24*time.Hour) {
		return 24 * time.Hour
	}
	return time.Duration(ns)
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// sizeError is what reading an answer beyond its bound gives.
type sizeError struct {
	what  string
	limit int
}

func (e *sizeError) Error() string {
	return fmt.Sprintf("%s is larger than %d MiB", e.what, e.limit>>20)
}

// bodyBound reads a whole answer, and fails past maxModelResponseBytes.
type bodyBound struct {
	rc   io.ReadCloser
	left int
}

func (b *bodyBound) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &sizeError{"the answer", maxModelResponseBytes}
	}
	if len(p) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= n
	if b.left < 0 {
		return n, &sizeError{"the answer", maxModelResponseBytes}
	}
	return n, err
}

func (b *bodyBound) Close() error { return b.rc.Close() }

var _ Model = (*OpenAIModel)(nil)
var _ Model = (*BuiltinModel)(nil)

// sentOnce is a request's body that drops what it reads from once it is
// all read or closed. Go's HTTP/2 client may close it while it reads.
type sentOnce struct {
	mu sync.Mutex
	rc io.ReadCloser
}

func (b *sentOnce) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rc == nil {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		_ = b.rc.Close()
		b.rc = nil
	}
	return n, err
}

func (b *sentOnce) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rc == nil {
		return nil
	}
	err := b.rc.Close()
	b.rc = nil
	return err
}

// errBodyReleased is GetBody's once the attempt it was for has its answer.
var errBodyReleased = errors.New("agent: the request's body was let go once its answer came")

// bodyAgain is a request's GetBody until release.
type bodyAgain struct {
	mu  sync.Mutex
	get func() (io.ReadCloser, error)
}

func (g *bodyAgain) body() (io.ReadCloser, error) {
	g.mu.Lock()
	get := g.get
	g.mu.Unlock()
	if get == nil {
		return nil, errBodyReleased
	}
	rc, err := get()
	if err != nil {
		return nil, err
	}
	return &sentOnce{rc: rc}, nil
}

// release lets go of GetBody; g may be nil.
func (g *bodyAgain) release() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.get = nil
	g.mu.Unlock()
}
