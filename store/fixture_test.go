package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"teamsbot/internal/pgtest"
	"teamsbot/store"
)

// The fixtures in testdata/fixtures were written by the store of bbolt
// schema version 6 and PostgreSQL schema version 1, before the store kept
// its rules apart from its storage (see fixture_gen_test.go, run with
// -tags fixturegen): a bbolt file, a pg_dump of the database holding the
// same records, and what that program read back from them (expected.json).
// The tests here open them with today's program, which migrates them, and
// read everything back: whatever a migration or a new storage layout does,
// the records people kept are still there, the same to the byte.
const (
	fixtureDir      = "testdata/fixtures"
	fixtureBolt     = "bbolt-v6.db"
	fixturePostgres = "postgres-v1.sql"
	fixtureExpected = "expected.json"
)

// fixtureDump is everything a store answers about the fixture's records,
// read through the exported API alone at the dump's clock. The keys of
// its maps are the ids, tenants and filters the reads were made with.
type fixtureDump struct {
	// Clock is the time of every read.
	Clock time.Time
	// Tenants are the tenants listed; the audit log also holds records of
	// none.
	Tenants []string

	Runs        map[string]store.Run
	RecentRuns  map[string][]string // tenant: run ids, newest first
	Views       map[string]fixtureView
	ActiveViews map[string][]string // tenant: view ids over every page of 2
	HTML        map[string][]byte   // SHA-256: the document (base64 in JSON: it need not be UTF-8)

	Audit        []store.AuditRecord // Audit with no filter, oldest first
	AuditNewest  []uint64            // Audit, newest first, limit 5: seqs
	AuditByQuery map[string][]uint64 // an AuditQuery's name: seqs
	AuditPages   map[string][]uint64 // a filter's name: seqs over every page of 3
	AuditExports map[string][]uint64 // a filter's name: seqs of ExportAudit

	Conversations map[string][]store.ConversationRef // tenant: its references
	Conversation  map[string]fixtureConversation     // key: Conversation(key)
	Deliveries    map[string]fixtureDelivery         // run id: Delivery(run id)

	Bindings    map[string][]store.Binding // tenant: every binding
	BindingsFor map[string][]store.Binding // a lookup's name: its bindings
	Settings    map[string]store.TenantSettings
	Policies    map[string]fixturePolicy

	APIKeys        map[string][]store.APIKey // tenant: its keys
	APIKey         map[string]store.APIKey   // id: APIKey(id)
	Triggers       map[string][]store.Trigger
	ActiveTriggers []store.Trigger

	Seen map[string]bool // activity key: Seen(key)

	// Sweep is what a sweep 200 days after the clock removed, with the
	// audit log kept 90 days.
	Sweep fixtureSweep
}

// fixtureView is what View and ViewTenant answer for one id.
type fixtureView struct {
	View   *store.View `json:",omitempty"`
	Err    string      `json:",omitempty"` // "expired", "revoked" or "not found"
	Tenant string
}

type fixtureConversation struct {
	Ref      *store.ConversationRef `json:",omitempty"`
	NotFound bool                   `json:",omitempty"`
}

type fixtureDelivery struct {
	Delivery *store.Delivery `json:",omitempty"`
	NotFound bool            `json:",omitempty"`
}

type fixturePolicy struct {
	Set      *store.PolicySet `json:",omitempty"`
	NotFound bool             `json:",omitempty"`
}

// fixtureSweep is SweepStats without its timings.
type fixtureSweep struct {
	Views, HTML, Runs, Deliveries, Audit, APIKeys, Activities, RunsHeld int
}

// fixtureTenants are the fixture's tenants: one a prefix of another, and
// ids that are not ASCII.
var fixtureTenants = []string{"tenant-a", "tenant-ab", "Zürich-東京-🚀", "tenant-β"}

// fixtureAuditQueries are the AuditQuery reads of the dump.
func fixtureAuditQueries(t0 time.Time) map[string]store.AuditQuery {
	return map[string]store.AuditQuery{
		"tenant-a":                 {TenantID: "tenant-a"},
		"tenant-a newest 4":        {TenantID: "tenant-a", Newest: true, Limit: 4},
		"agent.mcp_app.call":       {Action: "agent.mcp_app.call"},
		"Zürich bot.feedback":      {TenantID: "Zürich-東京-🚀", Action: "bot.feedback"},
		"first 40 minutes":         {From: t0, To: t0.Add(40 * time.Minute)},
		"tenant-ab from 30 min on": {TenantID: "tenant-ab", From: t0.Add(30 * time.Minute)},
		"no tenant":                {Action: "bot.refused"},
	}
}

