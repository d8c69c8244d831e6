package bot

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// event posts an activity that needs no turn, so only authentication
// decides its status.
func (h *harness) event(id, authorization string, mut func(map[string]any)) int {
	h.t.Helper()
	a := h.message("personal", "a:auth", id, "")
	a["type"] = "event"
	if mut != nil {
		mut(a)
	}
	s, _ := h.post(a, authorization)
	return s
}

// Tokens that differ from the usual one only where the Bot Connector may
// differ are accepted: an audience array that holds the app id, times within
// the 5 minutes of clock skew, no nbf, the scheme in lower case. Each is the
// accepted side of a rule that TestForgedTokensRejected checks from the
// other side, so together they pin the rule down.
func TestTokenVariantsAccepted(t *testing.T) {
	h := newHarness(t, setup{})
	cases := []struct {
		name   string
		mut    func(jwt.MapClaims)
		scheme string
	}{
		{"aud array with the app id", func(c jwt.MapClaims) { c["aud"] = []string{"another-app", testAppID} }, "Bearer"},
		{"expired 4 minutes ago", func(c jwt.MapClaims) { c["exp"] = h.now().Add(-4 * time.Minute).Unix() }, "Bearer"},
		{"nbf 4 minutes ahead", func(c jwt.MapClaims) { c["nbf"] = h.now().Add(4 * time.Minute).Unix() }, "Bearer"},
		{"no nbf", func(c jwt.MapClaims) { delete(c, "nbf") }, "Bearer"},
		{"lower-case scheme", nil, "bearer"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := h.claims()
			if tc.mut != nil {
				tc.mut(c)
			}
			if s := h.event("ok-"+string(rune('a'+i)), tc.scheme+" "+h.token(c), nil); s != http.StatusOK {
				t.Fatalf("status %d, want 200", s)
			}
		})
	}
}

// A token already verified is remembered, but every activity that carries
// it is checked again against the clock, its own serviceUrl and its own
// channel: the cache saves the RSA work, never a check.
func TestVerifiedTokenIsCheckedAgainPerActivity(t *testing.T) {
	h := newHarness(t, setup{})
	auth := "Bearer " + h.token(h.claims()) // exp in one hour
	if s := h.event("c-1", auth, nil); s != http.StatusOK {
		t.Fatalf("first use: %d", s)
	}
	if s := h.event("c-2", auth, func(a map[string]any) { a["serviceUrl"] = "https://smba.trafficmanager.net/emea/" }); s != http.StatusUnauthorized {
		t.Errorf("same token, another serviceUrl: %d, want 401", s)
	}
	if s := h.event("c-3", auth, func(a map[string]any) { a["channelId"] = "skype" }); s != http.StatusForbidden {
		t.Errorf("same token, a channel its key is not endorsed for: %d, want 403", s)
	}
	if s := h.event("c-4", auth, nil); s != http.StatusOK {
		t.Fatalf("same token again: %d", s)
	}
	h.clock.Advance(64 * time.Minute) // past exp, within the skew
	if s := h.event("c-5", auth, nil); s != http.StatusOK {
		t.Errorf("4 minutes past exp: %d, want 200", s)
	}
	h.clock.Advance(2 * time.Minute) // past exp and the skew
	if s := h.event("c-6", auth, nil); s != http.StatusUnauthorized {
		t.Errorf("6 minutes past exp: %d, want 401", s)
	}
	if n := h.bf.fetchCount(); n != 1 {
		t.Errorf("%d key fetches, want 1", n)
	}
}

// A refresh for an unknown key id that fails (the metadata endpoint is
// down just as Microsoft rolls its keys) does not use up the hourly
// allowance: once the endpoint answers again, the next token signed with
// the new key is accepted, without waiting an hour.
func TestFailedRolloverRefreshIsRetried(t *testing.T) {
	h := newHarness(t, setup{})
	if s := h.event("fr-1", "Bearer "+h.token(h.claims()), nil); s != http.StatusOK {
		t.Fatalf("first activity: %d", s)
	}
	h.bf.addKey(t, "key-2", "msteams")
	rolled := "Bearer " + sign(t, jwt.SigningMethodRS256, "key-2", h.bf.key("key-2"), h.claims())
	h.bf.mu.Lock()
	h.bf.failMeta = true
	h.bf.mu.Unlock()
	if s := h.event("fr-2", rolled, nil); s != http.StatusServiceUnavailable {
		t.Fatalf("new key while the metadata is down: %d, want 503", s)
	}
	h.bf.mu.Lock()
	h.bf.failMeta = false
	h.bf.mu.Unlock()
	h.clock.Advance(keyRetryAfterFailure + time.Second)
	if s := h.event("fr-3", rolled, nil); s != http.StatusOK {
		t.Fatalf("new key once the metadata is back: %d, want 200", s)
	}
}
