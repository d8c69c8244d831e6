// Package triggers starts agent runs that no person asked for, and posts
// their answers into a Teams conversation where the app is installed:
//
//   - the runs API, POST /api/agents/{agent}/runs, authenticated by an API
//     key that a tenant admin creates and revokes (shown once, kept as the
//     SHA-256 of its secret, scoped to one tenant and one agent, audited
//     on every use and every refusal);
//   - scheduled triggers: a five-field cron expression in an IANA time
//     zone, an agent, a text and a conversation. Each due time is claimed
//     in the store before its run starts, so it runs at most once, also
//     across restarts; due times missed while the service was down run
//     once at start.
//
// It owns the cron parser, API key secrets, the admin operations on keys
// and triggers (each audited with before and after, in the same commit as
// the change), the runs API and the scheduler. It does not run the agent
// or talk to Teams (bot.RunTriggered does), decide who may open the views
// of such runs (access: the tenant's agent readers), or keep records
// (store).
package triggers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // IANA zones on any machine, with or without /usr/share/zoneinfo

	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/access"
	"teamsbot/bot"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// Errors of the package; the admin console and the runs API answer them.
var (
	// ErrInvalid wraps input an admin or a caller must correct; the
	// error's Words (web.Words) say what, in words for them.
	ErrInvalid = errors.New("triggers: invalid")
	// ErrNotFound means no key or trigger of that id in the tenant (or no
	// conversation of the app); the error's Words say which.
	ErrNotFound = errors.New("triggers: not found")
)

// Audit actions. Admin changes carry the state before and after; runs and
// key uses name the key or trigger.
const (
	AuditKeyCreate     = "admin.apikey.create"
	AuditKeyRevoke     = "admin.apikey.revoke"
	AuditTriggerCreate = "admin.trigger.create"
	AuditTriggerPause  = "admin.trigger.pause"
	AuditTriggerResume = "admin.trigger.resume"
	AuditTriggerDelete = "admin.trigger.delete"
	// AuditKeyUse is a run started with an API key.
	AuditKeyUse = "trigger.apikey.use"
	// AuditKeyRefused is a runs API call refused: no key, a malformed,
	// unknown, wrong or revoked one, or a key of another agent.
	AuditKeyRefused = "trigger.apikey.refused"
	// AuditScheduledRun is a due time claimed and its run started.
	AuditScheduledRun = "trigger.schedule.run"
)

// Limits of what the admin and the runs API give.
const (
	// MaxText bounds the text of a run, the API's and a trigger's.
	MaxText = store.MaxTriggerText
	// maxName bounds a key's or a trigger's name.
	maxName = 200
	// DefaultInterval is how often the scheduler looks at the triggers
	// when nothing is due sooner; changes made through this Service wake
	// it at once.
	DefaultInterval = 30 * time.Second
	// noticeWindow is how far back the console shows conversations the
	// app was removed from.
	noticeWindow = 30 * 24 * time.Hour
)

// Options configures New.
type Options struct {
	Store  *store.Store    // required
	Bot    *bot.Bot        // required: it runs and posts
	Access *access.Service // required: admin operations check agents.admin
	// Agents are the configured agent ids keys and triggers may name.
	Agents []string
	// PublicBaseURL, when https, gives the views' addresses in the runs
	// API's answer, as on the cards; otherwise only their ids are given.
	PublicBaseURL netaddr.Origin
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Interval bounds the scheduler's sleep; zero means DefaultInterval.
	Interval time.Duration
	// Registerer receives the package's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Service holds the admin operations, the runs API and the scheduler.
type Service struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics

	wake chan struct{} // a trigger changed: plan again

	mu       sync.Mutex
	inflight map[string]bool // tenant/trigger id of runs under way
	runs     sync.WaitGroup
}

// New builds the Service.
func New(opts Options) (*Service, error) {
	var errs []error
	if opts.Store == nil {
		errs = append(errs, errors.New("triggers: Options.Store is required"))
	}
	if opts.Bot == nil {
		errs = append(errs, errors.New("triggers: Options.Bot is required"))
	}
	if opts.Access == nil {
		errs = append(errs, errors.New("triggers: Options.Access is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("triggers: registering metrics: %w", err)
	}
	s := &Service{opts: opts, log: opts.Logger, now: opts.Now, metrics: m, wake: make(chan struct{}, 1), inflight: map[string]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.opts.Interval <= 0 {
		s.opts.Interval = DefaultInterval
	}
	return s, nil
}

// Agents returns the agent ids keys and triggers may name.
func (s *Service) Agents() []string { return slices.Clone(s.opts.Agents) }

// problem is an ErrInvalid or ErrNotFound with what is wrong in words for
// the admin or the caller who made the mistake (its Words, which the
// console and the runs API show), and the cause behind it, for errors.Is
// and the log.
type problem struct {
	sentinel error
	words    string
	cause    error
}

func (e *problem) Error() string {
	s := e.sentinel.Error() + ": " + e.words
	if e.cause != nil && !strings.Contains(e.words, e.cause.Error()) {
		s += ": " + e.cause.Error()
	}
	return s
}

// Words is what is wrong, in plain words.
func (e *problem) Words() string { return e.words }

func (e *problem) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// invalid is ErrInvalid saying what format and args make.
func invalid(format string, args ...any) error {
	return &problem{sentinel: ErrInvalid, words: fmt.Sprintf(format, args...)}
}

// notFound is ErrNotFound saying what format and args make, with its
// cause (the store's error; nil when nothing was asked of the store).
func notFound(cause error, format string, args ...any) error {
	return &problem{sentinel: ErrNotFound, words: fmt.Sprintf(format, args...), cause: cause}
}

// newID returns a random id of n bytes, hex.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// checkName checks a key's or a trigger's name.
func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", invalid("give it a name, so that the audit log and the cards can say which one it was")
	case len(name) > maxName:
		return "", invalid("the name is %d bytes long, at most %d", len(name), maxName)
	case strings.ContainsAny(name, "\x00\r\n"):
		return "", invalid("the name must be one line of text")
	}
	return name, nil
}

// checkAgent checks an agent id against the configuration.
func (s *Service) checkAgent(agentID string) error {
	if !slices.Contains(s.opts.Agents, agentID) {
		return invalid("there is no agent %q; the configured agents are %s", textclip.Clip(agentID, 64), strings.Join(s.opts.Agents, ", "))
	}
	return nil
}

// checkText checks the text a run asks.
func checkText(text string) (string, error) {
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return "", invalid("the text is empty: say what the agent should do")
	case len(text) > MaxText:
		return "", invalid("the text is %d bytes long, at most %d", len(text), MaxText)
	case strings.IndexByte(text, 0) >= 0:
		return "", invalid("the text contains a NUL byte")
	}
	return text, nil
}

// checkConversation checks that the app is installed in a conversation of
// the tenant.
func (s *Service) checkConversation(ctx context.Context, tenant, conversation string) error {
	conversation = strings.TrimSpace(conversation)
	if conversation == "" {
		return invalid("name the conversation (its id, as the admin console's conversations page lists it)")
	}
	if len(conversation) > 512 || strings.IndexByte(conversation, 0) >= 0 {
		return invalid("that is not a conversation id")
	}
	_, err := s.opts.Store.Conversation(ctx, bot.ConversationKey(tenant, conversation))
	if errors.Is(err, store.ErrNotFound) {
		return notFound(err, "the app is not installed in conversation %q of your organisation (see the conversations page)", textclip.Clip(conversation, 128))
	}
	return err
}

// signal wakes the scheduler to plan again.
func (s *Service) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
