package store

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"teamsbot/mcpapps"
)

// ErrNotFound is returned for a record that does not exist, or a view that
// has expired (an expired view is never returned).
var ErrNotFound = errors.New("store: not found")

// Options configures Open. The zero value is usable.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
	// OpenTimeout bounds waiting for the file lock; zero means 5 s.
	OpenTimeout time.Duration
}

// Store is the service's bbolt file.
type Store struct{}

// Open opens (creating and migrating) the store file at path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) { panic("unimplemented") }

// Close closes the file.
func (s *Store) Close() error { panic("unimplemented") }

// Run is one agent run and its notes.
type Run struct {
	ID        string    `json:"id"`
	AgentID   string    `json:"agentId"`
	TenantID  string    `json:"tenantId"`
	UserID    string    `json:"userId,omitempty"`
	UserName  string    `json:"userName,omitempty"`
	Text      string    `json:"text"` // the answer text
	Notes     []string  `json:"notes,omitempty"`
	ViewIDs   []string  `json:"viewIds,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// NewView is a view with its HTML, as written by SaveRun.
type NewView struct {
	View mcpapps.View
	HTML []byte
}

// AuditRecord is one entry of the append-only audit log.
type AuditRecord struct {
	Seq      uint64         `json:"seq"` // set by the store
	Time     time.Time      `json:"time"`
	TenantID string         `json:"tenantId"`
	Action   string         `json:"action"` // e.g. agent.mcp_app.view
	Actor    string         `json:"actor,omitempty"`
	Fields   map[string]any `json:"fields,omitempty"`
}

// AuditQuery selects audit records; zero fields match everything.
type AuditQuery struct {
	TenantID string
	Action   string
	From, To time.Time // [From, To)
	Limit    int
}

// SaveRun writes a run, its views (HTML once per SHA-256) and its audit
// records in one commit. Concurrent calls share commits.
func (s *Store) SaveRun(ctx context.Context, run Run, views []NewView, audit []AuditRecord) error {
	panic("unimplemented")
}

// View returns a view; ErrNotFound when unknown or expired.
func (s *Store) View(ctx context.Context, id string) (mcpapps.View, error) { panic("unimplemented") }

// ViewHTML returns the HTML with the given SHA-256 (hex).
func (s *Store) ViewHTML(ctx context.Context, sha256hex string) ([]byte, error) {
	panic("unimplemented")
}

// GetRun returns a run.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) { panic("unimplemented") }

// Append adds audit records.
func (s *Store) Append(ctx context.Context, recs ...AuditRecord) error { panic("unimplemented") }

// Audit returns the matching records in time order.
func (s *Store) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	panic("unimplemented")
}

// ConversationRef is what a proactive send needs, kept per conversation.
type ConversationRef struct {
	Key            string    `json:"key"` // tenant + conversation id
	TenantID       string    `json:"tenantId"`
	ConversationID string    `json:"conversationId"`
	ServiceURL     string    `json:"serviceUrl"`
	ChannelID      string    `json:"channelId"`
	BotID          string    `json:"botId"`
	Reference      []byte    `json:"reference"` // the Bot Framework ConversationReference JSON
	UpdatedAt      time.Time `json:"updatedAt"`
}

// PutConversation stores or replaces a conversation reference.
func (s *Store) PutConversation(ctx context.Context, ref ConversationRef) error {
	panic("unimplemented")
}

// Conversation returns a conversation reference.
func (s *Store) Conversation(ctx context.Context, key string) (ConversationRef, error) {
	panic("unimplemented")
}

// DeleteConversation removes a conversation reference; unknown keys are not an error.
func (s *Store) DeleteConversation(ctx context.Context, key string) error { panic("unimplemented") }

// SweepStats says what one sweep removed.
type SweepStats struct {
	Views, HTML int
	Longest     time.Duration // longest write transaction
}

// Sweep deletes expired views and unreferenced HTML in short transactions.
func (s *Store) Sweep(ctx context.Context) (SweepStats, error) { panic("unimplemented") }

// Ping checks the file is open and readable.
func (s *Store) Ping(ctx context.Context) error { panic("unimplemented") }
