package viewpage

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/fluent"
	"teamsbot/internal/teamsjs"
	"teamsbot/internal/web"
)

// The page a card's Open button lands on (GET /mcp-apps/{id}), and the
// Teams sign-in shell served in its place inside Teams' frame without a
// session.

var (
	//go:embed assets/bridge.js
	bridgeJS string
	//go:embed assets/page.js
	pageJS string
	//go:embed assets/questions.js
	questionsJS string
	//go:embed assets/page.css
	pageCSS string
	//go:embed assets/page.html
	pageHTML string
	//go:embed assets/teams-page.js
	teamsPageJS string
	//go:embed assets/teams-signin.html
	teamsSignInHTML string
)

// BridgeScript is the host side of MCP Apps in plain JavaScript: it defines
// TeamsbotBridge.mount, which frames a view's sandbox proxy and answers the
// view's JSON-RPC messages through the view API. The view page runs it, and
// so does any other page of the service that shows views inline (the
// playground), so that every view meets the same host. A page includes it
// as its own script element, allowed by HostPagePolicy's CSP.
func BridgeScript() string { return bridgeJS }

// HostName is the hostInfo.name the page gives views in ui/initialize.
const HostName = "teamsbot"

// parsePages parses the page's template and, in Teams mode, the sign-in
// shell's.
func (h *Handler) parsePages() error {
	var err error
	if h.pageTmpl, err = template.New("page").Parse(pageHTML); err != nil {
		return fmt.Errorf("viewpage: page template: %w", err)
	}
	if h.teamsHosts != nil {
		if h.signInTmpl, err = template.New("teams-signin").Parse(teamsSignInHTML); err != nil {
			return fmt.Errorf("viewpage: Teams sign-in template: %w", err)
		}
	}
	return nil
}

// pageData is what page.html shows.
type pageData struct {
	ID, Title, Tool, Server string
	Expires, ExpiresISO     string
	Arguments               string
	ShowArguments           bool
	HostName, HostVersion   string
	// FluentCSS is internal/fluent's stylesheet, before the page's CSS.
	FluentCSS, CSS template.CSS
	Bridge, Script template.JS
	// Questions shows what a server asks during the view's calls.
	Questions template.JS
	// Teams mode: teams-js and the page's Teams script, and the origins
	// whose teams-js messages it trusts.
	Teams                bool
	TeamsJS, TeamsScript template.JS
	TeamsOrigins         string
}

// page serves GET /mcp-apps/{id}: sign-in first, then the access rule, then
// the page, which loads the rest from the view API.
func (h *Handler) page(c echo.Context) error {
	id := c.Param("id")
	r := c.Request()
	s, err := h.session(r)
	if errors.Is(err, ErrNoSession) {
		if h.teamsHosts != nil && h.signin.Teams() && r.Header.Get("Sec-Fetch-Dest") == "iframe" {
			// Inside Teams' frame the sign-in pages cannot show (they
			// refuse every frame): the shell signs in with Teams.
			return h.teamsSignIn(c)
		}
		return c.Redirect(http.StatusSeeOther, h.signInFor(r, id))
	}
	if err != nil {
		return err
	}
	v, err := h.viewFor(r.Context(), id, s)
	if err == nil {
		if err = h.access.CanRead(r.Context(), personOf(s), accessView(v)); err != nil {
			err = refusal(err)
		}
	}
	if err != nil {
		return h.localRefusal(r, id, s, err)
	}
	title := v.ToolTitle
	if title == "" {
		title = v.Tool
	}
	args := prettyJSON(v.Arguments)
	d := pageData{
		ID: v.ID, Title: title, Tool: v.Tool, Server: v.Server,
		Expires:       v.ExpiresAt.UTC().Format("2 Jan 2006 15:04 MST"),
		ExpiresISO:    v.ExpiresAt.UTC().Format(time.RFC3339),
		Arguments:     args,
		ShowArguments: args != "{}",
		HostName:      HostName,
		HostVersion:   h.hostVersion,
		FluentCSS:     template.CSS(fluent.CSS()),
		CSS:           template.CSS(pageCSS),
		Bridge:        template.JS(bridgeJS),
		Questions:     template.JS(questionsJS),
		Script:        template.JS(pageJS),
	}
	if h.teamsHosts != nil {
		d.Teams = true
		d.TeamsJS, d.TeamsScript = template.JS(teamsjs.Script()), template.JS(teamsPageJS)
		d.TeamsOrigins = h.teamsSources
	}
	var b bytes.Buffer
	if err := h.pageTmpl.Execute(&b, d); err != nil {
		return fmt.Errorf("viewpage: render page: %w", err)
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.pageCSP)
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// teamsSignIn serves the Teams sign-in shell: a page, framed by Teams,
// whose script signs the person in with Teams single sign-on (or a popup)
// and loads the view page again. It shows nothing of the view.
func (h *Handler) teamsSignIn(c echo.Context) error {
	var b bytes.Buffer
	err := h.signInTmpl.Execute(&b, pageData{
		FluentCSS: template.CSS(fluent.CSS()), CSS: template.CSS(pageCSS), TeamsJS: template.JS(teamsjs.Script()), TeamsScript: template.JS(teamsPageJS),
		TeamsOrigins: h.teamsSources,
	})
	if err != nil {
		return fmt.Errorf("viewpage: render Teams sign-in: %w", err)
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.signInCSP)
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// prettyJSON indents a JSON value for display; null or empty shows as {}.
func prettyJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
