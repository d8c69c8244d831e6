package viewpage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/web"
)

// Reports of closed channels. A view that tries a way out its sandbox keeps
// closed (a peer connection, a request its CSP refuses) is told no by the
// browser or by the guard; the guard (in the view) and the sandbox proxy
// tell the page, and the page posts the report here with the person's
// session and the view's frame token. The report names the channel only.
//
// Who can post one: the signed-in person who may read the view (the same
// session, same-origin and CanRead checks as the view API), holding a frame
// token of the view that is still valid (the page has one from the view
// API, at most 10 minutes old; it asks for a fresh one when refused). There
// is no endpoint for the browser's own Reporting API: its reports come
// without the session, and accepting reports for a view on a token alone
// would let anyone who saw a frame URL write into the tenant's audit log.
//
// What a report is worth: the guard runs inside the view's own window, so
// a view can post the same notification itself. Such a report can only say
// that the view tried something, in a fixed vocabulary (blockedChannels),
// and each view is recorded at most once per channel and source, and at
// most maxBlockedPerView times, per blockedWindow: a view cannot flood the
// log, nor write anything of its own into it.

// MaxBlockedBodyBytes bounds the body of POST /api/mcp-apps/{id}/blocked.
const MaxBlockedBodyBytes = 4 << 10

// blockedWindow and maxBlockedPerView bound how often one view is recorded.
const (
	blockedWindow     = time.Hour
	maxBlockedPerView = 20
	// maxBlockedViews bounds the views whose reports are counted at once;
	// beyond it reports are dropped until windows end.
	maxBlockedViews = 10000
)

// blockedChannels are the channel names a report may carry: WebRTC, a
// Connection-Allowlist report, and the CSP directives whose violation
// means a request the view's policy refused.
var blockedChannels = map[string]bool{
	"webrtc": true, "connection-allowlist": true,
	"default-src": true, "connect-src": true, "img-src": true, "script-src": true, "script-src-elem": true,
	"style-src": true, "style-src-elem": true, "font-src": true, "media-src": true, "frame-src": true,
	"child-src": true, "fenced-frame-src": true, "worker-src": true, "manifest-src": true, "object-src": true,
	"form-action": true, "base-uri": true,
}

// Where a report comes from: the guard in the view's document, or the
// sandbox proxy (its own CSP violations, such as the view's frame
// navigating away).
const (
	sourceView  = "view"
	sourceProxy = "proxy"
)

// openedWindow is how long a person's opening of a view counts as one: a
// reload or a reconnect within it is the same opening.
const openedWindow = 30 * time.Minute

// maxOpenedViews bounds the openings remembered; past it the oldest
// window's are forgotten first, and at worst an opening is audited twice.
const maxOpenedViews = 100_000

// openedViews remembers when each person last had an opening of a view
// audited.
type openedViews struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func openedKey(view, tenant, user string) string { return view + "\x00" + tenant + "\x00" + user }

// first reports whether this is a new opening of view by the person, and
// remembers it when it is.
func (o *openedViews) first(view, tenant, user string, now time.Time) bool {
	k := openedKey(view, tenant, user)
	o.mu.Lock()
	defer o.mu.Unlock()
	if at, ok := o.seen[k]; ok && now.Sub(at) < openedWindow {
		return false
	}
	if o.seen == nil || len(o.seen) >= maxOpenedViews {
		kept := make(map[string]time.Time, len(o.seen)/2)
		for key, at := range o.seen {
			if now.Sub(at) < openedWindow/2 {
				kept[key] = at
			}
		}
		o.seen = kept
	}
	o.seen[k] = now
	return true
}

// forget undoes first, for an opening whose record failed: the next ask
// tries again.
func (o *openedViews) forget(view, tenant, user string) {
	o.mu.Lock()
	delete(o.seen, openedKey(view, tenant, user))
	o.mu.Unlock()
}

// blockedLimiter counts the records of each view per window.
type blockedLimiter struct {
	mu    sync.Mutex
	views map[string]*blockedCount
}

type blockedCount struct {
	start time.Time
	n     int
	seen  map[string]bool // channel + " " + source
}

// allow reports whether a report of view id may be recorded now, and
// counts it when it may.
func (l *blockedLimiter) allow(id, channel, source string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.views == nil {
		l.views = map[string]*blockedCount{}
	}
	c := l.views[id]
	if c != nil && now.Sub(c.start) >= blockedWindow {
		c = nil
	}
	if c == nil {
		if len(l.views) >= maxBlockedViews {
			for k, v := range l.views {
				if now.Sub(v.start) >= blockedWindow {
					delete(l.views, k)
				}
			}
			if len(l.views) >= maxBlockedViews {
				return false
			}
		}
		c = &blockedCount{start: now, seen: map[string]bool{}}
		l.views[id] = c
	}
	key := channel + " " + source
	if c.seen[key] || c.n >= maxBlockedPerView {
		return false
	}
	c.seen[key] = true
	c.n++
	return true
}

// blockedRequest is the body of POST /api/mcp-apps/{id}/blocked.
type blockedRequest struct {
	Channel string `json:"channel"`
	Source  string `json:"source"`
	Token   string `json:"token"`
}

// blocked serves POST /api/mcp-apps/{id}/blocked: a closed channel a view
// tried, recorded as agent.mcp_app.blocked. 204 whether it was recorded or
// dropped by the limits; 400 for a channel or source it does not know.
func (h *Handler) blocked(c echo.Context) error {
	r := c.Request()
	if err := sameOriginJSON(h.cop, r); err != nil {
		return err
	}
	s, err := h.session(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	v, err := h.viewFor(ctx, c.Param("id"), s)
	if err != nil {
		return err
	}
	if err := h.access.CanRead(ctx, personOf(s), accessView(v)); err != nil {
		return refusal(err)
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, MaxBlockedBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return bodyTooLarge(MaxBlockedBodyBytes, err)
		}
		return fmt.Errorf("%w: reading the body: %w", ErrBadRequest, err)
	}
	var req blockedRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return badRequest(web.JSONWords(err, &req), err)
	}
	if err := h.keys.verify(req.Token, purposeView, v.ID, h.now()); err != nil {
		h.metrics.blocked.WithLabelValues("refused").Inc()
		return h.tokenRefused(purposeView, err)
	}
	if !blockedChannels[req.Channel] {
		h.metrics.blocked.WithLabelValues("refused").Inc()
		return badRequest(fmt.Sprintf("`channel` %.64q is not a channel a view reports", req.Channel), nil)
	}
	if req.Source != sourceView && req.Source != sourceProxy {
		h.metrics.blocked.WithLabelValues("refused").Inc()
		return badRequest("`source` must be view or proxy", nil)
	}
	if !h.blockedLimit.allow(v.ID, req.Channel, req.Source, h.now()) {
		h.metrics.blocked.WithLabelValues("limited").Inc()
		return c.NoContent(http.StatusNoContent)
	}
	if err := h.agent.RecordBlocked(ctx, v, agentPersonOf(s), req.Channel, req.Source); err != nil {
		return fmt.Errorf("view %s: record a blocked channel: %w", v.ID, err)
	}
	h.metrics.blocked.WithLabelValues("recorded").Inc()
	h.logger.InfoContext(ctx, "a view tried a closed channel", "view", v.ID, "channel", req.Channel, "source", req.Source)
	return c.NoContent(http.StatusNoContent)
}
