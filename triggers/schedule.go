package triggers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"teamsbot/access"
	"teamsbot/bot"
	"teamsbot/cards"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// Spec is what an admin gives for a new scheduled trigger.
type Spec struct {
	Name, Agent, Cron, TimeZone, Text, Conversation string
}

// Info is a trigger with its next due time (zero when paused).
type Info struct {
	store.Trigger
	Next time.Time
}

// loadZone reads an IANA time zone name; empty is UTC. The process's
// "Local" zone is refused: it would change with the machine.
func loadZone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" || len(name) > 64 {
		return nil, invalid("time zone %q: give an IANA name such as Europe/Berlin or UTC", textclip.Clip(name, 64))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalid("time zone %q is not an IANA time zone name (such as Europe/Berlin, America/New_York or UTC)", textclip.Clip(name, 64))
	}
	return loc, nil
}

// plan is a trigger's schedule, parsed.
func plan(t store.Trigger) (*Schedule, *time.Location, error) {
	sched, err := ParseCron(t.Cron)
	if err != nil {
		return nil, nil, err
	}
	loc, err := loadZone(t.TimeZone)
	if err != nil {
		return nil, nil, err
	}
	return sched, loc, nil
}

// triggerState is a trigger as its audit records show it.
func triggerState(t store.Trigger) map[string]any {
	m := map[string]any{
		"name": t.Name, "agent": t.AgentID, "cron": t.Cron, "timeZone": t.TimeZone,
		"conversation": t.ConversationID, "text": textclip.Clip(t.Text, 1024), "paused": t.Paused,
	}
	if t.PausedReason != "" {
		m["pausedReason"] = t.PausedReason
	}
	return m
}

// CreateTrigger makes a scheduled trigger in the admin's tenant, audited
// (admin.trigger.create) in the same commit. Its first run is the first
// due time after now. Every mistake in the spec is ErrInvalid, saying
// what is wrong.
func (s *Service) CreateTrigger(ctx context.Context, admin access.Person, sp Spec) (store.Trigger, error) {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return store.Trigger{}, err
	}
	var errs []error
	name, err := checkName(sp.Name)
	errs = append(errs, err)
	errs = append(errs, s.checkAgent(sp.Agent))
	if _, err := ParseCron(sp.Cron); err != nil {
		errs = append(errs, &problem{sentinel: ErrInvalid, cause: err,
			words: fmt.Sprintf("schedule `%s`: %s", textclip.Clip(strings.TrimSpace(sp.Cron), 64), err)})
	}
	loc, err := loadZone(sp.TimeZone)
	errs = append(errs, err)
	text, err := checkText(sp.Text)
	errs = append(errs, err)
	errs = append(errs, s.checkConversation(ctx, admin.TenantID, sp.Conversation))
	if err := errors.Join(errs...); err != nil {
		return store.Trigger{}, err
	}
	now := s.now()
	t := store.Trigger{
		ID: newID(8), TenantID: admin.TenantID, Name: name, AgentID: sp.Agent, Cron: strings.Join(strings.Fields(sp.Cron), " "),
		TimeZone: loc.String(), Text: text, ConversationID: strings.TrimSpace(sp.Conversation), CreatedBy: admin.UserID,
		CreatedAt: now, LastDue: now,
	}
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditTriggerCreate, Actor: admin.UserID, Fields: map[string]any{
		"trigger": t.ID, "before": nil, "after": triggerState(t),
	}}
	if err := s.opts.Store.PutTrigger(ctx, t, rec); err != nil {
		return store.Trigger{}, fmt.Errorf("triggers: create trigger: %w", err)
	}
	s.signal()
	t.Version = 1
	return t, nil
}

// Triggers returns the admin's tenant's triggers, by name, each with its
// next due time.
func (s *Service) Triggers(ctx context.Context, admin access.Person) ([]Info, error) {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return nil, err
	}
	ts, err := s.opts.Store.Triggers(ctx, admin.TenantID)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(ts))
	for _, t := range ts {
		in := Info{Trigger: t}
		if sched, loc, err := plan(t); err == nil && !t.Paused {
			in.Next = sched.Next(t.LastDue, loc)
		}
		out = append(out, in)
	}
	return out, nil
}