// fixtureAuditFilters are the AuditPage and ExportAudit reads of the dump.
func fixtureAuditFilters(t0 time.Time) map[string]store.AuditFilter {
	return map[string]store.AuditFilter{
		"tenant-a":                    {TenantID: "tenant-a"},
		"tenant-ab":                   {TenantID: "tenant-ab"},
		"Zürich":                      {TenantID: "Zürich-東京-🚀"},
		"tenant-a agent.mcp_app.call": {TenantID: "tenant-a", Action: "agent.mcp_app.call"},
		"tenant-a actor ada":          {TenantID: "tenant-a", Actor: "ada-oid"},
		"tenant-a actor Łukasz":       {TenantID: "tenant-a", Actor: "Łukasz-oid"},
		"tenant-a tool show_chart":    {TenantID: "tenant-a", Tool: "show_chart"},
		"tenant-a result refused":     {TenantID: "tenant-a", Result: "refused"},
		"tenant-a ada ok":             {TenantID: "tenant-a", Actor: "ada-oid", Result: "ok"},
		"tenant-a call ada error":     {TenantID: "tenant-a", Action: "agent.tool.call", Actor: "ada-oid", Result: "error"},
		"tenant-a tool 42":            {TenantID: "tenant-a", Tool: "42"},
		"tenant-a 20 to 60 minutes":   {TenantID: "tenant-a", From: t0.Add(20 * time.Minute), To: t0.Add(60 * time.Minute)},
		"Zürich tool run_report":      {TenantID: "Zürich-東京-🚀", Tool: "run_report"},
	}
}

// fixtureLookups are the BindingsFor reads of the dump.
var fixtureLookups = map[string]struct {
	tenant, agent string
	subjects      []string
}{
	"ada on sales":       {"tenant-a", "sales", []string{"ada-oid", "group-finance"}},
	"ada on every agent": {"tenant-a", store.AllAgents, []string{"ada-oid", "group-finance"}},
	"Łukasz on default":  {"Zürich-東京-🚀", "default", []string{"Łukasz-oid", "グループ"}},
	"nobody":             {"tenant-ab", "sales", []string{"nobody"}},
}

