package mcpauth

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/web"
	"teamsbot/internal/web/csp"
	"teamsbot/store"
)

// The pages, added by Register:
//
//	GET  /mcp-auth/client.json       the client ID metadata document (https only)
//	GET  /mcp-auth/connect/{id}      the Connect link: sign-in, then the authorization server
//	GET  /mcp-auth/callback          the authorization server's redirect
//	GET  /connections                the person's connections
//	POST /connections/{agent}/{server}/disconnect
//
// Every page is for a signed-in person (SessionFunc); the Connect link
// and the callback continue only for the person the request is for.

//go:embed assets
var assets embed.FS

// Signed is the signed-in person of a request, as the sign-in gives it.
type Signed struct {
	TenantID, UserID, Name string
}

// Pages are the package's pages; Register adds them.
type Pages struct {
	b *Broker
	// session returns the request's signed-in person, or an error when
	// there is none; signIn is where to send them to sign in first.
	session func(*http.Request) (Signed, error)
	signIn  func(returnPath, userID string) string
	doc     *template.Template
	css     string
	policy  string
	cop     *http.CrossOriginProtection
	// answerWait is how long the callback page waits for the run to take
	// the answer, so that it can say "connected" truthfully.
	answerWait time.Duration
	// freshSignIn says a sign-in gives SignedIn the person's assertion
	// (Entra ID): the Connect link of an Entra server goes through one
	// first, so that the on-behalf-of flow can connect the person with no
	// prompt of the server's own.
	freshSignIn bool
}

// FreshSignIn says whether a sign-in gives Broker.SignedIn the person's
// assertion (the service signs people in with Entra ID).
func (p *Pages) FreshSignIn(on bool) { p.freshSignIn = on }

// NewPages returns the pages of b. session reads the sign-in of a
// request; signIn gives the sign-in address that comes back to a path,
// for the person userID when the page knows whom it is for ("" when not):
// the local development sign-in selects them (signin's SignInAsURL).
func (b *Broker) NewPages(session func(*http.Request) (Signed, error), signIn func(returnPath, userID string) string) (*Pages, error) {
	css, err := assets.ReadFile("assets/page.css")
	if err != nil {
		return nil, err
	}
	doc, err := template.ParseFS(assets, "assets/page.html")
	if err != nil {
		return nil, fmt.Errorf("mcpauth: %w", err)
	}
	return &Pages{
		b: b, session: session, signIn: signIn, doc: doc, css: string(css),
		// No script; the one style by hash; forms post to this origin
		// only; nobody frames these pages (a Connect page in a frame
		// would be a way to trick a person into consenting).
		policy:     csp.New().Add("default-src").Add("style-src", csp.Hash(string(css))).Add("form-action", csp.Self).Add("base-uri").Add("frame-ancestors").String(),
		cop:        http.NewCrossOriginProtection(),
		answerWait: 15 * time.Second,
	}, nil
}

// Register adds the pages to e.
func (p *Pages) Register(e *echo.Echo) {
	e.GET(ClientPath, p.clientDocument)
	e.GET(ConnectPath+":id", p.connect)
	e.GET(CallbackPath, p.callback)
	e.GET(ConnectionsPath, p.connections)
	e.POST("/connections/:agent/:server/disconnect", p.disconnect)
}

// clientDocument serves the client ID metadata document
// (draft-ietf-oauth-client-id-metadata-document): the client id is this
// document's own https address.
func (p *Pages) clientDocument(c echo.Context) error {
	id := p.b.ClientIDURL()
	if id == "" {
		return web.NewError(http.StatusNotFound, "This service has no https address, so it offers no client metadata document.")
	}
	m := p.b.clientMetadata()
	doc := map[string]any{
		"client_id":                  id,
		"client_name":                m.ClientName,
		"client_uri":                 m.ClientURI,
		"redirect_uris":              m.RedirectURIs,
		"grant_types":                m.GrantTypes,
		"response_types":             m.ResponseTypes,
		"token_endpoint_auth_method": m.TokenEndpointAuthMethod,
	}
	c.Response().Header().Set("Cache-Control", "max-age=3600")
	return c.JSON(http.StatusOK, doc)
}

