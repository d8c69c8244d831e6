package signin

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/fluent"
	"teamsbot/internal/web"
	"teamsbot/internal/web/csp"
)

//go:embed templates/*.html templates/signin.css
var templateFS embed.FS

// pageNames are the pages, each rendered inside layout.html.
var pageNames = []string{"local.html", "signout.html", "signedout.html"}

// pages holds the parsed page templates and their policies.
type pages struct {
	t   map[string]*template.Template
	css string // the pages' own stylesheet, after internal/fluent's
	csp string
	// localCSP is the local sign-in form's: see localFormCSP.
	localCSP string
}

func parsePages() (*pages, error) {
	css, err := templateFS.ReadFile("templates/signin.css")
	if err != nil {
		return nil, fmt.Errorf("signin: %w", err)
	}
	p := &pages{t: map[string]*template.Template{}, css: string(css), csp: pageCSP(string(css)), localCSP: localFormCSP(string(css))}
	for _, name := range pageNames {
		t, err := template.New(name).ParseFS(templateFS, "templates/layout.html", "templates/"+name)
		if err != nil {
			return nil, fmt.Errorf("signin: parse page %s: %w", name, err)
		}
		p.t[name] = t
	}
	return p, nil
}

// returnKey is the echo.Context key under which a handler leaves the
// return path, so that an error page can offer to start again towards it.
const returnKey = "signin.return"

// pageData is what the pages show.
type pageData struct {
	// FluentCSS and CSS are internal/fluent's stylesheet and the pages'.
	FluentCSS, CSS template.CSS
	Title          string
	Local          bool // the development banner
	Return         string
	Form           localForm
}

// pageCSP is the policy that lets the pages load nothing but their two
// stylesheets (internal/fluent's and css), each by its hash, and no
// script (they are forms, which need none), post forms only here, and
// never be framed (the sign-out button must not be clickjacked).
func pageCSP(css string) string {
	return csp.New().Add("default-src").Add("style-src", fluent.CSSHash(), csp.Hash(css)).Add("form-action", csp.Self).
		Add("frame-ancestors").Add("base-uri").String()
}

// localFormCSP is pageCSP for the local sign-in form, whose form may lead
// on to another site: after signing in, the person goes on to the page
// they came from, and the Connect page of a server reached as each person
// (mcpauth) sends them on to the server's authorization server, anywhere
// on https, or on plain http on this machine in local development.
// Chromium checks form-action on every redirect that follows a form
// submission (MDN, "CSP: form-action"; Chromium's
// FormSubmissionThrottle::WillRedirectRequest), so 'self' alone would stop
// the person on the sign-in form. The form itself posts to this origin.
func localFormCSP(css string) string {
	return csp.New().Add("default-src").Add("style-src", fluent.CSSHash(), csp.Hash(css)).
		Add("form-action", csp.Self, "https:", "http://localhost:*", "http://127.0.0.1:*").
		Add("frame-ancestors").Add("base-uri").String()
}

// framed reports whether a browser asked for the page as a frame
// (Sec-Fetch-Dest, sent on every request by current browsers).
func framed(r *http.Request) bool {
	d := r.Header.Get("Sec-Fetch-Dest")
	return d == "iframe" || d == "frame" || d == "embed" || d == "object"
}

// errFramed refuses a sign-in page asked for inside a frame.
var errFramed = &web.Error{Status: http.StatusForbidden, Heading: "Sign-in opens in its own window",
	Message: "Sign-in does not open inside a frame. Open this address in its own browser window or tab."}

// render writes a page.
func (s *Service) render(c echo.Context, status int, name string, d pageData) error {
	d.Local = s.oidc == nil
	d.FluentCSS, d.CSS = template.CSS(fluent.CSS()), template.CSS(s.pages.css)
	var buf bytes.Buffer
	if err := s.pages.t[name].ExecuteTemplate(&buf, "layout", d); err != nil {
		return fmt.Errorf("signin: render %s: %w", name, err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// page wraps a handler: security headers on every response, and a
// heading and a link to start again on the *web.Error a handler returns,
// which the server's error handler shows.
func (s *Service) page(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hdr := c.Response().Header()
		web.NoStore(hdr)
		hdr.Set("Content-Security-Policy", s.pages.csp)
		// For browsers older than frame-ancestors: no frame at all.
		hdr.Set("X-Frame-Options", "DENY")
		// The callback URL carries the code: never leak it onwards.
		hdr.Set("Referrer-Policy", "no-referrer")
		if framed(c.Request()) {
			// Sign-in never renders inside a frame, where a page around
			// it could dress it up or capture what is typed ("tab
			// requirements": login pages don't render in iframes). Inside
			// Teams the view page signs in with Teams' token or a popup.
			return errFramed
		}
		err := h(c)
		var we *web.Error
		if err == nil || !errors.As(err, &we) {
			return err
		}
		// A sign-in problem names itself and offers to start again,
		// towards where the person was going.
		c2 := *we
		if c2.Heading == "" {
			c2.Heading = "Sign-in problem"
		}
		if c2.Link == nil {
			ret, _ := c.Get(returnKey).(string)
			c2.Link = &web.Link{Href: "/signin?return=" + url.QueryEscape(LocalPath(ret)), Text: "Start sign-in again"}
		}
		return &c2
	}
}
