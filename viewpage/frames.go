package viewpage

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/web"
	"teamsbot/mcpapps"
	"teamsbot/store"
)

// The two frame documents: the sandbox proxy (GET /sandbox/proxy) and the
// view's own HTML (GET /sandbox/views/{id}), each served only with a valid
// frame token and only as an iframe.

var (
	//go:embed assets/proxy.js
	proxyJS string
	//go:embed assets/proxy.css
	proxyCSS string
	//go:embed assets/proxy.html
	proxyHTML string
)

// renderProxy renders the proxy document, the same for every view.
func (h *Handler) renderProxy() error {
	proxyTmpl, err := template.New("proxy").Parse(proxyHTML)
	if err != nil {
		return fmt.Errorf("viewpage: proxy template: %w", err)
	}
	var b bytes.Buffer
	err = proxyTmpl.Execute(&b, struct {
		CSS    template.CSS
		Script template.JS
	}{template.CSS(proxyCSS), template.JS(proxyJS)})
	if err != nil {
		return fmt.Errorf("viewpage: proxy template: %w", err)
	}
	h.proxyDoc = b.Bytes()
	return nil
}

// frameBase is what the frame URLs start with: nothing (a path the browser
// resolves against the page) when they share the page's origin, else the
// sandbox origin.
func (h *Handler) frameBase() string {
	if h.sameOrigin() {
		return ""
	}
	return h.sandboxOrigin.String()
}

// proxy serves GET /sandbox/proxy?view={id}&token=...: the same small
// document for every view, only with a valid proxy token.
func (h *Handler) proxy(c echo.Context) error {
	id := c.QueryParam("view")
	if err := h.keys.verify(c.QueryParam("token"), purposeProxy, id, h.now()); err != nil {
		return h.tokenRefused(purposeProxy, err)
	}
	if err := framedOnly(c.Request()); err != nil {
		return err
	}
	// A view that expired or was revoked since its token was minted is
	// gone from its frames too, at once.
	if _, err := h.loadView(c.Request().Context(), id); err != nil {
		return err
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.proxyCSP)
	frameHeaders(hd)
	// No Connection-Allowlist here, though the proxy connects nowhere (its
	// default-src is 'none'): with one on the proxy as well as on the
	// view, Chromium 156 stops answering, DevTools included, once the view
	// makes a peer connection (TestBrowserExfiltration found it). The
	// view's own list is what closes the view's channels.
	return c.HTMLBlob(http.StatusOK, h.proxyDoc)
}

// viewDocument serves GET /sandbox/views/{id}?token=...: the view's own
// HTML under its stored CSP (viewPolicy), which only our page and proxy
// may frame.
func (h *Handler) viewDocument(c echo.Context) error {
	id := c.Param("id")
	if err := h.keys.verify(c.QueryParam("token"), purposeView, id, h.now()); err != nil {
		return h.tokenRefused(purposeView, err)
	}
	if err := framedOnly(c.Request()); err != nil {
		return err
	}
	ctx := c.Request().Context()
	v, err := h.loadView(ctx, id)
	if err != nil {
		return err
	}
	html, err := h.store.ViewHTML(ctx, v.HTMLSHA256)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("view %s: html %s: %w: %w", id, v.HTMLSHA256, ErrNotFound, err)
		}
		return fmt.Errorf("view %s: html: %w", id, err)
	}
	policy, own := h.viewPolicy(ctx, v)
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", policy)
	frameHeaders(hd)
	if !h.unguarded.allowlist {
		hd.Set("Connection-Allowlist", mcpapps.ConnectionAllowlist(own))
	}
	if !h.unguarded.script {
		html = withGuard(html)
	}
	return c.HTMLBlob(http.StatusOK, html)
}

// framedOnly refuses a frame document that a browser asks for as anything
// but an iframe (a top-level window, a fetch). Browsers send Sec-Fetch-Dest
// on every request; a client that sends none runs no script either.
func framedOnly(r *http.Request) error {
	if d := r.Header.Get("Sec-Fetch-Dest"); d != "" && d != "iframe" {
		return fmt.Errorf("%w: Sec-Fetch-Dest %.20q", ErrNotFramed, d)
	}
	return nil
}

// frameHeaders are the headers both frame documents carry. Never
// X-Frame-Options: the page must be able to frame them, and
// frame-ancestors says by whom.
func frameHeaders(hd http.Header) {
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	// No speculative DNS lookups for the links a document shows. (Chromium
	// still resolves what <link rel=dns-prefetch> or preconnect names;
	// Connection-Allowlist stops those.)
	hd.Set("X-DNS-Prefetch-Control", "off")
}

// tokenRefused counts a refused frame token and returns the error that
// becomes 403.
func (h *Handler) tokenRefused(purpose string, err error) error {
	reason := reasonMalformed
	var te *tokenError
	if errors.As(err, &te) {
		reason = te.reason
	}
	h.metrics.tokenRefusals.WithLabelValues(purpose, reason).Inc()
	return fmt.Errorf("%s: %w", purpose, err)
}
