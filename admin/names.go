package admin

import (
	"context"
	"html/template"
	"sync"
	"time"

	"teamsbot/access"
	"teamsbot/internal/guid"
	"teamsbot/signin"
	"teamsbot/store"
)

// PersonNamer looks a person's display name up; access/graph implements
// it (through Microsoft Graph, cached).
type PersonNamer interface {
	UserName(ctx context.Context, tenantID, userID string) (string, error)
}

// Bounds on looking names up for one page: a page names a few dozen
// people at most, and shows the ids of those Graph is too slow for.
const (
	nameLookups     = 8
	nameLookupLimit = 3 * time.Second
)

// names returns the display names of the people ids of tenant p's that
// can be named: through Graph (Options.People) when the service has it,
// else the local people of the playground's tenant, else known (names a
// record kept, such as a run's). An id without a name is left out, and
// the page shows the id.
func (h *Handler) names(ctx context.Context, p access.Person, known map[string]string, ids ...string) map[string]string {
	out := map[string]string{}
	var ask []string
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		if lp, ok := signin.LocalPersonOf(p.TenantID, id); ok {
			out[id] = lp.Name
			continue
		}
		if h.opts.People != nil && guid.Valid(id) {
			ask = append(ask, id)
			continue
		}
		if n := known[id]; n != "" {
			out[id] = n
		}
	}
	if len(ask) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, nameLookupLimit)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, nameLookups)
	for _, id := range ask {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name, err := h.opts.People.UserName(ctx, p.TenantID, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && name != "":
				out[id] = name
			case known[id] != "":
				out[id] = known[id]
			}
			if err != nil {
				h.log.Debug("a person's name was not found", "user", id, "err", err)
			}
		})
	}
	wg.Wait()
	return out
}

// person shows a person by name with the id on hover, or by the id
// alone when no name is known.
func person(names map[string]string, id string) template.HTML {
	if id == "" {
		return template.HTML("no person")
	}
	esc := template.HTMLEscapeString
	if n := names[id]; n != "" {
		return template.HTML(`<abbr class="id" title="` + esc(id) + `">` + esc(n) + `</abbr>`)
	}
	return template.HTML(`<code class="id">` + esc(id) + `</code>`)
}

// conversationName is how the console names a conversation: its kind
// and the names the bot saw in Teams, or its id when it has none.
func conversationName(c store.ConversationRef) string {
	switch c.Kind {
	case "personal":
		return "Personal chat"
	case "groupChat":
		if c.Title != "" {
			return "Group chat “" + c.Title + "”"
		}
		return "Group chat"
	case "channel":
		switch {
		case c.TeamName != "" && c.ChannelName != "":
			return "Channel “" + c.ChannelName + "” of team “" + c.TeamName + "”"
		case c.TeamName != "":
			return "Team “" + c.TeamName + "”"
		case c.ChannelName != "":
			return "Channel “" + c.ChannelName + "”"
		}
		return "Channel"
	}
	return ""
}

// conversationHTML shows a conversation by kind and name with its id on
// hover; convs are the tenant's, by conversation id.
func conversationHTML(convs map[string]store.ConversationRef, id string) template.HTML {
	esc := template.HTMLEscapeString
	if c, ok := convs[id]; ok {
		if n := conversationName(c); n != "" {
			return template.HTML(`<abbr class="id" title="` + esc(id) + `">` + esc(n) + `</abbr>`)
		}
	}
	return template.HTML(`<code class="id">` + esc(id) + `</code>`)
}

// conversations reads the tenant's conversations by id, for the pages
// that name them.
func (h *Handler) conversations(ctx context.Context, tenant string) (map[string]store.ConversationRef, error) {
	refs, err := h.opts.Store.Conversations(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.ConversationRef, len(refs))
	for _, r := range refs {
		out[r.ConversationID] = r
	}
	return out, nil
}
