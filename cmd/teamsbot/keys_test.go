package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
	"teamsbot/viewpage"
)

// A session cookie and a frame token made before `teamsbot keys rotate`
// still verify after it (the service restarted on the rotated files); new
// ones carry the new keys' ids; once `teamsbot keys retire` has removed
// the old keys (and the service restarted again), the old cookie and the
// old frame URL are refused, and the new ones still work.
func TestKeyRotation(t *testing.T) {
	connector := newRecordingConnector(t)
	const publicBase = "https://teams.example.test"
	m := testenv.StartMockOIDC(t)
	data := t.TempDir()
	env := map[string]string{
		"TICKETIQ_DATA":               data,
		"TICKETIQ_PUBLIC_BASE_URL":    publicBase,
		"TICKETIQ_OIDC_ISSUER":        m.Issuer(),
		"TICKETIQ_OIDC_CLIENT_ID":     m.ClientID,
		"TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
	}
	ada := &testenv.EntraUser{TID: "tenant-1", OID: "user-oid-1", Name: "Ada Lovelace"}
	// base is where the running service listens; the browser always
	// reaches it as publicBase.
	var base string
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return publicHost{publicBase, base}.RoundTrip(r)
		})}
	}
	signIn := func(c *http.Client) string {
		t.Helper()
		m.QueueUser(ada)
		resp, err := c.Get(publicBase + "/signin?return=/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		u, _ := url.Parse(publicBase)
		for _, ck := range c.Jar.Cookies(u) {
			if ck.Name == "__Host-teamsbot-session" {
				return ck.Value
			}
		}
		t.Fatalf("no session cookie after signing in (status %d)", resp.StatusCode)
		return ""
	}
	// frameURLs asks the view API for the view's frame URLs.
	frameURLs := func(c *http.Client, viewID string) (int, string) {
		t.Helper()
		code, body := get(t, c, publicBase+"/api/mcp-apps/"+viewID)
		if code != http.StatusOK {
			return code, ""
		}
		var v struct{ ProxyURL string }
		if err := json.Unmarshal([]byte(body), &v); err != nil || v.ProxyURL == "" {
			t.Fatalf("view API answer %s: %v", body, err)
		}
		return code, v.ProxyURL
	}
	tokenKeyID := func(frameURL string) string {
		u, err := url.Parse(frameURL)
		if err != nil {
			t.Fatal(err)
		}
		id, _, _ := strings.Cut(u.Query().Get("token"), ".")
		return id
	}
	cookieKeyID := func(value string) string {
		id, _, _ := strings.Cut(value, ".")
		return id
	}
	currentIDs := func() (token, cookie string) {
		t.Helper()
		tk, err := viewpage.TokenKeys(data).Load()
		if err != nil {
			t.Fatal(err)
		}
		ck, err := signin.CookieKeys(data).Load()
		if err != nil {
			t.Fatal(err)
		}
		return tk.Current().ID, ck.Current().ID
	}
	start := func() func() error {
		t.Helper()
		var stop func() error
		base, _, stop = startService(t, env)
		return stop
	}
	keys := func(args ...string) string {
		t.Helper()
		out, err := runCmd(t, env, append([]string{"keys"}, args...)...)
		if err != nil {
			t.Fatalf("teamsbot keys %v: %v\n%s", args, err, out)
		}
		return out
	}

	// Before: a view, a session and a frame URL, made with the first keys.
	stop := start()
	viewID := askForView(t, base, connector, publicBase, map[string]any{
		"type": "message", "id": "act-1", "serviceUrl": connector.URL, "channelId": "msteams",
		"timestamp":    time.Now().UTC().Format(time.RFC3339),
		"from":         map[string]any{"id": "29:user", "name": ada.Name, "aadObjectId": ada.OID},
		"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": "a:personal-1", "conversationType": "personal", "tenantId": ada.TID},
		"channelData":  map[string]any{"tenant": map[string]any{"id": ada.TID}},
		"text":         "/sales_report {}",
	})
	if viewID == "" {
		t.Fatal("no answer card with an Open button")
	}
	oldBrowser := browser()
	oldCookie := signIn(oldBrowser)
	_, oldFrame := frameURLs(oldBrowser, viewID)
	oldToken, oldCookieKey := currentIDs()
	if cookieKeyID(oldCookie) != oldCookieKey || tokenKeyID(oldFrame) != oldToken {
		t.Fatalf("cookie key %q, frame token key %q; want the files' keys %q and %q", cookieKeyID(oldCookie), tokenKeyID(oldFrame), oldCookieKey, oldToken)
	}
	if code, _ := get(t, oldBrowser, publicBase+oldFrame); code != http.StatusOK {
		t.Fatalf("the frame URL before the rotation: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Rotate, restart: what the old keys made still verifies; what is made
	// now carries the new keys' ids.
	out := keys("rotate")
	newToken, newCookieKey := currentIDs()
	if newToken == oldToken || newCookieKey == oldCookieKey || !strings.Contains(out, newToken) || !strings.Contains(out, newCookieKey) {
		t.Fatalf("after the rotation the keys are %q and %q (were %q and %q); printed:\n%s", newToken, newCookieKey, oldToken, oldCookieKey, out)
	}
	stop = start()
	code, frameAfter := frameURLs(oldBrowser, viewID)
	if code != http.StatusOK {
		t.Fatalf("the session of before the rotation: %d", code)
	}
	if got := tokenKeyID(frameAfter); got != newToken {
		t.Errorf("a frame URL minted after the rotation carries key %q, want the new %q", got, newToken)
	}
	if code, _ := get(t, oldBrowser, publicBase+oldFrame); code != http.StatusOK {
		t.Errorf("the frame URL of before the rotation: %d, want 200", code)
	}
	newBrowser := browser()
	newCookie := signIn(newBrowser)
	if got := cookieKeyID(newCookie); got != newCookieKey {
		t.Errorf("a session made after the rotation carries key %q, want the new %q", got, newCookieKey)
	}
	_, newFrame := frameURLs(newBrowser, viewID)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// The newest key signs and cannot be retired.
	if out, err := runCmd(t, env, "keys", "retire", newToken); err == nil || !strings.Contains(err.Error(), "rotate") {
		t.Errorf("retiring the signing key: %v\n%s", err, out)
	}
	// Retire the old keys, restart: what they made is refused.
	keys("retire", oldToken, oldCookieKey)
	stop = start()
	defer stop()
	if code, _ := frameURLs(oldBrowser, viewID); code != http.StatusUnauthorized {
		t.Errorf("the session of the retired key: %d, want 401", code)
	}
	if code, _ := get(t, oldBrowser, publicBase+oldFrame); code != http.StatusForbidden {
		t.Errorf("the frame URL of the retired key: %d, want 403", code)
	}
	if code, _ := frameURLs(newBrowser, viewID); code != http.StatusOK {
		t.Errorf("the session of the new key: %d, want 200", code)
	}
	if code, _ := get(t, newBrowser, publicBase+newFrame); code != http.StatusOK {
		t.Errorf("the frame URL of the new key: %d, want 200", code)
	}
}

// roundTripFunc is a RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// `teamsbot keys` on the one-key cookie file of an earlier version keeps
// it and lists its key without id; `teamsbot keys rotate` rewrites it with
// ids, keeping the old key.
func TestKeysUpgradeAnEarlierCookieKeyFile(t *testing.T) {
	data := t.TempDir()
	raw := bytes.Repeat([]byte{7}, 32)
	path := filepath.Join(data, signin.CookieKeyFile)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TICKETIQ_DATA": data}
	out, err := runCmd(t, env, "keys")
	if err != nil || !strings.Contains(out, "no id") {
		t.Fatalf("teamsbot keys: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, raw) {
		t.Fatal("`teamsbot keys` changed an existing key file")
	}
	if out, err = runCmd(t, env, "keys", "rotate"); err != nil {
		t.Fatalf("teamsbot keys rotate: %v\n%s", err, out)
	}
	ks, err := signin.CookieKeys(data).Load()
	legacy, ok := ks.Legacy()
	if err != nil || len(ks) != 2 || !ok || !bytes.Equal(legacy.Secret, raw) || legacy.ID == "" || strings.Contains(out, "no id") {
		t.Errorf("after rotate: %v, %v\n%s", ks, err, out)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after rotate: %v, %v; want mode 0600", fi, err)
	}
	if out, err := runCmd(t, env, "keys", "rotat"); err == nil || !strings.Contains(err.Error(), "did you mean `rotate`") {
		t.Errorf("a mistyped subcommand: %v\n%s", err, out)
	}
	if out, err := runCmd(t, env, "keys", "retire", "nosuchkey"); err == nil || !strings.Contains(err.Error(), "nosuchkey") {
		t.Errorf("retiring an unknown key: %v\n%s", err, out)
	}
}