// change applies an admin's change to one trigger, audited with before
// and after in the same commit.
func (s *Service) change(ctx context.Context, admin access.Person, id, action string, edit func(*store.Trigger) error) error {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return err
	}
	if id == "" || len(id) > 64 {
		return notFound(nil, "no trigger of your organisation has the id %q", textclip.Clip(id, 64))
	}
	_, err := s.opts.Store.UpdateTrigger(ctx, admin.TenantID, id, edit, func(before, after store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: action, Actor: admin.UserID, Fields: map[string]any{
			"trigger": id, "before": triggerState(before), "after": triggerState(after),
		}}}
	})
	if errors.Is(err, store.ErrNotFound) {
		return notFound(err, "no trigger of your organisation has the id %q", textclip.Clip(id, 64))
	}
	if err != nil {
		return fmt.Errorf("triggers: %s: %w", action, err)
	}
	s.signal()
	return nil
}

// PauseTrigger stops a trigger until it is resumed.
func (s *Service) PauseTrigger(ctx context.Context, admin access.Person, id string) error {
	now := s.now()
	return s.change(ctx, admin, id, AuditTriggerPause, func(t *store.Trigger) error {
		if t.Paused {
			return invalid("the trigger is paused already")
		}
		t.Paused, t.PausedReason, t.PausedBy, t.PausedAt = true, "Paused by an administrator.", admin.UserID, now
		return nil
	})
}

// ResumeTrigger runs a paused trigger again from the next due time after
// now: due times that passed while it was paused do not run. For a
// trigger paused because the app was removed from its conversation, the
// app must be installed there again first.
func (s *Service) ResumeTrigger(ctx context.Context, admin access.Person, id string) error {
	t, err := s.opts.Store.Trigger(ctx, admin.TenantID, id)
	if err == nil {
		err = s.checkConversation(ctx, admin.TenantID, t.ConversationID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return notFound(err, "no trigger of your organisation has the id %q", textclip.Clip(id, 64))
	}
	if err != nil {
		return err
	}
	now := s.now()
	return s.change(ctx, admin, id, AuditTriggerResume, func(t *store.Trigger) error {
		if !t.Paused {
			return invalid("the trigger is not paused")
		}
		t.Paused, t.PausedReason, t.PausedBy, t.PausedAt = false, "", "", time.Time{}
		t.LastDue = now
		return nil
	})
}

// DeleteTrigger deletes a trigger, audited (admin.trigger.delete) with
// what it was, in the same commit.
func (s *Service) DeleteTrigger(ctx context.Context, admin access.Person, id string) error {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return err
	}
	err := s.opts.Store.DeleteTrigger(ctx, admin.TenantID, id, func(before store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: AuditTriggerDelete, Actor: admin.UserID, Fields: map[string]any{
			"trigger": id, "before": triggerState(before), "after": nil,
		}}}
	})
	if errors.Is(err, store.ErrNotFound) {
		return notFound(err, "no trigger of your organisation has the id %q", textclip.Clip(id, 64))
	}
	if err != nil {
		return fmt.Errorf("triggers: delete trigger: %w", err)
	}
	s.signal()
	return nil
}

// Notices are the conversations the app was removed from lately, as the
// audit log recorded them, newest first: what the console's triggers
// page warns about.
func (s *Service) Notices(ctx context.Context, admin access.Person) ([]store.AuditRecord, error) {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return nil, err
	}
	return s.opts.Store.Audit(ctx, store.AuditQuery{TenantID: admin.TenantID, Action: bot.AuditConversationRemoved,
		From: s.now().Add(-noticeWindow), Limit: 10, Newest: true})
}

// errSkip stops a claim that another pass, or an admin, overtook.
var errSkip = errors.New("triggers: claim overtaken")

// RunScheduler runs the due triggers until ctx ends: at once (which runs,
// once each, the due times missed while the service was down), then
// whenever the next due time comes, a trigger changes, or Interval passes.
// It returns after ctx ends and the runs it started have finished (the
// bot's shutdown ends those that take too long).
func (s *Service) RunScheduler(ctx context.Context) {
	defer s.runs.Wait()
	for {
		next := s.pass(ctx)
		wait := s.opts.Interval
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(s.now()), 0)+10*time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// RunDue starts the run of every trigger that is due now and waits for
// them: one scheduler pass, for tests and tools that drive the clock.
func (s *Service) RunDue(ctx context.Context) {
	s.pass(ctx)
	s.runs.Wait()
}

// pass claims and starts each due trigger and returns the earliest next
// due time of the others (zero: none).
func (s *Service) pass(ctx context.Context) time.Time {
	ts, err := s.opts.Store.ActiveTriggers(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("scheduler: reading the triggers failed", "err", err)
		}
		return time.Time{}
	}
	now := s.now()
	var soonest time.Time
	for _, t := range ts {
		sched, loc, err := plan(t)
		if err != nil {
			s.log.Error("scheduler: a stored trigger does not parse", "tenant", t.TenantID, "trigger", t.ID, "err", err)
			continue
		}
		key := t.TenantID + "/" + t.ID
		s.mu.Lock()
		busy := s.inflight[key]
		s.mu.Unlock()
		due := sched.LatestDue(t.LastDue, now, loc)
		if due.IsZero() || busy {
			base := t.LastDue
			if now.After(base) {
				base = now
			}
			if n := sched.Next(base, loc); !n.IsZero() && (soonest.IsZero() || n.Before(soonest)) {
				soonest = n
			}
			continue
		}
		claimed, err := s.claim(ctx, t, due, now)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			s.log.Error("scheduler: claiming a due time failed; it is tried again on the next pass", "tenant", t.TenantID, "trigger", t.ID, "err", err)
			continue
		}
		if n := sched.Next(due, loc); !n.IsZero() && (soonest.IsZero() || n.Before(soonest)) {
			soonest = n
		}
		s.start(ctx, key, claimed)
	}
	return soonest
}

