package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/testenv"
)

// fakeBotFramework publishes a Bot Framework OpenID metadata document and
// a JWKS whose one key is endorsed for msteams, as the Bot Framework
// "Authentication" reference describes them, and answers the bot's token
// requests; it signs tokens with that key.
type fakeBotFramework struct {
	key      *rsa.PrivateKey
	metadata string
	token    string
}

const botIssuer = "https://api.botframework.com"

func startFakeBotFramework(t *testing.T) *fakeBotFramework {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBotFramework{key: key}
	b64 := base64.RawURLEncoding.EncodeToString
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/metadata", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, botIssuer, srv.URL+"/keys")
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"keys":[{"kty":"RSA","use":"sig","kid":"key-1","n":%q,"e":%q,"endorsements":["msteams"]}]}`,
			b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes()))
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"access_token":"bot-token","token_type":"Bearer","expires_in":3600}`)
	})
	f.metadata, f.token = srv.URL+"/metadata", srv.URL+"/token"
	return f
}

// sign makes a token with the given claims, signed by key (nil: the
// published one) under kid.
func (f *fakeBotFramework) sign(t *testing.T, claims jwt.MapClaims, kid string, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = f.key
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	hostileAppID   = "00000000-0000-0000-0000-000000000001"
	hostileTenant  = "00000000-0000-0000-0000-0000000000aa"
	otherTenant    = "00000000-0000-0000-0000-0000000000bb"
	hostileService = "https://connector.invalid/amer/"
)

func (f *fakeBotFramework) claims(mutate func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": botIssuer, "aud": hostileAppID, "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix(), "serviceurl": hostileService}
	if mutate != nil {
		mutate(c)
	}
	return c
}

