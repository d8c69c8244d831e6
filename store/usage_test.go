package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

// expectedOverview counts, from the audit records and runs themselves,
// what the overview of tenant over [from, to) must say: runs, views made
// and opened, tool calls by result, refusals, calls per tool and server,
// and the people who asked, opened or whose views called.
func expectedOverview(t *testing.T, s *store.Store, tenant string, from, to time.Time) store.Overview {
	t.Helper()
	ctx := context.Background()
	want := store.Overview{From: from, To: to}
	for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
		want.Days = append(want.Days, store.DayUsage{Day: d})
	}
	day := func(at time.Time) *store.DayUsage { return &want.Days[int(at.Sub(from)/(24*time.Hour))] }
	people, dayPeople := map[string]bool{}, map[string]bool{}
	person := func(at time.Time, id string) {
		if id == "" {
			return
		}
		people[id] = true
		if k := at.UTC().Format(time.DateOnly) + id; !dayPeople[k] {
			dayPeople[k] = true
			day(at).People++
		}
	}
	runs, err := s.RecentRuns(ctx, tenant, store.MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.CreatedAt.Before(from) || !r.CreatedAt.Before(to) {
			continue
		}
		day(r.CreatedAt).Runs++
		person(r.CreatedAt, r.UserID)
	}
	recs, err := s.Audit(ctx, store.AuditQuery{TenantID: tenant, From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	refusals, tools, servers := map[string]int64{}, map[[2]string]int64{}, map[string]int64{}
	for _, r := range recs {
		str := func(k string) string { s, _ := r.Fields[k].(string); return s }
		d := day(r.Time)
		switch r.Action {
		case "agent.tool.call", "agent.mcp_app.call":
			switch str("result") {
			case "ok":
				d.CallsOK++
			case "refused":
				d.CallsRefused++
				switch str("decision") {
				case "deny":
					refusals[store.RefusalPolicy]++
				case "none":
					refusals[store.RefusalUndecided]++
				default:
					refusals[store.RefusalNotAllowed]++
				}
			default:
				d.CallsError++
			}
			tools[[2]string{str("server"), str("tool")}]++
			servers[str("server")]++
			if r.Action == "agent.mcp_app.call" {
				person(r.Time, r.Actor)
			}
		case "agent.mcp_app.view":
			d.ViewsMade++
		case "agent.mcp_app.open":
			d.ViewsOpened++
			person(r.Time, r.Actor)
		case "agent.mcp_app.refused":
			refusals[store.RefusalView]++
		case "bot.refused":
			refusals[store.RefusalMessage+str("reason")]++
		case "trigger.apikey.refused":
			refusals[store.RefusalAPIKey]++
		}
	}
	for _, d := range want.Days {
		want.Totals.Runs += d.Runs
		want.Totals.ViewsMade += d.ViewsMade
		want.Totals.ViewsOpened += d.ViewsOpened
		want.Totals.CallsOK += d.CallsOK
		want.Totals.CallsError += d.CallsError
		want.Totals.CallsRefused += d.CallsRefused
	}
	want.People, want.Totals.People = len(people), int64(len(people))
	for k, n := range refusals {
		want.Refusals = append(want.Refusals, store.Count{Name: k, N: n})
	}
	for k, n := range tools {
		want.Tools = append(want.Tools, store.Count{Server: k[0], Name: k[1], N: n})
	}
	for k, n := range servers {
		want.Servers = append(want.Servers, store.Count{Name: k, N: n})
	}
	for _, l := range [][]store.Count{want.Refusals, want.Tools, want.Servers} {
		slices.SortFunc(l, func(a, b store.Count) int {
			if a.N != b.N {
				return int(b.N - a.N)
			}
			if a.Server != b.Server {
				return map[bool]int{true: -1, false: 1}[a.Server < b.Server]
			}
			return map[bool]int{true: -1, false: 1}[a.Name < b.Name]
		})
	}
	return want
}

// checkOverview holds s's overview of tenant over [from, to) to what its
// records say.
func checkOverview(t *testing.T, s *store.Store, tenant string, from, to time.Time) store.Overview {
	t.Helper()
	got, err := s.Overview(context.Background(), tenant, from, to)
	if err != nil {
		t.Fatalf("Overview(%s): %v", tenant, err)
	}
	if diff := cmp.Diff(expectedOverview(t, s, tenant, from, to), got); diff != "" {
		t.Errorf("Overview(%s) is not what its records count (-records +overview):\n%s", tenant, diff)
	}
	return got
}

// The overview's figures are the store's counts of the records of the
// period, per tenant, after a restart too; a run saved again counts once.
func testOverviewCountsTheRecords(t *testing.T, bk backend) {
	clk := newClock()
	path := bk.location(t)
	s := openAt(t, bk, path, clk)
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	users := []string{"u-megan", "u-alex", "u-adele"}
	call := func(action, tenant, actor, server, tool, result, decision string) store.AuditRecord {
		f := map[string]any{"server": server, "tool": tool, "result": result, "agent": "default"}
		if decision != "" {
			f["decision"] = decision
		}
		return store.AuditRecord{TenantID: tenant, Action: action, Actor: actor, Fields: f}
	}
	for i := range 40 {
		at := start.Add(time.Duration(i) * 5 * time.Hour) // across 9 days
		tenant := []string{"tenant-1", "tenant-2"}[i%5/4]
		user := users[i%3]
		recs := []store.AuditRecord{
			call("agent.tool.call", tenant, user, "demo", "sales_report", []string{"ok", "ok", "error", "refused"}[i%4], []string{"", "deny", "none"}[i%3]),
			call("agent.tool.call", tenant, user, []string{"crm", "demo"}[i%2], "lookup", "ok", ""),
			{TenantID: tenant, Action: "agent.mcp_app.view", Actor: user, Fields: map[string]any{"view": fmt.Sprint("v", i)}},
		}
		for j := range recs {
			recs[j].Time = at
		}
		if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprint("run-", i), TenantID: tenant, UserID: user, CreatedAt: at}, nil, recs); err != nil {
			t.Fatal(err)
		}
		more := []store.AuditRecord{
			{Time: at.Add(time.Minute), TenantID: tenant, Action: "agent.mcp_app.open", Actor: users[(i+1)%3], Fields: map[string]any{"view": fmt.Sprint("v", i)}},
			call("agent.mcp_app.call", tenant, users[(i+2)%3], "demo", "refresh", []string{"ok", "refused"}[i%2], ""),
			{Time: at, TenantID: tenant, Action: "bot.refused", Fields: map[string]any{"reason": "permission"}},
			{Time: at, TenantID: tenant, Action: "admin.binding.add", Actor: "u-admin"},
		}
		more[1].Time = at.Add(2 * time.Minute)
		if i%7 == 0 {
			more = append(more, store.AuditRecord{Time: at, TenantID: tenant, Action: "agent.mcp_app.refused", Actor: user},
				store.AuditRecord{Time: at, TenantID: tenant, Action: "trigger.apikey.refused"})
		}
		if err := s.Append(ctx, more...); err != nil {
			t.Fatal(err)
		}
	}
	// A run saved again (its views or notes changed) is the same run.
	if err := s.SaveRun(ctx, store.Run{ID: "run-3", TenantID: "tenant-1", UserID: "u-megan", CreatedAt: start.Add(15 * time.Hour), Text: "again"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	from, to := start, start.AddDate(0, 0, 9)
	o := checkOverview(t, s, "tenant-1", from, to)
	checkOverview(t, s, "tenant-2", from, to)
	if o.Totals.Runs == 0 || o.Totals.CallsRefused == 0 || len(o.Tools) < 2 || o.People != 3 || len(o.Refusals) < 4 {
		t.Errorf("the overview counts too little to prove anything: %+v", o.Totals)
	}
	// A shorter period counts only its days.
	checkOverview(t, s, "tenant-1", start.AddDate(0, 0, 2), start.AddDate(0, 0, 4))

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, bk, path, clk)
	checkOverview(t, s, "tenant-1", from, to)

	if _, err := s.Overview(ctx, "tenant-1", to, from); err == nil {
		t.Error("Overview of a period that ends before it starts: no error")
	}
	if _, err := s.Overview(ctx, "tenant-1", from, from.AddDate(2, 0, 0)); err == nil {
		t.Error("Overview of two years: no error")
	}
	if o, err := s.Overview(ctx, "tenant-3", from, to); err != nil || o.Totals != (store.DayUsage{}) || len(o.Days) != 9 {
		t.Errorf("Overview of a tenant with nothing = %+v, %v", o.Totals, err)
	}
}
