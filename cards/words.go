package cards

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file holds every word a person reads in Teams, from the cards and
// from the bot: the cards' texts, summaries, fallback texts and button
// titles, the streaming message's updates, the citation line and the
// citations' abstracts. They are English; keeping them in one place lets
// them be read, reviewed and one day translated together, and
// TestWordsLiveInWords keeps the other files of cards and bot free of them.
// Names, messages and answers from tools, servers and the model are not
// words of ours: they come in as arguments and are made safe by the callers.

// Shortened marks text that was cut so the card fits in one message.
const Shortened = "…(shortened)"

// unnamed stands in for a server or trigger that came without a name.
const unnamed = "unnamed"

// plural writes n with the singular or plural noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// quoted puts the person's own words in quotation marks.
func quoted(s string) string { return "“" + s + "”" }

// Words of the welcome card (Welcome). The views paragraph depends on
// whether the card can carry Open buttons (an https:// public base URL).
const (
	// welcomeDefaultName is the agent's name when none is configured.
	welcomeDefaultName = "Assistant"
	welcomeAbout       = "I answer questions with the tools your organisation connected to me."
	welcomeHowToAsk    = "**How to ask:** write your question in plain words, here or by mentioning me in a chat or channel."
	welcomeViewsOpen   = "Some tools come with an interactive view, such as a chart or a form. " +
		"My answer names each view and has an **Open** button that opens it in your browser, after you sign in."
	welcomeViewsOpenPlain = "Some tools come with an interactive view. My answer names each view; its Open button opens it in your browser, after you sign in."
	welcomeViewsStage     = "Some tools come with an interactive view, such as a chart or a form. " +
		"My answer names each view and has an **Open** button that opens it here in Teams, and a button that opens it in your browser."
	welcomeViewsStagePlain = "Some tools come with an interactive view. My answer names each view; its Open button opens it here in Teams."
	// Without an https address there is no Open button: Teams opens only
	// https pages, and nothing else in Teams leads to a view.
	welcomeViewsNeedHTTPS = "Some tools come with an interactive view, such as a chart or a form. " +
		"My answer names each view, but views can't be opened from Teams yet: once your admin gives this service an https address, " +
		"my answers come with an Open button for each view, which opens it in your browser after you sign in."
	welcomeViewsNeedHTTPSPlain = "Some tools come with an interactive view. My answer names each view, " +
		"but views can't be opened from Teams until your admin gives this service an https address."
	welcomeViewsOwner = "Only you can open the views made for you, for 7 days."
	welcomeTools      = "Type **/tools** to see the tools I can use."
	welcomeToolsPlain = "Type /tools to see the tools I can use."
)

// welcomeHello is the welcome card's greeting.
func welcomeHello(name string) string { return "Hi, I'm " + name + "." }

// welcomeSummary is the welcome card's notification line.
func welcomeSummary(name string) string {
	return welcomeHello(name) + " Ask me a question, or type /tools to see what I can use."
}

// welcomeViews is the welcome card's paragraph on views.
func welcomeViews(views string) string { return "**Views:** " + views + " " + welcomeViewsOwner }

// welcomeFallback is the whole welcome card in plain text.
func welcomeFallback(name, viewsPlain string) string {
	return welcomeHello(name) + " " + welcomeAbout + " Write your question in plain words. " +
		viewsPlain + " " + welcomeViewsOwner + " " + welcomeToolsPlain
}

// StartOverWords are the messages, alone in a message, that start a new
// conversation as /new does (in lower case, single spaces, without
// trailing punctuation). A chat with a bot in Teams is one thread for
// ever, with no gesture of its own for a new conversation (Microsoft's
// guidance "Deploy agents to Teams" for Copilot Studio resets on the
// person's word, as its "Start over" topic does).
var StartOverWords = []string{"start over", "start again", "new conversation", "new chat", "start a new conversation", "start a new chat"}

// Words of a run at work: the working card (Working) in group chats and
// channels, the streaming message in personal chats.
const (
	// WorkingOnIt is what a run shows while it works on a question it
	// cannot quote (an empty one).
	WorkingOnIt = "Working on it…"
	// workingOn comes before the question the run works on.
	workingOn             = "Working on: "
	workingOnYourQuestion = "Working on your question…"
	workingPromise        = "I will answer below when I am done."
	// StreamTakingAWhile is the streaming message's final text when the
	// run outlasts the stream: the answer follows as a new message.
	StreamTakingAWhile = "This is taking a while: the answer will follow as a new message."
)