// dumpFixture reads, at the clock's time, everything the dump holds: the
// ids come from want (what the generator stored), so that a record lost
// in a migration reads as missing rather than going unnoticed.
func dumpFixture(t *testing.T, s *store.Store, want *fixtureDump) *fixtureDump {
	t.Helper()
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	d := &fixtureDump{
		Clock: want.Clock, Tenants: want.Tenants,
		Runs: map[string]store.Run{}, RecentRuns: map[string][]string{}, Views: map[string]fixtureView{},
		ActiveViews: map[string][]string{}, HTML: map[string][]byte{},
		AuditByQuery: map[string][]uint64{}, AuditPages: map[string][]uint64{}, AuditExports: map[string][]uint64{},
		Conversations: map[string][]store.ConversationRef{}, Conversation: map[string]fixtureConversation{},
		Deliveries: map[string]fixtureDelivery{}, Bindings: map[string][]store.Binding{}, BindingsFor: map[string][]store.Binding{},
		Settings: map[string]store.TenantSettings{}, Policies: map[string]fixturePolicy{},
		APIKeys: map[string][]store.APIKey{}, APIKey: map[string]store.APIKey{}, Triggers: map[string][]store.Trigger{},
		Seen: map[string]bool{},
	}
	for id := range want.Runs {
		r, err := s.GetRun(ctx, id)
		must("GetRun "+id, err)
		d.Runs[id] = r
	}
	for id := range want.Views {
		var fv fixtureView
		v, err := s.View(ctx, id)
		switch {
		case errors.Is(err, store.ErrRevoked):
			fv.Err = "revoked"
		case errors.Is(err, store.ErrExpired):
			fv.Err = "expired"
		case errors.Is(err, store.ErrNotFound):
			fv.Err = "not found"
		case err != nil:
			t.Fatalf("View %s: %v", id, err)
		default:
			fv.View = &v
		}
		tenant, err := s.ViewTenant(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ViewTenant %s: %v", id, err)
		}
		fv.Tenant = tenant
		d.Views[id] = fv
	}
	for sha := range want.HTML {
		html, err := s.ViewHTML(ctx, sha)
		must("ViewHTML "+sha, err)
		d.HTML[sha] = html
	}
	for _, tenant := range want.Tenants {
		runs, err := s.RecentRuns(ctx, tenant, 0)
		must("RecentRuns", err)
		d.RecentRuns[tenant] = []string{}
		for _, r := range runs {
			d.RecentRuns[tenant] = append(d.RecentRuns[tenant], r.ID)
		}
		d.ActiveViews[tenant] = []string{}
		for cursor, pages := "", 0; ; pages++ {
			if pages > 100 {
				t.Fatal("ActiveViews does not end")
			}
			views, next, err := s.ActiveViews(ctx, tenant, 2, cursor)
			must("ActiveViews", err)
			for _, v := range views {
				d.ActiveViews[tenant] = append(d.ActiveViews[tenant], v.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		convs, err := s.Conversations(ctx, tenant)
		must("Conversations", err)
		d.Conversations[tenant] = orEmpty(convs)
		bindings, err := s.Bindings(ctx, tenant, "")
		must("Bindings", err)
		d.Bindings[tenant] = orEmpty(bindings)
		ts, err := s.TenantSettings(ctx, tenant)
		must("TenantSettings", err)
		d.Settings[tenant] = ts
		p, err := s.PolicySet(ctx, tenant)
		switch {
		case errors.Is(err, store.ErrNotFound):
			d.Policies[tenant] = fixturePolicy{NotFound: true}
		case err != nil:
			t.Fatalf("PolicySet %s: %v", tenant, err)
		default:
			d.Policies[tenant] = fixturePolicy{Set: &p}
		}
		keys, err := s.APIKeys(ctx, tenant)
		must("APIKeys", err)
		d.APIKeys[tenant] = orEmpty(keys)
		trs, err := s.Triggers(ctx, tenant)
		must("Triggers", err)
		d.Triggers[tenant] = orEmpty(trs)
	}
	recs, err := s.Audit(ctx, store.AuditQuery{})
	must("Audit", err)
	d.Audit = recs
	newest, err := s.Audit(ctx, store.AuditQuery{Newest: true, Limit: 5})
	must("Audit newest", err)
	d.AuditNewest = seqs(newest)
	for name, q := range fixtureAuditQueries(want.Clock.Add(-2 * time.Hour)) {
		recs, err := s.Audit(ctx, q)
		must("Audit "+name, err)
		d.AuditByQuery[name] = seqs(recs)
	}
	for name, q := range fixtureAuditFilters(want.Clock.Add(-2 * time.Hour)) {
		var page []store.AuditRecord
		for cursor, pages := "", 0; ; pages++ {
			if pages > 1000 {
				t.Fatal("AuditPage does not end")
			}
			recs, next, err := s.AuditPage(ctx, q, cursor, 3)
			must("AuditPage "+name, err)
			page = append(page, recs...)
			if next == "" {
				break
			}
			cursor = next
		}
		d.AuditPages[name] = seqs(page)
		var exported []store.AuditRecord
		must("ExportAudit "+name, s.ExportAudit(ctx, q, func(r store.AuditRecord) error {
			exported = append(exported, r)
			return nil
		}))
		d.AuditExports[name] = seqs(exported)
	}
	for key := range want.Conversation {
		ref, err := s.Conversation(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			d.Conversation[key] = fixtureConversation{NotFound: true}
		case err != nil:
			t.Fatalf("Conversation %q: %v", key, err)
		default:
			d.Conversation[key] = fixtureConversation{Ref: &ref}
		}
	}
	for id := range want.Deliveries {
		del, err := s.Delivery(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			d.Deliveries[id] = fixtureDelivery{NotFound: true}
		case err != nil:
			t.Fatalf("Delivery %s: %v", id, err)
		default:
			d.Deliveries[id] = fixtureDelivery{Delivery: &del}
		}
	}
	for name, l := range fixtureLookups {
		bs, err := s.BindingsFor(ctx, l.tenant, l.agent, l.subjects)
		must("BindingsFor "+name, err)
		d.BindingsFor[name] = orEmpty(bs)
	}
	for id := range want.APIKey {
		k, err := s.APIKey(ctx, id)
		must("APIKey "+id, err)
		d.APIKey[id] = k
	}
	active, err := s.ActiveTriggers(ctx)
	must("ActiveTriggers", err)
	slices.SortFunc(active, func(a, b store.Trigger) int { return strings.Compare(a.TenantID+"\x00"+a.ID, b.TenantID+"\x00"+b.ID) })
	d.ActiveTriggers = active
	for key := range want.Seen {
		seen, err := s.Seen(ctx, key)
		must("Seen", err)
		d.Seen[key] = seen
	}
	return d
}

func seqs(recs []store.AuditRecord) []uint64 {
	out := []uint64{}
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func orEmpty[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// sweepFixture sweeps s 200 days after the dump's clock and returns what
// it removed.
func sweepFixture(t *testing.T, s *store.Store) fixtureSweep {
	t.Helper()
	st, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return fixtureSweep{Views: st.Views, HTML: st.HTML, Runs: st.Runs, Deliveries: st.Deliveries, Audit: st.Audit,
		APIKeys: st.APIKeys, Activities: st.Activities, RunsHeld: st.RunsHeld}
}

// fixtureOptions are the options of every store opened on the fixture:
// its clock, and the default retentions.
func fixtureOptions(now *time.Time) store.Options {
	return store.Options{Now: func() time.Time { return *now }}
}

func readExpected(t *testing.T) *fixtureDump {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, fixtureExpected))
	if err != nil {
		t.Fatal(err)
	}
	var want fixtureDump
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	return &want
}

// compactRaw compares JSON kept as it was given (a view's arguments and
// result) without its white space, which the expected file's indentation
// adds and the store, storing it inside a record, never keeps.
var compactRaw = cmp.Comparer(func(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
})

// checkFixture reads the fixture back from s, compares it with what the
// generator read, then sweeps it 200 days later and compares again.
func checkFixture(t *testing.T, s *store.Store, now *time.Time, want *fixtureDump) {
	// The migration counted the records stored before the usage rollup
	// as new ones are counted.
	first := want.Clock
	for _, r := range want.Audit {
		if r.Time.Before(first) {
			first = r.Time
		}
	}
	from := first.UTC().Truncate(24 * time.Hour)
	to := want.Clock.UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	for _, tenant := range want.Tenants {
		checkOverview(t, s, tenant, from, to)
	}
	t.Helper()
	got := dumpFixture(t, s, want)
	got.Sweep = want.Sweep // compared below, after the sweep
	if diff := cmp.Diff(want, got, compactRaw); diff != "" {
		t.Errorf("the fixture reads back otherwise (-generator +now):\n%s", diff)
	}
	*now = want.Clock.Add(200 * 24 * time.Hour)
	if diff := cmp.Diff(want.Sweep, sweepFixture(t, s)); diff != "" {
		t.Errorf("a sweep of the fixture removes otherwise (-generator +now):\n%s", diff)
	}
	checkNewRecords(t, s, *now)
}

// checkNewRecords keeps and reads back, in a store migrated from the
// fixture, the records that came after it: MCP connections and
// authorization requests, questions to people, turns of conversation
// history, and sweeps the requests, the questions and the turns.
func checkNewRecords(t *testing.T, s *store.Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	c := store.MCPConnection{TenantID: "Zürich-東京-🚀", UserID: "Łukasz-oid", AgentID: "default", Server: "crm",
		Sealed: []byte("\x00sealed"), KeyID: "k1", ConnectedAt: now}
	if err := s.PutMCPConnection(ctx, c, store.AuditRecord{Action: "mcp.connect"}); err != nil {
		t.Fatalf("PutMCPConnection on the migrated fixture: %v", err)
	}
	got, err := s.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: c.TenantID})
	if err != nil || len(got) != 1 || !cmp.Equal(got[0], c) {
		t.Errorf("MCPConnections on the migrated fixture: %+v %v", got, err)
	}
	r := store.MCPAuthRequest{ID: "req-1", State: "state-1", TenantID: c.TenantID, UserID: c.UserID, AgentID: "default", Server: "wiki",
		AuthURL: "https://as.example/authorize", CreatedAt: now.Add(-50 * time.Hour), ExpiresAt: now.Add(-49 * time.Hour)}
	if err := s.PutMCPAuthRequest(ctx, r); err != nil {
		t.Fatalf("PutMCPAuthRequest on the migrated fixture: %v", err)
	}
	if got, err := s.MCPAuthRequestByState(ctx, "state-1"); err != nil || got.ID != "req-1" {
		t.Errorf("MCPAuthRequestByState on the migrated fixture: %+v %v", got, err)
	}
	q := store.Question{ID: "q-1", TenantID: c.TenantID, UserID: c.UserID, ConversationID: "a:1Łukasz", ServiceURL: "https://smba.example/",
		Shown: []byte(`{"message":"Grüß Gott?"}`), CreatedAt: now.Add(-50 * time.Hour), ExpiresAt: now.Add(-49 * time.Hour)}
	if err := s.PutQuestion(ctx, q); err != nil {
		t.Fatalf("PutQuestion on the migrated fixture: %v", err)
	}
	if got, err := s.Question(ctx, "q-1"); err != nil || !bytes.Equal(got.Shown, q.Shown) {
		t.Errorf("Question on the migrated fixture: %+v %v", got, err)
	}
	// Turns of conversation history: two of a channel's thread, one
	// past the run retention (30 days by default), which the sweep
	// deletes; then the channel's history cleared.
	conv := "19:fixture@thread.tacv2;messageid=1"
	for _, at := range []time.Time{now.Add(-31 * 24 * time.Hour), now.Add(-time.Hour)} {
		if _, err := s.AppendTurn(ctx, store.HistoryTurn{TenantID: c.TenantID, ConversationID: conv, AgentID: "default", RunID: "run-" + at.Format(time.RFC3339),
			UserID: c.UserID, At: at, Messages: json.RawMessage(`[{"role":"user","content":"Grüß Gott"}]`), Tokens: 7}); err != nil {
			t.Fatalf("AppendTurn on the migrated fixture: %v", err)
		}
	}
	if got, err := s.History(ctx, c.TenantID, conv, "default", 10, 100); err != nil || len(got) != 2 || got[0].Seq >= got[1].Seq {
		t.Errorf("History on the migrated fixture: %+v %v", got, err)
	}
	if st, err := s.Sweep(ctx); err != nil || st.MCPAuthRequests != 1 || st.Questions != 1 || st.HistoryTurns != 1 {
		t.Errorf("a sweep of the migrated fixture: %+v %v, want the expired request, the expired question and the old turn", st, err)
	}
	if n, err := s.ClearHistory(ctx, c.TenantID, "19:fixture@thread.tacv2"); err != nil || n != 1 {
		t.Errorf("ClearHistory on the migrated fixture = %d, %v; want the turn the sweep kept", n, err)
	}
}

// The bbolt file the earlier program wrote opens, and reads back as it did.
func TestFixtureBolt(t *testing.T) {
	want := readExpected(t)
	src, err := os.ReadFile(filepath.Join(fixtureDir, fixtureBolt))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	now := want.Clock
	s := openOpts(t, boltBackend(), path, fixtureOptions(&now))
	checkFixture(t, s, &now, want)
}

// The database the earlier program wrote, restored from its dump, opens
// (and migrates), and reads back as it did.
func TestFixturePostgres(t *testing.T) {
	want := readExpected(t)
	url := pgtest.Database(t)
	restoreDump(t, url, filepath.Join(fixtureDir, fixturePostgres))
	now := want.Clock
	s := openOpts(t, postgresBackend(), url, fixtureOptions(&now))
	checkFixture(t, s, &now, want)
}

// restoreDump replays a plain SQL dump into the database at url, as psql
// would (the generator leaves out psql's own commands).
func restoreDump(t testing.TB, url, path string) {
	t.Helper()
	script, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Without arguments pgx sends the script as one simple query, which
	// may hold many statements.
	if _, err := conn.Exec(ctx, string(script)); err != nil {
		t.Fatalf("restore %s: %v", path, err)
	}
}