// page is what page.html shows.
type page struct {
	Title       string
	Lines       []string
	Connections []connectionRow
	Link        *web.Link
	CSS         template.CSS
}

type connectionRow struct {
	Agent, Server, Connected, LastUsed, Action string
}

func (p *Pages) render(c echo.Context, status int, pg page) error {
	pg.CSS = template.CSS(p.css)
	var buf bytes.Buffer
	if err := p.doc.Execute(&buf, pg); err != nil {
		return err
	}
	h := c.Response().Header()
	web.NoStore(h)
	h.Set("Content-Security-Policy", p.policy)
	h.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(status, buf.Bytes())
}

// signedIn returns the request's person, or sends them to sign in (as
// the person userID, when the page is for someone) and returns ok false.
func (p *Pages) signedIn(c echo.Context, userID string) (Signed, bool, error) {
	s, err := p.session(c.Request())
	if err != nil {
		return Signed{}, false, c.Redirect(http.StatusSeeOther, p.signIn(c.Request().URL.RequestURI(), userID))
	}
	return s, true, nil
}

// notYours is the page for someone else than the person a request is for.
func notYours(r store.MCPAuthRequest) error {
	who := r.UserName
	if who == "" {
		who = "the person who asked"
	}
	return &web.Error{Status: http.StatusForbidden, Heading: "This sign-in is for someone else",
		Message: fmt.Sprintf("This sign-in is for %s. Only they can connect %s for their question; ask the assistant yourself to connect your own account.", who, r.Server)}
}

var errGone = &web.Error{Status: http.StatusGone, Heading: "This link has expired",
	Message: "This Connect link has expired or was already used. Ask the assistant again in Teams: it offers a new one when it needs it."}

// connect is the Connect link: the person signs in; only the person the
// request is for goes on to the authorization server.
func (p *Pages) connect(c echo.Context) error {
	ctx := c.Request().Context()
	r, readErr := p.b.opts.Store.MCPAuthRequest(ctx, c.Param("id"))
	// The sign-in is for the person the request is for: the local
	// sign-in has them selected.
	s, ok, err := p.signedIn(c, r.UserID)
	if !ok {
		return err
	}
	if errors.Is(readErr, store.ErrNotFound) {
		return errGone
	}
	if readErr != nil {
		return readErr
	}
	if r.TenantID != s.TenantID || r.UserID != s.UserID {
		p.b.appendAudit(ctx, store.AuditRecord{Time: p.b.now(), TenantID: r.TenantID, Action: ActionRefused, Actor: s.UserID,
			Fields: map[string]any{"agent": r.AgentID, "server": r.Server, "person": r.UserID, "request": r.ID, "why": "the Connect link was opened by someone else"}})
		return notYours(r)
	}
	now := p.b.now()
	if !now.Before(r.ExpiresAt) {
		return errGone
	}
	switch r.Status {
	case store.MCPAuthWaiting, store.MCPAuthOpened:
	case store.MCPAuthAnswered, store.MCPAuthDone:
		return p.render(c, http.StatusOK, page{Title: "Already connected", Lines: []string{fmt.Sprintf("%s is connected. You can close this page and go back to Teams.", r.Server)}})
	default:
		return errGone
	}
	if _, entra := p.b.entraServer(r.AgentID, r.Server); entra && p.freshSignIn {
		if c.QueryParam("signedin") == "" {
			// A sign-in now gives the on-behalf-of flow its assertion; a
			// person signed in to Microsoft is not asked anything.
			return c.Redirect(http.StatusSeeOther, p.signIn(ConnectPath+url.PathEscape(r.ID)+"?signedin=1", r.UserID))
		}
		if conn, err := p.b.opts.Store.MCPConnection(ctx, r.TenantID, r.UserID, r.AgentID, r.Server); err == nil && !conn.ConnectedAt.Before(r.CreatedAt) {
			return p.render(c, http.StatusOK, page{Title: "Connected", Lines: []string{
				fmt.Sprintf("%s is connected with your Microsoft account: the assistant now works there as you and goes on with your question.", r.Server),
				"You can close this page and go back to Teams.",
			}, Link: &web.Link{Href: ConnectionsPath, Text: "Your connections"}})
		}
		// Not connected on the person's behalf (consent is missing):
		// the server's own sign-in asks for it.
	}
	if _, err := p.b.opts.Store.UpdateMCPAuthRequest(ctx, r.ID, func(x *store.MCPAuthRequest) error {
		if x.Status == store.MCPAuthWaiting {
			x.Status, x.OpenedAt = store.MCPAuthOpened, now
		}
		return nil
	}, nil); err != nil {
		return err
	}
	u, err := url.Parse(r.AuthURL)
	if err != nil || (&guardedTransport{allowHTTP: p.b.opts.AllowHTTP}).allowed(u) != nil {
		return errGone
	}
	web.NoStore(c.Response().Header())
	c.Response().Header().Set("Referrer-Policy", "no-referrer")
	return c.Redirect(http.StatusSeeOther, r.AuthURL)
}

