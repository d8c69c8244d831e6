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
	ID          string                 `json:"id"`
	RunID       string                 `json:"runId"`
	AgentID     string                 `json:"agentId"`
	TenantID    string                 `json:"tenantId"`
	UserID      string                 `json:"userId,omitempty"` // empty: a run with no person
	UserName    string                 `json:"userName,omitempty"`
	Server      string                 `json:"server"`
	Tool        string                 `json:"tool"`
	ToolTitle   string                 `json:"toolTitle,omitempty"`
	ResourceURI string                 `json:"resourceUri"`
	HTMLSHA256  string                 `json:"htmlSha256"` // lower-case hex; the store's key of the HTML
	CSP         string                 `json:"csp"`        // the header value the view is served under (mcpapps.BuildCSP)
	CSPDropped  []mcpapps.DroppedEntry `json:"cspDropped,omitempty"`
	Permissions mcpapps.Permissions    `json:"permissions"` // as asked
	// Granted is what the view was granted of Permissions when it was
	// made: forms whenever asked, the others where allowed for its server.
	// Views kept before it existed were granted forms only.
	Granted       mcpapps.Permissions `json:"granted"`
	PrefersBorder *bool               `json:"prefersBorder,omitempty"`
	Arguments     json.RawMessage     `json:"arguments"`
	Result        json.RawMessage     `json:"result"` // a CallToolResult as JSON
	CreatedAt     time.Time           `json:"createdAt"`
	ExpiresAt     time.Time           `json:"expiresAt"`
	// RevokedAt and RevokedBy are set by RevokeView: from then on the
	// view answers as expired.
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	RevokedBy string    `json:"revokedBy,omitempty"`
}

// Expired reports whether the view can no longer be opened at now: its
// ExpiresAt has come, or it was revoked.
func (v View) Expired(now time.Time) bool {
	return v.Revoked() || !now.Before(v.ExpiresAt)
}

// Revoked reports whether an admin revoked the view.
func (v View) Revoked() bool { return !v.RevokedAt.IsZero() }

// end is when the view stops being served: its expiry, or its
// revocation if that came first. The storage indexes it, so that a sweep
// and a listing know which views can be opened without reading them.
func (v View) end() time.Time { return viewEnd(v.ExpiresAt, v.RevokedAt) }

// viewEnd is end of a view that expires and was revoked (zero: not) at
// these times.
func viewEnd(expires, revoked time.Time) time.Time {
	if !revoked.IsZero() && revoked.Before(expires) {
		return revoked
	}
	return expires
}
