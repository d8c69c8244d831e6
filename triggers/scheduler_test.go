package triggers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/web"
	"teamsbot/triggers"
)

// Each due time runs exactly once, also across a restart on the same
// bbolt file; due times missed while the service was down run once when
// it starts again, not once each.
func TestScheduleRunsOncePerDueTimeAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.install(tenantA, convA)
	e.clock.Set(time.Date(2026, 12, 7, 7, 30, 0, 0, time.UTC)) // 08:30 in Berlin
	tr, err := e.trig.CreateTrigger(ctx, admin, triggers.Spec{Name: "Morning sales", Agent: "default",
		Cron: "0 9 * * *", TimeZone: "Europe/Berlin", Text: "/sales_report {}", Conversation: convA})
	if err != nil {
		t.Fatal(err)
	}
	list, _ := e.trig.Triggers(ctx, admin)
	if len(list) != 1 || !list[0].Next.Equal(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("next run %+v, want 09:00 Berlin (08:00 UTC)", list)
	}

	e.trig.RunDue(ctx)
	if n := len(e.conn.Messages(convA)); n != 0 {
		t.Fatalf("%d messages before the due time", n)
	}
	e.clock.Set(time.Date(2026, 12, 7, 8, 0, 20, 0, time.UTC))
	e.trig.RunDue(ctx)
	e.trig.RunDue(ctx)
	msgs := e.conn.Messages(convA)
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Raw), "the schedule “Morning sales” started it") {
		t.Fatalf("after the due time: %d messages %v", len(msgs), msgs)
	}

	// A restart at the same moment: the claim is on disk, nothing repeats.
	e.restart()
	e.trig.RunDue(ctx)
	if n := len(e.conn.Messages(convA)); n != 1 {
		t.Fatalf("%d messages after a restart, want 1", n)
	}
	got, _ := e.store.Trigger(ctx, tenantA, tr.ID)
	if got.LastResult != "ok" || got.LastRunID == "" || !got.LastDue.Equal(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("after the run: %+v", got)
	}
	if v, err := e.store.View(ctx, mustRunView(t, e, got.LastRunID)); err != nil || v.UserID != "" {
		t.Errorf("the run's view %+v %v, want one without a person", v, err)
	}

	// Down for three due times (8, 9 and 10 December); at start the
	// scheduler runs once, for the latest.
	e.stop()
	e.clock.Set(time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC))
	e.start()
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.trig.RunScheduler(sctx) }()
	e.conn.WaitMessages(t, convA, 2)
	time.Sleep(100 * time.Millisecond) // room for a wrong second catch-up run
	cancel()
	<-done
	if n := len(e.conn.Messages(convA)); n != 2 {
		t.Fatalf("%d messages after catching up, want 2", n)
	}
	got, _ = e.store.Trigger(ctx, tenantA, tr.ID)
	if !got.LastDue.Equal(time.Date(2026, 12, 10, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("LastDue %v, want 10 December 08:00 UTC", got.LastDue)
	}
	runs := e.audit(tenantA, triggers.AuditScheduledRun)
	if len(runs) != 2 || runs[1].Fields["due"] != "2026-12-10T08:00:00Z" || runs[1].Fields["previous"] != "2026-12-07T08:00:00Z" {
		t.Errorf("run audit %+v", runs)
	}
}

// mustRunView returns the one view of a run.
func mustRunView(t *testing.T, e *env, runID string) string {
	t.Helper()
	d, err := e.store.Delivery(context.Background(), runID)
	if err != nil {
		t.Fatalf("delivery of %s: %v", runID, err)
	}
	views, _, err := e.store.ActiveViews(context.Background(), tenantA, 10, "")
	if err != nil || len(views) == 0 {
		t.Fatalf("views %v %v (delivery %+v)", views, err, d)
	}
	for _, v := range views {
		if v.RunID == runID {
			return v.ID
		}
	}
	t.Fatalf("no view of run %s", runID)
	return ""
}

