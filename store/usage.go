package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The usage rollup: per tenant and UTC day, counters of what the audit
// log and the runs record, kept up to date in the same commit as the
// records they count, so that the console's overview reads a few
// hundred small rows instead of every audit record of a period.

// Usage metrics, the counters kept per tenant, day and label.
const (
	// UsageRuns counts runs (label "").
	UsageRuns = "runs"
	// UsageViewsMade counts views made (agent.mcp_app.view, label "").
	UsageViewsMade = "views.made"
	// UsageViewsOpened counts views opened (agent.mcp_app.open, label "").
	UsageViewsOpened = "views.opened"
	// UsageCalls counts tool calls, the model's and the views', by
	// result (label "ok", "error" or "refused").
	UsageCalls = "calls"
	// UsageRefusals counts refusals by reason (label: one of the
	// Refusal... reasons).
	UsageRefusals = "refusals"
	// UsageTools counts tool calls by server and tool (label: server,
	// 0x1f, tool).
	UsageTools = "tools"
	// UsagePeople counts what each person did: runs for them, views they
	// opened, calls their views made (label: the user id).
	UsagePeople = "people"
)

// Refusal reasons of UsageRefusals.
const (
	RefusalPolicy     = "call.policy"      // a tool call a Cedar policy forbade
	RefusalUndecided  = "call.undecided"   // a tool call no access decision could be made for
	RefusalNotAllowed = "call.not_allowed" // a tool call the agent does not offer its caller, or a bad one
	RefusalView       = "view.invalid"     // a view whose resource is not a valid MCP App
	RefusalAPIKey     = "apikey"           // a runs API call with a key refused
	// RefusalMessage prefixes the bot's reason for a refused message
	// ("message.tenant", "message.permission", ...).
	RefusalMessage = "message."
)

// Audit actions the rollup counts. They are the agent's and the bot's
// (agent.AuditToolCall and so on); the store names them here because it
// may import neither.
const (
	actionToolCall      = "agent.tool.call"
	actionAppCall       = "agent.mcp_app.call"
	actionView          = "agent.mcp_app.view"
	actionViewOpen      = "agent.mcp_app.open"
	actionViewRefused   = "agent.mcp_app.refused"
	actionBotRefused    = "bot.refused"
	actionAPIKeyRefused = "trigger.apikey.refused"
)

// toolLabelSep separates the server from the tool in a UsageTools label.
const toolLabelSep = "\x1f"

// usageCount is n to add to one counter.
type usageCount struct {
	tenant string
	day    int32 // days since 1970-01-01, UTC
	metric string
	label  string
	n      int64
}

// usageDay is the UTC day of t, as days since 1970-01-01.
func usageDay(t time.Time) int32 {
	return int32(t.UTC().Unix() / 86400)
}

// dayTime is the start of day d, UTC.
func dayTime(d int32) time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// usageOfAudit is the rule of what an audit record counts for: the
// one place that says it, for both backends and their migrations.
func usageOfAudit(r AuditRecord) []usageCount {
	if r.TenantID == "" {
		return nil
	}
	day := usageDay(r.Time)
	c := func(metric, label string) usageCount {
		return usageCount{tenant: r.TenantID, day: day, metric: metric, label: label, n: 1}
	}
	str := func(k string) string { s, _ := r.Fields[k].(string); return s }
	var out []usageCount
	switch r.Action {
	case actionToolCall, actionAppCall:
		result := str("result")
		if result == "" {
			result = "error"
		}
		out = append(out, c(UsageCalls, result), c(UsageTools, str("server")+toolLabelSep+str("tool")))
		if result == "refused" {
			reason := RefusalNotAllowed
			switch str("decision") {
			case "deny":
				reason = RefusalPolicy
			case "none":
				reason = RefusalUndecided
			}
			out = append(out, c(UsageRefusals, reason))
		}
		if r.Action == actionAppCall && r.Actor != "" {
			out = append(out, c(UsagePeople, r.Actor))
		}
	case actionView:
		out = append(out, c(UsageViewsMade, ""))
	case actionViewOpen:
		out = append(out, c(UsageViewsOpened, ""))
		if r.Actor != "" {
			out = append(out, c(UsagePeople, r.Actor))
		}
	case actionViewRefused:
		out = append(out, c(UsageRefusals, RefusalView))
	case actionBotRefused:
		out = append(out, c(UsageRefusals, RefusalMessage+cmp.Or(str("reason"), "other")))
	case actionAPIKeyRefused:
		out = append(out, c(UsageRefusals, RefusalAPIKey))
	}
	return out
}

// usageOfRun is what a new run counts for.
func usageOfRun(r Run) []usageCount {
	if r.TenantID == "" {
		return nil
	}
	day := usageDay(r.CreatedAt)
	out := []usageCount{{tenant: r.TenantID, day: day, metric: UsageRuns, n: 1}}
	if r.UserID != "" {
		out = append(out, usageCount{tenant: r.TenantID, day: day, metric: UsagePeople, label: r.UserID, n: 1})
	}
	return out
}

// keyableUsage drops counts that cannot be keyed: a tenant or metric
// with a NUL byte (the tenants of audit records are only checked for
// NUL-free text, so this drops none the store accepts).
func keyableUsage(cs []usageCount) []usageCount {
	return slices.DeleteFunc(cs, func(c usageCount) bool {
		return strings.IndexByte(c.tenant, 0) >= 0 || !keyablePart(c.tenant)
	})
}

