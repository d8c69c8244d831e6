package viewpage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/agent"
	"teamsbot/elicit"
	"teamsbot/internal/web"
	"teamsbot/signin"
)

// A server's question during a view's tool call (elicitation), shown by
// the page itself.
//
// The page says, with the header QuestionsHeader on POST
// /api/mcp-apps/{id}/call, that it shows questions; the view page's
// bridge sends it, pages that show views without the questions' dialog
// (the playground) do not, and their calls are declined at once as
// before. Such a call carries an agent.Elicitor of the caller: the same
// person, the same tenant, the same view. A question of the call waits
// here under its random id until the page's own script fetches it
// (GET /api/mcp-apps/{id}/questions) and the person answers it
// (POST /api/mcp-apps/{id}/questions/{qid}), or until the time limit or
// the end of the call.
//
// The page shows it in a dialog of its own document, outside the view's
// frames: the view can neither read nor fill it in, and is told nothing
// of it; it gets the tool's result, which is the server's to make. Only
// the caller sees and answers it: another person, another tenant, or the
// same person on another view asking for it by its id is told there is
// no such question.
//
// The questions are kept in the memory of the process that runs the
// call: with several replicas, a person's requests must reach one of
// them (session affinity), or the page never sees the question and the
// call's wait ends as a cancel.

// QuestionsHeader is the header with which the page's call says it
// shows the questions of the call's server (value "page").
const QuestionsHeader = "Teamsbot-Questions"

// Bounds on questions.
const (
	// MaxPendingQuestions is how many questions may wait for one person
	// at once, over all their views: a server that asks more during
	// calls still under way gets a cancel for the extra ones.
	MaxPendingQuestions = 8
	// maxQuestionsInAll bounds the questions waiting in the process.
	maxQuestionsInAll = 10_000
	// MaxAnswerBodyBytes bounds the body of an answer: 20 fields, or a
	// multiple choice of 50 options, of at most 2,000 bytes each, with
	// room for JSON's escapes.
	MaxAnswerBodyBytes = 256 << 10
	// maxKnownBytes bounds the known parameter of the list.
	maxKnownBytes = 1 << 10
	// QuestionPollWait is how long GET /api/mcp-apps/{id}/questions with
	// known holds its answer while nothing changes: long enough that the
	// page asks rarely, well under any write timeout of the server.
	QuestionPollWait = 10 * time.Second
)

// errQuestionLimit is why a question was not shown: too many wait for
// the person already.
var errQuestionLimit = errors.New("viewpage: too many questions wait for this person")

// Question is a server's question waiting for the person's answer, as
// the page shows it (GET /api/mcp-apps/{id}/questions).
type Question struct {
	// ID is the question's random id, which its answer names.
	ID string `json:"id"`
	// Server is the MCP server that asks, Tool the tool whose call it
	// asks during, Agent the name of the agent the server belongs to.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Agent  string `json:"agent,omitempty"`
	// Mode is "form" or "url".
	Mode string `json:"mode"`
	// Message is the server's text, to be shown as text.
	Message string `json:"message"`
	// Form is what a form question asks for.
	Form *elicit.Form `json:"form,omitempty"`
	// URL is the https address a URL question asks the person to open.
	URL string `json:"url,omitempty"`
	// Deadline is when the call stops waiting for the answer.
	Deadline time.Time `json:"deadline"`
}

// QuestionList is the answer of GET /api/mcp-apps/{id}/questions.
type QuestionList struct {
	Questions []Question `json:"questions"`
}

// Answer is the body of POST /api/mcp-apps/{id}/questions/{qid}.
type Answer struct {
	// Action is accept, decline or cancel.
	Action string `json:"action"`
	// Values are a form's answers by field name: strings, numbers,
	// booleans, or arrays of strings for a multiple choice. Only an
	// accept of a form question carries them.
	Values map[string]any `json:"values,omitempty"`
}

// AnswerProblems is the answer of an accept whose values do not fit the
// form (422): the person corrects the fields named and sends again.
type AnswerProblems struct {
	Error    string           `json:"error"`
	Problems []elicit.Problem `json:"problems"`
}

