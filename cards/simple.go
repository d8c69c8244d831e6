package cards

import "unicode/utf8"

// Welcome is the card the bot sends when it is installed: what it does, how
// to ask, how views open (in the browser, in Teams, or not yet, when the
// service has no https address), and the /tools command.
func Welcome(o Options) Card {
	name := label(o.AgentName, maxName)
	if name == "" {
		name = welcomeDefaultName
	}
	views, viewsPlain := welcomeViewsOpen, welcomeViewsOpenPlain
	switch {
	case !o.PublicBaseURL.HTTPS():
		views, viewsPlain = welcomeViewsNeedHTTPS, welcomeViewsNeedHTTPSPlain
	case o.StageView:
		views, viewsPlain = welcomeViewsStage, welcomeViewsStagePlain
	}
	hello := bold(welcomeHello(name))
	hello.Size = "Medium"
	return newCard(
		welcomeSummary(name),
		welcomeFallback(name, viewsPlain),
		rich(hello),
		text(welcomeAbout),
		text(welcomeHowToAsk),
		text(welcomeViews(views)),
		text(welcomeTools),
	)
}

// Working is the card the bot sends while the agent works on a question,
// which it repeats, shortened, so the person knows which one it is.
func Working(question string) Card {
	q := label(question, maxQuestion)
	head := rich(subtle(WorkingOnIt))
	summary := workingOnYourQuestion
	if q != "" {
		head = rich(subtle(workingOn), run(quoted(q)))
		// The summary keeps to maxSummary with the words before the question.
		summary = workingSummary(oneLine(question, maxSummary-utf8.RuneCountInString(workingOn)))
	}
	return newCard(summary, workingFallback(summary),
		head,
		subtleText(workingPromise),
	)
}

// Answered is what the working card becomes when the answer has arrived
// below it but the card could not be deleted: one quiet line.
func Answered() Card {
	return newCard(answeredSummary, answeredText, subtleText(answeredText))
}

// MissingIdentity is the polite refusal for a message that came without a
// tenant id or a user object id: answers and views belong to a person, so
// the bot does not answer someone it cannot name.
func MissingIdentity() Card {
	return newCard(
		missingIdentitySummary,
		missingIdentityPlain,
		heading(missingIdentityHeading),
		text(missingIdentityWhy),
		text(missingIdentityWhat),
	)
}

// RunFailed is the card for a run that failed. It says nothing about the
// cause, which may carry internal detail, but gives a reference (such as
// the run id) that an operator can find in the logs.
func RunFailed(reference string) Card {
	ref := label(reference, maxName)
	head := boldText(runFailedHeading)
	head.Color = "Attention"
	items := []element{head, text(runFailedText)}
	fallback := runFailedPlain
	if ref != "" {
		items = append(items, rich(subtle(runFailedReference), run(ref)))
		fallback += " " + runFailedReference + ref
	}
	return newCard(runFailedHeading, fallback, box("attention", items...))
}

// NotServed is the card for a message the bot will not run: from another
// channel than Teams, or from an organisation it does not serve. It says
// so and nothing else.
func NotServed() Card {
	return newCard(
		notServedSummary,
		notServedPlain,
		heading(notServedHeading),
		text(notServedWhere),
		text(notServedAsk),
	)
}

// NotAllowed is the card for a person the access rules do not let run the
// agent; reason says which role is missing and whom to ask, in the access
// rules' own words (which hold no names, links or markup of anyone else).
func NotAllowed(reason string) Card {
	reason = label(reason, maxMessage)
	return newCard(
		notAllowedHeading,
		notAllowedPlain(reason),
		heading(notAllowedHeading),
		text(reason),
	)
}

// AccessUnavailable is the card for a message whose access decision could
// not be made because group memberships could not be checked: nothing is
// allowed until they can.
func AccessUnavailable() Card {
	return newCard(
		accessUnavailableHeading,
		accessUnavailablePlain,
		heading(accessUnavailableHeading),
		text(accessUnavailableText),
	)
}

// Forgotten is the answer to /new: the agent no longer remembers the
// conversation's earlier messages (found: there were some).
func Forgotten(found bool) Card {
	said := forgottenText
	if !found {
		said = forgottenNothing
	}
	return newCard(forgottenHeading, said, rich(bold(forgottenHeading)), text(said))
}
