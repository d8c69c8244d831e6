package mcpapps

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Reasons a resource is refused, as RefusedError.Reason and in the audit
// record agent.mcp_app.refused.
const (
	ReasonScheme  = "scheme"  // the URI is not a well-formed ui:// URI
	ReasonMIME    = "mime"    // the MIME type is not exactly MIMEType
	ReasonSize    = "size"    // the HTML (or, as the agent also applies it, the view's arguments and result) is larger than the limit
	ReasonContent = "content" // not exactly one item, another URI, both or neither of text and blob, empty HTML
	ReasonRead    = "read"    // resources/read failed; set by the caller, which does the I/O
)

// maxURIBytes bounds a ui:// URI, which ends up in the store, the audit log
// and card text.
const maxURIBytes = 2048

// RefusedError says why a resource is not a valid MCP App.
type RefusedError struct {
	// Reason is one of "scheme", "mime", "size", "content", "read".
	Reason string
	// Detail says what was wrong, for people; parts quoted from the
	// resource are cut short.
	Detail string
}

// Error implements error.
func (e *RefusedError) Error() string { return "mcp app refused: " + e.Reason + ": " + e.Detail }

func refused(reason, format string, args ...any) *RefusedError {
	return &RefusedError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// CheckURI reports whether uri may name a view's resource: the ui:// scheme
// (lower case, as the specification writes it), something after it, no
// whitespace or control characters, and at most 2048 bytes. Callers may run
// it before resources/read so that no other resource is ever read for a
// view; CheckResource runs it again.
func CheckURI(uri string) error {
	const scheme = "ui://"
	if !strings.HasPrefix(uri, scheme) {
		return refused(ReasonScheme, "%.200q is not a ui:// URI", uri)
	}
	if len(uri) == len(scheme) {
		return refused(ReasonScheme, "%q names nothing", uri)
	}
	if len(uri) > maxURIBytes {
		return refused(ReasonScheme, "URI is %d bytes, more than %d", len(uri), maxURIBytes)
	}
	for _, r := range uri {
		if r <= ' ' || r == 0x7f {
			return refused(ReasonScheme, "%.200q contains whitespace or a control character", uri)
		}
	}
	if _, err := url.Parse(uri); err != nil {
		return refused(ReasonScheme, "%.200q is not a valid URI: %v", uri, err)
	}
	return nil
}

// CheckResource checks the resources/read result of uri and returns the
// view's HTML. maxBytes <= 0 means DefaultMaxResourceBytes.
//
// The checks, in order: the URI (CheckURI); exactly one content item; its
// URI equal to uri; its MIME type exactly MIMEType; text or blob, not both
// (go-sdk has already decoded a base64 blob); at most maxBytes of HTML; and
// HTML that is not empty or only whitespace. Every refusal is a
// *RefusedError. The returned slice is the caller's own copy.
func CheckResource(uri string, contents []*mcp.ResourceContents, maxBytes int) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResourceBytes
	}
	if err := CheckURI(uri); err != nil {
		return nil, err
	}
	if len(contents) != 1 || contents[0] == nil {
		return nil, refused(ReasonContent, "want exactly one content item, got %d", len(contents))
	}
	c := contents[0]
	if c.URI != uri {
		return nil, refused(ReasonContent, "content item is for %.200q, not %.200q", c.URI, uri)
	}
	if c.MIMEType != MIMEType {
		return nil, refused(ReasonMIME, "MIME type is %.100q, want %q", c.MIMEType, MIMEType)
	}
	if c.Text != "" && len(c.Blob) > 0 {
		return nil, refused(ReasonContent, "content item has both text and blob")
	}
	n := max(len(c.Text), len(c.Blob))
	if n > maxBytes {
		return nil, refused(ReasonSize, "HTML is %d bytes, more than the limit of %d", n, maxBytes)
	}
	var html []byte
	if c.Text != "" {
		html = []byte(c.Text)
	} else {
		html = bytes.Clone(c.Blob)
	}
	if len(bytes.TrimSpace(html)) == 0 {
		return nil, refused(ReasonContent, "HTML is empty")
	}
	return html, nil
}

// HTMLSHA256 returns the lower-case hex SHA-256 of a view's HTML: the key
// under which the store keeps it once, and the digest the audit log records.
func HTMLSHA256(html []byte) string {
	sum := sha256.Sum256(html)
	return hex.EncodeToString(sum[:])
}
