package playground_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/adaptivecards"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/playground"

	"github.com/labstack/echo/v4"
)

type response struct {
	status int
	header http.Header
	body   string
}

// do sends one request over loopback HTTP.
func do(t *testing.T, method, u string, header map[string]string, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

var pageJSON = map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}

func whoJSON(kind string, extra string) string {
	return `{"tenant":"` + pageTenant + `","user":"` + pageUser + `","name":"Megan Bowen","kind":"` + kind + `"` + extra + `}`
}

func stateOf(t *testing.T, en *env, kind string) (conversation string, items []map[string]any, installed bool) {
	t.Helper()
	q := url.Values{"tenant": {pageTenant}, "user": {pageUser}, "name": {"Megan Bowen"}, "kind": {kind}}
	r := do(t, http.MethodGet, en.base+"/playground/api/state?"+q.Encode(), nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("state: %d %s", r.status, r.body)
	}
	var s struct {
		Conversation string           `json:"conversation"`
		Items        []map[string]any `json:"items"`
		Installed    bool             `json:"installed"`
	}
	if err := json.Unmarshal([]byte(r.body), &s); err != nil {
		t.Fatal(err)
	}
	return s.Conversation, s.Items, s.Installed
}

// waitFor polls the conversation until cond holds of its items.
func waitFor(t *testing.T, en *env, kind, what string, cond func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, items, _ := stateOf(t, en, kind)
		if cond(items) {
			return items
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s; items: %v", what, items)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func botSaid(items []map[string]any, part string) bool {
	for _, it := range items {
		b, _ := json.Marshal(it["attachments"])
		if it["from"] == "bot" && strings.Contains(string(b), part) {
			return true
		}
	}
	return false
}

// TestPageCSP checks the page's headers and that everything it runs is
// its own: each script allowed by its hash, no inline handler, nothing
// loaded from elsewhere, frames only from the service's own origin, and
// HTML written only through the card renderer's own Trusted Types
// policies.
func TestPageCSP(t *testing.T) {
	en := newEnv(t)
	r := do(t, http.MethodGet, en.base+"/playground", nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /playground: %d %s", r.status, r.body)
	}
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-src 'self'", "frame-ancestors 'none'", "connect-src 'self'",
		"require-trusted-types-for 'script'", "trusted-types " + strings.Join(adaptivecards.Policies(), " "), "base-uri 'none'", "form-action 'none'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP lacks %q: %s", want, csp)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") || strings.Count(csp, "trusted-types ") != 1 {
		t.Errorf("CSP allows more than the page's own scripts: %s", csp)
	}
	scripts := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(r.body, -1)
	if len(scripts) != 3 {
		t.Fatalf("%d scripts on the page, want 3 (bridge, cards, page)", len(scripts))
	}
	for _, s := range scripts {
		if !strings.Contains(csp, web.CSPHash(s[1])) {
			t.Errorf("a script of the page is not allowed by hash: %.60q", s[1])
		}
	}
	styles := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(r.body, -1)
	if len(styles) != 2 {
		t.Fatalf("%d style elements on the page, want 2 (Fluent, page)", len(styles))
	}
	for _, s := range styles {
		if !strings.Contains(csp, web.CSPHash(s[1])) {
			t.Errorf("a style of the page is not allowed by hash: %.60q", s[1])
		}
	}
	if regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).MatchString(r.body) || regexp.MustCompile(`(?i)\son[a-z]+=`).MatchString(r.body) {
		t.Errorf("the page loads something from elsewhere or has an inline handler")
	}
	if r.header.Get("Cache-Control") == "" {
		t.Errorf("page headers: %v", r.header)
	}

	home := do(t, http.MethodGet, en.base+"/", nil, "")
	if home.status != http.StatusOK || !strings.Contains(home.body, `href="/playground"`) || !strings.Contains(home.body, "/sales_report {}") ||
		!strings.Contains(home.body, "/tools") || !strings.Contains(home.body, "group chat") {
		t.Errorf("the start page does not lead to the playground and say what to try: %d\n%s", home.status, home.body)
	}
	if c := home.header.Get("Content-Security-Policy"); !strings.Contains(c, "default-src 'none'") || strings.Contains(c, "script-src") {
		t.Errorf("start page CSP: %s", c)
	}
}

