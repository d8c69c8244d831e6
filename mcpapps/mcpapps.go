// Package mcpapps is the MCP Apps extension (io.modelcontextprotocol/ui) as
// this service applies it: it reads _meta.ui from tools and resources, tells
// who may call a tool, checks a ui:// resource before it becomes a view, and
// builds the Content Security Policy a view is served under.
//
// It does no I/O: callers hand it what an MCP server returned and get back
// plain values, so the rules can be tested and fuzzed on their own. It does
// not read resources or call tools (agent does), keep views or decide how
// long they live (store does, with the View record), or decide who may
// open a view (access does).
package mcpapps

// ExtensionID names the extension in MCP capabilities.
const ExtensionID = "io.modelcontextprotocol/ui"

// MIMEType is the only MIME type a view's resource may have.
const MIMEType = "text/html;profile=mcp-app"

// DefaultMaxResourceBytes bounds the HTML of one view when the caller sets no
// limit: large enough for the bundled single-file views real servers ship
// (a PDF renderer or a 3D engine is several megabytes; the largest
// official example is 4.3 MB), small enough that one server cannot fill
// the store.
const DefaultMaxResourceBytes = 8 << 20

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
// _meta.ui.permissions, or those a view was granted. Forms is granted
// whenever asked; the others only where the operator or the tenant's
// admin allowed them for the view's server (see Grant).
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
