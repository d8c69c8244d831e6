package agent

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/textclip"
	"teamsbot/mcpapps"
)

// A server's tool list, cached until notifications/tools/list_changed:
// read within bounds, each tool checked and sorted into what the model is
// offered and what only views may call, with the notes that say why.

// Bounds on what one server's tools/list can make the service hold. The
// list comes from a server the service does not control: it could page
// forever, list thousands of tools, or fill every run's notes.
const (
	// maxTools is how many tools of one server are read; the rest are
	// not offered, and the notes say so.
	maxTools = 1000
	// maxListPages is how many pages of tools/list (or resources/list)
	// are read.
	maxListPages = 100
	// maxToolNotes is how many notes about one server's tools each run
	// gets; the rest are counted in one more note.
	maxToolNotes = 20
	// maxToolNameBytes is the longest tool name the MCP specification
	// allows.
	maxToolNameBytes = 128
)

// toolList is one server's tools, read once per tools/list.
type toolList struct {
	byName map[string]*toolEntry
	// specs are the tools offered to the model, notes the run notes on
	// those that are not (at most maxToolNotes of them, then a count).
	specs []ToolSpec
	notes []string
	more  int // notes left out
	// all are every tool with a valid name, _meta.ui or not: what a run
	// of a tenant whose admin turned MCP Apps off is offered.
	all []ToolSpec
}

func (tl *toolList) note(format string, args ...any) {
	if len(tl.notes) < maxToolNotes {
		tl.notes = append(tl.notes, fmt.Sprintf(format, args...))
		return
	}
	tl.more++
}

// validToolName reports whether name follows the MCP specification's rule
// for tool names: 1 to 128 of A-Z, a-z, 0-9, '_', '-' and '.'. Anything
// else (control characters, '/', spaces) is not offered: the name reaches
// the model, the run notes and the audit log, and "server/tool" must split
// one way only.
func validToolName(name string) bool {
	if name == "" || len(name) > maxToolNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// toolEntry is one tool with what its _meta.ui says.
type toolEntry struct {
	tool    *mcp.Tool
	ui      mcpapps.ToolUI
	toModel bool
	toApp   bool
	// notOffered says why the model is not offered the tool; "" when it is.
	notOffered string
}

func (c *serverConn) invalidateTools() {
	c.cmu.Lock()
	c.tools = nil
	c.toolGen++
	c.cmu.Unlock()
}

// toolList returns the cached tool list, reading it when the cache is empty.
func (c *serverConn) toolList(ctx context.Context, cs *mcp.ClientSession) (*toolList, error) {
	c.cmu.RLock()
	tl, gen := c.tools, c.toolGen
	c.cmu.RUnlock()
	if tl != nil {
		return tl, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	more := false // the server has tools beyond what was read
	for page := 0; ; page++ {
		if page == maxListPages {
			more = true
			break
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			if sessionBroken(err) {
				c.markDead(cs)
			}
			return nil, fmt.Errorf("%w: %s: tools/list: %w", ErrUnavailable, c.name, c.scrub(err))
		}
		tools = append(tools, res.Tools...)
		if len(tools) > maxTools {
			tools, more = tools[:maxTools], true
			break
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	tl = c.buildToolList(tools, more)
	c.cmu.Lock()
	if c.toolGen == gen {
		c.tools = tl
	}
	c.cmu.Unlock()
	return tl, nil
}

// buildToolList reads what each tool's _meta.ui says and decides what the
// model is offered; more says the server listed more tools than were read.
func (c *serverConn) buildToolList(tools []*mcp.Tool, more bool) *toolList {
	apps := c.svc.opts.AppsEnabled
	tl := &toolList{byName: make(map[string]*toolEntry, len(tools))}
	if more {
		tl.note("server %s lists more tools than the %d (or %d pages) read; the rest are not offered", c.name, maxTools, maxListPages)
	}
	for _, t := range tools {
		switch {
		case t == nil:
			continue
		case !validToolName(t.Name):
			tl.note("a tool of server %s named %.64q is not offered: a tool name is 1 to %d of A-Z, a-z, 0-9, '_', '-' and '.'", c.name, t.Name, maxToolNameBytes)
			continue
		case tl.byName[t.Name] != nil:
			tl.note("server %s lists tool %s twice; only the first is used", c.name, t.Name)
			continue
		}
		ui, err := mcpapps.ReadToolUI(t.Meta)
		e := &toolEntry{tool: t, ui: ui}
		switch {
		case !apps:
			// The extension is off: the server's _meta.ui means nothing here.
			e.ui = mcpapps.ToolUI{}
			e.toModel = true
		case err != nil:
			// A malformed _meta.ui: who may call the tool is unknown, so
			// nobody may (ReadToolUI fails closed the same way), and it
			// has no view. Offering it to the model could hand it a tool
			// its server meant for views only. The note says so; what is
			// wrong with it (the checker's error) is for the operator's log.
			e.notOffered = "its _meta.ui is malformed"
			c.svc.log.Warn("MCP tool not offered: its _meta.ui is malformed", "agent", c.agentID, "server", c.name, "tool", t.Name, "err", err)
		default:
			e.toModel = ui.VisibleTo(mcpapps.VisibilityModel)
			e.toApp = ui.VisibleTo(mcpapps.VisibilityApp)
			if !e.toModel {
				e.notOffered = fmt.Sprintf("its _meta.ui.visibility %q lacks \"model\"", ui.Visibility)
			}
		}
		tl.byName[t.Name] = e
		spec := ToolSpec{
			Name:        c.name + "/" + t.Name,
			Server:      c.name,
			Tool:        t.Name,
			Title:       toolTitle(t),
			Description: t.Description,
			InputSchema: t.InputSchema,
		}
		tl.all = append(tl.all, spec)
		if !e.toModel {
			tl.note("tool %s/%s is not offered to the model: %s", c.name, t.Name, e.notOffered)
			continue
		}
		tl.specs = append(tl.specs, spec)
	}
	if tl.more > 0 {
		tl.notes = append(tl.notes, fmt.Sprintf("server %s: %d more notes about its tools are left out", c.name, tl.more))
	}
	return tl
}

// maxTitleBytes bounds a tool's title as shown to the model, in views and
// on cards.
const maxTitleBytes = 256

// toolTitle is a tool's display name: title, annotations.title, name; one
// line, at most maxTitleBytes.
func toolTitle(t *mcp.Tool) string {
	title := t.Name
	switch {
	case t.Title != "":
		title = t.Title
	case t.Annotations != nil && t.Annotations.Title != "":
		title = t.Annotations.Title
	}
	return oneLine(textclip.Clip(title, maxTitleBytes))
}
