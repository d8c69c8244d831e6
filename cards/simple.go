package cards

// Welcome is the card the bot sends when it is installed: what it does, how
// to ask, that views open in the browser, and the /tools command.
func Welcome(o Options) Card {
	name := label(o.AgentName, maxName)
	if name == "" {
		name = "Assistant"
	}
	views := "Some tools come with an interactive view, such as a chart or a form. " +
		"My answer names each view and has an **Open** button that opens it in your browser, after you sign in."
	viewsPlain := "Some tools come with an interactive view. My answer names each view; its Open button opens it in your browser, after you sign in."
	if !o.PublicBaseURL.HTTPS() {
		views = "Some tools come with an interactive view, such as a chart or a form. " +
			"My answer names each view; you open it in your browser from the web console, after you sign in."
		viewsPlain = "Some tools come with an interactive view. My answer names each view; you open it in your browser from the web console."
	}
	hello := bold("Hi, I'm " + name + ".")
	hello.Size = "Medium"
	return newCard(
		"Hi, I'm "+name+". Ask me a question, or type /tools to see what I can use.",
		"Hi, I'm "+name+". I answer questions with the tools your organisation connected to me. "+
			"Write your question in plain words. "+viewsPlain+" Only you can open the views made for you, for 7 days. "+
			"Type /tools to see the tools I can use.",
		rich(hello),
		text("I answer questions with the tools your organisation connected to me."),
		text("**How to ask:** write your question in plain words, here or by mentioning me in a chat or channel."),
		text("**Views:** "+views+" Only you can open the views made for you, for 7 days."),
		text("Type **/tools** to see the tools I can use."),
	)
}

// Working is the card the bot sends while the agent works on a question,
// which it repeats, shortened, so the person knows which one it is.
func Working(question string) Card {
	q := label(question, maxQuestion)
	head := rich(subtle("Working on it…"))
	summary := "Working on your question…"
	if q != "" {
		head = rich(subtle("Working on: "), run("“"+q+"”"))
		summary = "Working on: " + oneLine(question, maxSummary-12)
	}
	return newCard(summary, summary+" I will answer below when I am done.",
		head,
		subtleText("I will answer below when I am done."),
	)
}

// Answered is what the working card becomes when the answer has arrived
// below it but the card could not be deleted: one quiet line.
func Answered() Card {
	return newCard("Answered below", "Answered below.", subtleText("Answered below."))
}

// MissingIdentity is the polite refusal for a message that came without a
// tenant id or a user object id: answers and views belong to a person, so
// the bot does not answer someone it cannot name.
func MissingIdentity() Card {
	return newCard(
		"Sorry, I can't tell who sent this message",
		"Sorry, I can't answer this message. I answer people of an organisation signed in to Microsoft Teams, "+
			"because what I find and the views I make belong to the person who asked. "+
			"This message came without an organisation (tenant) or user id. "+
			"Please write to me from your work or school account.",
		heading("Sorry, I can't answer this message"),
		text("I answer people of an organisation signed in to Microsoft Teams, because what I find and the views I make belong to the person who asked."),
		text("This message came without an organisation (tenant) or user id, for example from a guest or an anonymous participant. Please write to me from your work or school account."),
	)
}

// RunFailed is the card for a run that failed. It says nothing about the
// cause, which may carry internal detail, but gives a reference (such as
// the run id) that an operator can find in the logs.
func RunFailed(reference string) Card {
	ref := label(reference, maxName)
	head := boldText("Sorry, something went wrong")
	head.Color = "Attention"
	items := []element{head, text("I could not finish answering your question. Please try again in a moment.")}
	fallback := "Sorry, something went wrong. I could not finish answering your question. Please try again in a moment."
	if ref != "" {
		items = append(items, rich(subtle("If it keeps happening, tell your administrator this reference: "), run(ref)))
		fallback += " If it keeps happening, tell your administrator this reference: " + ref
	}
	return newCard("Sorry, something went wrong", fallback, box("attention", items...))
}

// NotServed is the card for a message the bot will not run: from another
// channel than Teams, or from an organisation it does not serve. It says
// so and nothing else.
func NotServed() Card {
	return newCard(
		"Sorry, I don't serve this conversation",
		"Sorry, I can't answer here. I answer in Microsoft Teams, for the organisation that installed me. "+
			"If you think I should answer you, ask your Teams administrator.",
		heading("Sorry, I can't answer here"),
		text("I answer in Microsoft Teams, for the organisation that installed me."),
		text("If you think I should answer you, ask your Teams administrator."),
	)
}

// NotAllowed is the card for a person the access rules do not let run the
// agent; reason says which role is missing and whom to ask, in the access
// rules' own words (which hold no names, links or markup of anyone else).
func NotAllowed(reason string) Card {
	reason = label(reason, maxMessage)
	return newCard(
		"Sorry, you can't use me yet",
		"Sorry, you can't use me yet. "+reason,
		heading("Sorry, you can't use me yet"),
		text(reason),
	)
}

// AccessUnavailable is the card for a message whose access decision could
// not be made because group memberships could not be checked: nothing is
// allowed until they can.
func AccessUnavailable() Card {
	return newCard(
		"Sorry, I can't check your access right now",
		"Sorry, I can't check your access right now: your group memberships could not be looked up in Microsoft Entra ID. "+
			"Please try again in a few minutes.",
		heading("Sorry, I can't check your access right now"),
		text("Your group memberships could not be looked up in Microsoft Entra ID, and I answer only when I know you may use me. Please try again in a few minutes."),
	)
}