// TestRefusesCallersNotOnThisMachine: the page, its API and the connector
// answer only loopback connections addressed by a loopback name, without
// proxy headers; the connector and the message API refuse what a web page
// sends.
func TestRefusesCallersNotOnThisMachine(t *testing.T) {
	en := newEnv(t)
	conn := "/playground/connector/v3/conversations/a:1x/activities"
	activity := `{"type":"message","text":"forged"}`

	t.Run("non-loopback connection", func(t *testing.T) {
		ip := nonLoopbackIP()
		if ip == "" {
			t.Skip("this machine has no non-loopback address")
		}
		// The same service, also listening on a non-loopback address of
		// this machine: its connections come from that address.
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Skipf("cannot listen on %s: %v", ip, err)
		}
		srv := &http.Server{Handler: en.e, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		base := "http://" + ln.Addr().String()
		loopHost := map[string]string{"Host": strings.TrimPrefix(en.base, "http://"), "Content-Type": "application/json"}
		for _, c := range []struct{ method, path, body string }{
			{http.MethodPost, conn, activity},
			{http.MethodPut, conn + "/1", activity},
			{http.MethodDelete, conn + "/1", ""},
			{http.MethodGet, "/playground", ""},
			{http.MethodPost, "/playground/api/send", whoJSON("personal", `,"text":"hi"`)},
			{http.MethodPost, "/playground/api/submit", whoJSON("personal", `,"replyToId":"1","value":{}`)},
		} {
			if r := do(t, c.method, base+c.path, loopHost, c.body); r.status != http.StatusForbidden {
				t.Errorf("%s %s from %s: %d, want 403", c.method, c.path, ip, r.status)
			}
		}
	})
	for name, h := range map[string]map[string]string{
		"web page origin":       {"Origin": "http://evil.example", "Content-Type": "application/json"},
		"web page fetch":        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Content-Type": "application/json"},
		"same-origin page":      {"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"},
		"rebound host name":     {"Host": "evil.example", "Content-Type": "application/json"},
		"through a proxy":       {"X-Forwarded-For": "203.0.113.9", "Content-Type": "application/json"},
		"through a proxy (RFC)": {"Forwarded": "for=203.0.113.9", "Content-Type": "application/json"},
	} {
		t.Run(name, func(t *testing.T) {
			if r := do(t, http.MethodPost, en.base+conn, h, activity); r.status != http.StatusForbidden {
				t.Errorf("connector: %d %s, want 403", r.status, r.body)
			}
		})
	}
	// The page's API takes same-origin JSON only.
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, whoJSON("personal", `,"text":"hi"`)); r.status != http.StatusForbidden {
		t.Errorf("cross-site send: %d, want 403", r.status)
	}
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "same-origin"}, whoJSON("personal", `,"text":"hi"`)); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain send: %d, want 415", r.status)
	}
	if r := do(t, http.MethodGet, en.base+"/playground", map[string]string{"Host": "evil.example"}, ""); r.status != http.StatusForbidden {
		t.Errorf("page under a rebound name: %d, want 403", r.status)
	}
	if _, items, _ := stateOf(t, en, "personal"); len(items) != 0 {
		t.Errorf("a refused call changed the transcript: %v", items)
	}
}