// asker is whose a question is: the caller's tenant and user, and the
// view whose call asked.
type asker struct{ tenant, user, view string }

func askerOf(s signin.Session, viewID string) asker {
	return asker{tenant: s.TenantID, user: s.UserID, view: viewID}
}

// pendingQuestion is one question waiting for its answer.
type pendingQuestion struct {
	q        agent.Question
	who      asker
	seq      uint64
	deadline time.Time
	// reply receives the answer, sent while the question is taken off
	// the board under its lock; it holds one.
	reply chan agent.Reply
}

// questionBoard holds the questions waiting for an answer, for every
// person and view.
type questionBoard struct {
	mu   sync.Mutex
	byID map[string]*pendingQuestion
	seq  uint64
	// changed is closed, and replaced, whenever a question comes or
	// goes: a waiting list request wakes up.
	changed chan struct{}
}

// add puts p on the board, unless its person has MaxPendingQuestions
// waiting already or the board is full.
func (b *questionBoard) add(p *pendingQuestion) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byID == nil {
		b.byID = map[string]*pendingQuestion{}
	}
	if _, dup := b.byID[p.q.ID]; dup || p.q.ID == "" {
		return fmt.Errorf("viewpage: question id %q is empty or taken", p.q.ID)
	}
	n := 0
	for _, o := range b.byID {
		if o.who.tenant == p.who.tenant && o.who.user == p.who.user {
			n++
		}
	}
	if n >= MaxPendingQuestions || len(b.byID) >= maxQuestionsInAll {
		return errQuestionLimit
	}
	b.seq++
	p.seq = b.seq
	b.byID[p.q.ID] = p
	b.changedLocked()
	return nil
}

// withdraw takes p off the board for its waiter; it reports false when
// an answer took it first (the answer is then in p.reply).
func (b *questionBoard) withdraw(p *pendingQuestion) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byID[p.q.ID] != p {
		return false
	}
	delete(b.byID, p.q.ID)
	b.changedLocked()
	return true
}

// find returns the question id of who, or nil: another person's, another
// tenant's or another view's question is not found.
func (b *questionBoard) find(id string, who asker) *pendingQuestion {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.byID[id]; p != nil && p.who == who {
		return p
	}
	return nil
}

// answer hands r to question id of who and takes it off the board; it
// reports false when there is no such question (any more).
func (b *questionBoard) answer(id string, who asker, r agent.Reply) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.byID[id]
	if p == nil || p.who != who {
		return false
	}
	delete(b.byID, id)
	p.reply <- r
	b.changedLocked()
	return true
}

// list returns who's questions in the order they came, and the channel
// that is closed at the next change.
func (b *questionBoard) list(who asker) ([]*pendingQuestion, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	var out []*pendingQuestion
	for _, p := range b.byID {
		if p.who == who {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *pendingQuestion) int { return cmp.Compare(a.seq, b.seq) })
	return out, b.changed
}

func (b *questionBoard) changedLocked() {
	if b.changed != nil {
		close(b.changed)
	}
	b.changed = make(chan struct{})
}

// viewElicitor is the agent.Elicitor of one view call: it shows the
// call's questions to its caller, on the page that made the call.
type viewElicitor struct {
	h     *Handler
	who   asker
	write *writeDeadline
}

