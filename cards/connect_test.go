package cards

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"teamsbot/internal/netaddr"
	"testing"
	"time"
	"unicode/utf8"
)

// allStates are the states of a Connect request.
var allStates = []ConnectState{ConnectWaiting, ConnectConnected, ConnectTimedOut, ConnectRefused}

// TestConnectButton: while the run waits, the card's one button leads to
// exactly the escaped Connect address on the https:// public base URL.
// Without an https base there is no button and no address anywhere in the
// card, and the card says why and who can change it; a request that has
// ended has no button either.
func TestConnectButton(t *testing.T) {
	for id, want := range map[string]string{
		"c-4d2e":                "https://teams.example.com/mcp-auth/connect/c-4d2e",
		"../../mcp-apps/v1?x#y": "https://teams.example.com/mcp-auth/connect/..%2F..%2Fmcp-apps%2Fv1%3Fx%23y",
	} {
		c := crmConnect(ConnectWaiting)
		c.RequestID = id
		card := ConnectCard(c, Options{PublicBaseURL: httpsBase})
		acts := actionsOf(t, card)
		if len(acts) != 1 || acts[0]["type"] != "Action.OpenUrl" || acts[0]["url"] != want || acts[0]["title"] != "Connect CRM" {
			t.Errorf("id %q: actions %v, want one Connect CRM to %s", id, acts, want)
		}
		if !strings.Contains(card.FallbackText, want) {
			t.Errorf("id %q: fallback %q lacks the address", id, card.FallbackText)
		}
	}
	for _, base := range []netaddr.Origin{httpBase, netaddr.MustParseOrigin("HTTP://127.0.0.1:3978"), {}} {
		card := ConnectCard(crmConnect(ConnectWaiting), Options{PublicBaseURL: base, Shared: true})
		in := inspect(t, card)
		if acts := actionsOf(t, card); len(acts) != 0 || strings.Contains(in.raw, "/mcp-auth/") {
			t.Errorf("base %q: actions %v in %s", base, acts, in.raw)
		}
		const why = "You can't connect CRM from Teams until your admin gives this service an https address."
		if !slices.Contains(in.texts, why) || !strings.Contains(card.FallbackText, why) {
			t.Errorf("base %q: the card does not say why there is no button:\n%s\n%s", base, in.allText(), card.FallbackText)
		}
		// Nobody can connect, so the card does not say who may.
		if strings.Contains(in.allText(), "can connect") || strings.Contains(in.allText(), "Select Connect") {
			t.Errorf("base %q: the card asks for a button it does not have:\n%s", base, in.allText())
		}
		if !strings.Contains(in.allText(), "Assistant answers without CRM after 5 minutes.") {
			t.Errorf("base %q: the card does not say how long the question waits:\n%s", base, in.allText())
		}
	}
	// An id that makes no safe address: no button, and no promise of one.
	c := crmConnect(ConnectWaiting)
	c.RequestID = ".."
	card := ConnectCard(c, Options{PublicBaseURL: httpsBase})
	if acts := actionsOf(t, card); len(acts) != 0 || !strings.Contains(inspect(t, card).allText(), connectNoAddress) {
		t.Errorf("id \"..\": actions %v, texts %q", acts, inspect(t, card).texts)
	}
	for _, s := range allStates[1:] {
		if acts := actionsOf(t, ConnectCard(crmConnect(s), Options{PublicBaseURL: httpsBase})); len(acts) != 0 {
			t.Errorf("state %d: actions %v, want none", s, acts)
		}
	}
}