// mergeUsage adds up the counts of the same counter and orders them by
// key, so that PostgreSQL's writers lock counter rows in one order.
func mergeUsage(cs []usageCount) []usageCount {
	if len(cs) == 0 {
		return nil
	}
	slices.SortFunc(cs, func(a, b usageCount) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), cmp.Compare(a.day, b.day),
			strings.Compare(a.metric, b.metric), strings.Compare(a.label, b.label))
	})
	out := cs[:1]
	for _, c := range cs[1:] {
		last := &out[len(out)-1]
		if c.tenant == last.tenant && c.day == last.day && c.metric == last.metric && c.label == last.label {
			last.n += c.n
			continue
		}
		out = append(out, c)
	}
	return out
}

// usageRow is one stored counter, as a backend reads it back.
type usageRow struct {
	day    int32
	metric string
	label  string
	n      int64
}

// Overview is a tenant's usage over a period of whole UTC days, as the
// console's overview shows it.
type Overview struct {
	// From is the first day, To the day after the last (UTC midnights).
	From, To time.Time
	// Days are the period's days, oldest first, each with its counts.
	Days []DayUsage
	// Totals are the period's sums of the daily counts.
	Totals DayUsage
	// Refusals, Tools and Servers are the period's counts by reason, by
	// tool and by server, most first (then by name).
	Refusals, Tools, Servers []Count
	// People is how many different people were active in the period.
	People int
}

// DayUsage is one day's counts.
type DayUsage struct {
	Day                               time.Time // its UTC midnight
	Runs, ViewsMade, ViewsOpened      int64
	CallsOK, CallsError, CallsRefused int64
	// People is how many different people were active that day.
	People int64
}

// Count is a count of one thing: a refusal reason, a tool
// (Server and Name), a server (Name).
type Count struct {
	Name, Server string
	N            int64
}

// maxOverviewDays bounds an overview's period.
const maxOverviewDays = 400

// Overview returns tenant's usage over the whole UTC days from the day
// of from to the day before the day of to (to's day is left out unless
// to is past midnight: [day(from), day(to)) when to is a midnight, else
// up to day(to) included). It reads the usage rollup, never the audit
// records, so that its cost grows with the period and the tenant's
// tools and people, not with its records.
func (s *Store) Overview(ctx context.Context, tenant string, from, to time.Time) (Overview, error) {
	if err := ctx.Err(); err != nil {
		return Overview{}, err
	}
	if err := checkKeyPart("overview tenant", tenant); err != nil {
		return Overview{}, err
	}
	first, end := usageDay(from), usageDay(to)
	if !dayTime(end).Equal(to.UTC()) {
		end++
	}
	if end <= first || end-first > maxOverviewDays {
		return Overview{}, invalid("the period is %d days, it must be 1 to %d", end-first, maxOverviewDays)
	}
	var rows []usageRow
	err := s.be.read(ctx, func(r reader) error {
		var err error
		rows, err = r.usage(tenant, first, end)
		return err
	})
	if err != nil {
		return Overview{}, fmt.Errorf("store: overview of %s: %w", tenant, err)
	}
	return overviewOf(first, end, rows), nil
}

// overviewOf adds the counters up into an Overview.
func overviewOf(first, end int32, rows []usageRow) Overview {
	o := Overview{From: dayTime(first), To: dayTime(end), Days: make([]DayUsage, end-first)}
	for i := range o.Days {
		o.Days[i].Day = dayTime(first + int32(i))
	}
	refusals, tools, servers := map[string]int64{}, map[[2]string]int64{}, map[string]int64{}
	people := map[string]bool{}
	for _, r := range rows {
		if r.day < first || r.day >= end {
			continue
		}
		d := &o.Days[r.day-first]
		switch r.metric {
		case UsageRuns:
			d.Runs += r.n
		case UsageViewsMade:
			d.ViewsMade += r.n
		case UsageViewsOpened:
			d.ViewsOpened += r.n
		case UsageCalls:
			switch r.label {
			case "ok":
				d.CallsOK += r.n
			case "refused":
				d.CallsRefused += r.n
			default:
				d.CallsError += r.n
			}
		case UsageRefusals:
			refusals[r.label] += r.n
		case UsageTools:
			server, tool, _ := strings.Cut(r.label, toolLabelSep)
			tools[[2]string{server, tool}] += r.n
			servers[server] += r.n
		case UsagePeople:
			d.People++
			people[r.label] = true
		}
	}
	for _, d := range o.Days {
		o.Totals.Runs += d.Runs
		o.Totals.ViewsMade += d.ViewsMade
		o.Totals.ViewsOpened += d.ViewsOpened
		o.Totals.CallsOK += d.CallsOK
		o.Totals.CallsError += d.CallsError
		o.Totals.CallsRefused += d.CallsRefused
	}
	o.People = len(people)
	o.Totals.People = int64(len(people))
	for k, n := range refusals {
		o.Refusals = append(o.Refusals, Count{Name: k, N: n})
	}
	for k, n := range tools {
		o.Tools = append(o.Tools, Count{Server: k[0], Name: k[1], N: n})
	}
	for k, n := range servers {
		o.Servers = append(o.Servers, Count{Name: k, N: n})
	}
	for _, l := range [][]Count{o.Refusals, o.Tools, o.Servers} {
		slices.SortFunc(l, func(a, b Count) int {
			return cmp.Or(cmp.Compare(b.N, a.N), strings.Compare(a.Server, b.Server), strings.Compare(a.Name, b.Name))
		})
	}
	return o
}
