package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/elicit"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// A server may ask the person for more during one of its tool calls
// (elicitation/create). The request is shown to whoever the call is made
// for: the run's person in the conversation of the run (the bot), the
// viewer on the view page (viewpage), nobody for a run without a person,
// which declines at once. The call's own timeout stops while the person
// is asked; the answer is checked against the request before it goes
// back. Each request and its outcome are audited, with field names and
// never values. Sampling (sampling/createMessage) is not offered: the
// agent does not lend its model to servers; a request for it is refused
// and audited.
//
// Which call a request belongs to: on Streamable HTTP the server sends it
// on the event stream of the call's own POST, and the service tags it on
// the way in with a random token of the call, which no server sees
// (tagRelated). Elsewhere (stdio, in memory) it belongs to the one run or
// view with a call under way on the session; when several are, nobody
// can tell whose it is, and it is declined.

// Audit actions of elicitation and sampling.
const (
	// AuditElicitation is a server's request for the person's input.
	AuditElicitation = "agent.elicitation.request"
	// AuditElicitationOutcome is how such a request ended.
	AuditElicitationOutcome = "agent.elicitation.outcome"
	// AuditSamplingRefused is a server's request to use the agent's
	// model, refused.
	AuditSamplingRefused = "agent.sampling.refused"
)

// DefaultElicitWait is how long a call waits for the person's answer
// before it is cancel.
const DefaultElicitWait = 5 * time.Minute

// Keys of _meta the service adds to a server's request on its way in:
// the call it belongs to and the order of the requested properties. A
// server's own values under these keys are replaced or removed.
const (
	metaCall  = "io.teamsbot/call"
	metaOrder = "io.teamsbot/order"
)

// Elicitor shows a server's question to the person a call is made for and
// waits for the answer.
type Elicitor interface {
	// Elicit returns the person's reply; it returns when ctx ends (the
	// time limit, the run stopped) with ctx's error. A form's Accept
	// content must already be checked with q.Form.Check.
	Elicit(ctx context.Context, q Question) (Reply, error)
}

// Question is one request of a server, ready to be shown.
type Question struct {
	// ID is the service's own id of the request (random): what a card's
	// or a page's answer names.
	ID        string
	AgentID   string
	AgentName string
	Server    string
	Tool      string
	// Person is whose answer it is: the run's person, or the viewer.
	Person Person
	// ViewID is the view whose call asked, for a view's call.
	ViewID string
	// Mode is elicit.ModeForm or elicit.ModeURL.
	Mode string
	// Message is the server's, clipped to elicit.MaxMessage.
	Message string
	Form    elicit.Form
	// URL is the https address a URL mode request asks the person to
	// open; Completed is closed when the server says the interaction
	// there is complete (notifications/elicitation/complete).
	URL       string
	Completed <-chan struct{}
	// Wait is how long the call waits for the answer.
	Wait time.Duration
	// Deadline is when the wait ends.
	Deadline time.Time
}

// Reply is the person's answer.
type Reply struct {
	// Action is elicit.Accept, elicit.Decline or elicit.Cancel.
	Action  string
	Content map[string]any
}

type elicitorKey struct{}

// WithElicitor returns ctx carrying e: the tool calls made under ctx may
// ask the person through it. Without one, a server's request is declined.
func WithElicitor(ctx context.Context, e Elicitor) context.Context {
	return context.WithValue(ctx, elicitorKey{}, e)
}

func elicitorFrom(ctx context.Context) Elicitor {
	e, _ := ctx.Value(elicitorKey{}).(Elicitor)
	return e
}

// elicitNotes gathers the run notes that the requests of a run's calls
// add; the handler runs on the session's goroutine, the run reads them
// after its call.
type elicitNotes struct {
	mu    sync.Mutex
	notes []string
}

func (n *elicitNotes) add(s string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, s)
}

func (n *elicitNotes) take() []string {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.notes
	n.notes = nil
	return out
}

type notesKey struct{}