// TestConnectSaysWhose: in a group chat or a channel, where everyone sees
// the card, it names the person whose sign-in it is and says only they can
// connect; without a name it says the person who asked. In a personal chat
// it does not say who else may not.
func TestConnectSaysWhose(t *testing.T) {
	shared := inspect(t, ConnectCard(crmConnect(ConnectWaiting), Options{PublicBaseURL: httpsBase, Shared: true})).allText()
	for _, want := range []string{
		"Hi Ada Lovelace, to answer your question, Assistant needs you to connect CRM.",
		"Only Ada Lovelace can connect, with their own account.",
		"Select Connect and sign in to let Assistant use CRM as you.",
		"Your question waits 5 minutes for this. After that, Assistant answers without CRM.",
	} {
		if !strings.Contains(shared, want) {
			t.Errorf("shared card lacks %q:\n%s", want, shared)
		}
	}
	c := crmConnect(ConnectWaiting)
	c.PersonName = "  "
	nameless := inspect(t, ConnectCard(c, Options{PublicBaseURL: httpsBase, Shared: true})).allText()
	if !strings.Contains(nameless, "To answer your question, Assistant needs you to connect CRM.") || !strings.Contains(nameless, connectOnlyAsker) {
		t.Errorf("shared card without a name:\n%s", nameless)
	}
	personal := inspect(t, ConnectCard(crmConnect(ConnectWaiting), Options{PublicBaseURL: httpsBase})).allText()
	if strings.Contains(personal, "Only ") || !strings.Contains(personal, "Hi Ada Lovelace") {
		t.Errorf("personal card:\n%s", personal)
	}
	if got := ConnectCard(crmConnect(ConnectWaiting), Options{PublicBaseURL: httpsBase}).Summary; got != "Ada Lovelace, connect CRM to get your answer" {
		t.Errorf("summary %q", got)
	}
}

// TestConnectNames: the card shows the server's title, else its name; the
// agent's name, else the options', else "Assistant".
func TestConnectNames(t *testing.T) {
	tests := []struct {
		c         Connect
		agent     string
		wantHead  string
		wantAgent string
	}{
		{Connect{Server: "crm", ServerTitle: "Contoso CRM", AgentName: "Sales"}, "Helpdesk", "Connect Contoso CRM", "Sales needs you"},
		{Connect{Server: "crm"}, "Helpdesk", "Connect crm", "Helpdesk needs you"},
		{Connect{Server: "crm"}, "", "Connect crm", "Assistant needs you"},
		{Connect{}, "", "Connect the server", "Assistant needs you to connect the server"},
	}
	for _, tt := range tests {
		tt.c.RequestID = "c1"
		in := inspect(t, ConnectCard(tt.c, Options{PublicBaseURL: httpsBase, AgentName: tt.agent}))
		if in.texts[0] != tt.wantHead || !strings.Contains(in.allText(), tt.wantAgent) {
			t.Errorf("%+v, agent %q: texts %q, want %q and %q", tt.c, tt.agent, in.texts, tt.wantHead, tt.wantAgent)
		}
	}
}

// TestConnectEnded: the card the bot makes of the same one when the
// request ends says what happened and what comes next, with no button.
func TestConnectEnded(t *testing.T) {
	tests := []struct {
		state ConnectState
		base  netaddr.Origin
		want  []string
		not   []string
	}{
		{ConnectConnected, httpsBase, []string{"Connected to CRM", "Done: Ada Lovelace connected CRM, and Assistant now uses it to answer the question."}, []string{"Connect button"}},
		{ConnectTimedOut, httpsBase, []string{"Not connected to CRM", "The connection to CRM was not made within 5 minutes, so Assistant answers without it.", connectAskAgain}, []string{"https address"}},
		// Without an https address, nobody could have connected: that is
		// why, and asking again changes nothing.
		{ConnectTimedOut, httpBase, []string{"not made within 5 minutes", "You can't connect CRM from Teams until your admin gives this service an https address."}, []string{connectAskAgain}},
		{ConnectRefused, httpsBase, []string{"Not connected to CRM", "The sign-in to CRM for Ada Lovelace was declined or refused, so Assistant answers without it.", connectAskAgain}, []string{"https address"}},
	}
	for _, tt := range tests {
		card := ConnectCard(crmConnect(tt.state), Options{PublicBaseURL: tt.base, Shared: true})
		all := inspect(t, card).allText()
		for _, w := range tt.want {
			if !strings.Contains(all, w) || !strings.Contains(card.FallbackText, w) {
				t.Errorf("state %d, %s: card or fallback lacks %q:\n%s\n%s", tt.state, tt.base.Scheme(), w, all, card.FallbackText)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(all, w) {
				t.Errorf("state %d, %s: card says %q:\n%s", tt.state, tt.base.Scheme(), w, all)
			}
		}
		if card.Summary != inspect(t, card).texts[0] {
			t.Errorf("state %d: summary %q, heading %q", tt.state, card.Summary, inspect(t, card).texts[0])
		}
	}
	c := crmConnect(ConnectTimedOut)
	c.Wait = 0
	if all := inspect(t, ConnectCard(c, Options{PublicBaseURL: httpsBase})).allText(); !strings.Contains(all, "was not made in time,") {
		t.Errorf("timed out with no wait given:\n%s", all)
	}
}

// TestWaitWords: how long a run waits, in words.
func TestWaitWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                       "",
		-time.Minute:                            "",
		time.Millisecond:                        "1 second",
		30 * time.Second:                        "30 seconds",
		time.Minute:                             "1 minute",
		90 * time.Second:                        "1 minute and 30 seconds",
		5*time.Minute + 400*time.Millisecond:    "5 minutes",
		time.Hour:                               "1 hour",
		2*time.Hour + time.Minute + time.Second: "2 hours, 1 minute and 1 second",
	} {
		if got := waitWords(d); got != want {
			t.Errorf("waitWords(%v) = %q, want %q", d, got, want)
		}
	}
}

