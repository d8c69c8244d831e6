package cards

import (
	"golang.org/x/net/idna"

	"teamsbot/elicit"
)

// The address of a URL mode question: written out in full while the
// question waits, opened by the Open button once the person went on.

// Bounds of an address.
const (
	// maxPageURL is the longest address a URL mode question may lead to:
	// the card writes it out in full, so that the person sees where the
	// Open button leads.
	maxPageURL = 2048
	// maxHost bounds a host's name, which is never cut: a cut name could
	// read as another.
	maxHost = 255
)

// page is the https address of a URL mode question: url as a button opens
// it and the card writes it out, and the host it shows.
type page struct{ url, host string }

// page returns the question's address, or the sentence that stands in
// its place: only an absolute https address, with no user name (which
// can make "https://bank.example@evil.example" read as the bank), short
// enough to be written out in full, is shown or opened. A host with
// letters outside ASCII is opened, and written out, in the form the
// browser uses (xn--), which tells look-alike letters apart; the host
// line shows both.
func (q question) page() (page, string) {
	u, ok := elicit.PageURL(q.e.URL)
	if !ok {
		return page{}, elicitURLNotHTTPS(q.server)
	}
	if len(u.Host) > maxHost {
		return page{}, elicitURLTooLong(q.server)
	}
	host := label(u.Host, maxHost)
	if name := u.Hostname(); !ascii(name) {
		a, err := idna.Lookup.ToASCII(name)
		if err != nil {
			return page{}, elicitURLBadHost(q.server)
		}
		u.Host = a
		if port := u.Port(); port != "" {
			u.Host = a + ":" + port
		}
		host = elicitURLHost(host, label(u.Host, maxHost))
	}
	s := u.String()
	if len(s) > maxPageURL {
		return page{}, elicitURLTooLong(q.server)
	}
	return page{url: s, host: host}, ""
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// address writes out where a page is: lead and the host in bold, then
// the whole address, made safe (Teams links none of it: the Open button
// is the one way there).
func address(p page, lead string) ([]element, []string) {
	shown := label(p.url, maxPageURL)
	addr := run(shown)
	addr.FontType = "Monospace"
	return []element{rich(run(lead), bold(p.host), run(".")), rich(addr)},
		[]string{lead + p.host + ".", elicitURLPlain(shown)}
}

// askURL is the card of a URL mode question that waits: the address
// written out and Continue, which makes the bot tell the server the
// person goes on and show the Open button.
func (q question) askURL() Card {
	var c Card
	// Only a Teams message smaller than MaxCardSize (Options.MaxSize)
	// lets the message give way.
	for _, m := range []int{elicit.MaxMessage, maxMessage} {
		els, lines, _ := q.intro(m)
		p, why := q.page()
		if why != "" {
			els = append(els, rich(run(why)), text(elicitDeclineOrCancel))
			lines = append(lines, why, elicitDeclineOrCancel)
			c = q.asking(els, lines, "")
		} else {
			e, l := address(p, elicitURLAsk(q.server))
			how := elicitURLHow(q.server)
			els = append(append(els, e...), rich(run(how)))
			lines = append(append(lines, l...), how)
			c = q.asking(els, lines, elicitContinue)
		}
		if c.Size() <= q.limit {
			break
		}
	}
	return c
}

// openPage is the card of a URL mode question the person went on with:
// the address and the Open button to it.
func (q question) openPage() Card {
	heading := elicitHeading(q.server)
	p, why := q.page()
	if why != "" {
		return q.ended(heading, "Warning", why)
	}
	els, lines := address(p, elicitURLOn)
	els = append([]element{rich(run(elicitURLAccepted(q.server)))}, els...)
	lines = append([]string{elicitURLAccepted(q.server)}, lines...)
	set := buttons(openURL{Type: "Action.OpenUrl", Title: elicitOpen, URL: p.url})
	set.Spacing = "Medium"
	return q.card(heading, heading, append(els, set), lines)
}
