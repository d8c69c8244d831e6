package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/mcpapps"
)

// A server's checked ui:// resources, cached until
// notifications/resources/list_changed, within bounds of count and size.

// Bounds of the resource cache. Its keys are URIs a server chose, so
// without them a server naming a new ui:// resource on every tools/list
// would grow it for as long as the service runs.
const (
	// maxCachedResources is how many checked resources of one server are
	// kept; a new one beyond it pushes an old one out.
	maxCachedResources = 32
	// maxCachedHTMLBytes bounds the HTML kept for one server.
	maxCachedHTMLBytes = 16 << 20
	// maxListedResources is how many resources/list entries are read for
	// their _meta.ui, over at most maxListPages pages.
	maxListedResources = 1000
)

// resourceEntry is a ui:// resource, read and checked once.
type resourceEntry struct {
	html    []byte
	sha     string
	ui      mcpapps.ResourceUI
	csp     mcpapps.Policy
	refusal *mcpapps.RefusedError
}

func (c *serverConn) invalidateResources() {
	c.cmu.Lock()
	c.resources, c.resBytes = nil, 0
	c.listMeta = nil
	c.resGen++
	c.cmu.Unlock()
}

// resource returns the checked resource uri, reading it when not cached. A
// read error is returned and not cached; a refusal is cached like a view,
// since the server would serve the same content until it says otherwise.
func (c *serverConn) resource(ctx context.Context, cs *mcp.ClientSession, uri string) (*resourceEntry, error) {
	c.cmu.RLock()
	e, gen := c.resources[uri], c.resGen
	meta, haveMeta := c.listMeta, c.listMeta != nil
	c.cmu.RUnlock()
	if e != nil {
		return e, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if !haveMeta {
		meta = listedUIMeta(ctx, cs)
	}
	cut := c.cut.Load()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		oversize := tooLarge(err) || c.cut.Load() != cut
		if sessionBroken(err) || oversize {
			// A message over the limit ends the connection where it was
			// cut: the next use connects anew.
			c.markDead(cs)
		}
		if oversize {
			return &resourceEntry{refusal: sizeRefusal("the server's answer to resources/read is larger than the %d bytes read of one message (twice the HTML limit of %d bytes, and 1 MiB)",
				messageLimit(c.svc.maxResourceBytes()), c.svc.maxResourceBytes())}, nil
		}
		return nil, c.scrub(err)
	}
	e = c.check(uri, res.Contents, meta[uri])
	c.cmu.Lock()
	if c.resGen == gen {
		c.cache(uri, e)
		c.listMeta = meta
	}
	c.cmu.Unlock()
	return e, nil
}

// listedUIMeta reads resources/list for the _meta of entries that have
// _meta.ui. A server without resources/list still serves resources/read;
// the list only adds _meta.ui that the content may lack, so an error ends
// the reading without failing the view.
func listedUIMeta(ctx context.Context, cs *mcp.ClientSession) map[string]mcp.Meta {
	meta := map[string]mcp.Meta{}
	params := &mcp.ListResourcesParams{}
	for page, read := 0, 0; page < maxListPages && read < maxListedResources; page++ {
		res, err := cs.ListResources(ctx, params)
		if err != nil {
			break
		}
		for _, r := range res.Resources {
			if read++; read > maxListedResources {
				break
			}
			if r != nil && r.Meta["ui"] != nil {
				meta[r.URI] = r.Meta
			}
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	return meta
}

// cache keeps e as the checked resource uri, pushing out other entries
// while the cache is over its bounds. c.cmu must be held.
func (c *serverConn) cache(uri string, e *resourceEntry) {
	if old := c.resources[uri]; old != nil {
		c.resBytes -= len(old.html)
		delete(c.resources, uri)
	}
	if c.resources == nil {
		c.resources = map[string]*resourceEntry{}
	}
	for k, old := range c.resources {
		if len(c.resources) < maxCachedResources && c.resBytes+len(e.html) <= maxCachedHTMLBytes {
			break
		}
		c.resBytes -= len(old.html)
		delete(c.resources, k)
	}
	c.resources[uri] = e
	c.resBytes += len(e.html)
}

// sizeRefusal is a "size" refusal that tells the operator which setting
// raises the limit.
func sizeRefusal(format string, args ...any) *mcpapps.RefusedError {
	return &mcpapps.RefusedError{Reason: mcpapps.ReasonSize,
		Detail: fmt.Sprintf(format, args...) + "; " + MaxHTMLSetting + " sets the limit"}
}

// check runs mcpapps' checks on a resource and prepares what each view of
// it needs: the HTML, its SHA-256 and the CSP.
func (c *serverConn) check(uri string, contents []*mcp.ResourceContents, listEntry mcp.Meta) *resourceEntry {
	html, err := mcpapps.CheckResource(uri, contents, c.svc.maxResourceBytes())
	if err != nil {
		var re *mcpapps.RefusedError
		if !errors.As(err, &re) {
			re = &mcpapps.RefusedError{Reason: mcpapps.ReasonContent, Detail: err.Error()}
		}
		if re.Reason == mcpapps.ReasonSize {
			re = sizeRefusal("%s", re.Detail)
		}
		return &resourceEntry{refusal: re}
	}
	var itemMeta mcp.Meta
	if len(contents) > 0 && contents[0] != nil {
		itemMeta = contents[0].Meta
	}
	ui, err := mcpapps.ReadResourceUI(itemMeta, listEntry)
	if err != nil {
		return &resourceEntry{refusal: &mcpapps.RefusedError{Reason: mcpapps.ReasonContent, Detail: "malformed _meta.ui: " + err.Error()}}
	}
	return &resourceEntry{html: html, sha: mcpapps.HTMLSHA256(html), ui: ui, csp: mcpapps.BuildCSP(ui.CSP)}
}