// workingSummary is the working card's notification line for a question,
// already on one line and shortened.
func workingSummary(question string) string { return workingOn + question }

// workingFallback is the working card in plain text.
func workingFallback(summary string) string { return summary + " " + workingPromise }

// StreamWorkingOn is the streaming message's first update for a question,
// already on one line and shortened.
func StreamWorkingOn(question string) string { return workingOn + question + "…" }

// StreamCalling is the streaming message's update while the agent calls
// tool on server.
func StreamCalling(tool, server string) string {
	return fmt.Sprintf("Calling %s on %s…", tool, server)
}

// Words of what the working card becomes when it cannot be deleted
// (Answered).
const (
	answeredSummary = "Answered below"
	answeredText    = "Answered below."
)

// Words of the refusal for a message without a tenant or user id
// (MissingIdentity).
const (
	missingIdentitySummary = "Sorry, I can't tell who sent this message"
	missingIdentityHeading = "Sorry, I can't answer this message"
	missingIdentityWhy     = "I answer people of an organisation signed in to Microsoft Teams, because what I find and the views I make belong to the person who asked."
	missingIdentityWhat    = "This message came without an organisation (tenant) or user id, for example from a guest or an anonymous participant. Please write to me from your work or school account."
	missingIdentityPlain   = "Sorry, I can't answer this message. I answer people of an organisation signed in to Microsoft Teams, " +
		"because what I find and the views I make belong to the person who asked. " +
		"This message came without an organisation (tenant) or user id. " +
		"Please write to me from your work or school account."
)

// Words of the failure card (RunFailed).
const (
	runFailedHeading = "Sorry, something went wrong"
	runFailedText    = "I could not finish answering your question. Please try again in a moment."
	runFailedPlain   = runFailedHeading + ". " + runFailedText
	// runFailedReference comes before the run's reference.
	runFailedReference = "If it keeps happening, tell your administrator this reference: "
)

// Words of the refusal for another channel or an organisation not served
// (NotServed).
const (
	notServedSummary = "Sorry, I don't serve this conversation"
	notServedHeading = "Sorry, I can't answer here"
	notServedWhere   = "I answer in Microsoft Teams, for the organisation that installed me."
	notServedAsk     = "If you think I should answer you, ask your Teams administrator."
	notServedPlain   = notServedHeading + ". " + notServedWhere + " " + notServedAsk
)

// Words of the refusal for a person the access rules turn away
// (NotAllowed); the reason comes in the access rules' own words.
const notAllowedHeading = "Sorry, you can't use me yet"

// notAllowedPlain is the refusal in plain text.
func notAllowedPlain(reason string) string { return notAllowedHeading + ". " + reason }

// Words of the refusal when group memberships cannot be checked
// (AccessUnavailable).
const (
	accessUnavailableHeading = "Sorry, I can't check your access right now"
	accessUnavailableText    = "Your group memberships could not be looked up in Microsoft Entra ID, and I answer only when I know you may use me. Please try again in a few minutes."
	accessUnavailablePlain   = accessUnavailableHeading + ": your group memberships could not be looked up in Microsoft Entra ID. " +
		"Please try again in a few minutes."
)

// Words of the answer card (AnswerCards): its text and summary.
const (
	noWrittenAnswer = "_The agent gave no written answer._"
	answeredNothing = "The agent answered"
)

// answeredViews is the summary of an answer with views and no text.
func answeredViews(n int) string { return "The agent answered with " + plural(n, "view", "views") }

// Words of a triggered run's banner, atop its first card.
const triggeredRun = "Triggered run. "

// triggerLine says which trigger started a run and who may open its views:
// nobody asked, so no person owns them.
func triggerLine(name string, scheduled bool) string {
	kind := "the API key"
	if scheduled {
		kind = "the schedule"
	}
	return "Nobody asked for this answer: " + kind + " " + quoted(name) + " started it. " +
		"Its views can be opened by your organisation's agent readers (the agents.read role)."
}

// Words of the cards that carry the views that did not fit in the first.
const moreViewsHeading = "More views from this answer"