// elicitCall is a tool call under way that a server's request may belong
// to.
type elicitCall struct {
	token   string
	session *mcp.ClientSession
	call    toolCall
	run     string
	agent   *agentRuntime
	asker   Elicitor
	notes   *elicitNotes
	// pause and resume stop and restart the call's own timeout.
	pause, resume func()
	// callCtx is the call's context: a wait for the person ends with it.
	callCtx context.Context
}

type callTokenKey struct{}

// startElicitable registers a call that is about to be sent, so that a
// request of the server during it finds whom to ask; the returned context
// carries its token for tagRelated. done unregisters it.
func (c *serverConn) startElicitable(ctx context.Context, g governedCall, pause, resume func()) (context.Context, func()) {
	ec := &elicitCall{token: rand.Text(), session: g.session, call: g.call, run: g.run, agent: g.agent,
		asker: elicitorFrom(ctx), pause: pause, resume: resume, callCtx: ctx}
	ec.notes, _ = ctx.Value(notesKey{}).(*elicitNotes)
	c.emu.Lock()
	if c.calls == nil {
		c.calls = map[string]*elicitCall{}
	}
	c.calls[ec.token] = ec
	c.emu.Unlock()
	return context.WithValue(ctx, callTokenKey{}, ec.token), func() {
		c.emu.Lock()
		delete(c.calls, ec.token)
		c.emu.Unlock()
	}
}

// callOf finds the call a server's request belongs to: by the token the
// service tagged it with, or as the one run's or view's call under way
// on the session. ambiguous says several were.
func (c *serverConn) callOf(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta) (ec *elicitCall, ambiguous bool) {
	c.emu.Lock()
	defer c.emu.Unlock()
	if tok, _ := meta[metaCall].(string); tok != "" {
		return c.calls[tok], false
	}
	// On protocol 2026-07-28 a server returns its requests in the call's
	// result (inputRequests), and the client asks during the call itself.
	if tok, _ := ctx.Value(callTokenKey{}).(string); tok != "" {
		return c.calls[tok], false
	}
	for _, e := range c.calls {
		if e.session != cs {
			continue
		}
		if ec != nil && (ec.run != e.run || ec.call.viewID != e.call.viewID || ec.call.person.UserID != e.call.person.UserID) {
			return nil, true
		}
		ec = e
	}
	return ec, false
}

// urlWaiter is a URL mode request shown, waiting for the server's word
// that the interaction is complete.
type urlWaiter struct {
	session *mcp.ClientSession
	done    chan struct{}
	once    sync.Once
}

// completed hears notifications/elicitation/complete.
func (c *serverConn) completed(cs *mcp.ClientSession, id string) {
	c.emu.Lock()
	w := c.urls[id]
	c.emu.Unlock()
	if w != nil && w.session == cs {
		w.once.Do(func() { close(w.done) })
	}
}