// hostileMCP is a Streamable HTTP MCP server on loopback that a
// configuration names: tools with control characters and markup in their
// names and descriptions, a resource of 8 MiB, an endless tool list (every
// page names a next one) and a tool that answers with a huge text.
func hostileMCP(t *testing.T) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, &mcp.ServerOptions{PageSize: 1})
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 4<<20)}}}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "big_view", Description: "a view of 8 MiB", InputSchema: map[string]any{"type": "object"},
		Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://hostile/big.html"}}}, ok)
	srv.AddResource(&mcp.Resource{URI: "ui://hostile/big.html", Name: "big", MIMEType: "text/html;profile=mcp-app"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "ui://hostile/big.html", MIMEType: "text/html;profile=mcp-app", Text: strings.Repeat("<p>", 8<<20/3)}}}, nil
		})
	for i := range 300 {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%03d", i), Description: "\x1b[31m\u202e<script>alert(1)</script>\x00", InputSchema: map[string]any{"type": "object"}}, ok)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A tool name with control characters cannot be added through the
		// SDK: it is written into the tools/list answer on the wire.
		if r.Method == http.MethodPost {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			body := strings.ReplaceAll(rec.Body.String(), `"name":"t000"`, `"name":"t000\u0000\r\nX-Injected: 1"`)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			io.WriteString(w, body)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestHostileInputs sends hostile input at every surface of the whole
// service, over real HTTP on loopback, and names the expected answer for
// each: forged and broken tokens, oversized, deeply nested and malformed
// bodies, path tricks in ids, header injection, another tenant's ids,
// cross-site posts to the admin console and the view API, and an MCP
// server that answers with huge resources, control characters in names
// and an endless tool list. After all of it the service still answers.
func TestHostileInputs(t *testing.T) {
	bf := startFakeBotFramework(t)
	m := testenv.StartMockOIDC(t)
	cfgPath := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(cfgPath, []byte("agents:\n  - id: default\n    servers:\n      - name: demo\n        builtin: demo\n      - name: hostile\n        url: "+hostileMCP(t)+"\n        timeout: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const public = "https://teams.example.test"
	base, logs, stop := startService(t, map[string]string{
		"TICKETIQ_BOT_APP_ID": hostileAppID, "TICKETIQ_BOT_APP_PASSWORD": "pw", "TICKETIQ_BOT_TENANT_ID": hostileTenant,
		"TICKETIQ_BOT_OPENID_METADATA_URL": bf.metadata, "TICKETIQ_BOT_TOKEN_URL": bf.token,
		"TICKETIQ_OIDC_ISSUER": m.Issuer(), "TICKETIQ_OIDC_CLIENT_ID": m.ClientID, "TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
		"TICKETIQ_PUBLIC_BASE_URL": public, "TICKETIQ_CONFIG": cfgPath,
	})
	// A signed-in tenant admin, reaching the service as a browser reaches
	// the public host.
	jar, _ := cookiejar.New(nil)
	admin := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: publicHost{public, base},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	m.QueueUser(&testenv.EntraUser{TID: hostileTenant, OID: "admin-oid", Name: "Ada Admin", Roles: []string{"agents.admin", "agents.read", "agents.run"}})
	if resp, err := (&http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: publicHost{public, base}}).Get(public + "/signin?return=/admin"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	anon := &http.Client{Timeout: 30 * time.Second, Transport: publicHost{public, base},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	activity := func(mutate func(map[string]any)) string {
		a := map[string]any{
			"type": "message", "id": "act-1", "timestamp": time.Now().UTC().Format(time.RFC3339),
			"serviceUrl": hostileService, "channelId": "msteams",
			"from":         map[string]any{"id": "29:user", "name": "Ada", "aadObjectId": "user-oid-1"},
			"recipient":    map[string]any{"id": "28:" + hostileAppID, "name": "teamsbot"},
			"conversation": map[string]any{"id": "a:personal-1", "conversationType": "personal", "tenantId": hostileTenant},
			"channelData":  map[string]any{"tenant": map[string]any{"id": hostileTenant}},
			"text":         "/tools",
		}
		if mutate != nil {
			mutate(a)
		}
		b, _ := json.Marshal(a)
		return string(b)
	}
	good := bf.sign(t, bf.claims(nil), "key-1", nil)
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	nested := func(n int) string { return strings.Repeat(`{"a":`, n) + `1` + strings.Repeat(`}`, n) }
	bearer := func(tok string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
	}
	sameOrigin := map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin", "Origin": public}
	crossSite := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
	noneAlg := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"key-1"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+botIssuer+`","aud":"`+hostileAppID+`","exp":4102444800,"serviceurl":"`+hostileService+`"}`)) + "."
	hs256 := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, bf.claims(nil))
		tok.Header["kid"] = "key-1"
		s, _ := tok.SignedString([]byte("key-1"))
		return s
	}()

	cases := []struct {
		name   string
		client *http.Client
		method string
		path   string
		header map[string]string
		body   string
		want   int
	}{
		// Forged, broken and misdirected Bot Framework tokens.
		{"no token", anon, "POST", "/api/messages", map[string]string{"Content-Type": "application/json"}, activity(nil), 401},
		{"basic auth", anon, "POST", "/api/messages", map[string]string{"Authorization": "Basic YTpi", "Content-Type": "application/json"}, activity(nil), 401},
		{"garbage token", anon, "POST", "/api/messages", bearer("not.a.jwt"), activity(nil), 401},
		{"alg none", anon, "POST", "/api/messages", bearer(noneAlg), activity(nil), 401},
		{"HS256 with the kid as secret", anon, "POST", "/api/messages", bearer(hs256), activity(nil), 401},
		{"signed by another key", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(nil), "key-1", otherKey)), activity(nil), 401},
		{"unknown kid", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(nil), "key-2", nil)), activity(nil), 401},
		{"kid path trick", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(nil), "../keys/key-1", nil)), activity(nil), 401},
		{"wrong issuer", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), "key-1", nil)), activity(nil), 401},
		{"another bot's audience", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(func(c jwt.MapClaims) { c["aud"] = "other-app" }), "key-1", nil)), activity(nil), 401},
		{"expired", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), "key-1", nil)), activity(nil), 401},
		{"not yet valid", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), "key-1", nil)), activity(nil), 401},
		{"no exp", anon, "POST", "/api/messages", bearer(bf.sign(t, bf.claims(func(c jwt.MapClaims) { delete(c, "exp") }), "key-1", nil)), activity(nil), 401},
		{"serviceUrl not the token's", anon, "POST", "/api/messages", bearer(good), activity(func(a map[string]any) { a["serviceUrl"] = "https://evil.example/" }), 401},
		{"key not endorsed for the channel", anon, "POST", "/api/messages", bearer(good), activity(func(a map[string]any) { a["channelId"] = "webchat" }), 403},
		// Bodies, with a good token.
		{"malformed JSON", anon, "POST", "/api/messages", bearer(good), `{"type":"message",`, 400},
		{"not an object", anon, "POST", "/api/messages", bearer(good), `[1,2,3]`, 400},
		{"empty body", anon, "POST", "/api/messages", bearer(good), ``, 400},
		{"deeply nested", anon, "POST", "/api/messages", bearer(good), activity(func(a map[string]any) { a["channelData"] = json.RawMessage(nested(20000)) }), 400},
		{"oversized", anon, "POST", "/api/messages", bearer(good), activity(func(a map[string]any) { a["text"] = strings.Repeat("A", 300<<10) }), 413},
		{"two JSON values", anon, "POST", "/api/messages", bearer(good), activity(nil) + activity(nil), 400},
		{"another tenant's message", anon, "POST", "/api/messages", bearer(good), activity(func(a map[string]any) {
			a["id"] = "act-other"
			a["channelData"] = map[string]any{"tenant": map[string]any{"id": otherTenant}}
			a["conversation"] = map[string]any{"id": "a:personal-2", "conversationType": "personal", "tenantId": otherTenant}
		}), 202},
		// Path tricks in view ids, and another tenant's ids.
		{"dot-dot id", admin, "GET", "/api/mcp-apps/..%2f..%2fadmin", nil, "", 404},
		{"encoded NUL in id", admin, "GET", "/api/mcp-apps/abc%00def", nil, "", 404},
		{"id of 8 KiB", admin, "GET", "/api/mcp-apps/" + strings.Repeat("a", 8<<10), nil, "", 404},
		{"unknown view page", admin, "GET", "/mcp-apps/" + strings.Repeat("Z", 43), nil, "", 404},
		{"call on an unknown id", admin, "POST", "/api/mcp-apps/" + strings.Repeat("Z", 43) + "/call", sameOrigin, `{"name":"refresh_sales"}`, 404},
		{"revoke another tenant's view", admin, "POST", "/api/admin/views/" + strings.Repeat("Y", 43) + "/revoke", sameOrigin, `{}`, 404},
		{"sandbox proxy without a token", anon, "GET", "/sandbox/proxy?view=abc", nil, "", 403},
		{"sandbox view with a forged token", anon, "GET", "/sandbox/views/abc?token=v1.AAAA.BBBB", map[string]string{"Sec-Fetch-Dest": "iframe"}, "", 403},
		{"sandbox view path trick", anon, "GET", "/sandbox/views/..%2f..%2fadmin?token=x", map[string]string{"Sec-Fetch-Dest": "iframe"}, "", 403},
		// The view API's bridge endpoint: cross-site and wrong types.
		{"view call cross-site", admin, "POST", "/api/mcp-apps/" + strings.Repeat("Z", 43) + "/call", crossSite, `name=refresh_sales`, 403},
		{"view call text/plain", admin, "POST", "/api/mcp-apps/" + strings.Repeat("Z", 43) + "/call", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "same-origin", "Origin": public}, `{"name":"x"}`, 415},
		{"view API without a session", anon, "GET", "/api/mcp-apps/" + strings.Repeat("Z", 43), nil, "", 401},
		// Cross-site posts to the admin console.
		{"CSRF: add a binding", admin, "POST", "/admin/bindings", crossSite, "principal=user:evil&role=agents.admin", 403},
		{"CSRF: save policies", admin, "POST", "/admin/policies", crossSite, "policies=permit(principal,action,resource);", 403},
		{"CSRF: create an API key", admin, "POST", "/admin/keys", crossSite, "label=evil", 403},
		{"CSRF: revoke a view", admin, "POST", "/admin/views/abc/revoke", crossSite, "", 403},
		{"CSRF: admin API with a form", admin, "PUT", "/api/admin/settings", crossSite, "x=1", 403},
		{"admin API without a session", anon, "GET", "/api/admin/bindings", nil, "", 401},
		// Header injection and redirects.
		{"CRLF in the sign-in return", anon, "GET", "/signin?return=/x%0d%0aSet-Cookie:%20evil=1", nil, "", 303},
		{"open redirect in the sign-in return", anon, "GET", "/signin?return=//evil.example/", nil, "", 303},
		{"absolute return URL", anon, "GET", "/signin?return=https://evil.example/", nil, "", 303},
		{"oversized header", anon, "GET", "/healthz", map[string]string{"X-Big": strings.Repeat("a", 2<<20)}, "", 431},
		{"unknown method on the bot", anon, "PUT", "/api/messages", bearer(good), activity(nil), 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			req, err := http.NewRequest(c.method, public+c.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", c.method, c.path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s %.80s: %d, want %d: %.300s", c.method, c.path, resp.StatusCode, c.want, b)
			}
			for k, vs := range resp.Header {
				for _, v := range vs {
					if strings.ContainsAny(v, "\r\n") || k == "Set-Cookie" && strings.Contains(v, "evil") {
						t.Errorf("header %s: %q", k, v)
					}
				}
			}
			if loc := resp.Header.Get("Location"); strings.Contains(loc, "evil.example") && !strings.HasPrefix(loc, m.Issuer()) {
				t.Errorf("redirect to %q", loc)
			}
		})
	}
	// After all of it the service still answers, and no request was
	// answered 500.
	if code, _ := get(t, anon, public+"/healthz"); code != 200 {
		t.Errorf("/healthz after the hostile inputs: %d", code)
	}
	if strings.Contains(logs.String(), `"status":500`) {
		t.Errorf("a request was answered 500:\n%s", logs)
	}
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
}