// moreViewsRange numbers the views of a continuation card, first to last
// of total, counting from one.
func moreViewsRange(first, last, total int) string {
	return fmt.Sprintf("Views %d–%d of %d.", first, last, total)
}

// moreViewsPlain is a continuation card's fallback text.
func moreViewsPlain(first, last, total int) string {
	return fmt.Sprintf("%s (%d–%d of %d).", moreViewsHeading, first, last, total)
}

// moreViewsSummary is a continuation card's notification line.
func moreViewsSummary(first, last, total int) string {
	return fmt.Sprintf("More views (%d–%d of %d)", first, last, total)
}

// moreViewsFollow says that n views follow in the next message.
func moreViewsFollow(n int) string {
	return fmt.Sprintf("%s follow in the next message.", plural(n, "more view", "more views"))
}

// moreViewsFollowPlain is moreViewsFollow in the fallback text.
func moreViewsFollowPlain(n int) string { return plural(n, "more view follows.", "more views follow.") }

// Words of a view's block.
const (
	untitledView = "Untitled view"
	// interactiveViewFrom and viewTool frame the server and the tool of
	// a view.
	interactiveViewFrom = "Interactive view from "
	viewTool            = ", tool "
	// onlyOwner and ownerCanOpen frame the name of the person who may
	// open a view in a shared conversation.
	onlyOwner        = "Only "
	ownerCanOpen     = " can open this view."
	onlyAskerCanOpen = "Only the person who asked can open this view."
	// viewNeedsHTTPS and viewPlainNeedsHTTPS stand where the Open button
	// would be when the service has no https address: Teams opens only
	// https pages, so the person can't open the view from Teams, and only
	// an admin can change that.
	viewNeedsHTTPS      = "This view can't be opened from Teams yet. Ask your admin to give this service an https address: answers after that come with an Open button."
	viewPlainNeedsHTTPS = ": it can't be opened from Teams until your admin gives this service an https address."
	// viewNoAddress and viewPlainNoAddress stand where the Open button
	// would be for a view whose id makes no safe address.
	viewNoAddress      = "This view can't be opened from Teams."
	viewPlainNoAddress = ": it can't be opened from Teams."
)

// openViewTitle is the title of a view's Open button: it names the view,
// so that a screen reader does not read "Open, Open, Open".
func openViewTitle(title string) string { return "Open " + title }

// openInBrowserTitle is the title of a view's second button inside Teams,
// which opens the page in the browser for clients without Stage View.
func openInBrowserTitle(title string) string { return "Open " + title + " in the browser" }

// cardTime writes t as Adaptive Card DATE() and TIME() functions, which
// Teams shows in the reader's own time zone and locale.
func cardTime(t time.Time) string {
	at := t.UTC().Format("2006-01-02T15:04:05Z")
	return "{{DATE(" + at + ", SHORT)}} at {{TIME(" + at + ")}}"
}

// viewExpired says when a view stopped opening; when is cardTime's.
func viewExpired(when string) string {
	return "This view expired on " + when + " and can no longer be opened."
}

// viewOpenUntil says until when a view opens; when is cardTime's.
func viewOpenUntil(when string) string { return "Can be opened until " + when + "." }

// viewPlain names a view in the fallback text.
func viewPlain(title, server string) string { return "View: " + title + " (" + server + ")" }

// viewPlainExpired follows viewPlain for a view that has expired; at is
// formatTime's.
func viewPlainExpired(at string) string { return ", expired on " + at + "." }

// viewPlainUntil follows viewPlain for a view that still opens; at is
// formatTime's.
func viewPlainUntil(at string) string { return ", open until " + at }

// formatTime writes a time out for fallback text in the order and clock
// of the person's locale: month first and a 12-hour clock where that is
// the custom (en-US and the regions that follow it), day first and a
// 24-hour clock elsewhere. The zone is always named.
func formatTime(t time.Time, locale string) string {
	switch strings.ToLower(locale) {
	case "en-us", "en-ph", "en-ca", "es-us":
		return t.Format("Jan 2, 2006 3:04 PM MST")
	}
	return t.Format("2 Jan 2006 15:04 MST")
}