// hostileNames are names a server's configuration or a directory could
// hold that must stay text: markdown, links, addresses, text functions,
// bidirectional overrides, control characters, braces in a row, and
// names long enough to be cut.
var hostileNames = []string{
	"**[Click here](https://evil.example/login)**",
	"Eve {{DATE(2020-01-01T00:00:00Z, SHORT)}} {{{TIME(2020-01-01T00:00:00Z)}}}",
	"www.evil.example <https://evil.example/a> mail@evil.example",
	"Ada\u202Egnp.exe\x00\r\n# Heading\n\n- item",
	"<b>bold</b> ![img](https://evil.example/p.png) [ref]: https://evil.example/r",
	strings.Repeat("😀𝒳 long name ", 40),
	"{",
}

// TestConnectHostile: whatever the server's, the agent's and the person's
// names hold, and whatever the request's id, every Connect card stays well
// within a Teams message, shows no live link, address or text function
// but its own Connect address, keeps names out of markdown (every
// TextBlock holds only our own words), and has a button only while the
// run waits on an https base, to exactly ConnectURL.
func TestConnectHostile(t *testing.T) {
	ours := []string{connectAskAgain, connectNoAddress}
	r := rand.New(rand.NewPCG(3, 4))
	pick := func() string {
		if r.IntN(3) == 0 {
			return randomText(r, r.IntN(400))
		}
		return hostileNames[r.IntN(len(hostileNames))]
	}
	ids := []string{"c1", "../admin", "a?b#c", "..", "", "{{DATE(2020-01-01T00:00:00Z)}}", "https://evil.example/x"}
	for i := range 300 {
		c := Connect{
			Server: pick(), ServerTitle: pick(), AgentName: pick(), PersonName: pick(),
			RequestID: ids[r.IntN(len(ids))], Wait: time.Duration(r.IntN(10_000)) * time.Second,
			State: allStates[r.IntN(len(allStates))],
		}
		if r.IntN(4) == 0 {
			c.ServerTitle = ""
		}
		base := []netaddr.Origin{httpsBase, httpBase}[r.IntN(2)]
		o := Options{PublicBaseURL: base, Shared: r.IntN(2) == 0, AgentName: pick()}
		card := ConnectCard(c, o)
		name := fmt.Sprintf("%d (state %d, %s, id %q)", i, c.State, base.Scheme(), c.RequestID)
		if size := card.Size(); size > MaxCardSize/3 {
			t.Fatalf("%s: %d UTF-16 code units, more than a third of %d", name, size, MaxCardSize)
		}
		if card.Summary == "" || strings.Contains(card.Summary, "\n") || utf8.RuneCountInString(card.Summary) > maxSummary || card.FallbackText == "" {
			t.Errorf("%s: summary %q, fallback %q", name, card.Summary, card.FallbackText)
		}
		in := inspect(t, card)
		for _, bad := range []string{"\u202e", `\u0000`, "\r"} {
			if strings.Contains(in.raw, bad) {
				t.Errorf("%s: the card holds %q", name, bad)
			}
		}
		u, ok := ConnectURL(base, c.RequestID)
		var want []string
		if ok && c.State == ConnectWaiting {
			want = []string{u}
		}
		if !slices.Equal(in.openURLs, want) {
			t.Errorf("%s: buttons to %q, want %q", name, in.openURLs, want)
		}
		if acts := actionsOf(t, card); len(acts) != len(want) {
			t.Errorf("%s: actions %v", name, acts)
		}
		checkShownNeutral(t, i, card, want...)
		for _, tb := range find(decode(t, card), "TextBlock") {
			if !slices.Contains(ours, tb["text"].(string)) {
				t.Errorf("%s: a TextBlock, read as markdown, holds %q", name, tb["text"])
			}
		}
	}
}