// TestConnectorWireFormat checks the Bot Connector calls as the REST API
// reference gives them, on a conversation the bot is not in yet.
func TestConnectorWireFormat(t *testing.T) {
	en := newEnv(t)
	conv, _, _ := stateOf(t, en, "personal")
	base := en.base + "/playground/connector/v3/conversations/" + url.PathEscape(conv) + "/activities"
	bj := map[string]string{"Content-Type": "application/json"}
	card := `{"type":"message","attachments":[{"contentType":"application/vnd.microsoft.card.adaptive","content":{"type":"AdaptiveCard","version":"1.5","body":[{"type":"TextBlock","text":"one"}]}}]}`

	r := do(t, http.MethodPost, base, bj, card)
	var rr struct {
		ID string `json:"id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal([]byte(r.body), &rr) != nil || rr.ID == "" {
		t.Fatalf("Send to Conversation: %d %s, want 201 with an id", r.status, r.body)
	}
	if r := do(t, http.MethodPost, base, bj, `{"type":"typing"}`); r.status != http.StatusOK {
		t.Errorf("typing: %d", r.status)
	}
	q := url.Values{"tenant": {pageTenant}, "user": {pageUser}, "name": {"Megan Bowen"}, "kind": {"personal"}}
	if r := do(t, http.MethodGet, en.base+"/playground/api/state?"+q.Encode(), nil, ""); !strings.Contains(r.body, `"typingMs":`) {
		t.Errorf("after a typing activity the page is not told the bot types: %s", r.body)
	}
	if r := do(t, http.MethodPut, base+"/"+rr.ID, bj, strings.Replace(card, `"one"`, `"two"`, 1)); r.status != http.StatusOK || !strings.Contains(r.body, rr.ID) {
		t.Errorf("Update Activity: %d %s", r.status, r.body)
	}
	_, items, _ := stateOf(t, en, "personal")
	if len(items) != 1 || items[0]["revision"] != float64(2) || !botSaid(items, `"two"`) {
		t.Errorf("after the update, the conversation is %v, want the one card in its second revision", items)
	}
	if r := do(t, http.MethodPut, base+"/999", bj, card); r.status != http.StatusNotFound {
		t.Errorf("Update of an unknown activity: %d, want 404", r.status)
	}
	if r := do(t, http.MethodPost, base+"/"+rr.ID, bj, `{"type":"message","text":"a reply"}`); r.status != http.StatusCreated {
		t.Errorf("Reply to Activity: %d", r.status)
	}
	if r := do(t, http.MethodDelete, base+"/"+rr.ID, nil, ""); r.status != http.StatusOK {
		t.Errorf("Delete Activity: %d", r.status)
	}
	_, items, _ = stateOf(t, en, "personal")
	if len(items) != 2 || items[0]["deleted"] != true || items[1]["replyToId"] != rr.ID {
		t.Errorf("after reply and delete: %v", items)
	}
	if r := do(t, http.MethodPost, base, bj, `{"text":"no type"}`); r.status != http.StatusBadRequest {
		t.Errorf("an activity without a type: %d, want 400", r.status)
	}
}

// TestConversationKinds sends through the real bot: a group chat message
// without the @mention never reaches the bot (as in Teams), one with it is
// answered; a channel post is answered in its thread, which the
// playground shows in the channel.
func TestConversationKinds(t *testing.T) {
	en := newEnv(t)
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("groupChat", `,"text":"/tools"`)); r.status != http.StatusOK || strings.Contains(r.body, `"delivered":true`) {
		t.Fatalf("group chat without @mention: %d %s, want it kept from the bot", r.status, r.body)
	}
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("groupChat", `,"text":"/tools","mention":true`)); r.status != http.StatusOK || !strings.Contains(r.body, `"delivered":true`) {
		t.Fatalf("group chat with @mention: %d %s", r.status, r.body)
	}
	items := waitFor(t, en, "groupChat", "the answer in the group chat", func(items []map[string]any) bool { return botSaid(items, "sales_report") })
	if items[0]["text"] != "/tools" || items[2]["text"] != "<at>Assistant</at> /tools" {
		t.Errorf("the group chat shows %v", items)
	}

	if r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("channel", `,"text":"/tools","mention":true`)); r.status != http.StatusOK || !strings.Contains(r.body, `"delivered":true`) {
		t.Fatalf("channel: %d %s", r.status, r.body)
	}
	waitFor(t, en, "channel", "the answer in the channel's thread", func(items []map[string]any) bool { return botSaid(items, "sales_report") })

	// Install in the channel: the reference is kept under the team's id.
	if r := do(t, http.MethodPost, en.base+"/playground/api/install", pageJSON, whoJSON("channel", `,"action":"add"`)); r.status != http.StatusOK {
		t.Fatalf("install: %d %s", r.status, r.body)
	}
	conv, _, installed := stateOf(t, en, "channel")
	if !installed {
		t.Errorf("after install the channel %s is not kept", conv)
	}
	waitFor(t, en, "channel", "the welcome card", func(items []map[string]any) bool { return botSaid(items, "Hi, I'm Assistant") })
	if r := do(t, http.MethodPost, en.base+"/playground/api/install", pageJSON, whoJSON("channel", `,"action":"remove"`)); r.status != http.StatusOK {
		t.Fatalf("uninstall: %d %s", r.status, r.body)
	}
	if _, _, installed := stateOf(t, en, "channel"); installed {
		t.Errorf("after uninstall the channel %s is still kept", conv)
	}
	if r := do(t, http.MethodPost, en.base+"/playground/api/install", pageJSON, whoJSON("channel", `,"action":"upgrade"`)); r.status != http.StatusBadRequest {
		t.Errorf("an unknown action: %d, want 400", r.status)
	}
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("meeting", `,"text":"hi"`)); r.status != http.StatusBadRequest {
		t.Errorf("an unknown conversation kind: %d, want 400", r.status)
	}
}

// TestCardActionInAChannelThread answers a question card in a channel,
// where the bot asks in the thread of the post: the card's action is
// posted as Teams posts it, in that thread, replying to the card, and the
// bot takes it (the card says the question was declined, the answer that
// no refund was made). The page's API refuses an action on anything but a
// card of the bot in the person's conversation, and one Teams would not
// post.
func TestCardActionInAChannelThread(t *testing.T) {
	en := newEnv(t)
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("channel", `,"text":"/request_refund {}","mention":true`)); r.status != http.StatusOK {
		t.Fatalf("channel: %d %s", r.status, r.body)
	}
	items := waitFor(t, en, "channel", "the question card", func(items []map[string]any) bool { return botSaid(items, `"elicitation"`) })
	var post, cardID, question string
	for _, it := range items {
		b, _ := json.Marshal(it["attachments"])
		if it["from"] == "user" {
			post, _ = it["id"].(string)
		}
		if m := regexp.MustCompile(`"elicitation":"([^"]+)"`).FindStringSubmatch(string(b)); it["from"] == "bot" && m != nil {
			cardID, question = it["id"].(string), m[1]
		}
	}
	if cardID == "" || post == "" {
		t.Fatalf("no question card after the post: %v", items)
	}
	submit := func(extra string) response {
		return do(t, http.MethodPost, en.base+"/playground/api/submit", pageJSON, whoJSON("channel", extra))
	}
	for what, c := range map[string]struct {
		extra  string
		status int
	}{
		"an unknown activity":           {`,"replyToId":"999","value":{}`, http.StatusNotFound},
		"the person's own message":      {`,"replyToId":"` + post + `","value":{}`, http.StatusNotFound},
		"no value":                      {`,"replyToId":"` + cardID + `"`, http.StatusBadRequest},
		"a Stage View button's data":    {`,"replyToId":"` + cardID + `","value":{"msteams":{"type":"invoke"}}`, http.StatusBadRequest},
		"a value that is not an object": {`,"replyToId":"` + cardID + `","value":"decline"`, http.StatusBadRequest},
	} {
		if r := submit(c.extra); r.status != c.status {
			t.Errorf("%s: %d %s, want %d", what, r.status, r.body, c.status)
		}
	}
	if r := do(t, http.MethodPost, en.base+"/playground/api/submit", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
		whoJSON("channel", `,"replyToId":"`+cardID+`","value":{}`)); r.status != http.StatusForbidden {
		t.Errorf("a cross-site card action: %d, want 403", r.status)
	}

	r := submit(`,"replyToId":"` + cardID + `","value":{"teamsbot":"elicit","elicitation":"` + question + `","action":"decline","field:amount":"900"}`)
	if r.status != http.StatusOK || !strings.Contains(r.body, `"delivered":true`) {
		t.Fatalf("the Decline button: %d %s", r.status, r.body)
	}
	waitFor(t, en, "channel", "the card saying the question was declined", func(items []map[string]any) bool {
		return botSaid(items, "The question was declined, and demo was told so.")
	})
	waitFor(t, en, "channel", "the answer", func(items []map[string]any) bool {
		return botSaid(items, "No refund was made for order A-1042: the person declined")
	})

	// What the playground posted, as its inspector lists it.
	q := url.Values{"tenant": {pageTenant}, "user": {pageUser}, "name": {"Megan Bowen"}, "kind": {"channel"}}
	var s struct {
		Activities []struct {
			Dir      string          `json:"dir"`
			Activity json.RawMessage `json:"activity"`
		} `json:"activities"`
	}
	if err := json.Unmarshal([]byte(do(t, http.MethodGet, en.base+"/playground/api/state?"+q.Encode(), nil, "").body), &s); err != nil {
		t.Fatal(err)
	}
	var action map[string]any
	for _, e := range s.Activities {
		var a map[string]any
		if e.Dir == "to-bot" && json.Unmarshal(e.Activity, &a) == nil && a["value"] != nil {
			action = a
		}
	}
	conv, _ := action["conversation"].(map[string]any)
	thread, _ := conv["id"].(string)
	from, _ := action["from"].(map[string]any)
	if text, ok := action["text"]; !ok || text != "" || action["type"] != "message" || action["replyToId"] != cardID ||
		!strings.HasSuffix(thread, "@thread.tacv2;messageid="+post) || from["aadObjectId"] != pageUser {
		t.Errorf("the card action posted: %v", action)
	}
	if v, _ := action["value"].(map[string]any); v["action"] != "decline" || v["elicitation"] != question || v["field:amount"] != "900" {
		t.Errorf("the card action's value: %v", action["value"])
	}
}