// Elicit puts q on the board for the caller and waits for the answer, the
// server's word that a URL question is done, or ctx's end.
func (e *viewElicitor) Elicit(ctx context.Context, q agent.Question) (agent.Reply, error) {
	if q.ViewID != e.who.view || q.Person.TenantID != e.who.tenant || q.Person.UserID != e.who.user {
		return agent.Reply{}, fmt.Errorf("viewpage: question %s is not for the caller of view %s", q.ID, e.who.view)
	}
	if _, ok := elicit.PageURL(q.URL); q.Mode == elicit.ModeURL && !ok {
		return agent.Reply{}, fmt.Errorf("viewpage: question %s: the address to open is not an https URL", q.ID)
	}
	// The deadline the page shows is the wall clock's: the wait is.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(q.Wait)
	}
	p := &pendingQuestion{q: q, who: e.who, deadline: deadline, reply: make(chan agent.Reply, 1)}
	if err := e.h.questions.add(p); err != nil {
		e.h.logger.WarnContext(ctx, "a server's question was not shown", "view", e.who.view, "server", q.Server, "tool", q.Tool, "err", err)
		return agent.Reply{}, fmt.Errorf("view %s: question %s: %w", e.who.view, q.ID, err)
	}
	// The person's time to answer does not count against the server's
	// write timeout: the call's response waits for it.
	shown := time.Now()
	wait := time.Until(deadline)
	e.write.push(wait)
	defer func() { e.write.push(time.Since(shown) - wait) }()

	select {
	case r := <-p.reply:
		return r, nil
	case <-q.Completed:
		// The server says the interaction at the address is complete:
		// the person did what it asked there.
		if e.h.questions.withdraw(p) {
			return agent.Reply{Action: elicit.Accept}, nil
		}
		return <-p.reply, nil
	case <-ctx.Done():
		if e.h.questions.withdraw(p) {
			return agent.Reply{}, ctx.Err()
		}
		// An answer came at the last moment, and the person was told it
		// was taken.
		return <-p.reply, nil
	}
}

// writeDeadline moves the write deadline of a view call's response by
// the time its person takes to answer: the server's WriteTimeout counts
// from the request's start, and covers the server's time, not the
// person's.
type writeDeadline struct {
	mu sync.Mutex
	rc *http.ResponseController
	// at is the deadline as moved so far; zero when the server sets none.
	at time.Time
}

// newWriteDeadline is the write deadline of the response w to r, which
// started at start (by the wall clock).
func newWriteDeadline(w http.ResponseWriter, r *http.Request, start time.Time) *writeDeadline {
	d := &writeDeadline{rc: http.NewResponseController(w)}
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 {
		d.at = start.Add(srv.WriteTimeout)
	}
	return d
}

// push moves the deadline by d.
func (d *writeDeadline) push(by time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at.IsZero() {
		return
	}
	d.at = d.at.Add(by)
	// A writer that cannot move its deadline keeps the server's: the
	// call then ends as it always did.
	_ = d.rc.SetWriteDeadline(d.at)
}

// questionsFor checks a request of the page's own script for the
// questions of view id: the person's session, the view of their tenant,
// the right to call its tools. It returns who asks.
func (h *Handler) questionsFor(c echo.Context) (asker, error) {
	r := c.Request()
	s, err := h.session(r)
	if err != nil {
		return asker{}, err
	}
	ctx := r.Context()
	v, err := h.viewFor(ctx, c.Param("id"), s)
	if err != nil {
		return asker{}, err
	}
	if err := h.access.CanCall(ctx, personOf(s), accessView(v)); err != nil {
		return asker{}, refusal(err)
	}
	return askerOf(s, v.ID), nil
}

// listQuestions serves GET /api/mcp-apps/{id}/questions: the questions
// of the view's calls waiting for this person, oldest first. With known
// (the ids the page has, comma-separated, possibly none) it holds its
// answer up to QuestionPollWait until the list is no longer that.
func (h *Handler) listQuestions(c echo.Context) error {
	r := c.Request()
	// A read, but of what only the page's own script may see: the view,
	// in its cross-site frames, is refused as a cross-site POST is.
	read := *r
	read.Method = http.MethodPost
	if err := h.cop.Check(&read); err != nil {
		return fmt.Errorf("%w: %w", ErrCrossOrigin, err)
	}
	who, err := h.questionsFor(c)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	hold := q.Has("known")
	known, err := knownIDs(q.Get("known"))
	if err != nil {
		return err
	}
	timer := time.NewTimer(QuestionPollWait)
	defer timer.Stop()
	var pending []*pendingQuestion
wait:
	for {
		var changed <-chan struct{}
		pending, changed = h.questions.list(who)
		if !hold || !sameIDs(pending, known) {
			break
		}
		select {
		case <-changed:
		case <-timer.C:
			break wait
		case <-r.Context().Done():
			break wait
		}
	}
	out := QuestionList{Questions: make([]Question, 0, len(pending))}
	for _, p := range pending {
		out.Questions = append(out.Questions, questionOf(p))
	}
	web.NoStore(c.Response().Header())
	return c.JSON(http.StatusOK, out)
}