// TestRendererShowsConnectNamesAsText: the official renderer accepts
// Connect cards made of hostile names in every state, and shows a text
// function in a person's name as the text it is.
func TestRendererShowsConnectNamesAsText(t *testing.T) {
	requireNode(t)
	const fn = "{{DATE(2020-01-01T00:00:00Z, SHORT)}}"
	var cs []Card
	for i, s := range allStates {
		for j, n := range hostileNames {
			c := Connect{Server: n, AgentName: hostileNames[(j+1)%len(hostileNames)], PersonName: "Eve " + fn, RequestID: n, Wait: time.Minute, State: s}
			base := []netaddr.Origin{httpsBase, httpBase}[(i+j)%2]
			cs = append(cs, ConnectCard(c, Options{PublicBaseURL: base, Shared: true}))
		}
	}
	path := writeMessages(t, t.TempDir(), "connect", cs...)
	if out, status := validate(t, path); status != 0 {
		t.Fatalf("the Adaptive Cards renderer rejects Connect cards:\n%s", out)
	}
	shownTexts := shown(t, ConnectCard(Connect{Server: "crm", PersonName: "Eve " + fn, RequestID: "c1"}, Options{PublicBaseURL: httpsBase, Shared: true}))
	all := strings.ReplaceAll(strings.Join(shownTexts[0], "\n"), zwsp, "")
	if !strings.Contains(all, "Only Eve "+fn+" can connect") {
		t.Errorf("the renderer shows:\n%s", all)
	}
	if strings.Contains(all, "Jan 1, 2020") {
		t.Errorf("the renderer evaluated a function from a name:\n%s", all)
	}
}

// TestConnections: one line per connection (server, agent, when
// connected, when last used), a Manage connections button to exactly the
// page on the https base, and what a person can do otherwise.
func TestConnections(t *testing.T) {
	page := httpsBase.URL("/mcp-auth/connections")
	card := Connections(twoConnections(), page, Options{PublicBaseURL: httpsBase})
	in := inspect(t, card)
	all := in.allText()
	for _, want := range []string{
		"Your connections", "crm\n for \nAssistant",
		"Connected on {{DATE(2026-11-02T12:00:00Z, SHORT)}}. Last used on {{DATE(2026-12-02T10:00:00Z, SHORT)}} at {{TIME(2026-12-02T10:00:00Z)}}.",
		"billing\n for \nAssistant", "Connected on {{DATE(2026-12-01T12:00:00Z, SHORT)}}. Not used yet.",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("card lacks %q:\n%s", want, all)
		}
	}
	acts := actionsOf(t, card)
	if len(acts) != 1 || acts[0]["url"] != page || acts[0]["title"] != "Manage connections" {
		t.Errorf("actions %v, want Manage connections to %s", acts, page)
	}
	if card.Summary != "Your connections: 2 servers" || !strings.Contains(card.FallbackText, "crm for Assistant: Connected on 2 Nov 2026 12:00 UTC. Last used on 2 Dec 2026 10:00 UTC.") {
		t.Errorf("summary %q, fallback %q", card.Summary, card.FallbackText)
	}

	empty := Connections(nil, page, Options{PublicBaseURL: httpsBase})
	if got := inspect(t, empty).texts; len(got) < 2 || got[1] != "You have not connected any server yet." || empty.Summary != got[1] {
		t.Errorf("empty: texts %q, summary %q", got, empty.Summary)
	}

	// No https address: no button, and words that say why.
	http := Connections(twoConnections(), httpBase.URL("/mcp-auth/connections"), Options{PublicBaseURL: httpBase})
	if acts := actionsOf(t, http); len(acts) != 0 || !strings.Contains(inspect(t, http).allText(), "once your admin gives this service an https address") {
		t.Errorf("http: actions %v, texts %q", acts, inspect(t, http).texts)
	}
	// A page that is not on the public base URL gets no button, and no
	// words about an https address the service has.
	for _, elsewhere := range []string{"https://evil.example/mcp-auth/connections", "https://teams.example.com.evil.example/x", "javascript:alert(1)", ""} {
		c := Connections(twoConnections(), elsewhere, Options{PublicBaseURL: httpsBase})
		if acts := actionsOf(t, c); len(acts) != 0 || strings.Contains(inspect(t, c).allText(), "https address") {
			t.Errorf("page %q: actions %v, texts %q", elsewhere, acts, inspect(t, c).texts)
		}
	}
}

