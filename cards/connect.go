package cards

import (
	"net/url"
	"strings"
	"time"
)

// ConnectState is where a request to connect an MCP server stands. The bot
// sends the Connect card in ConnectWaiting and updates the same card to
// the state the request ends in.
type ConnectState int

const (
	// ConnectWaiting: the run waits for the person to connect; the card
	// carries the Connect button. It is the zero value, and any value not
	// listed here reads as it.
	ConnectWaiting ConnectState = iota
	// ConnectConnected: the person connected; the run goes on with the
	// server.
	ConnectConnected
	// ConnectTimedOut: the wait ended first; the run answers without the
	// server.
	ConnectTimedOut
	// ConnectRefused: the authorization server gave no access (the person
	// declined, or their sign-in was refused); the run answers without the
	// server.
	ConnectRefused
)

// Connect is the card asking a person to connect an MCP server that acts
// as them, for one run.
type Connect struct {
	// Server is the server's name as configured, such as "crm"; the card
	// shows it when ServerTitle is empty.
	Server string
	// ServerTitle is the server's display title, shown instead of Server.
	ServerTitle string
	// AgentName is the agent the run is for; empty means Options.AgentName,
	// then "Assistant".
	AgentName string
	// PersonName is the display name of the person the run is for, whose
	// sign-in it is: in a group chat or a channel everyone sees the card,
	// and only that person gets past the Connect page. Empty: the words
	// name nobody.
	PersonName string
	// RequestID is the request's id, the last segment of the Connect
	// button's address (see ConnectURL).
	RequestID string
	// Wait is how long the run waits for the connection; zero names no
	// length.
	Wait time.Duration
	// State is where the request stands.
	State ConnectState
}

// ConnectCard renders the card that asks a person to connect an MCP server
// for a run, or what it becomes. While the run waits it names the person
// whose sign-in it is and has a Connect button to ConnectURL; with
// Options.Shared (a group chat or a channel) it also says that only that
// person can connect. Without an https:// public base URL there is no
// button, and the card says the server can't be connected from Teams until
// an admin gives the service an https address. Once the request has ended,
// the card says how (connected, timed out, refused) and has no button.
//
// Of Options it reads PublicBaseURL, Shared and AgentName.
func ConnectCard(c Connect, o Options) Card {
	server := label(c.ServerTitle, maxName)
	if server == "" {
		server = label(c.Server, maxName)
	}
	if server == "" {
		server = connectUnnamedServer
	}
	agent := label(c.AgentName, maxName)
	if agent == "" {
		agent = label(o.AgentName, maxName)
	}
	if agent == "" {
		agent = welcomeDefaultName
	}
	person := label(c.PersonName, maxName)
	wait := waitWords(c.Wait)
	// A local development service counts as reachable: its person's
	// browser is on the same machine.
	https := o.PublicBaseURL.HTTPS() || o.Local && o.PublicBaseURL.Loopback()

	// lines are the card's sentences after the heading, made safe: names
	// go in TextRuns, which Teams never reads as markdown.
	var lines []string
	var els []element
	say := func(s string) {
		lines = append(lines, s)
		els = append(els, rich(run(s)))
	}
	// whyNot says why nothing more will happen: nobody can connect
	// without an https address; otherwise asking again offers Connect.
	whyNot := func() {
		if https {
			lines = append(lines, connectAskAgain)
			els = append(els, subtleText(connectAskAgain))
			return
		}
		say(connectNeedsHTTPS(server))
	}
	var head textRun
	var summary string
	switch c.State {
	case ConnectConnected:
		head, summary = bold(connectedHeading(server)), connectedHeading(server)
		head.Color = "Good"
		say(connectedGoesOn(person, agent, server))
	case ConnectTimedOut:
		head, summary = bold(notConnectedHeading(server)), notConnectedHeading(server)
		head.Color = "Warning"
		say(connectTimedOut(wait, agent, server))
		whyNot()
	case ConnectRefused:
		head, summary = bold(notConnectedHeading(server)), notConnectedHeading(server)
		head.Color = "Warning"
		say(connectRefused(person, agent, server))
		whyNot()
	default:
		head, summary = bold(connectHeading(server)), connectSummary(person, server)
		say(connectAsk(person, agent, server))
		u, ok := connectURL(o, c.RequestID)
		switch {
		case ok:
			say(connectHow(agent, server))
			if o.Shared && person != "" {
				say(connectOnly(person))
			} else if o.Shared {
				say(connectOnlyAsker)
			}
		case https:
			// Only an id that cannot make a safe address ends here.
			say(connectNoAddress)
		default:
			say(connectNeedsHTTPS(server))
		}
		switch {
		case wait == "":
		case ok:
			say(connectWaits(wait, agent, server))
		default:
			say(connectWaitsNoButton(wait, agent, server))
		}
		if ok {
			// Teams shows no positive button style, so none is set. The
			// sign-in opens in the browser: an authorization server's
			// pages need not let themselves be framed in Teams.
			set := buttons(openURL{Type: "Action.OpenUrl", Title: label(connectTitle(server), maxOpenTitle), URL: u})
			set.Spacing = "Medium"
			els = append(els, set)
			lines = append(lines, connectPlainURL(u))
		}
	}
	head.Size = "Medium"
	return newCard(oneLine(summary, maxSummary), headed(head.Text, lines...), append([]element{rich(head)}, els...)...)
}

