// Package mcpapps is the MCP Apps extension (io.modelcontextprotocol/ui) as
// this service applies it: it reads _meta.ui from tools and resources, tells
// who may call a tool, checks a ui:// resource before it becomes a view, and
// builds the Content Security Policy a view is served under.
//
// It does no I/O: callers hand it what an MCP server returned and get back
// plain values, so the rules can be tested and fuzzed on their own. It does
// not read resources or call tools (agent does), keep views (store does),
// or decide who may open a view (viewpage does); the View record it
// defines is what those packages pass between them.
package mcpapps

import (
	"encoding/json"
	"time"
)

// ExtensionID names the extension in MCP capabilities.
const ExtensionID = "io.modelcontextprotocol/ui"

// MIMEType is the only MIME type a view's resource may have.
const MIMEType = "text/html;profile=mcp-app"

// DefaultMaxResourceBytes bounds the HTML of one view when the caller sets no
// limit: large enough for a bundled single-file app, small enough that one
// server cannot fill the store.
const DefaultMaxResourceBytes = 2 << 20

// Lifetime is how long a view can be opened after it was made.
const Lifetime = 7 * 24 * time.Hour

// Who may call a tool, as listed in _meta.ui.visibility.
const (
	VisibilityModel = "model"
	VisibilityApp   = "app"
)

// ToolUI is what a tool's _meta declares about its view and its callers.
type ToolUI struct {
	// ResourceURI is the ui:// resource of the tool's view, or empty.
	ResourceURI string
	// Visibility lists who may call the tool; nil (absent in _meta) means
	// both, an empty list nobody. Use VisibleTo rather than comparing it.
	Visibility []string
}

// CSPDomains are the origins a resource declares in _meta.ui.csp.
type CSPDomains struct {
	ConnectDomains  []string `json:"connectDomains,omitempty"`
	ResourceDomains []string `json:"resourceDomains,omitempty"`
	FrameDomains    []string `json:"frameDomains,omitempty"`
	BaseURIDomains  []string `json:"baseUriDomains,omitempty"`
}

// Permissions are the sandbox permissions a resource asks for in
// _meta.ui.permissions. Only Forms is ever granted.
type Permissions struct {
	Camera         bool `json:"camera,omitempty"`
	Microphone     bool `json:"microphone,omitempty"`
	Geolocation    bool `json:"geolocation,omitempty"`
	ClipboardWrite bool `json:"clipboardWrite,omitempty"`
	Forms          bool `json:"forms,omitempty"`
}

// ResourceUI is what a resource declares in _meta.ui, on its content item or,
// failing that, on its resources/list entry.
type ResourceUI struct {
	CSP           CSPDomains  `json:"csp"`
	Permissions   Permissions `json:"permissions"`
	Domain        string      `json:"domain,omitempty"`
	PrefersBorder *bool       `json:"prefersBorder,omitempty"`
}

// DroppedEntry is a declared CSP entry that was not added to the policy.
type DroppedEntry struct {
	// Field is the declaration it came from, such as "connectDomains".
	Field string `json:"field"`
	// Value is the entry as declared.
	Value string `json:"value"`
	// Reason says why it was dropped, for the audit log.
	Reason string `json:"reason"`
}

// View is one view made from one tool call: what the view page needs to show
// it and what the access rule needs to decide who may open it. The HTML is
// kept apart, once per SHA-256.
type View struct {
	ID            string          `json:"id"`
	RunID         string          `json:"runId"`
	AgentID       string          `json:"agentId"`
	TenantID      string          `json:"tenantId"`
	UserID        string          `json:"userId,omitempty"` // empty: a run with no person
	UserName      string          `json:"userName,omitempty"`
	Server        string          `json:"server"`
	Tool          string          `json:"tool"`
	ToolTitle     string          `json:"toolTitle,omitempty"`
	ResourceURI   string          `json:"resourceUri"`
	HTMLSHA256    string          `json:"htmlSha256"` // lower-case hex; the store's key of the HTML
	CSP           string          `json:"csp"`        // the header value the view is served under (BuildCSP)
	CSPDropped    []DroppedEntry  `json:"cspDropped,omitempty"`
	Permissions   Permissions     `json:"permissions"` // as asked; only Forms is granted
	PrefersBorder *bool           `json:"prefersBorder,omitempty"`
	Arguments     json.RawMessage `json:"arguments"`
	Result        json.RawMessage `json:"result"` // a CallToolResult as JSON
	CreatedAt     time.Time       `json:"createdAt"`
	ExpiresAt     time.Time       `json:"expiresAt"`
}

// Expired reports whether the view can no longer be opened at now.
func (v View) Expired(now time.Time) bool { return !now.Before(v.ExpiresAt) }
