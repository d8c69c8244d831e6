package signin

import (
	"bytes"
	"encoding/json"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/teamsjs"
	"teamsbot/internal/web"
	"teamsbot/internal/web/csp"
)

// The popup sign-in: where Teams cannot give a single sign-on token (the
// person or the admin has not consented, or the client has no SSO), the view
// page asks teams-js authentication.authenticate to open /signin/teams/start
// in a popup, a top-level window where the ordinary OIDC sign-in runs. Its
// last page, /signin/teams/done, hands a one-time code back to the page
// through authentication.notifySuccess, and the page trades the code for a
// session cookie of its own frame (POST /api/signin/teams/handoff): the
// popup's cookie is first-party and SameSite=Lax, which a browser never
// sends inside Teams' frame. Microsoft's "Enable authentication using
// third-party OAuth provider" (auth-flow-tab) describes the popup, and the
// teams-js reference of authentication.authenticate says it is the way to
// show sign-in or consent pages that refuse to render in a frame.

// handoffLifetime bounds the time between the popup's last page and the
// page's trade of the code.
const handoffLifetime = 2 * time.Minute

// handoffName is the purpose sealed into a handoff code, so that no other
// sealed value of this package can pass for one.
const handoffName = "teamsbot-teams-handoff"

// handoffPayload is the sealed content of a handoff code.
type handoffPayload struct {
	V       int            `json:"v"`
	ID      string         `json:"id"`
	Exp     int64          `json:"exp"`
	Session sessionPayload `json:"s"`
}

// handleTeamsStart serves GET /signin/teams/start, the popup's first page:
// the ordinary sign-in, then /signin/teams/done.
func (s *Service) handleTeamsStart(c echo.Context) error {
	if _, err := s.Session(c.Request()); err == nil {
		return c.Redirect(http.StatusSeeOther, "/signin/teams/done")
	}
	return c.Redirect(http.StatusSeeOther, s.SignInURL("/signin/teams/done"))
}

// doneScript runs on /signin/teams/done: it tells Teams that sign-in
// succeeded, with the handoff code as the result the page receives.
const doneScript = `(function () {
  "use strict";
  var code = document.body.getAttribute("data-code");
  var origins = (document.body.getAttribute("data-teams-origins") || "").split(" ").filter(Boolean);
  var status = document.getElementById("status");
  var teams = window.TeamsbotTeams;
  teams.app.initialize(origins).then(function () {
    teams.authentication.notifySuccess(code);
  }).catch(function () {
    status.textContent = "You are signed in, but this window was not opened by Teams. Close it and open the view again.";
  });
})();`

var doneTemplate = template.Must(template.New("done").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Signed in</title>
</head>
<body data-code="{{.Code}}" data-teams-origins="{{.Origins}}">
<h1>Signed in</h1>
<p id="status" role="status">You are signed in. This window closes by itself.</p>
<script>{{.TeamsJS}}</script>
<script>{{.Script}}</script>
</body>
</html>
`))

// doneCSP is the policy that lets the last popup page run teams-js and its
// own script only, and never be framed.
func doneCSP() string {
	return csp.New().Add("default-src").Add("script-src", teamsjs.Hash(), csp.Hash(doneScript)).
		Add("base-uri").Add("form-action").Add("object-src").Add("frame-ancestors").String()
}

// handleTeamsDone serves GET /signin/teams/done: with the popup's session,
// a one-time code for the page inside Teams.
func (s *Service) handleTeamsDone(c echo.Context) error {
	sess, err := s.Session(c.Request())
	if err != nil {
		return c.Redirect(http.StatusSeeOther, s.SignInURL("/signin/teams/done"))
	}
	h := handoffPayload{
		V:   1,
		ID:  randomString(),
		Exp: s.now().Add(handoffLifetime).Unix(),
		Session: sessionPayload{
			TID: sess.TenantID, OID: sess.UserID, Name: sess.Name, UPN: sess.Username, Roles: sess.Roles,
		},
	}
	plain, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := doneTemplate.Execute(&b, struct {
		Code, Origins   string
		TeamsJS, Script template.JS
	}{s.seal.seal(handoffName, plain), s.teams.origins, template.JS(teamsjs.Script()), template.JS(doneScript)}); err != nil {
		return err
	}
	c.Response().Header().Set("Content-Security-Policy", doneCSP())
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// handleTeamsHandoff serves POST /api/signin/teams/handoff: the page inside
// Teams trades the popup's one-time code for a session of its frame.
func (s *Service) handleTeamsHandoff(c echo.Context) error {
	r := c.Request()
	if err := s.cop.Check(r); err != nil {
		return errCrossSite
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return web.NewError(http.StatusUnsupportedMediaType, "Send the code as JSON.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, maxTeamsTokenBytes))
	if err != nil {
		return web.NewError(http.StatusRequestEntityTooLarge, "The code is too large.")
	}
	var in struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Code == "" {
		return web.NewError(http.StatusBadRequest, "Send {\"code\": \"...\"} from the sign-in window.")
	}
	refused := web.NewError(http.StatusUnauthorized, "This sign-in has expired or was already used. Sign in again.")
	plain, err := s.seal.open(handoffName, in.Code)
	if err != nil {
		s.log.Info("handoff code refused", slog.String("why", "not sealed by this service"))
		return refused
	}
	var h handoffPayload
	if err := json.Unmarshal(plain, &h); err != nil || h.V != 1 || h.ID == "" || h.Session.TID == "" || h.Session.OID == "" {
		return refused
	}
	now := s.now()
	exp := time.Unix(h.Exp, 0)
	if !now.Before(exp) || exp.Sub(now) > handoffLifetime+clockSlack {
		s.log.Info("handoff code refused", slog.String("why", "expired"))
		return refused
	}
	if !s.used.use("handoff:"+h.ID, exp, now) {
		s.log.Warn("handoff code used twice")
		return refused
	}
	if _, err := s.startFramedSession(c, h.Session); err != nil {
		return err
	}
	s.log.Info("signed in (Teams popup)", slog.String("tenant", h.Session.TID), slog.String("user", h.Session.OID))
	return c.NoContent(http.StatusNoContent)
}