// A hostile MCP server, over the whole service in local mode: an endless
// tool list, tool names with control characters and markup, a resource of
// 8 MiB and a result of 4 MiB. Each message still gets its answer within
// the bound, the bad parts are left out with a note, and nothing of the
// control characters reaches Teams.
func TestHostileMCPServerOverTheWholeService(t *testing.T) {
	conn := testenv.StartConnector(t)
	cfgPath := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(cfgPath, []byte("agents:\n  - id: default\n    servers:\n      - name: hostile\n        url: "+hostileMCP(t)+"\n        timeout: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs, _ := startService(t, map[string]string{"TICKETIQ_CONFIG": cfgPath})
	for i, c := range []struct {
		text, want string
		// logged, when set, is in the service log under the reference
		// the answer gives: the detail is the operator's.
		logged string
	}{
		{"/tools", "lists more tools than the 1000 (or 100 pages) read", ""},
		// Refused as size, whether by the HTML limit or, as here with
		// its JSON escapes, by the cap on one message from a server;
		// either way the card says so in plain words, and the log has
		// the detail, which names the setting, under its reference.
		{"/hostile/big_view {}", "no view was made for hostile/big_view (ref ", ""},
		{"/hostile/big_view {}", ": the view is too large to show.", "TICKETIQ_MCP_APPS_MAX_HTML_BYTES sets the limit"},
		{"/hostile/t001 {}", `named \"t000\\x00\\r\\nX-Injected: 1\" is not offered`, ""},
	} {
		conv := fmt.Sprintf("a:hostile-%d", i)
		body, _ := json.Marshal(map[string]any{
			"type": "message", "id": fmt.Sprintf("h-%d", i), "timestamp": time.Now().UTC().Format(time.RFC3339),
			"serviceUrl": conn.URL, "channelId": "msteams",
			"from":         map[string]any{"id": "29:user", "name": "Ada", "aadObjectId": "user-oid-1"},
			"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
			"conversation": map[string]any{"id": conv, "conversationType": "personal", "tenantId": "local-tenant"},
			"channelData":  map[string]any{"tenant": map[string]any{"id": "local-tenant"}},
			"text":         c.text,
		})
		start := time.Now()
		resp, err := http.Post(base+"/api/messages", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s: %d", c.text, resp.StatusCode)
		}
		msgs := conn.WaitMessages(t, conv, 1)
		var all strings.Builder
		for _, m := range msgs {
			all.Write(m.Raw)
		}
		got := all.String()
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: the answer lacks %q: %s", c.text, c.want, got[max(0, len(got)-1500):])
		}
		if c.logged != "" {
			ref := regexp.MustCompile(`\(ref ([0-9A-Z]{8})\)`).FindStringSubmatch(got)
			if ref == nil || strings.Contains(got, c.logged) {
				t.Errorf("%s: the answer gives no reference, or shows the detail: %s", c.text, got[max(0, len(got)-1500):])
			} else if !logHolds(logs.String(), `"ref":"`+ref[1]+`"`, c.logged) {
				t.Errorf("%s: no log line holds %q under %s:\n%s", c.text, c.logged, ref[1], logs)
			}
		}
		for _, bad := range []string{`\u0000`, `\u001b`, `\u202e`, `\r\nX-Injected`} {
			if strings.Contains(got, bad) {
				i := strings.Index(got, bad)
				t.Errorf("%s: the answer carries %s: %s", c.text, bad, got[max(0, i-300):min(len(got), i+100)])
			}
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s: answered after %s", c.text, d)
		}
	}
}

// logHolds reports whether one line of logs holds every part.
func logHolds(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