// ConnectionItem is one of a person's connections: an agent that acts as
// them on an MCP server.
type ConnectionItem struct {
	// Agent is the agent's name, Server the server's as configured.
	Agent, Server string
	// ConnectedAt is when the person connected; LastUsedAt when the agent
	// last used the connection. Zero: the card names no time.
	ConnectedAt, LastUsedAt time.Time
}

// Connections renders the list of a person's connections, one line each
// (server, agent, when connected, when last used), or says there are none,
// with a "Manage connections" button to pageURL. The button is there only
// when pageURL is an address on the https:// public base URL (build it with
// Options.PublicBaseURL.URL): a card's buttons lead to the service's own
// pages and nowhere else. Without an https address, the card says the
// connections can be managed once an admin gives the service one; with one
// and a pageURL elsewhere, it has no button.
//
// The lines that do not fit in one message are counted, not listed.
func Connections(items []ConnectionItem, pageURL string, o Options) Card {
	loc := o.Location
	if loc == nil {
		loc = time.UTC
	}
	manage, ok := "", false
	if base := o.PublicBaseURL; base.HTTPS() && strings.HasPrefix(pageURL, base.URL("/")) {
		_, err := url.Parse(pageURL)
		manage, ok = pageURL, err == nil
	}
	type line struct{ name, agent, times, plain string }
	lines := make([]line, len(items))
	for i, it := range items {
		l := line{name: label(it.Server, maxName), agent: label(it.Agent, maxName)}
		if l.name == "" {
			l.name = connectUnnamedServer
		}
		var connected, used, plainConnected, plainUsed string
		if !it.ConnectedAt.IsZero() {
			connected, plainConnected = cardDate(it.ConnectedAt), formatTime(it.ConnectedAt.In(loc), o.Locale)
		}
		if !it.LastUsedAt.IsZero() {
			used, plainUsed = cardTime(it.LastUsedAt), formatTime(it.LastUsedAt.In(loc), o.Locale)
		}
		l.times = connectionTimes(connected, used)
		l.plain = l.name
		if l.agent != "" {
			l.plain += connectionFor + l.agent
		}
		l.plain += ": " + connectionTimes(plainConnected, plainUsed)
		lines[i] = l
	}
	card := func(n int) Card {
		head := bold(connectionsHeading)
		head.Size = "Medium"
		els := []element{rich(head)}
		var plain []string
		summary := connectionsSummary(len(items))
		if len(items) == 0 {
			summary = connectionsNone
			els = append(els, text(connectionsNone), subtleText(connectionsWhen))
			plain = append(plain, connectionsNone, connectionsWhen)
		}
		for _, l := range lines[:n] {
			name := []textRun{bold(l.name)}
			if l.agent != "" {
				name = append(name, subtle(connectionFor), run(l.agent))
			}
			r := rich(name...)
			r.Spacing = "Medium"
			els = append(els, r, subtleText(l.times))
			plain = append(plain, l.plain)
		}
		if n < len(lines) {
			els = append(els, subtleText(issuesNotListed(len(lines)-n)))
			plain = append(plain, issuesNotListed(len(lines)-n))
		}
		if ok {
			set := buttons(openURL{Type: "Action.OpenUrl", Title: connectionsManage, URL: manage})
			set.Spacing = "Medium"
			els = append(els, set)
			plain = append(plain, connectionsPlainManage(manage))
		} else if !o.PublicBaseURL.HTTPS() {
			els = append(els, subtleText(connectionsNeedHTTPS))
			plain = append(plain, connectionsNeedHTTPS)
		}
		return newCard(summary, headed(connectionsHeading, plain...), els...)
	}
	n := largest(0, len(lines), func(n int) bool { return card(n).Size() <= MaxCardSize })
	return card(max(n, 0))
}

// Disconnected answers a person who disconnected server: it was
// disconnected (found), or they had not connected it.
func Disconnected(server string, found bool) Card {
	s := label(server, maxName)
	if s == "" {
		s = connectUnnamedServer
	}
	if !found {
		return newCard(notDisconnected(s), notDisconnected(s)+" "+notDisconnectedNothing,
			rich(run(notDisconnected(s))), subtleText(notDisconnectedNothing))
	}
	return newCard(disconnected(s), disconnected(s)+" "+disconnectedAgain(s),
		rich(run(disconnected(s))), rich(subtle(disconnectedAgain(s))))
}