// elicit answers one elicitation/create of the server.
func (c *serverConn) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	s := c.svc
	p := req.Params
	ec, ambiguous := c.callOf(ctx, req.Session, p.Meta)
	if ec == nil {
		why := "no call of this service was under way on the session"
		if ambiguous {
			why = "several people's calls were under way on the session, so whose question it is cannot be told"
		}
		s.log.Warn("elicitation declined", "agent", c.agentID, "server", c.name, "why", why)
		s.metrics.elicited(c.name, "unrelated")
		return &mcp.ElicitResult{Action: elicit.Decline}, nil
	}
	q := Question{ID: rand.Text(), AgentID: ec.call.agentID, AgentName: ec.agent.cfg.DisplayName(), Server: c.name, Tool: ec.call.tool,
		Person: ec.call.person, ViewID: ec.call.viewID, Mode: p.Mode, Message: textclip.Clip(oneLineKeepBreaks(p.Message), elicit.MaxMessage)}
	if q.Mode == "" {
		q.Mode = elicit.ModeForm
	}
	fields := map[string]any{}
	accepted := false
	audit := func(action string, f map[string]any) {
		rec := ec.audit(action, s.now(), q)
		for k, v := range f {
			rec.Fields[k] = v
		}
		if err := s.appendAudit(context.WithoutCancel(ctx), rec); err != nil {
			s.log.Warn("elicitation audit record not written", "server", c.name, "err", err)
		}
	}
	// end answers the server and audits the outcome; why says why the
	// person was not asked, or did not answer.
	end := func(action, why string) (*mcp.ElicitResult, error) {
		f := map[string]any{"outcome": action}
		if why != "" {
			f["why"] = why
		}
		audit(AuditElicitationOutcome, f)
		s.metrics.elicited(c.name, action)
		return &mcp.ElicitResult{Action: action}, nil
	}

	switch q.Mode {
	case elicit.ModeForm:
		raw, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the requested schema does not encode"}
		}
		order, _ := p.Meta[metaOrder].([]any)
		names := make([]string, 0, len(order))
		for _, o := range order {
			if n, ok := o.(string); ok {
				names = append(names, n)
			}
		}
		form, err := elicit.Parse(raw, names)
		if err != nil {
			audit(AuditElicitation, nil)
			s.metrics.elicited(c.name, "refused")
			audit(AuditElicitationOutcome, map[string]any{"outcome": "refused", "why": textclip.Clip(err.Error(), maxReasonBytes)})
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: textclip.Clip(err.Error(), maxReasonBytes)}
		}
		q.Form = form
		fields["fields"] = form.FieldNames()
	case elicit.ModeURL:
		if u, err := url.Parse(p.URL); err == nil {
			fields["url_host"] = textclip.Clip(u.Hostname(), 255)
		}
		audit(AuditElicitation, fields)
		u, ok := elicit.PageURL(p.URL)
		if !ok {
			return end(elicit.Decline, "the address to open is not an https URL")
		}
		q.URL = u.String()
		done := make(chan struct{})
		q.Completed = done
		if p.ElicitationID != "" {
			w := &urlWaiter{session: req.Session, done: done}
			c.emu.Lock()
			if c.urls == nil {
				c.urls = map[string]*urlWaiter{}
			}
			c.urls[p.ElicitationID] = w
			c.emu.Unlock()
			// An accepted request waits for its completion until the
			// question's time is up; any other ends now.
			forget := func() {
				c.emu.Lock()
				if c.urls[p.ElicitationID] == w {
					delete(c.urls, p.ElicitationID)
				}
				c.emu.Unlock()
			}
			defer func() {
				if accepted {
					time.AfterFunc(time.Until(q.Deadline), forget)
					return
				}
				forget()
			}()
		}
	}
	if q.Mode == elicit.ModeForm {
		audit(AuditElicitation, fields)
	}

	if s.opts.Access != nil && !s.opts.Access.ElicitationAllowed(ctx, ec.call.tenantID, c.name) {
		ec.notes.add(fmt.Sprintf("server %s asked for input during %s; the tenant's admin turned that off for it, so it was declined", c.name, q.Tool))
		return end(elicit.Decline, "turned off by the tenant's admin")
	}
	if ec.asker == nil || ec.call.person.UserID == "" {
		ec.notes.add(fmt.Sprintf("server %s asked for input during %s; a run without a person cannot answer, so it was declined", c.name, q.Tool))
		return end(elicit.Decline, "no person to ask")
	}

	wait := s.opts.ElicitWait
	if wait <= 0 {
		wait = DefaultElicitWait
	}
	q.Wait, q.Deadline = wait, s.now().Add(wait)
	if ec.pause != nil {
		ec.pause()
		defer ec.resume()
	}
	// The call's context: the person's time to answer is bounded by the
	// wait, and ends with the run or the view's request.
	callCtx, stop := ec.ctx(ctx)
	defer stop()
	actx, cancel := context.WithTimeout(callCtx, wait)
	defer cancel()
	reply, err := ec.asker.Elicit(actx, q)
	switch {
	case err != nil && actx.Err() != nil && callCtx.Err() == nil:
		ec.notes.add(fmt.Sprintf("server %s asked for input during %s; no answer came within %s, so it was cancelled", c.name, q.Tool, wait))
		return end(elicit.Cancel, "no answer in time")
	case err != nil && callCtx.Err() != nil:
		return end(elicit.Cancel, "the call ended before an answer came")
	case err != nil:
		s.log.Warn("elicitation not shown", "server", c.name, "err", err)
		return end(elicit.Cancel, "the question could not be shown")
	}
	switch reply.Action {
	case elicit.Accept:
		if q.Mode == elicit.ModeForm {
			content, problems := q.Form.Check(reply.Content)
			if problems != nil {
				return end(elicit.Cancel, "the answer did not fit the request")
			}
			audit(AuditElicitationOutcome, map[string]any{"outcome": elicit.Accept})
			s.metrics.elicited(c.name, elicit.Accept)
			return &mcp.ElicitResult{Action: elicit.Accept, Content: content}, nil
		}
		accepted = true
		return end(elicit.Accept, "")
	case elicit.Decline:
		return end(elicit.Decline, "")
	default:
		return end(elicit.Cancel, "")
	}
}

