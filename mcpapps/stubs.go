package mcpapps

import "github.com/modelcontextprotocol/go-sdk/mcp"

// ReadToolUI reads _meta.ui (and the legacy _meta["ui/resourceUri"]) of a tool.
func ReadToolUI(meta mcp.Meta) (ToolUI, error) { panic("unimplemented") }

// VisibleTo reports whether who ("model" or "app") may call the tool; an
// absent visibility means both.
func (t ToolUI) VisibleTo(who string) bool { panic("unimplemented") }

// ReadResourceUI reads _meta.ui from the content item, or failing that from
// the resources/list entry (either may be nil).
func ReadResourceUI(item, listEntry mcp.Meta) (ResourceUI, error) { panic("unimplemented") }

// RefusedError says why a resource is not a valid MCP App.
type RefusedError struct {
	// Reason is one of "scheme", "mime", "size", "content", "read".
	Reason string
	Detail string
}

func (e *RefusedError) Error() string { return "mcp app refused: " + e.Reason + ": " + e.Detail }

// CheckResource checks the resources/read result of uri and returns the
// view's HTML. maxBytes <= 0 means DefaultMaxResourceBytes.
func CheckResource(uri string, contents []*mcp.ResourceContents, maxBytes int) ([]byte, error) {
	panic("unimplemented")
}

// Policy is a CSP header value and the declared entries left out of it.
type Policy struct {
	Header  string
	Dropped []DroppedEntry
}

// BuildCSP builds the CSP a view is served under from its declared domains.
func BuildCSP(d CSPDomains) Policy { panic("unimplemented") }
