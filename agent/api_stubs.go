package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/mcpapps"
	"teamsbot/store"
)

// Errors of the governed path.
var (
	// ErrNotFound: unknown agent, server or tool.
	ErrNotFound = errors.New("agent: not found")
	// ErrToolNotAllowed: a view asked for a tool whose visibility lacks "app",
	// or a tool of another server.
	ErrToolNotAllowed = errors.New("agent: tool not allowed")
	// ErrDenied: the policy or a data rule denied the call.
	ErrDenied = errors.New("agent: denied")
)

// Person is who a run is for. UserID empty means a run with no person (a
// trigger); TenantID is always set.
type Person struct {
	TenantID string
	UserID   string
	Name     string
}

// Request asks for one run.
type Request struct {
	Person  Person
	AgentID string // empty: the first agent
	Text    string
}

// Refusal is a view that was not made.
type Refusal struct {
	Server, Tool, ResourceURI string
	Reason                    string // scheme, mime, size, content, read
	Detail                    string
}

// ToolError is a tool call that failed (IsError result or transport error).
type ToolError struct {
	Server, Tool, Message string
}

// Answer is the outcome of a run.
type Answer struct {
	RunID      string
	AgentID    string
	Text       string
	Views      []mcpapps.View
	Refusals   []Refusal
	ToolErrors []ToolError
	Notes      []string
}

// Decision is what a Policy is asked.
type Decision struct {
	Person   Person
	AgentID  string
	Action   string // "invoke"
	Server   string
	Tool     string
	FromView bool
}

// Policy decides whether a tool call may go ahead; a non-nil error denies it.
type Policy interface {
	Authorize(ctx context.Context, d Decision) error
}

// Options configures New.
type Options struct {
	Store            *store.Store
	Logger           *slog.Logger
	Now              func() time.Time
	Policy           Policy // nil: allow all
	AppsEnabled      bool
	MaxResourceBytes int
	HTTPClient       *http.Client
	Getenv           func(string) string
}

// Service runs agents.
type Service struct{}

// New connects every agent's MCP servers.
func New(ctx context.Context, cfg Config, opts Options) (*Service, error) { panic("unimplemented") }

// Run runs an agent for a person and stores what it made.
func (s *Service) Run(ctx context.Context, req Request) (Answer, error) { panic("unimplemented") }

// CallFromView calls a tool for a view through the governed path.
func (s *Service) CallFromView(ctx context.Context, v mcpapps.View, caller Person, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	panic("unimplemented")
}

// Ready reports whether every MCP server is reachable.
func (s *Service) Ready(ctx context.Context) error { panic("unimplemented") }

// Close closes MCP sessions.
func (s *Service) Close() error { panic("unimplemented") }

// Config is the agents part of the TICKETIQ_CONFIG file.
type Config struct{}