// callback takes the authorization server's answer. It is for the person
// the request is for, signed in on this browser: a code from another
// person's browser (a login CSRF, a phished link) is refused. A state is
// answered once; a replay is refused.
func (p *Pages) callback(c echo.Context) error {
	s, ok, err := p.signedIn(c, "")
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	q := c.QueryParams()
	state := q.Get("state")
	if state == "" || len(state) > 512 {
		return web.NewError(http.StatusBadRequest, "This address is missing its sign-in answer. Start again from the Connect button in Teams.")
	}
	r, err := p.b.opts.Store.MCPAuthRequestByState(ctx, state)
	if errors.Is(err, store.ErrNotFound) {
		p.b.appendAudit(ctx, store.AuditRecord{Time: p.b.now(), TenantID: s.TenantID, Action: ActionRefused, Actor: s.UserID,
			Fields: map[string]any{"person": s.UserID, "why": "a sign-in answer for no request of this service (unknown state)"}})
		return errGone
	}
	if err != nil {
		return err
	}
	if r.TenantID != s.TenantID || r.UserID != s.UserID {
		p.b.appendAudit(ctx, store.AuditRecord{Time: p.b.now(), TenantID: r.TenantID, Action: ActionRefused, Actor: s.UserID,
			Fields: map[string]any{"agent": r.AgentID, "server": r.Server, "person": r.UserID, "request": r.ID, "why": "a sign-in answer arrived in someone else's browser"}})
		return notYours(r)
	}
	code, answerErr := q.Get("code"), q.Get("error")
	if answerErr == "" && code == "" {
		answerErr = "no code"
	}
	now := p.b.now()
	_, err = p.b.opts.Store.UpdateMCPAuthRequest(ctx, r.ID, func(x *store.MCPAuthRequest) error {
		if x.Status != store.MCPAuthOpened || !now.Before(x.ExpiresAt) {
			return errReplay
		}
		x.Status, x.AnsweredAt = store.MCPAuthAnswered, now
		x.Iss = q.Get("iss")
		if answerErr != "" {
			x.Error = answerErr
			return nil
		}
		x.Answer, _ = p.b.seal.seal(codeWhat(x.ID), []byte(code))
		return nil
	}, nil)
	if errors.Is(err, errReplay) {
		p.b.appendAudit(ctx, store.AuditRecord{Time: now, TenantID: r.TenantID, Action: ActionRefused, Actor: s.UserID,
			Fields: map[string]any{"agent": r.AgentID, "server": r.Server, "person": r.UserID, "request": r.ID, "why": "a sign-in answer for a request already answered or expired (a replay)"}})
		return errGone
	}
	if err != nil {
		return err
	}
	if answerErr != "" {
		return p.render(c, http.StatusOK, page{Title: "Not connected", Lines: []string{fmt.Sprintf("%s was not connected: the sign-in was declined or did not finish. Ask the assistant again in Teams to try again.", r.Server)}})
	}
	// The waiting run exchanges the code (on whichever replica it runs):
	// say what became of it, when it is known soon enough.
	status := p.awaitRun(ctx, r.ID)
	switch status {
	case store.MCPAuthDone:
		return p.render(c, http.StatusOK, page{Title: "Connected", Lines: []string{
			fmt.Sprintf("%s is connected: the assistant now works there as you and goes on with your question.", r.Server),
			"You can close this page and go back to Teams.",
		}, Link: &web.Link{Href: ConnectionsPath, Text: "Your connections"}})
	case store.MCPAuthRefused:
		return p.render(c, http.StatusOK, page{Title: "Not connected", Lines: []string{
			fmt.Sprintf("%s was not connected: the service refused what its sign-in server answered. The answer in Teams says more; an administrator can find the details in the audit log.", r.Server),
		}})
	}
	return p.render(c, http.StatusOK, page{Title: "Signed in", Lines: []string{
		fmt.Sprintf("You signed in to %s. The assistant is finishing the connection and goes on with your question in Teams.", r.Server),
		"You can close this page.",
	}})
}