// claim moves a trigger's LastDue to due, in the store and with its audit
// record, before the run starts: once on disk, no pass and no restart
// runs that due time again. A trigger changed in between is skipped.
func (s *Service) claim(ctx context.Context, t store.Trigger, due, now time.Time) (store.Trigger, error) {
	return s.opts.Store.UpdateTrigger(ctx, t.TenantID, t.ID, func(cur *store.Trigger) error {
		if cur.Paused || !cur.LastDue.Equal(t.LastDue) {
			return errSkip
		}
		cur.LastDue, cur.LastRunAt, cur.LastResult, cur.LastError, cur.LastRunID = due, now, "running", "", ""
		return nil
	}, func(before, after store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: AuditScheduledRun, Time: now, Fields: map[string]any{
			"trigger": t.ID, "name": t.Name, "agent": t.AgentID, "conversation": t.ConversationID,
			"due": due.UTC().Format(time.RFC3339), "previous": before.LastDue.UTC().Format(time.RFC3339),
		}}}
	})
}

// start runs a claimed trigger in the background and records its outcome.
func (s *Service) start(ctx context.Context, key string, t store.Trigger) {
	s.mu.Lock()
	s.inflight[key] = true
	s.mu.Unlock()
	s.runs.Add(1)
	go func() {
		defer s.runs.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
		}()
		// A run started before shutdown finishes (the bot bounds it);
		// the scheduler's own end does not cut it short.
		rctx := context.WithoutCancel(ctx)
		res, err := s.opts.Bot.RunTriggered(rctx, bot.TriggeredRun{
			TenantID: t.TenantID, AgentID: t.AgentID, Text: t.Text, ConversationID: t.ConversationID,
			Trigger: cards.Trigger{Name: t.Name, Scheduled: true},
		})
		s.metrics.runs.WithLabelValues("schedule", runResult(res, err)).Inc()
		result, msg := "ok", ""
		switch {
		case err != nil:
			result, msg = "failed", runError(err)
			s.log.Warn("scheduled run failed", "tenant", t.TenantID, "trigger", t.ID, "conversation", t.ConversationID, "err", err)
		case res.Failed:
			result, msg = "failed", "the agent could not answer; the card gives a reference for the logs"
		}
		wctx, cancel := context.WithTimeout(rctx, 10*time.Second)
		defer cancel()
		_, uerr := s.opts.Store.UpdateTrigger(wctx, t.TenantID, t.ID, func(cur *store.Trigger) error {
			if !cur.LastDue.Equal(t.LastDue) {
				return errSkip // a later run has claimed it since
			}
			cur.LastRunID, cur.LastResult, cur.LastError = res.RunID, result, msg
			return nil
		}, nil)
		if uerr != nil && !errors.Is(uerr, errSkip) && !errors.Is(uerr, store.ErrNotFound) {
			s.log.Warn("scheduled run done, its outcome not recorded", "tenant", t.TenantID, "trigger", t.ID, "err", uerr)
		}
	}()
}

// runResult is a run's result for the metrics.
func runResult(res bot.TriggeredResult, err error) string {
	switch {
	case errors.Is(err, bot.ErrConversationGone):
		return "removed"
	case err != nil:
		return "error"
	case res.Failed:
		return "failed"
	}
	return "ok"
}

// runError is a failed run in words for the console; the log has the
// cause.
func runError(err error) string {
	switch {
	case errors.Is(err, bot.ErrConversationGone):
		return "the app was removed from the conversation; the trigger is paused"
	case errors.Is(err, bot.ErrNoConversation):
		return "the app is not installed in the conversation"
	case errors.Is(err, bot.ErrClosed):
		return "the service was shutting down"
	}
	return "the answer could not be posted; see the service's log"
}