// ctx is the context an elicitation of the call waits under: the
// session's handler context does not end with the call, so a call that
// ends (its run stopped, its view's request gone) must end the wait
// too.
func (ec *elicitCall) ctx(handler context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(handler)
	stop := context.AfterFunc(ec.callCtx, func() { cancel(context.Cause(ec.callCtx)) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// audit is an elicitation audit record of the call, in the tenant of the
// person asked; it names the request's fields, never their values.
func (ec *elicitCall) audit(action string, now time.Time, q Question) store.AuditRecord {
	f := map[string]any{"server": q.Server, "tool": q.Tool, "agent": q.AgentID, "elicitation": q.ID, "mode": q.Mode,
		"message": textclip.Clip(oneLine(q.Message), 200)}
	if ec.run != "" {
		f["run"] = ec.run
	}
	if ec.call.viewID != "" {
		f["view"] = ec.call.viewID
	}
	return store.AuditRecord{Time: now, TenantID: ec.call.tenantID, Action: action, Actor: ec.call.person.UserID, Fields: f}
}

// oneLineKeepBreaks is oneLine for a message a person reads: line breaks
// stay, other control characters go.
func oneLineKeepBreaks(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// refuseSampling is the client's receiving middleware: a server's
// sampling/createMessage is answered with the error of a method the
// client does not offer (the capability is never declared), and audited
// in the tenant of the call it came during, when one is known.
func (c *serverConn) refuseSampling(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "sampling/createMessage" {
			return next(ctx, method, req)
		}
		var meta mcp.Meta
		if p := req.GetParams(); p != nil {
			meta = p.GetMeta()
		}
		cs, _ := req.GetSession().(*mcp.ClientSession)
		ec, _ := c.callOf(ctx, cs, meta)
		c.samplingRefused(ctx, ec)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "sampling is not offered by this client"}
	}
}

// samplingRefused audits a server's request for the model during call
// ec (nil: a call unknown, logged only).
func (c *serverConn) samplingRefused(ctx context.Context, ec *elicitCall) {
	s := c.svc
	s.metrics.elicited(c.name, "sampling_refused")
	if ec == nil {
		s.log.Warn("sampling refused", "agent", c.agentID, "server", c.name)
		return
	}
	rec := store.AuditRecord{Time: s.now(), TenantID: ec.call.tenantID, Action: AuditSamplingRefused, Actor: ec.call.person.UserID,
		Fields: map[string]any{"server": c.name, "tool": ec.call.tool, "agent": ec.call.agentID, "why": "the agent does not lend its model to servers"}}
	if ec.run != "" {
		rec.Fields["run"] = ec.run
	}
	if ec.call.viewID != "" {
		rec.Fields["view"] = ec.call.viewID
	}
	if err := s.appendAudit(context.WithoutCancel(ctx), rec); err != nil {
		s.log.Warn("sampling audit record not written", "server", c.name, "err", err)
	}
}

// tagRelated is the transport of a Streamable HTTP server: it tags each
// request the server sends on the event stream of a call's POST with that
// call's token (_meta "io.teamsbot/call"), removes the key from anything
// else (so that a request can only name the call whose stream it came
// on), and relates what a call's result asks for (see relate). The HTTP
// connection itself is go-sdk's and is not wrapped.
type tagRelated struct {
	base http.RoundTripper
	conn *serverConn
}

func (t *tagRelated) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	tok, _ := req.Context().Value(callTokenKey{}).(string)
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "text/event-stream":
		resp.Body = &eventTagger{src: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10), ctx: req.Context(), token: tok, conn: t.conn}
	case "application/json":
		// One message, the response to this POST: only a call's result
		// may ask for input (inputRequests), and only a small one; a
		// large result (a resource, a view's data) is passed on as read.
		if tok == "" || resp.ContentLength > maxRelated {
			return resp, nil
		}
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxRelated+1))
		if rerr != nil {
			resp.Body.Close()
			return nil, rerr
		}
		if len(body) > maxRelated {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
			return resp, nil
		}
		resp.Body.Close()
		body = t.conn.relate(req.Context(), body, tok)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// eventTagger rewrites a server-sent event stream one line at a time.