// Words of the blocks that list refused views and failed tool calls.
const (
	// issueFrom comes between an issue's name and its server.
	issueFrom          = " from "
	unnamedRefusal     = "A view"
	refusalsDontMatter = "The answer above does not depend on them."
	unnamedToolError   = "A tool"
	toolReturnedError  = "it returned an error"
	toolErrorsMatter   = "The answer may be incomplete."
)

// refusalsHeading heads the list of n refused views.
func refusalsHeading(n int) string {
	return plural(n, "view could not be shown", "views could not be shown")
}

// refusalsPlain is refusalsHeading in the fallback text.
func refusalsPlain(n int) string {
	return plural(n, "view could not be shown.", "views could not be shown.")
}

// toolErrorsHeading heads the list of n failed tool calls.
func toolErrorsHeading(n int) string { return plural(n, "tool call failed", "tool calls failed") }

// toolErrorsPlain is toolErrorsHeading in the fallback text.
func toolErrorsPlain(n int) string { return plural(n, "tool call failed.", "tool calls failed.") }

// refusalWhy follows a refused view's name: why it was refused.
func refusalWhy(reason string) string { return ": " + reason + "." }

// refusalRef follows refusalWhy: the reference under which operators find
// the checker's detail.
func refusalRef(ref string) string { return " (ref " + ref + ")" }

// toolErrorWhy follows a failed tool call's name: what it failed with.
func toolErrorWhy(message string) string { return ": " + message }

// issuesNotListed says that n more issues were left out of a list.
func issuesNotListed(n int) string {
	return fmt.Sprintf("%s: %s not listed.", Shortened, plural(n, "more", "more"))
}

// refusalReason says why a view was refused, in words a person
// understands. The keys are mcpapps.RefusedError reasons.
func refusalReason(reason string) string {
	switch reason {
	case "mime":
		return "the server sent something that is not an MCP App view"
	case "scheme":
		return "the server gave the view an address that views may not have"
	case "size":
		return "the view is too large to show"
	case "read":
		return "the view could not be read from the server"
	case "content":
		return "the server sent a view with no usable content"
	}
	return "the view was refused"
}

// Words of the folded run notes.

// runNotesTitle is the title of the button that shows n run notes.
func runNotesTitle(n int) string { return fmt.Sprintf("Run notes (%d)", n) }

// notesNotShown says that n more notes were left out.
func notesNotShown(n int) string {
	return fmt.Sprintf("%s: %s not shown.", Shortened, plural(n, "more note", "more notes"))
}

// Words of the AI label's citations, one per tool result the answer
// relies on, and of the line that points at them. Teams matches each
// citation to its [n] in the message text.

// CitationName names the citation of tool's result on server.
func CitationName(tool, server string) string { return tool + " on " + server }

// CitationAbstract describes the citation of tool's result on server.
func CitationAbstract(tool, server string) string {
	return fmt.Sprintf("The result of the tool %s of the MCP server %s, which the answer relies on.", tool, server)
}

// CitationAbstractView describes the citation of tool's result on server
// when the citation links to the view the tool made.
func CitationAbstractView(tool, server string) string {
	return fmt.Sprintf("The result of %s on %s; its view opens from this link.", tool, server)
}

// SourcesLine is the message text that carries n citations: "Sources: [1]
// [2] …". It is empty when there are none.
func SourcesLine(n int) string {
	if n == 0 {
		return ""
	}
	refs := make([]string, n)
	for i := range refs {
		refs[i] = fmt.Sprintf("[%d]", i+1)
	}
	return "Sources: " + strings.Join(refs, " ")
}

// CardActionReply answers a press on a card button that asks the bot to
// act: the cards carry none, so there is nothing to do.
const CardActionReply = "Nothing to do here: open a view with its Open button, or write to me."

// Words of the Connect card (ConnectCard), which asks a person to connect
// an MCP server that acts as them, and which the bot updates when they
// have, when the run stops waiting, or when the sign-in was refused. The
// person, agent and server names come in already made safe; sentences that
// carry them go in TextRuns. Only the agent's name, which an admin gives,
// starts a sentence: a server's name may begin with a small letter.
const (
	// connectUnnamedServer stands in for a server without a name.
	connectUnnamedServer = "the server"
	// connectOnlyAsker says whose sign-in it is when the card has no name
	// to give, in a chat others read.
	connectOnlyAsker = "Only the person who asked can connect, with their own account."
	// connectNoAddress stands where the Connect button would be when the
	// request's id makes no safe address.
	connectNoAddress = "This card can't open the sign-in."
	// connectAskAgain follows a wait that ended without a connection.
	connectAskAgain = "Ask your question again to get a new Connect button."
)

