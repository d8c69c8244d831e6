package store

import (
	"encoding/json"
	"time"

	"teamsbot/mcpapps"
)

// ViewLifetime is how long a view can be opened after it was made: the
// product keeps views for 7 days.
const ViewLifetime = 7 * 24 * time.Hour

// View is one view made from one tool call: what the view page needs to show
// it and what the access rule needs to decide who may open it. The HTML is
// kept apart, once per SHA-256. It is stored as JSON under these names.
type View struct {
	ID            string                 `json:"id"`
	RunID         string                 `json:"runId"`
	AgentID       string                 `json:"agentId"`
	TenantID      string                 `json:"tenantId"`
	UserID        string                 `json:"userId,omitempty"` // empty: a run with no person
	UserName      string                 `json:"userName,omitempty"`
	Server        string                 `json:"server"`
	Tool          string                 `json:"tool"`
	ToolTitle     string                 `json:"toolTitle,omitempty"`
	ResourceURI   string                 `json:"resourceUri"`
	HTMLSHA256    string                 `json:"htmlSha256"` // lower-case hex; the store's key of the HTML
	CSP           string                 `json:"csp"`        // the header value the view is served under (mcpapps.BuildCSP)
	CSPDropped    []mcpapps.DroppedEntry `json:"cspDropped,omitempty"`
	Permissions   mcpapps.Permissions    `json:"permissions"` // as asked; only Forms is granted
	PrefersBorder *bool                  `json:"prefersBorder,omitempty"`
	Arguments     json.RawMessage        `json:"arguments"`
	Result        json.RawMessage        `json:"result"` // a CallToolResult as JSON
	CreatedAt     time.Time              `json:"createdAt"`
	ExpiresAt     time.Time              `json:"expiresAt"`
}

// Expired reports whether the view can no longer be opened at now.
func (v View) Expired(now time.Time) bool { return !now.Before(v.ExpiresAt) }
