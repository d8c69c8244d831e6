package signin

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed templates/*.html
var templateFS embed.FS

// pageNames are the pages, each rendered inside layout.html.
var pageNames = []string{"local.html", "error.html", "signout.html", "signedout.html"}

// pages holds the parsed page templates.
type pages struct {
	t map[string]*template.Template
}

func parsePages() (*pages, error) {
	p := &pages{t: map[string]*template.Template{}}
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
	Title   string
	Local   bool // the development banner
	Message string
	Status  int
	Return  string
	Form    localForm
}

// pageCSP lets the pages load nothing but their own inline style, post
// forms only here, and never be framed (the sign-out button must not be
// clickjacked).
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// render writes a page.
func (s *Service) render(c echo.Context, status int, name string, d pageData) error {
	d.Local = s.oidc == nil
	var buf bytes.Buffer
	if err := s.pages.t[name].ExecuteTemplate(&buf, "layout", d); err != nil {
		return fmt.Errorf("signin: render %s: %w", name, err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// page wraps a handler: security headers on every response, and an error a
// handler returns as *echo.HTTPError shown as a small HTML page with its safe
// message instead of the JSON Echo would send. Other errors go on to Echo's
// error handler.
func (s *Service) page(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hdr := c.Response().Header()
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("Content-Security-Policy", pageCSP)
		// The callback URL carries the code: never leak it onwards.
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Content-Type-Options", "nosniff")
		err := h(c)
		var he *echo.HTTPError
		if err == nil || !errors.As(err, &he) || c.Response().Committed {
			return err
		}
		if he.Code >= 500 {
			s.log.Error("request failed", slog.Int("status", he.Code), slog.Any("err", he.Internal))
		}
		msg, ok := he.Message.(string)
		if !ok {
			msg = http.StatusText(he.Code)
		}
		ret, _ := c.Get(returnKey).(string)
		return s.render(c, he.Code, "error.html", pageData{
			Title:   "Sign-in problem",
			Message: msg,
			Status:  he.Code,
			Return:  LocalPath(ret),
		})
	}
}