func questionOf(p *pendingQuestion) Question {
	q := p.q
	out := Question{ID: q.ID, Server: q.Server, Tool: q.Tool, Agent: q.AgentName, Mode: q.Mode, Message: q.Message,
		Deadline: p.deadline.UTC().Truncate(time.Second)}
	switch q.Mode {
	case elicit.ModeURL:
		out.URL = q.URL
	default:
		f := q.Form
		if f.Fields == nil {
			f.Fields = []elicit.Field{}
		}
		out.Form = &f
	}
	return out
}

// knownIDs reads the known parameter: question ids separated by commas.
func knownIDs(s string) ([]string, error) {
	if len(s) > maxKnownBytes {
		return nil, badRequest(fmt.Sprintf("`known` is %d bytes long; it names at most %d questions, in at most %d bytes", len(s), MaxPendingQuestions, maxKnownBytes), nil)
	}
	if s == "" {
		return nil, nil
	}
	ids := strings.Split(s, ",")
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// sameIDs reports whether pending are exactly the questions known (sorted).
func sameIDs(pending []*pendingQuestion, known []string) bool {
	if len(pending) != len(known) {
		return false
	}
	for _, p := range pending {
		if _, ok := slices.BinarySearch(known, p.q.ID); !ok {
			return false
		}
	}
	return true
}

// answerQuestion serves POST /api/mcp-apps/{id}/questions/{qid}: the
// person's answer to a question of the view's call. 204 once it is handed
// to the call; 422 with the problems when an accepted form's values do
// not fit it; 404 when no such question waits for this person on this
// view (answered already, timed out, the call ended, or someone else's).
func (h *Handler) answerQuestion(c echo.Context) error {
	r := c.Request()
	if err := sameOriginJSON(h.cop, r); err != nil {
		return err
	}
	who, err := h.questionsFor(c)
	if err != nil {
		return err
	}
	qid := c.Param("qid")
	var a Answer
	if err := web.ReadJSON(c, &a, MaxAnswerBodyBytes); err != nil {
		return err
	}
	p := h.questions.find(qid, who)
	if p == nil {
		return fmt.Errorf("view %s: question %.64q: %w", who.view, qid, ErrQuestionNotFound)
	}
	reply := agent.Reply{Action: a.Action}
	switch a.Action {
	case elicit.Accept:
		if p.q.Mode == elicit.ModeURL {
			if len(a.Values) > 0 {
				return badRequest("this question asks you to open an address, not to fill in a form: send `accept` without `values`", nil)
			}
			break
		}
		content, problems := p.q.Form.Check(a.Values)
		if problems != nil {
			web.NoStore(c.Response().Header())
			return c.JSON(http.StatusUnprocessableEntity, AnswerProblems{
				Error:    "Some answers do not fit what the server asked. Correct the fields marked, then send again.",
				Problems: problems,
			})
		}
		reply.Content = content
	case elicit.Decline, elicit.Cancel:
	default:
		return badRequest(fmt.Sprintf("`action` %.32q is none of accept, decline, cancel: say which", a.Action), nil)
	}
	if !h.questions.answer(qid, who, reply) {
		return fmt.Errorf("view %s: question %.64q: %w", who.view, qid, ErrQuestionNotFound)
	}
	h.logger.InfoContext(r.Context(), "a server's question was answered on the view page", "view", who.view, "server", p.q.Server, "tool", p.q.Tool, "action", a.Action)
	return c.NoContent(http.StatusNoContent)
}