// TestNewRefusesOutsideLocalMode: a bot with an app id gets no playground.
func TestNewRefusesOutsideLocalMode(t *testing.T) {
	ctx := context.Background()
	agents, err := agent.New(ctx, agent.DefaultConfig(), agent.Options{AppsEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agents.Close() })
	teams, err := bot.New(bot.Options{Agent: agents, AppID: "00000000-0000-0000-0000-000000000001", Credential: clientcred.Secret("secret"),
		AllowedTenants: []string{"00000000-0000-0000-0000-0000000000aa"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = playground.New(playground.Options{Self: netaddr.MustParseOrigin("http://127.0.0.1:3978"), Bot: teams})
	if !errors.Is(err, playground.ErrNotLocal) {
		t.Errorf("New with a bot that has an app id: %v, want ErrNotLocal", err)
	}
}

// TestCloseEndsLongPolls: a page waiting for news gets its answer as soon
// as the playground closes, so a shutdown is not held up by open tabs.
func TestCloseEndsLongPolls(t *testing.T) {
	en := newEnv(t)
	// One change, so that the conversation has a seq to wait after.
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("groupChat", `,"text":"hello"`)); r.status != http.StatusOK {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	q := url.Values{"tenant": {pageTenant}, "user": {pageUser}, "name": {"Megan Bowen"}, "kind": {"groupChat"}}
	var first struct {
		Seq uint64 `json:"seq"`
	}
	r := do(t, http.MethodGet, en.base+"/playground/api/state?"+q.Encode(), nil, "")
	if err := json.Unmarshal([]byte(r.body), &first); err != nil || first.Seq == 0 {
		t.Fatalf("state: %s", r.body)
	}
	q.Set("since", strconv.FormatUint(first.Seq, 10))
	done := make(chan int, 1)
	go func() {
		resp, err := http.Get(en.base + "/playground/api/state?" + q.Encode())
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Fatalf("the poll answered (%d) before anything changed", code)
	case <-time.After(300 * time.Millisecond):
	}
	en.pg.Close()
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Errorf("the poll ended with %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll still waits after Close")
	}
}

// TestEmptyConversationPollWaits: a page's poll of a conversation with
// nothing in it yet waits for news like any other, rather than being
// answered at once and asking again at once, round after round, for as
// long as the page shows an empty chat. Its first read is answered at
// once.
func TestEmptyConversationPollWaits(t *testing.T) {
	en := newEnv(t)
	q := url.Values{"tenant": {pageTenant}, "user": {pageUser}, "name": {"Megan Bowen"}, "kind": {"personal"}}
	var first struct {
		Seq   uint64 `json:"seq"`
		Items []any  `json:"items"`
	}
	r := do(t, http.MethodGet, en.base+"/playground/api/state?"+q.Encode(), nil, "")
	if err := json.Unmarshal([]byte(r.body), &first); err != nil || r.status != http.StatusOK || len(first.Items) != 0 {
		t.Fatalf("first read of an empty chat: %d %s", r.status, r.body)
	}
	q.Set("since", strconv.FormatUint(first.Seq, 10))
	done := make(chan int, 1)
	go func() {
		resp, err := http.Get(en.base + "/playground/api/state?" + q.Encode())
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Fatalf("the poll of an empty chat answered (%d) before anything changed", code)
	case <-time.After(300 * time.Millisecond):
	}
	if r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("personal", `,"text":"hello"`)); r.status != http.StatusOK {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Errorf("the poll ended with %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll still waits after a message")
	}
}

// When /api/messages does not take an activity, the chat and the page's
// answer say so in a person's words: the status the bot answered, or that
// it could not be reached. The bot's and the transport's error texts go
// to the service log only.
func TestBotNotTakingAMessageIsSaidPlainly(t *testing.T) {
	en := newEnv(t)
	if err := en.teams.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := do(t, http.MethodPost, en.base+"/playground/api/send", pageJSON, whoJSON("personal", `,"text":"hi"`))
	want := "The bot did not take the message: it answered 503 Service Unavailable. The service log says why."
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, want) {
		t.Errorf("send to a bot shutting down: %d %s", r.status, r.body)
	}
	_, items, _ := stateOf(t, en, "personal")
	if last := items[len(items)-1]; last["text"] != want {
		t.Errorf("the chat says %v, want %q", last, want)
	}
	if !strings.Contains(en.logs.String(), "bot: shutting down") {
		t.Errorf("the log does not hold the bot's answer:\n%s", en.logs.String())
	}

	// A playground whose bot cannot be reached at all.
	dead := testenv.Listen(t)
	deadOrigin := netaddr.MustParseOrigin("http://" + dead.Addr().String())
	dead.Close()
	pg, err := playground.New(playground.Options{Self: deadOrigin, Bot: en.teams, Store: en.store, SignIn: en.signIn, Views: en.views})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	pg.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	r = do(t, http.MethodPost, srv.URL+"/playground/api/send", pageJSON, whoJSON("personal", `,"text":"hi"`))
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "The bot did not take the message: it could not be reached.") ||
		strings.Contains(r.body, dead.Addr().String()) || strings.Contains(r.body, "dial") || strings.Contains(r.body, "playground:") {
		t.Errorf("send to a bot that cannot be reached: %d %s", r.status, r.body)
	}
}