var errReplay = errors.New("mcpauth: the request was answered already")

// awaitRun waits a little for the run to take the answer.
func (p *Pages) awaitRun(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, p.answerWait)
	defer cancel()
	t := time.NewTicker(p.b.opts.Poll / 2)
	defer t.Stop()
	for {
		r, err := p.b.opts.Store.MCPAuthRequest(ctx, id)
		if err == nil && r.Status != store.MCPAuthAnswered {
			return r.Status
		}
		select {
		case <-ctx.Done():
			return store.MCPAuthAnswered
		case <-t.C:
		}
	}
}

// connections lists the person's connections, each with Disconnect.
func (p *Pages) connections(c echo.Context) error {
	s, ok, err := p.signedIn(c, "")
	if !ok {
		return err
	}
	list, err := p.b.Connections(c.Request().Context(), s.TenantID, s.UserID)
	if err != nil {
		return err
	}
	pg := page{Title: "Your connections"}
	if len(list) == 0 {
		pg.Lines = []string{"You have not connected any server. When the assistant needs one, it asks you in Teams with a Connect button."}
	} else {
		pg.Lines = []string{"The assistant works as you on these servers. Disconnect one and it no longer can, until you connect it again."}
	}
	for _, x := range list {
		row := connectionRow{Agent: x.AgentID, Server: x.Server, Connected: day(x.ConnectedAt), LastUsed: day(x.LastUsedAt),
			Action: fmt.Sprintf(disconnectPathFmt, url.PathEscape(x.AgentID), url.PathEscape(x.Server))}
		pg.Connections = append(pg.Connections, row)
	}
	return p.render(c, http.StatusOK, pg)
}

func day(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2 Jan 2006 15:04 UTC")
}

// disconnect ends one of the person's connections.
func (p *Pages) disconnect(c echo.Context) error {
	if err := p.cop.Check(c.Request()); err != nil {
		return web.NewError(http.StatusForbidden, "This form was sent from another site, so it was refused. Use the Disconnect button on your connections page.").Wrap(err)
	}
	s, ok, err := p.signedIn(c, "")
	if !ok {
		return err
	}
	n, err := p.b.Disconnect(c.Request().Context(), Person{TenantID: s.TenantID, UserID: s.UserID, Name: s.Name}, c.Param("agent"), c.Param("server"))
	if err != nil {
		return err
	}
	if n == 0 {
		return web.NewError(http.StatusNotFound, fmt.Sprintf("You had not connected %s.", c.Param("server")))
	}
	return c.Redirect(http.StatusSeeOther, ConnectionsPath)
}
