package viewpage

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/web"
)

// The view API (GET /api/mcp-apps/{id}): what the page needs to frame a
// view and answer its messages.

// ViewInfo is the answer of GET /api/mcp-apps/{id}: what the page needs to
// frame the view and answer its messages. The two URLs carry fresh tokens.
type ViewInfo struct {
	// ID is the view's id.
	ID string `json:"id"`
	// Server is the name of the MCP server the view came from.
	Server string `json:"server"`
	// Tool is the name of the tool whose call made the view.
	Tool string `json:"tool"`
	// ToolTitle is the tool's title, when it has one.
	ToolTitle string `json:"toolTitle,omitempty"`
	// ResourceURI is the ui:// resource the view's HTML was read from.
	ResourceURI string `json:"resourceUri"`
	// ProxyURL is the sandbox proxy's URL with a fresh token: on the
	// sandbox origin, or a path when the frames share the page's origin.
	ProxyURL string `json:"proxyUrl"`
	// ViewURL is the view document's URL with a fresh token, on the same
	// origin as ProxyURL.
	ViewURL string `json:"viewUrl"`
	// Arguments are the tool call's arguments, a JSON object ({} when
	// there were none): the view's tool-input.
	Arguments json.RawMessage `json:"arguments"`
	// Result is the tool's CallToolResult, its content always an array:
	// the view's tool-result.
	Result json.RawMessage `json:"result"`
	// ExpiresAt is when the view stops being served.
	ExpiresAt time.Time `json:"expiresAt"`
	// Permissions are what the view was granted of what its server
	// asked for: forms whenever asked (see Sandbox), the others only where
	// the configuration file or the tenant's admin allowed them for its
	// server (see Allow).
	Permissions Granted `json:"permissions"`
	// Allow is the allow attribute (Permissions Policy) of both frames:
	// the granted features, such as "microphone", separated by "; ";
	// empty when none was granted. The proxy frame carries it too because
	// a frame can delegate only what it was delegated.
	Allow string `json:"allow"`
	// Sandbox is the sandbox attribute of both frames: "allow-scripts",
	// plus "allow-forms" only when the server asked for forms. The proxy
	// frame carries it too because a frame inherits its parent's sandbox
	// flags (TestSandboxFlagsAreInherited).
	Sandbox string `json:"sandbox"`
	// PrefersBorder is the resource's prefersBorder, when it said.
	PrefersBorder *bool `json:"prefersBorder,omitempty"`
}

// Granted are the sandbox permissions a view was granted, as the page
// tells the view in ui/initialize.
type Granted struct {
	Camera         bool `json:"camera,omitempty"`
	Microphone     bool `json:"microphone,omitempty"`
	Geolocation    bool `json:"geolocation,omitempty"`
	ClipboardWrite bool `json:"clipboardWrite,omitempty"`
	Forms          bool `json:"forms,omitempty"`
}

// viewAPI serves GET /api/mcp-apps/{id}.
func (h *Handler) viewAPI(c echo.Context) error {
	r := c.Request()
	s, err := h.session(r)
	if err != nil {
		return err
	}
	v, err := h.viewFor(r.Context(), c.Param("id"), s)
	if err != nil {
		return err
	}
	if err := h.access.CanRead(r.Context(), personOf(s), accessView(v)); err != nil {
		return refusal(err)
	}
	// An opening is audited, once a person per view within openedWindow:
	// the page asks again on a reload or a reconnect, which is not
	// another opening, and a commit on every ask would cost the view API
	// most of its speed (BenchmarkViewAPI). Its record failing does not
	// keep the view from the person.
	p := agentPersonOf(s)
	if h.opened.first(v.ID, p.TenantID, p.UserID, h.now()) {
		if err := h.agent.RecordOpened(r.Context(), v, p); err != nil {
			h.opened.forget(v.ID, p.TenantID, p.UserID)
			h.logger.ErrorContext(r.Context(), "audit of an opened view failed", "view", v.ID, "err", err)
		}
	}
	now := h.now()
	info := ViewInfo{
		ID:          v.ID,
		Server:      v.Server,
		Tool:        v.Tool,
		ToolTitle:   v.ToolTitle,
		ResourceURI: v.ResourceURI,
		ProxyURL: h.frameBase() + "/sandbox/proxy?view=" + url.QueryEscape(v.ID) +
			"&token=" + h.keys.mint(purposeProxy, v.ID, now),
		ViewURL: h.frameBase() + "/sandbox/views/" + url.PathEscape(v.ID) +
			"?token=" + h.keys.mint(purposeView, v.ID, now),
		Arguments: jsonObjectOr(v.Arguments, `{}`),
		Result:    toolResultJSON(v.Result),
		ExpiresAt: v.ExpiresAt.UTC(),
		Permissions: Granted{Camera: v.Granted.Camera, Microphone: v.Granted.Microphone, Geolocation: v.Granted.Geolocation,
			ClipboardWrite: v.Granted.ClipboardWrite, Forms: v.Permissions.Forms},
		Allow:         strings.Join(v.Granted.PolicyFeatures(), "; "),
		Sandbox:       sandboxFor(v.Permissions.Forms),
		PrefersBorder: v.PrefersBorder,
	}
	hd := c.Response().Header()
	web.NoStore(hd)
	return c.JSON(http.StatusOK, info)
}

// sandboxFor is the inner frame's sandbox attribute. Never
// allow-same-origin, allow-popups or allow-top-navigation.
func sandboxFor(forms bool) string {
	if forms {
		return "allow-scripts allow-forms"
	}
	return "allow-scripts"
}

// jsonObjectOr returns raw when it is a JSON object, else def.
func jsonObjectOr(raw json.RawMessage, def string) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage(def)
}

// toolResultJSON makes sure the stored result is a CallToolResult whose
// content is an array, which the MCP Apps SDK requires of tool-result.
func toolResultJSON(raw json.RawMessage) json.RawMessage {
	obj := jsonObjectOr(raw, `{"content":[]}`)
	var probe struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(obj, &probe); err == nil {
		t := bytes.TrimSpace(probe.Content)
		if len(t) > 0 && t[0] == '[' {
			return obj
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return json.RawMessage(`{"content":[]}`)
	}
	m["content"] = json.RawMessage(`[]`)
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"content":[]}`)
	}
	return b
}