type eventTagger struct {
	src   io.ReadCloser
	r     *bufio.Reader
	ctx   context.Context
	token string
	conn  *serverConn
	buf   bytes.Buffer
	err   error
	long  bool // in a line longer than the reader's buffer
}

func (e *eventTagger) Read(p []byte) (int, error) {
	for e.buf.Len() == 0 {
		if e.err != nil {
			return 0, e.err
		}
		line, err := e.r.ReadSlice('\n')
		switch {
		case e.long || errors.Is(err, bufio.ErrBufferFull):
			// A line longer than the buffer is passed on as it is, a
			// piece at a time (the capped transport below bounds it);
			// only a message that fits is related.
			e.buf.Write(line)
			e.long = errors.Is(err, bufio.ErrBufferFull)
			if e.long {
				err = nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			data := bytes.TrimSpace(line[len("data:"):])
			out := e.conn.relate(e.ctx, data, e.token)
			if len(data) > 0 && len(out) > 0 && &out[0] == &data[0] {
				e.buf.Write(line)
			} else {
				e.buf.WriteString("data: ")
				e.buf.Write(out)
				e.buf.WriteByte('\n')
			}
		default:
			e.buf.Write(line)
		}
		e.err = err
	}
	return e.buf.Read(p)
}

func (e *eventTagger) Close() error { return e.src.Close() }

// maxRelated bounds a message relate reads: a server's request for input
// and a result that asks for it are small, and a resource or a view's
// data, which may be megabytes, is passed on without being decoded.
const maxRelated = 1 << 20

// relate makes one JSON-RPC message from the server fit to be read: a
// request of the server (elicitation/create, sampling) gets the token of
// the call whose stream it came on (none: the key is removed), and an
// elicitation the order of its requested properties; a call's result that
// asks for input (protocol 2026-07-28: inputRequests) gets the same for
// each request it holds, and a request for the model among them is
// audited as refused (the client then fails the call). It returns msg
// itself when nothing changed.
func (c *serverConn) relate(ctx context.Context, msg []byte, token string) []byte {
	if len(msg) == 0 || len(msg) > maxRelated || msg[0] != '{' || !bytes.Contains(msg, []byte(`"method"`)) && !bytes.Contains(msg, []byte(`"inputRequests"`)) {
		return msg
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || m["id"] == nil {
		return msg
	}
	switch {
	case m["method"] != nil:
		var method string
		_ = json.Unmarshal(m["method"], &method)
		params, changed := retag(m["params"], token, method == "elicitation/create")
		if !changed {
			return msg
		}
		m["params"] = params
	case m["result"] != nil && token != "":
		result, changed := c.inputRequests(ctx, m["result"], token)
		if !changed {
			return msg
		}
		m["result"] = result
	default:
		return msg
	}
	out, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	return out
}

// inputRequests relates the requests a call's result holds (see relate).
func (c *serverConn) inputRequests(ctx context.Context, result json.RawMessage, tok string) (json.RawMessage, bool) {
	var res map[string]json.RawMessage
	if json.Unmarshal(result, &res) != nil {
		return result, false
	}
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}
	if json.Unmarshal(res["inputRequests"], &reqs) != nil || len(reqs) == 0 {
		return result, false
	}
	for k, r := range reqs {
		switch r.Method {
		case "elicitation/create":
			if params, changed := retag(r.Params, tok, true); changed {
				r.Params = params
				reqs[k] = r
			}
		case "sampling/createMessage":
			ec, _ := c.callOf(context.WithValue(ctx, callTokenKey{}, tok), nil, nil)
			c.samplingRefused(ctx, ec)
		}
	}
	raw, err := json.Marshal(reqs)
	if err != nil {
		return result, false
	}
	res["inputRequests"] = raw
	out, err := json.Marshal(res)
	if err != nil {
		return result, false
	}
	return out, true
}

// retag sets (or, with an empty token, removes) the call tag in a
// request's params, and with order adds the order of a requested
// schema's properties; changed is false when nothing needed to change.
func retag(params json.RawMessage, token string, order bool) (json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if len(params) == 0 || json.Unmarshal(params, &p) != nil || p == nil {
		if token == "" {
			return params, false
		}
		p = map[string]json.RawMessage{}
	}
	var meta map[string]any
	if raw := p["_meta"]; len(raw) > 0 && json.Unmarshal(raw, &meta) != nil {
		meta = nil
	}
	_, had := meta[metaCall]
	if token == "" && !had && !order {
		return params, false
	}
	if meta == nil {
		meta = map[string]any{}
	}
	delete(meta, metaCall)
	if token != "" {
		meta[metaCall] = token
	}
	if order {
		if names := elicit.PropertyOrder(p["requestedSchema"]); names != nil {
			meta[metaOrder] = names
		} else {
			delete(meta, metaOrder)
		}
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return params, false
	}
	p["_meta"] = raw
	out, err := json.Marshal(p)
	if err != nil {
		return params, false
	}
	return out, true
}

// relatedTransport is the connection of a transport without per-call
// streams (stdio, in memory) as the client sees it: what the server sends
// is related as on HTTP (relate), except that a request of the server
// cannot tell its call (any tag it carries is removed), while a call's
// result can, by its id.
type relatedTransport struct {
	mcp.Transport
	conn *serverConn
}

func (t *relatedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &relatedConn{Connection: conn, c: t.conn, calls: map[string]string{}}, nil
}

type relatedConn struct {
	mcp.Connection
	c *serverConn

	mu    sync.Mutex
	calls map[string]string // tools/call request id → the call's token
}

// idKey is a request id as a map key.
func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

func (rc *relatedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "tools/call" {
		if tok, _ := ctx.Value(callTokenKey{}).(string); tok != "" {
			rc.mu.Lock()
			rc.calls[idKey(req.ID)] = tok
			rc.mu.Unlock()
		}
	}
	return rc.Connection.Write(ctx, msg)
}

func (rc *relatedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := rc.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			if params, changed := retag(m.Params, "", m.Method == "elicitation/create"); changed {
				m.Params = params
			}
		}
	case *jsonrpc.Response:
		rc.mu.Lock()
		tok, ok := rc.calls[idKey(m.ID)]
		delete(rc.calls, idKey(m.ID))
		rc.mu.Unlock()
		if ok && m.Error == nil && bytes.Contains(m.Result, []byte(`"inputRequests"`)) {
			if result, changed := rc.c.inputRequests(ctx, m.Result, tok); changed {
				m.Result = result
			}
		}
	}
	return msg, nil
}

// related wraps the transport of a stdio or in-memory server; the HTTP
// transport is left as go-sdk made it (its connection has methods of its
// own that a wrapper would hide), its requests related by tagRelated.
func related(t mcp.Transport, c *serverConn) mcp.Transport {
	if _, ok := t.(*mcp.StreamableClientTransport); ok {
		return t
	}
	return &relatedTransport{Transport: t, conn: c}
}