// TestConnectionsMany: a list longer than one message holds shows as many
// lines as fit, counts the rest, and stays text whatever the names hold.
func TestConnectionsMany(t *testing.T) {
	var items []ConnectionItem
	for i := range 500 {
		items = append(items, ConnectionItem{
			Agent: hostileNames[i%len(hostileNames)], Server: hostileNames[(i+3)%len(hostileNames)],
			ConnectedAt: now.Add(-time.Duration(i) * time.Hour), LastUsedAt: now,
		})
	}
	page := httpsBase.URL("/mcp-auth/connections")
	card := Connections(items, page, Options{PublicBaseURL: httpsBase})
	if size := card.Size(); size > MaxCardSize {
		t.Fatalf("%d UTF-16 code units, limit %d", size, MaxCardSize)
	}
	in := inspect(t, card)
	lines := strings.Count(in.raw, `"text":" for "`)
	if lines < 10 || !strings.Contains(in.allText(), fmt.Sprintf("%s: %d more not listed.", Shortened, 500-lines)) {
		t.Errorf("%d lines shown; texts end %q", lines, in.texts[len(in.texts)-2:])
	}
	if card.Summary != "Your connections: 500 servers" {
		t.Errorf("summary %q", card.Summary)
	}
	checkShownNeutral(t, 0, card, page)
	for _, tb := range find(decode(t, card), "TextBlock") {
		s := tb["text"].(string)
		if strings.ContainsAny(s, "*[<!#") || strings.Contains(s, "evil") {
			t.Errorf("a TextBlock, read as markdown, holds %q", s)
		}
	}
	if out, status := validate(t, writeMessages(t, t.TempDir(), "connections", card)); status != 0 {
		t.Fatalf("the Adaptive Cards renderer rejects the card:\n%s", out)
	}
}

// TestDisconnected: what the chat command answers, with the server's name
// kept as text.
func TestDisconnected(t *testing.T) {
	for _, tt := range []struct {
		server string
		found  bool
		want   string
	}{
		{"CRM", true, "Disconnected CRM: the assistant no longer acts as you there."},
		{"billing", false, "You had not connected billing."},
		{"", false, "You had not connected the server."},
	} {
		c := Disconnected(tt.server, tt.found)
		if in := inspect(t, c); in.texts[0] != tt.want || c.Summary != tt.want || !strings.HasPrefix(c.FallbackText, tt.want) {
			t.Errorf("Disconnected(%q, %v): texts %q, summary %q", tt.server, tt.found, in.texts, c.Summary)
		}
	}
	for _, n := range hostileNames {
		for _, found := range []bool{true, false} {
			c := Disconnected(n, found)
			checkShownNeutral(t, 0, c)
			if len(actionsOf(t, c)) != 0 || strings.Contains(c.Summary, "\n") || c.Size() > MaxCardSize/4 {
				t.Errorf("Disconnected(%q, %v): %s", n, found, inspect(t, c).raw)
			}
		}
	}
}

// TestConnectLocal: the playground's service is on loopback http; in local
// mode its Connect card leads there, and nowhere in other modes.
func TestConnectLocal(t *testing.T) {
	base := netaddr.MustParseOrigin("http://127.0.0.1:3978")
	card := ConnectCard(crmConnect(ConnectWaiting), Options{PublicBaseURL: base, Local: true})
	acts := actionsOf(t, card)
	if len(acts) != 1 || acts[0]["url"] != "http://127.0.0.1:3978/mcp-auth/connect/"+crmConnect(ConnectWaiting).RequestID {
		t.Errorf("local loopback: actions %v", acts)
	}
	for _, o := range []Options{{PublicBaseURL: base}} {
		if acts := actionsOf(t, ConnectCard(crmConnect(ConnectWaiting), o)); len(acts) != 0 {
			t.Errorf("%+v: actions %v, want none", o, acts)
		}
	}
}