// connectHeading heads the card while the run waits.
func connectHeading(server string) string { return "Connect " + server }

// connectTitle is the Connect button's title: it names the server, so that
// a screen reader tells one card's button from another's.
func connectTitle(server string) string { return "Connect " + server }

// connectAsk says who is asked, and why. person may be "".
func connectAsk(person, agent, server string) string {
	if person == "" {
		return "To answer your question, " + agent + " needs you to connect " + server + "."
	}
	return "Hi " + person + ", to answer your question, " + agent + " needs you to connect " + server + "."
}

// connectHow says what Connect does.
func connectHow(agent, server string) string {
	return "Select Connect and sign in to let " + agent + " use " + server + " as you."
}

// connectOnly says, in a chat others read, whose sign-in it is.
func connectOnly(person string) string {
	return "Only " + person + " can connect, with their own account."
}

// connectWaits says how long the question waits; wait is waitWords'.
func connectWaits(wait, agent, server string) string {
	return "Your question waits " + wait + " for this. After that, " + agent + " answers without " + server + "."
}

// connectWaitsNoButton says how long the question waits when the card
// has no Connect button; wait is waitWords'.
func connectWaitsNoButton(wait, agent, server string) string {
	return agent + " answers without " + server + " after " + wait + "."
}

// connectNeedsHTTPS stands where the Connect button would be when the
// service has no https address: Teams opens only https pages, so nobody
// can connect from Teams, and only an admin can change that.
func connectNeedsHTTPS(server string) string {
	return "You can't connect " + server + " from Teams until your admin gives this service an https address."
}

// connectPlainURL gives the Connect button's address in the fallback text.
func connectPlainURL(u string) string { return "Connect: " + u }

// connectSummary is the notification line while the run waits.
func connectSummary(person, server string) string {
	if person == "" {
		return "Connect " + server + " to get your answer"
	}
	return person + ", connect " + server + " to get your answer"
}

// connectedHeading heads the card once the person has connected.
func connectedHeading(server string) string { return "Connected to " + server }

// connectedGoesOn says the run goes on with the server.
func connectedGoesOn(person, agent, server string) string {
	if person == "" {
		return "Done: " + agent + " now uses " + server + " to answer your question."
	}
	return "Done: " + person + " connected " + server + ", and " + agent + " now uses it to answer the question."
}

// notConnectedHeading heads the card when the run stopped waiting or the
// sign-in was refused.
func notConnectedHeading(server string) string { return "Not connected to " + server }

// connectTimedOut says that the wait ended, and why; wait is waitWords',
// "" when the card has no length to give.
func connectTimedOut(wait, agent, server string) string {
	within := "in time"
	if wait != "" {
		within = "within " + wait
	}
	return "The connection to " + server + " was not made " + within + ", so " + agent +
		" answers without it. The answer may be incomplete."
}

// connectRefused says that the sign-in did not give access: the person
// declined, or the server's sign-in refused them.
func connectRefused(person, agent, server string) string {
	who := ""
	if person != "" {
		who = " for " + person
	}
	return "The sign-in to " + server + who + " was declined or refused, so " + agent +
		" answers without it. The answer may be incomplete."
}