// Pausing stops runs; resuming starts again from the next due time, not
// with the ones missed while paused; deleting ends it. Each change is
// audited with before and after.
func TestPauseResumeDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.install(tenantA, convA)
	e.clock.Set(time.Date(2026, 12, 7, 10, 7, 0, 0, time.UTC))
	tr, err := e.trig.CreateTrigger(ctx, admin, triggers.Spec{Name: "Quarter-hourly", Agent: "default", Cron: "*/15 * * * *", Text: "/lookup_customer {\"customer\": \"Contoso\"}", Conversation: convA})
	if err != nil {
		t.Fatal(err)
	}
	if tr.TimeZone != "UTC" {
		t.Errorf("zone %q, want UTC by default", tr.TimeZone)
	}
	if err := e.trig.PauseTrigger(ctx, admin, tr.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.trig.RunDue(ctx)
	if n := len(e.conn.Messages(convA)); n != 0 {
		t.Fatalf("a paused trigger ran %d times", n)
	}
	if err := e.trig.ResumeTrigger(ctx, admin, tr.ID); err != nil {
		t.Fatal(err)
	}
	e.trig.RunDue(ctx)
	if n := len(e.conn.Messages(convA)); n != 0 {
		t.Fatalf("resuming ran the due times missed while paused (%d)", n)
	}
	e.clock.Advance(15 * time.Minute)
	e.trig.RunDue(ctx)
	if n := len(e.conn.Messages(convA)); n != 1 {
		t.Fatalf("%d runs after the next due time, want 1", n)
	}
	if err := e.trig.DeleteTrigger(ctx, admin, tr.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.trig.RunDue(ctx)
	if n := len(e.conn.Messages(convA)); n != 1 {
		t.Fatalf("a deleted trigger ran")
	}
	for _, c := range []struct {
		action                string
		beforeNil, afterNil   bool
		beforePaused, afterPs any
	}{
		{triggers.AuditTriggerCreate, true, false, nil, false},
		{triggers.AuditTriggerPause, false, false, false, true},
		{triggers.AuditTriggerResume, false, false, true, false},
		{triggers.AuditTriggerDelete, false, true, false, nil},
	} {
		recs := e.audit(tenantA, c.action)
		if len(recs) != 1 || recs[0].Actor != admin.UserID {
			t.Errorf("%s: %+v", c.action, recs)
			continue
		}
		b, _ := recs[0].Fields["before"].(map[string]any)
		a, _ := recs[0].Fields["after"].(map[string]any)
		if (b == nil) != c.beforeNil || (a == nil) != c.afterNil || b != nil && b["paused"] != c.beforePaused || a != nil && a["paused"] != c.afterPs {
			t.Errorf("%s before %v after %v", c.action, b, a)
		}
	}
}

// Every mistake in a trigger is named at once.
func TestCreateTriggerRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	_, err := e.trig.CreateTrigger(context.Background(), admin, triggers.Spec{Name: "", Agent: "ghost", Cron: "61 * * * funday", TimeZone: "Mars/Olympus", Text: "", Conversation: "19:nowhere"})
	if err == nil {
		t.Fatal("accepted")
	}
	words := web.Words(err)
	for _, want := range []string{"give it a name", `no agent "ghost"`, "schedule `61 * * * funday`: minute `61`: use 0-59; day of week `funday`: use 0-7 or sun-sat\n", `"Mars/Olympus" is not an IANA time zone`, "the text is empty", "not installed in conversation"} {
		if !strings.Contains(words, want) {
			t.Errorf("the words lack %q:\n%s", want, words)
		}
	}
	if strings.Contains(words, "triggers:") {
		t.Errorf("the words show the package prefix:\n%s", words)
	}
}

// A scheduled run into a conversation the app has left (the connector
// answers 403) pauses the trigger with the reason, reports it, and is not
// tried again.
func TestScheduleIntoRemovedConversationPauses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.install(tenantA, convA)
	e.clock.Set(time.Date(2026, 12, 7, 10, 7, 0, 0, time.UTC))
	tr, err := e.trig.CreateTrigger(ctx, admin, triggers.Spec{Name: "Hourly", Agent: "default", Cron: "0 * * * *", Text: "/sales_report {}", Conversation: convA})
	if err != nil {
		t.Fatal(err)
	}
	e.conn.Forbid(convA)
	e.clock.Advance(time.Hour)
	e.trig.RunDue(ctx)
	got, _ := e.store.Trigger(ctx, tenantA, tr.ID)
	if !got.Paused || !strings.Contains(got.PausedReason, "403") || got.LastResult != "failed" || !strings.Contains(got.LastError, "removed") {
		t.Fatalf("after a 403: %+v", got)
	}
	if n := len(e.audit(tenantA, "bot.conversation.removed")); n != 1 {
		t.Errorf("%d removal records, want 1", n)
	}
	e.clock.Advance(3 * time.Hour)
	e.trig.RunDue(ctx)
	if n := len(e.audit(tenantA, triggers.AuditScheduledRun)); n != 1 {
		t.Errorf("%d runs claimed, want 1: a paused trigger is not retried", n)
	}
	list, _ := e.trig.Triggers(ctx, admin)
	if len(list) != 1 || !list[0].Next.IsZero() {
		t.Errorf("a paused trigger has a next run: %+v", list)
	}
}
