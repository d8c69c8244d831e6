package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/internal/testenv"
	"teamsbot/mcpapps"
	"teamsbot/store"
)

// testClock is the injected clock: tests move time by hand.
type testClock = testenv.Clock

func newClock() *testClock {
	return testenv.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
}

func openAt(t testing.TB, bk backend, path string, clk *testClock) *store.Store {
	t.Helper()
	return openOpts(t, bk, path, store.Options{Now: clk.Now})
}

// openOpts opens the store at location with opts, closed at the end of t.
func openOpts(t testing.TB, bk backend, location string, opts store.Options) *store.Store {
	t.Helper()
	s, err := bk.open(context.Background(), location, opts)
	if err != nil {
		t.Fatalf("open %s store: %v", bk.name, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func openTemp(t testing.TB, bk backend, clk *testClock) (*store.Store, string) {
	t.Helper()
	path := bk.location(t)
	return openAt(t, bk, path, clk), path
}

func shaHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// sampleView is a view as the agent makes it, without its hash (the store
// fills it in).
func sampleView(id string, created time.Time, life time.Duration) store.View {
	yes := true
	return store.View{
		ID:            id,
		AgentID:       "default",
		TenantID:      "tenant-1",
		UserID:        "user-1",
		UserName:      "Ada",
		Server:        "demo",
		Tool:          "show_chart",
		ToolTitle:     "Show chart",
		ResourceURI:   "ui://demo/chart.html",
		CSP:           "default-src 'none'",
		CSPDropped:    []mcpapps.DroppedEntry{{Field: "connectDomains", Value: "http://x", Reason: "not https"}},
		Permissions:   mcpapps.Permissions{Forms: true},
		PrefersBorder: &yes,
		Arguments:     json.RawMessage(`{"q":"sales"}`),
		Result:        json.RawMessage(`{"content":[{"type":"text","text":"42"}]}`),
		CreatedAt:     created,
		ExpiresAt:     created.Add(life),
	}
}

func TestOpenCreatesPrivateFolderAndFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nested")
	path := filepath.Join(dir, "teamsbot.db")
	openAt(t, boltBackend(), path, newClock())
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{dir, 0o700}, {path, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.want {
			t.Errorf("%s: mode %v, want %v", c.path, got, c.want)
		}
	}
}

func testSaveRunRoundTrip(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	now := clk.Now()
	html := []byte("<!doctype html><p>chart</p>")
	v1 := sampleView("view-1", now, store.ViewLifetime)
	v2 := sampleView("view-2", now, store.ViewLifetime)
	v2.HTMLSHA256 = strings.ToUpper(shaHex(html)) // a given hash is checked, in any case
	run := store.Run{
		ID: "run-1", AgentID: "default", TenantID: "tenant-1", UserID: "user-1", UserName: "Ada",
		Text: "Sales are up.", Notes: []string{"tool hidden from the model: app_only"}, CreatedAt: now,
	}
	audit := []store.AuditRecord{{TenantID: "tenant-1", Action: "agent.mcp_app.view", Actor: "user-1",
		Fields: map[string]any{"tool": "show_chart", "htmlSha256": shaHex(html)}}}
	if err := s.SaveRun(ctx, run, []store.NewView{{View: v1, HTML: html}, {View: v2, HTML: html}}, audit); err != nil {
		t.Fatalf("SaveRun: %v", err)
	}

	gotRun, err := s.GetRun(ctx, "run-1")
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	wantRun := run
	wantRun.ViewIDs = []string{"view-1", "view-2"}
	if diff := cmp.Diff(wantRun, gotRun); diff != "" {
		t.Errorf("GetRun (-want +got):\n%s", diff)
	}
	for _, want := range []store.View{v1, v2} {
		got, err := s.View(ctx, want.ID)
		if err != nil {
			t.Fatalf("View(%s): %v", want.ID, err)
		}
		want.RunID = "run-1"
		want.HTMLSHA256 = shaHex(html)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("View(%s) (-want +got):\n%s", want.ID, diff)
		}
	}
	gotHTML, err := s.ViewHTML(ctx, shaHex(html))
	if err != nil || string(gotHTML) != string(html) {
		t.Errorf("ViewHTML = %q, %v; want %q", gotHTML, err, html)
	}
	recs, err := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-1"})
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	wantRecs := []store.AuditRecord{audit[0]}
	wantRecs[0].Seq, wantRecs[0].Time = 1, now
	if diff := cmp.Diff(wantRecs, recs); diff != "" {
		t.Errorf("Audit (-want +got):\n%s", diff)
	}
}

func testSaveRunRefusesBadInputAndWritesNothing(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	html := []byte("<p>x</p>")
	good := sampleView("v", clk.Now(), time.Hour)
	wrongHash := good
	wrongHash.HTMLSHA256 = shaHex([]byte("other"))
	otherRun := good
	otherRun.RunID = "run-2"
	noExpiry := good
	noExpiry.ExpiresAt = time.Time{}
	noID := good
	noID.ID = ""
	for _, c := range []struct {
		name  string
		views []store.NewView
		audit []store.AuditRecord
	}{
		{"hash does not match HTML", []store.NewView{{View: wrongHash, HTML: html}}, nil},
		{"view of another run", []store.NewView{{View: otherRun, HTML: html}}, nil},
		{"no expiry", []store.NewView{{View: noExpiry, HTML: html}}, nil},
		{"no view id", []store.NewView{{View: noID, HTML: html}}, nil},
		{"no HTML", []store.NewView{{View: good}}, nil},
		{"same view twice", []store.NewView{{View: good, HTML: html}, {View: good, HTML: html}}, nil},
		{"audit without action", []store.NewView{{View: good, HTML: html}}, []store.AuditRecord{{TenantID: "t"}}},
		{"NUL in tenant", []store.NewView{{View: good, HTML: html}}, []store.AuditRecord{{TenantID: "t\x00", Action: "a"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.SaveRun(ctx, store.Run{ID: "run-1"}, c.views, c.audit)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("SaveRun = %v, want ErrInvalid", err)
			}
			if _, err := s.GetRun(ctx, "run-1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("GetRun after refused SaveRun = %v, want ErrNotFound", err)
			}
			if _, err := s.View(ctx, "v"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("View after refused SaveRun = %v, want ErrNotFound", err)
			}
		})
	}
	if err := s.SaveRun(ctx, store.Run{}, nil, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("SaveRun without run id = %v, want ErrInvalid", err)
	}
}

func testReopenKeepsEverything(t *testing.T, bk backend) {
	clk := newClock()
	path := bk.location(t)
	ctx := context.Background()
	html := []byte("<p>kept</p>")
	ref := store.ConversationRef{Key: "tenant-1/conv-1", TenantID: "tenant-1", ConversationID: "conv-1",
		ServiceURL: "https://smba.trafficmanager.net/amer/", ChannelID: "msteams", BotID: "28:bot",
		Reference: []byte(`{"conversation":{"id":"conv-1"}}`), UpdatedAt: clk.Now(),
		Kind: "channel", TeamName: "Sales", ChannelName: "Forecasts"}

	s := openAt(t, bk, path, clk)
	if err := s.SaveRun(ctx, store.Run{ID: "run-1", TenantID: "tenant-1", Text: "hi"},
		[]store.NewView{{View: sampleView("view-1", clk.Now(), time.Hour), HTML: html}},
		[]store.AuditRecord{{TenantID: "tenant-1", Action: "agent.mcp_app.view"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutConversation(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ping after Close = %v, want ErrClosed", err)
	}
	if err := s.Append(ctx, store.AuditRecord{Action: "x"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}

	s = openAt(t, bk, path, clk)
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if r, err := s.GetRun(ctx, "run-1"); err != nil || r.Text != "hi" {
		t.Errorf("GetRun after reopen = %+v, %v", r, err)
	}
	if v, err := s.View(ctx, "view-1"); err != nil || v.HTMLSHA256 != shaHex(html) {
		t.Errorf("View after reopen = %+v, %v", v, err)
	}
	if h, err := s.ViewHTML(ctx, shaHex(html)); err != nil || string(h) != string(html) {
		t.Errorf("ViewHTML after reopen = %q, %v", h, err)
	}
	got, err := s.Conversation(ctx, ref.Key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ref, got); diff != "" {
		t.Errorf("Conversation after reopen (-want +got):\n%s", diff)
	}
	// The audit sequence goes on from where it was.
	if err := s.Append(ctx, store.AuditRecord{TenantID: "tenant-1", Action: "agent.mcp_app.call"}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Audit(ctx, store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Seq != 1 || recs[1].Seq != 2 || recs[1].Action != "agent.mcp_app.call" {
		t.Errorf("Audit after reopen = %+v, want seq 1 then seq 2 (agent.mcp_app.call)", recs)
	}
}

func testExpiredViewIsNeverReturned(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	start := clk.Now()
	if err := s.SaveRun(ctx, store.Run{ID: "run-1"},
		[]store.NewView{{View: sampleView("view-1", start, store.ViewLifetime), HTML: []byte("<p>")}}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Set(start.Add(store.ViewLifetime - time.Nanosecond))
	if _, err := s.View(ctx, "view-1"); err != nil {
		t.Fatalf("View one nanosecond before expiry: %v", err)
	}
	for _, at := range []time.Duration{store.ViewLifetime, store.ViewLifetime + time.Hour} {
		clk.Set(start.Add(at))
		v, err := s.View(ctx, "view-1")
		if !errors.Is(err, store.ErrExpired) || !errors.Is(err, store.ErrNotFound) {
			t.Errorf("View at +%s = %v, want an error that is both ErrExpired and ErrNotFound", at, err)
		}
		if v.ID != "" {
			t.Errorf("View at +%s returned a view: %+v", at, v)
		}
	}
	_, err := s.View(ctx, "no-such-view")
	if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExpired) {
		t.Errorf("View(unknown) = %v, want ErrNotFound and not ErrExpired", err)
	}
	// An id comes from a URL: a huge one is not found, and the error (which
	// callers log) does not repeat it whole.
	huge := strings.Repeat("x", 1<<20)
	for what, err := range map[string]error{
		"View":         second(s.View(ctx, huge)),
		"ViewHTML":     second(s.ViewHTML(ctx, huge)),
		"GetRun":       second(s.GetRun(ctx, huge)),
		"Conversation": second(s.Conversation(ctx, huge)),
	} {
		if !errors.Is(err, store.ErrNotFound) || len(err.Error()) > 300 {
			t.Errorf("%s(1 MiB id): not ErrNotFound, or a %d-byte error", what, len(err.Error()))
		}
	}
}

// second is the error of a (value, error) pair.
func second[T any](_ T, err error) error { return err }

func testSharedHTMLKeptUntilItsLastViewIsSwept(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	start := clk.Now()
	html := []byte("<!doctype html><p>shared</p>")
	if err := s.SaveRun(ctx, store.Run{ID: "run-1"},
		[]store.NewView{{View: sampleView("short", start, time.Hour), HTML: html}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRun(ctx, store.Run{ID: "run-2"},
		[]store.NewView{{View: sampleView("long", start, 2*time.Hour), HTML: html}}, nil); err != nil {
		t.Fatal(err)
	}

	clk.Set(start.Add(90 * time.Minute))
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Views != 1 || st.HTML != 0 {
		t.Errorf("first sweep removed %d views and %d documents, want 1 and 0", st.Views, st.HTML)
	}
	if _, err := s.View(ctx, "long"); err != nil {
		t.Errorf("View(long) after first sweep: %v", err)
	}
	if _, err := s.ViewHTML(ctx, shaHex(html)); err != nil {
		t.Errorf("shared HTML gone while a live view uses it: %v", err)
	}

	clk.Set(start.Add(3 * time.Hour))
	if st, err = s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Views != 1 || st.HTML != 1 {
		t.Errorf("second sweep removed %d views and %d documents, want 1 and 1", st.Views, st.HTML)
	}
	if _, err := s.ViewHTML(ctx, shaHex(html)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ViewHTML after its last view was swept = %v, want ErrNotFound", err)
	}
	// Runs are not views: they stay.
	if _, err := s.GetRun(ctx, "run-1"); err != nil {
		t.Errorf("GetRun after sweep: %v", err)
	}
}

func testSweepRemovesExactlyTheExpired(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	start := clk.Now()
	// 30 views, expiring one minute apart, each with its own HTML, in
	// runs of 3.
	for r := range 10 {
		var views []store.NewView
		for i := range 3 {
			n := r*3 + i
			views = append(views, store.NewView{
				View: sampleView(fmt.Sprintf("view-%02d", n), start, time.Duration(n+1)*time.Minute),
				HTML: fmt.Appendf(nil, "<p>%d</p>", n),
			})
		}
		if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("run-%d", r)}, views, nil); err != nil {
			t.Fatal(err)
		}
	}
	// view-29 is replaced by a longer-lived copy with other HTML: the
	// old expiry must not sweep it, and its old HTML must go at once.
	longer := sampleView("view-29", start, 24*time.Hour)
	if err := s.SaveRun(ctx, store.Run{ID: "run-9"}, []store.NewView{{View: longer, HTML: []byte("<p>new</p>")}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ViewHTML(ctx, shaHex([]byte("<p>29</p>"))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("HTML of a replaced view = %v, want ErrNotFound", err)
	}

	clk.Set(start.Add(12 * time.Minute)) // views 0..11 have expired (the 12th at exactly now)
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Views != 12 || st.HTML != 12 {
		t.Errorf("Sweep = %+v, want 12 views and 12 documents", st)
	}
	if st.Longest <= 0 || st.Transactions < 1 {
		t.Errorf("Sweep did not report its transactions: %+v", st)
	}
	clk.Set(start) // look at what is stored, whatever its expiry
	for n := range 30 {
		id := fmt.Sprintf("view-%02d", n)
		_, err := s.View(ctx, id)
		_, herr := s.ViewHTML(ctx, shaHex(fmt.Appendf(nil, "<p>%d</p>", n)))
		switch {
		case n < 12 && (!errors.Is(err, store.ErrNotFound) || !errors.Is(herr, store.ErrNotFound)):
			t.Errorf("%s should be swept with its HTML: view %v, html %v", id, err, herr)
		case n >= 12 && n < 29 && (err != nil || herr != nil):
			t.Errorf("%s should be kept with its HTML: view %v, html %v", id, err, herr)
		case n == 29 && err != nil:
			t.Errorf("%s (replaced, longer life) should be kept: %v", id, err)
		}
	}
	clk.Set(start.Add(12 * time.Minute))
	if st, err := s.Sweep(ctx); err != nil || st.Views != 0 || st.HTML != 0 {
		t.Errorf("second sweep = %+v, %v; want nothing removed", st, err)
	}
}

func testAuditQueries(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	t0 := clk.Now()
	tenants := []string{"tenant-a", "tenant-b", "tenant-ab"} // "tenant-a" is a prefix of another
	actions := []string{"agent.mcp_app.view", "agent.mcp_app.call", "agent.mcp_app.refused"}
	var all []store.AuditRecord
	var batch []store.AuditRecord
	for i := range 60 {
		r := store.AuditRecord{
			// Times go back and forth so that append order is not
			// time order; every fifth pair shares a time.
			Time:     t0.Add(time.Duration((i*37)%60) * time.Minute),
			TenantID: tenants[i%3],
			Action:   actions[(i/3)%3],
			Actor:    fmt.Sprintf("user-%d", i),
		}
		if i%10 == 5 {
			r.Time = all[i-1].Time
		}
		all = append(all, r)
		batch = append(batch, r)
		if len(batch) == 7 || i == 59 {
			// Some through Append, some through SaveRun.
			if i%2 == 0 {
				if err := s.Append(ctx, batch...); err != nil {
					t.Fatal(err)
				}
			} else if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("run-%d", i)}, nil, batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	for i := range all {
		all[i].Seq = uint64(i + 1)
	}
	// want is the query answered by brute force: filter, then sort by
	// (time, seq).
	want := func(q store.AuditQuery) []store.AuditRecord {
		var out []store.AuditRecord
		for _, r := range all {
			if (q.TenantID == "" || r.TenantID == q.TenantID) && (q.Action == "" || r.Action == q.Action) &&
				(q.From.IsZero() || !r.Time.Before(q.From)) && (q.To.IsZero() || r.Time.Before(q.To)) {
				out = append(out, r)
			}
		}
		less := func(a, b store.AuditRecord) bool {
			return a.Time.Before(b.Time) || a.Time.Equal(b.Time) && a.Seq < b.Seq
		}
		for i := 1; i < len(out); i++ {
			for j := i; j > 0 && less(out[j], out[j-1]); j-- {
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
		if q.Newest {
			for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
				out[i], out[j] = out[j], out[i]
			}
		}
		if q.Limit > 0 && len(out) > q.Limit {
			out = out[:q.Limit]
		}
		return out
	}
	from, to := t0.Add(10*time.Minute), t0.Add(40*time.Minute)
	for _, q := range []store.AuditQuery{
		{},
		{TenantID: "tenant-a"},
		{TenantID: "tenant-ab"},
		{Action: "agent.mcp_app.call"},
		{TenantID: "tenant-b", Action: "agent.mcp_app.refused"},
		{From: from},
		{To: to},
		{From: from, To: to},
		{TenantID: "tenant-a", From: from, To: to},
		{Action: "agent.mcp_app.view", From: from, To: to, Limit: 3},
		{TenantID: "tenant-a", Action: "agent.mcp_app.view", From: from},
		{Limit: 5},
		{Limit: 5, Newest: true},
		{TenantID: "tenant-b", To: to, Limit: 4, Newest: true},
		{TenantID: "tenant-a", Action: "agent.mcp_app.call", From: from, To: to, Newest: true},
		{TenantID: "no-such-tenant"},
		{From: to, To: from}, // empty range
	} {
		t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
			got, err := s.Audit(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want(q), got); diff != "" {
				t.Errorf("Audit (-want +got):\n%s", diff)
			}
		})
	}
}

func testConcurrentSaveRunsAllLand(t *testing.T, bk backend) {
	clk := newClock()
	s, path := openTemp(t, bk, clk)
	ctx := context.Background()
	html := []byte("<!doctype html><p>one document for all</p>")
	const n = 100
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			v := sampleView(fmt.Sprintf("view-%03d", i), clk.Now(), time.Hour)
			errs[i] = s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("run-%03d", i), TenantID: "tenant-1"},
				[]store.NewView{{View: v, HTML: html}},
				[]store.AuditRecord{{TenantID: "tenant-1", Action: "agent.mcp_app.view"}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("SaveRun %d: %v", i, err)
		}
	}
	t.Logf("%+v", s.Stats())
	// Read back from a fresh open, so that the data is known to be in the
	// file and not only in memory.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, bk, path, clk)
	for i := range n {
		if _, err := s.View(ctx, fmt.Sprintf("view-%03d", i)); err != nil {
			t.Errorf("View %d: %v", i, err)
		}
		if _, err := s.GetRun(ctx, fmt.Sprintf("run-%03d", i)); err != nil {
			t.Errorf("GetRun %d: %v", i, err)
		}
	}
	recs, err := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-1"})
	if err != nil || len(recs) != n {
		t.Errorf("Audit: %d records, %v; want %d", len(recs), err, n)
	}
	seen := map[uint64]bool{}
	for _, r := range recs {
		if seen[r.Seq] {
			t.Errorf("sequence number %d used twice", r.Seq)
		}
		seen[r.Seq] = true
	}
	// All hundred views share one document; after they expire it goes.
	clk.Set(clk.Now().Add(2 * time.Hour))
	st, err := s.Sweep(ctx)
	if err != nil || st.Views != n || st.HTML != 1 {
		t.Errorf("Sweep = %+v, %v; want %d views and 1 document", st, err, n)
	}
}

func TestSecondOpenFailsAfterTimeout(t *testing.T) {
	_, path := openTemp(t, boltBackend(), newClock())
	s2, err := store.Open(context.Background(), path, store.Options{OpenTimeout: 100 * time.Millisecond})
	if err == nil {
		s2.Close()
		t.Fatal("second Open of the same file succeeded")
	}
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("second Open = %v, want ErrLocked naming the file", err)
	}
	// A context deadline shorter than the timeout wins.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := store.Open(ctx, path, store.Options{OpenTimeout: time.Hour}); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Open with a short ctx deadline = %v, want ErrLocked", err)
	}
}

func testCancelledContextWritesNothing(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	view := store.NewView{View: sampleView("view-1", clk.Now(), time.Hour), HTML: []byte("<p>")}
	if err := s.SaveRun(ctx, store.Run{ID: "run-1"}, []store.NewView{view}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("SaveRun = %v, want context.Canceled", err)
	}
	if err := s.Append(ctx, store.AuditRecord{Action: "a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Append = %v, want context.Canceled", err)
	}
	if err := s.PutConversation(ctx, store.ConversationRef{Key: "k"}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutConversation = %v, want context.Canceled", err)
	}
	if _, err := s.View(ctx, "view-1"); !errors.Is(err, context.Canceled) {
		t.Errorf("View = %v, want context.Canceled", err)
	}
	bg := context.Background()
	if _, err := s.GetRun(bg, "run-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun after a cancelled SaveRun = %v, want ErrNotFound", err)
	}
	if recs, err := s.Audit(bg, store.AuditQuery{}); err != nil || len(recs) != 0 {
		t.Errorf("Audit after a cancelled Append = %v, %v; want nothing", recs, err)
	}
	if _, err := s.Conversation(bg, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Conversation after a cancelled put = %v, want ErrNotFound", err)
	}
}

func testConversations(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	ref := store.ConversationRef{Key: "tenant-1/19:abc@thread.v2", TenantID: "tenant-1",
		ConversationID: "19:abc@thread.v2", ServiceURL: "https://smba.trafficmanager.net/emea/",
		ChannelID: "msteams", BotID: "28:bot", Reference: []byte(`{"activityId":"1"}`)}
	if err := s.PutConversation(ctx, ref); err != nil {
		t.Fatal(err)
	}
	got, err := s.Conversation(ctx, ref.Key)
	if err != nil {
		t.Fatal(err)
	}
	ref.UpdatedAt = clk.Now() // stamped by the store
	if diff := cmp.Diff(ref, got); diff != "" {
		t.Errorf("Conversation (-want +got):\n%s", diff)
	}
	ref.ServiceURL = "https://smba.trafficmanager.net/amer/"
	if err := s.PutConversation(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Conversation(ctx, ref.Key); got.ServiceURL != ref.ServiceURL {
		t.Errorf("after replace, ServiceURL = %q, want %q", got.ServiceURL, ref.ServiceURL)
	}
	if err := s.DeleteConversation(ctx, ref.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conversation(ctx, ref.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Conversation after delete = %v, want ErrNotFound", err)
	}
	if err := s.DeleteConversation(ctx, "never-stored"); err != nil {
		t.Errorf("DeleteConversation(unknown) = %v, want nil", err)
	}
	if err := s.PutConversation(ctx, store.ConversationRef{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutConversation without key = %v, want ErrInvalid", err)
	}
}

// logRecords is a slog handler that hands each record's message and
// attributes to a channel.
type logRecords chan map[string]any

func (h logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h logRecords) WithGroup(string) slog.Handler            { return h }
func (h logRecords) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	h <- m
	return nil
}

func testRunSweeperSweepsLogsAndStops(t *testing.T, bk backend) {
	clk := newClock()
	logs := make(logRecords, 100)
	path := bk.location(t)
	s, err := bk.open(context.Background(), path, store.Options{Now: clk.Now, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	html := []byte("<p>old</p>")
	if err := s.SaveRun(context.Background(), store.Run{ID: "run-1"},
		[]store.NewView{{View: sampleView("old", clk.Now(), time.Minute), HTML: html}}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Set(clk.Now().Add(time.Hour))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunSweeper(ctx, time.Hour)
	}()
	for rec := range logs {
		if rec["msg"] == "store sweep" {
			if rec["views"] != int64(1) || rec["html"] != int64(1) {
				t.Errorf("sweep log = %v, want views=1 html=1", rec)
			}
			break
		}
	}
	cancel()
	<-done // RunSweeper returns once ctx is done
	if _, err := s.ViewHTML(context.Background(), shaHex(html)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("HTML of the swept view = %v, want ErrNotFound", err)
	}
}

// RunSweeper also returns when the store is closed, without waiting for
// its next tick: a sweeper whose ctx outlives the store does not linger.
func testRunSweeperStopsWhenStoreCloses(t *testing.T, bk backend) {
	s, _ := openTemp(t, bk, newClock())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunSweeper(context.Background(), 24*time.Hour)
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunSweeper still runs after Close")
	}
}

func testPing(t *testing.T, bk backend) {
	s, _ := openTemp(t, bk, newClock())
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestBackupIsAWorkingStore(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, boltBackend(), clk)
	ctx := context.Background()
	html := []byte("<p>backed up</p>")
	if err := s.SaveRun(ctx, store.Run{ID: "run-1"},
		[]store.NewView{{View: sampleView("view-1", clk.Now(), time.Hour), HTML: html}},
		[]store.AuditRecord{{TenantID: "tenant-1", Action: "agent.mcp_app.view"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMCPConnection(ctx, store.MCPConnection{TenantID: "tenant-1", UserID: "user-1", AgentID: "default", Server: "crm",
		Sealed: []byte("sealed"), KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMCPAuthRequest(ctx, store.MCPAuthRequest{ID: "req-1", State: "state-1", TenantID: "tenant-1", UserID: "user-1",
		AgentID: "default", Server: "crm", AuthURL: "https://as.example/authorize", ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutQuestion(ctx, store.Question{ID: "q-1", TenantID: "tenant-1", UserID: "user-1", ConversationID: "conv-1",
		ServiceURL: "https://smba.example/", Shown: []byte(`{}`), ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.AppendTurn(ctx, store.HistoryTurn{TenantID: "tenant-1", ConversationID: "conv-1", AgentID: "default", RunID: "run-1",
		Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`), Tokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Backup(ctx, f); err != nil || n == 0 {
		t.Fatalf("Backup = %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b := openAt(t, boltBackend(), path, clk)
	if _, err := b.View(ctx, "view-1"); err != nil {
		t.Errorf("View in the backup: %v", err)
	}
	if h, err := b.ViewHTML(ctx, shaHex(html)); err != nil || string(h) != string(html) {
		t.Errorf("ViewHTML in the backup = %q, %v", h, err)
	}
	if recs, err := b.Audit(ctx, store.AuditQuery{}); err != nil || len(recs) != 1 {
		t.Errorf("Audit in the backup = %v, %v; want 1 record", recs, err)
	}
	if c, err := b.MCPConnection(ctx, "tenant-1", "user-1", "default", "crm"); err != nil || string(c.Sealed) != "sealed" {
		t.Errorf("MCP connection in the backup = %+v, %v", c, err)
	}
	if uses, err := b.MCPServerUses(ctx, "tenant-1"); err != nil || len(uses) != 1 || uses[0].People != 1 {
		t.Errorf("MCP server uses in the backup = %+v, %v", uses, err)
	}
	if r, err := b.MCPAuthRequestByState(ctx, "state-1"); err != nil || r.ID != "req-1" {
		t.Errorf("MCP authorization request in the backup = %+v, %v", r, err)
	}
	if q, err := b.Question(ctx, "q-1"); err != nil || q.UserID != "user-1" {
		t.Errorf("question in the backup = %+v, %v", q, err)
	}
	if h, err := b.History(ctx, "tenant-1", "conv-1", "default", 10, 10); err != nil || len(h) != 1 || !cmp.Equal(h[0], turn) {
		t.Errorf("history in the backup = %+v, %v; want %+v", h, err, turn)
	}
	if next, err := b.AppendTurn(ctx, store.HistoryTurn{TenantID: "tenant-1", ConversationID: "conv-1", AgentID: "default", RunID: "run-2",
		Messages: json.RawMessage(`[]`)}); err != nil || next.Seq != turn.Seq+1 {
		t.Errorf("a turn after the backup's: %+v, %v; want Seq %d", next, err, turn.Seq+1)
	}
}