// waitWords writes how long a run waits: "5 minutes", "1 minute and 30
// seconds", "2 hours". Nothing under a second is shown; "" for no wait.
func waitWords(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	d = max(d.Round(time.Second), time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var parts []string
	if h > 0 {
		parts = append(parts, plural(h, "hour", "hours"))
	}
	if m > 0 {
		parts = append(parts, plural(m, "minute", "minutes"))
	}
	if s > 0 {
		parts = append(parts, plural(s, "second", "seconds"))
	}
	return andList(parts)
}

// Words of the list of a person's connections (Connections) and of the
// answer to disconnecting one (Disconnected).
const (
	connectionsHeading = "Your connections"
	connectionsNone    = "You have not connected any server yet."
	connectionsWhen    = "When a question needs a server that acts as you, you are asked to connect it."
	connectionsManage  = "Manage connections"
	connectionsNotUsed = "Not used yet."
	// connectionsNeedHTTPS stands where the Manage connections button
	// would be without an https address.
	connectionsNeedHTTPS = "Your connections can be managed in the browser once your admin gives this service an https address."
	// connectionFor comes between a server and the agent that acts as the
	// person there.
	connectionFor = " for "
)

// connectionsSummary is the notification line of a list of n connections.
func connectionsSummary(n int) string {
	return connectionsHeading + ": " + plural(n, "server", "servers")
}

// connectionTimes says when a connection was made and last used; the
// times are cardTime's, or formatTime's in the fallback text, "" when
// unknown.
func connectionTimes(connected, used string) string {
	var s string
	if connected != "" {
		s = "Connected on " + connected + ". "
	}
	if used == "" {
		return s + connectionsNotUsed
	}
	return s + "Last used on " + used + "."
}

// connectionsPlainManage gives the Manage connections address in the
// fallback text.
func connectionsPlainManage(u string) string { return connectionsManage + ": " + u }

// disconnected says that a server was disconnected.
func disconnected(server string) string {
	return "Disconnected " + server + ": the assistant no longer acts as you there."
}

// disconnectedAgain says what happens when a question needs the server
// again.
func disconnectedAgain(server string) string {
	return "If a question needs " + server + " again, you will be asked to connect it."
}

// notDisconnected answers disconnecting a server the person had not
// connected.
func notDisconnected(server string) string { return "You had not connected " + server + "." }

// notDisconnectedNothing follows notDisconnected.
const notDisconnectedNothing = "Nothing was changed."

// headed writes a card with a heading in plain text, for fallback texts:
// the heading as a sentence, then the card's sentences.
func headed(heading string, sentences ...string) string {
	return strings.Join(append([]string{heading + "."}, sentences...), " ")
}

// cardDate writes t as an Adaptive Card DATE() function, which Teams shows
// in the reader's own time zone and locale.
func cardDate(t time.Time) string {
	return "{{DATE(" + t.UTC().Format("2006-01-02T15:04:05Z") + ", SHORT)}}"
}

// The answer to /new, which makes the agent forget the conversation's
// earlier messages (Forgotten).
const (
	forgottenHeading = "Starting afresh"
	forgottenText    = "I no longer remember what was said here before: the next question starts a new conversation."
	forgottenNothing = "There was nothing to forget: the next question starts a new conversation."
)

// Words of a server's question to the person (ElicitationCard), and of
// what the card becomes once the question has ended. The server's,
// agent's, tool's and person's names come in already made safe; sentences
// that carry them go in TextRuns. A server's name may begin with a small
// letter, so no sentence starts with it.
const (
	elicitSubmit   = "Submit"
	elicitContinue = "Continue"
	elicitDecline  = "Decline"
	elicitCancel   = "Cancel"
	elicitOpen     = "Open"
	// elicitRequired follows the name of a field that must be filled in.
	elicitRequired = " (required)"
	// elicitYes is a yes-or-no field's toggle: the field's name is above it.
	elicitYes = "Yes"
	// elicitChoose is the placeholder of a drop-down list of choices.
	elicitChoose = "Choose…"
	// elicitDateTimeExample is the placeholder of a date and time field,
	// in the form its answer must take.
	elicitDateTimeExample = "Such as 2026-12-31T09:30:00+01:00"
	// elicitUnnamedChoice stands for a choice whose name is blank.
	elicitUnnamedChoice = "(blank)"
	// elicitOnlyAsker says whose answer it is when the card has no name
	// to give, in a chat others read.
	elicitOnlyAsker = "Only the person who asked can answer this."
	// elicitCorrect heads a form sent again after a wrong answer.
	elicitCorrect = "Please correct what is marked below, then submit again."
	// elicitDescriptionsLeftOut and the other parts of elicitShortened say
	// what gave way for the card to fit in one message.
	elicitDescriptionsLeftOut = "the fields' descriptions are left out"
	elicitDescriptionsCut     = "the fields' descriptions are shortened"
	elicitChoiceNamesCut      = "the names of choices are shortened"
	elicitMessageCut          = "the server's message is shortened"
	elicitNamesCut            = "the fields' names are shortened"
)

// elicitHeading heads a question while it waits, and a URL mode question
// the person went on with.
func elicitHeading(server string) string { return server + " asks for your input" }

// elicitSummary is the notification line of a question; person is whose
// answer it is, "" outside a shared chat.
func elicitSummary(person, server string) string {
	if person == "" {
		return "A question from " + server + " waits for your answer"
	}
	return person + ", a question from " + server + " waits for your answer"
}

// elicitDuring says which tool call asks; agent may be "".
func elicitDuring(agent, tool string) string {
	if agent == "" {
		return "Asked during the tool call " + tool + "."
	}
	return "Asked while " + agent + " calls the tool " + tool + "."
}

// elicitOnly says whose answer it is, in a chat others read.
func elicitOnly(person string) string { return "Only " + person + " can answer this." }

// elicitWaits says how long the question waits; wait is waitWords'.
func elicitWaits(wait string) string {
	return "The tool waits " + wait + " for your answer; after that it goes on as if you cancelled."
}

// elicitWaitsUntil is elicitWaits with the time the wait ends: cardTime's
// in the card, formatTime's in the fallback text.
func elicitWaitsUntil(wait, until string) string {
	return "The tool waits " + wait + " for your answer, until " + until + "; after that it goes on as if you cancelled."
}

// elicitLengthHint says how long a text answer may be.
func elicitLengthHint(min, max *int) string {
	switch {
	case min != nil && max != nil:
		return fmt.Sprintf("%d to %d characters", *min, *max)
	case min != nil:
		return fmt.Sprintf("at least %s", plural(*min, "character", "characters"))
	case max != nil:
		return fmt.Sprintf("at most %s", plural(*max, "character", "characters"))
	}
	return ""
}

// elicitNumberHint says what number a field takes; min and max are
// written as a person reads them ("10", not "10.000000"), "" when unbounded.
func elicitNumberHint(whole bool, min, max string) string {
	what := "a number"
	if whole {
		what = "a whole number"
	}
	switch {
	case min != "" && max != "":
		return what + " from " + min + " to " + max
	case min != "":
		return what + ", at least " + min
	case max != "":
		return what + ", at most " + max
	}
	return what
}

// elicitItemsHint says how many choices a multiple choice takes.
func elicitItemsHint(min, max *int) string {
	switch {
	case min != nil && max != nil && *min == *max:
		return "choose " + strconv.Itoa(*min)
	case min != nil && max != nil:
		return fmt.Sprintf("choose %d to %d", *min, *max)
	case min != nil:
		return fmt.Sprintf("choose at least %d", *min)
	case max != nil:
		return fmt.Sprintf("choose at most %d", *max)
	}
	return "choose any"
}

// elicitHint comes between a field's name and what it takes.
func elicitHint(hint string) string { return " · " + hint }

// elicitLeftOut says what the server asked for that the question does not
// hold (elicit.Form.Clipped, already made safe and joined).
func elicitLeftOut(server, what string) string {
	return server + " asked for more than a question here holds. Left out: " + what + "."
}

// elicitShortened says what gave way for the form to fit in one Teams
// message: parts are elicitDescriptionsLeftOut and the like, and
// elicitChoicesHidden.
func elicitShortened(parts []string) string {
	return "To fit in one message, " + andList(parts) + "."
}

// elicitChoicesHidden says that n choices are left out of their lists.
func elicitChoicesHidden(n int) string {
	return plural(n, "choice is", "choices are") + " not shown"
}

// elicitFields names the fields of a form in the fallback text.
func elicitFields(names []string) string { return "It asks for: " + strings.Join(names, ", ") + "." }

// elicitFallbackHow and elicitFallbackEnd end a waiting question's
// fallback text: its inputs and buttons show only in the card.
const (
	elicitFallbackHow = "Open this chat in Microsoft Teams to answer."
	elicitFallbackEnd = "Open this chat in Microsoft Teams to decline or cancel it."
)

// elicitURLHow says what Continue does in URL mode: the address opens only
// once the server has been told the person goes on.
func elicitURLHow(server string) string {
	return "Continue tells " + server + " you go on, and shows the button that opens the page."
}

// elicitTooLarge stands where a form would be that does not fit in one
// Teams message even shortened.
func elicitTooLarge(server string) string {
	return "This question from " + server + " is too large to show in one Teams message, so it can't be answered here."
}

// elicitDeclineOrCancel follows a question that can't be answered here
// while it still waits: the person can end the wait.
const elicitDeclineOrCancel = "Decline or cancel it, and the tool goes on without your answer."

// elicitURLAsk says on which host the page of a URL mode question is; the
// full address follows on its own line.
func elicitURLAsk(server string) string { return server + " asks you to open a page on " }

// elicitURLOn comes before the host of a page the person went on to.
const elicitURLOn = "The page is on "

// elicitURLHost writes a host whose name has letters outside ASCII with
// the form the browser uses, which tells look-alike letters apart.
func elicitURLHost(host, ascii string) string { return host + " (" + ascii + ")" }

// elicitURLNotHTTPS stands where the address would be when it is not an
// https address: Teams would not open it, and nothing here leads to it.
func elicitURLNotHTTPS(server string) string {
	return "The address " + server + " asks you to open is not an https address, so this question can't be answered here."
}

// elicitURLTooLong stands where an address would be that is too long to
// show in full: a person must see where a button leads.
func elicitURLTooLong(server string) string {
	return "The address " + server + " asks you to open is too long to show in full, so this question can't be answered here."
}

// elicitURLBadHost stands where an address would be whose host's name
// has letters outside ASCII that make no valid name.
func elicitURLBadHost(server string) string {
	return "The address " + server + " asks you to open has a host name that can't be shown safely, so this question can't be answered here."
}

// elicitURLPlain gives the address in the fallback text.
func elicitURLPlain(u string) string { return "Address: " + u }

// elicitURLAccepted says what to do once the person chose to go on.
func elicitURLAccepted(server string) string {
	return "Open the page below to go on with " + server + ". This card will say when " + server + " is done."
}

// elicitSentHeading heads a form whose answer was sent.
func elicitSentHeading(server string) string { return "Answer sent to " + server }

// elicitSent says the answer was sent, and why the card no longer shows it.
func elicitSent(server string) string {
	return "Your answer was sent to " + server + ". This card does not show it, so that nobody else reads it here."
}

// elicitEndedHeading heads a question that ended in the given way.
func elicitEndedHeading(server, how string) string { return "Question from " + server + ": " + how }

// Words of elicitEndedHeading.
const (
	elicitHowDone      = "done"
	elicitHowDeclined  = "declined"
	elicitHowCancelled = "cancelled"
	elicitHowTimedOut  = "no answer"
	elicitHowEnded     = "ended"
)

// elicitCompleted says the server has what it asked for at the address.
func elicitCompleted(server string) string {
	return "Done: " + server + " says it is done with its page, and the tool goes on."
}

// elicitUnanswerable says nobody can answer the question any more: the
// run stopped, or the question could not be kept.
func elicitUnanswerable(server string) string {
	return "This question from " + server + " can no longer be answered."
}

// elicitDeclined says the question was declined.
func elicitDeclined(server string) string {
	return "The question was declined, and " + server + " was told so."
}

// elicitCancelled says the question was cancelled.
func elicitCancelled(server string) string {
	return "The question was cancelled, and " + server + " was told so."
}

// elicitTimedOut says no answer came in time; wait is waitWords', "" when
// the card has no length to give.
func elicitTimedOut(server, wait string) string {
	if wait == "" {
		return "No answer came in time, so " + server + " was told the question was cancelled."
	}
	return "No answer came within " + wait + ", so " + server + " was told the question was cancelled."
}

// andList joins parts as a sentence lists them: "a", "a and b", "a, b
// and c".
func andList(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// Words the bot says outside the card about a question.
const (
	// ElicitNotYours answers someone other than the person asked.
	ElicitNotYours = "Only the person who asked can answer this question. Your answer was not sent."
	// ElicitGone answers a question that is no longer waiting.
	ElicitGone = "This question is no longer waiting for an answer."
)

// StreamAsking is a stream's informative update while a server's question
// waits for the person.
func StreamAsking(server string) string {
	return server + " asks you something: answer the card below."
}

// elicitDateTimePlaceholder names a date-time input and shows its form.
func elicitDateTimePlaceholder(name string) string {
	return name + ", " + strings.ToLower(elicitDateTimeExample[:1]) + elicitDateTimeExample[1:]
}
