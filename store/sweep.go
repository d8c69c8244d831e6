package store

import (
	"context"
	"errors"
	"time"
)

// SweepStats says what one sweep removed.
type SweepStats struct {
	Views, HTML int
	// Runs and Deliveries are the runs past Options.RunRetention and
	// their deliveries; Audit the audit records past
	// Options.AuditRetention.
	Runs, Deliveries, Audit int
	// APIKeys are the revoked API keys whose revocation is older than
	// Options.AuditRetention: their records of use are gone by then too.
	APIKeys int
	// Activities are the arrivals of activities whose window is over.
	Activities int
	// MCPAuthRequests are the MCP authorization requests that expired
	// more than a day ago, whatever their status.
	MCPAuthRequests int
	// Questions are the questions to people that expired more than a
	// day ago, whatever their status.
	Questions int
	// HistoryTurns are the turns of conversation history older than
	// Options.RunRetention.
	HistoryTurns int
	// UsageCounters are the counters of the usage rollup of the days
	// that ended at or before the audit retention's cutoff.
	UsageCounters int
	// RunsHeld counts the runs past their retention kept because a view
	// of theirs can still be opened.
	RunsHeld int
	Longest  time.Duration // longest write transaction
	// Transactions is how many write transactions the sweep took.
	Transactions int
}

func (st *SweepStats) add(o SweepStats) {
	st.Views += o.Views
	st.HTML += o.HTML
	st.Runs += o.Runs
	st.Deliveries += o.Deliveries
	st.Audit += o.Audit
	st.RunsHeld += o.RunsHeld
	st.APIKeys += o.APIKeys
	st.Activities += o.Activities
	st.MCPAuthRequests += o.MCPAuthRequests
	st.Questions += o.Questions
	st.HistoryTurns += o.HistoryTurns
	st.UsageCounters += o.UsageCounters
}

func (st SweepStats) removed() bool {
	return st.Views > 0 || st.HTML > 0 || st.Runs > 0 || st.Deliveries > 0 || st.Audit > 0 || st.APIKeys > 0 || st.Activities > 0 || st.MCPAuthRequests > 0 ||
		st.Questions > 0 || st.HistoryTurns > 0 || st.UsageCounters > 0
}

// sweepPlan is what a sweep deletes, the rules of retention written once
// for both backends: the views that ended at or before now (expired, or
// revoked) and the documents no view uses any more, the arrivals whose
// window ended at or before now, the runs made at or before runsUntil
// (with their deliveries) unless keepRun holds them, the turns of
// conversation history of a time at or before runsUntil too, the audit
// records of a time at or before auditUntil and the API keys revoked at or
// before it, the counters of the usage rollup of the days before
// usageDaysBefore, the MCP authorization requests that expired at or
// before authUntil and the questions that expired at or before
// questionsUntil. A zero runsUntil or auditUntil keeps those records
// forever.
type sweepPlan struct {
	now                       time.Time
	runsUntil, auditUntil     time.Time
	authUntil, questionsUntil time.Time
}

// sweepPart is one part of a sweep, which a backend deletes in batches.
type sweepPart int

const (
	sweepEndedViews  sweepPart = iota // views that ended, and documents no view uses any more
	sweepArrivals                     // arrivals whose window ended
	sweepOldRuns                      // runs past their retention, with their deliveries
	sweepOldAudit                     // audit records past their retention
	sweepRevokedKeys                  // API keys revoked as long ago
	sweepMCPAuth                      // MCP authorization requests a day after they expired
	sweepQuestions                    // questions a day after they expired
	sweepOldHistory                   // turns of conversation history past the run retention
	sweepOldUsage                     // usage counters of the days past the audit retention
)

// parts are the parts of a sweep, in the order they run.
func (p sweepPlan) parts() []sweepPart {
	parts := []sweepPart{sweepEndedViews, sweepArrivals, sweepMCPAuth, sweepQuestions}
	if !p.runsUntil.IsZero() {
		parts = append(parts, sweepOldRuns, sweepOldHistory)
	}
	if !p.auditUntil.IsZero() {
		parts = append(parts, sweepOldAudit, sweepRevokedKeys, sweepOldUsage)
	}
	return parts
}

// usageDaysBefore is the first day (as usageDay numbers it) whose usage
// counters are kept: a day's counters go with the audit records they
// count, once the whole day is past the audit retention (it ended at or
// before auditUntil), and stay while any part of it is within, so that
// an overview of the days within the retention is never changed by a
// sweep. Day d ends at dayTime(d+1), which is at or before auditUntil
// exactly when d+1 <= usageDay(auditUntil).
func (p sweepPlan) usageDaysBefore() int32 {
	return usageDay(p.auditUntil)
}

// sweepBatches runs one part of a sweep until it is done, adding what it
// did to st: tx deletes one batch of at most batch records, going on from
// after (nil at first), in a transaction of its own, and returns what it
// deleted and where the next batch starts (nil when nothing is left).
// The batches are sized to the time they take.
func sweepBatches(ctx context.Context, st *SweepStats, batch int, tx func(batch int, after []byte) (SweepStats, []byte, error)) error {
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		did, next, err := tx(batch, after)
		took := time.Since(start)
		if err != nil {
			return err
		}
		st.add(did)
		st.Transactions++
		st.Longest = max(st.Longest, took)
		if next == nil {
			return nil
		}
		after, batch = next, nextBatch(batch, took)
	}
}

// keepRun reports whether a run past its retention is kept for now: one
// of its views, ending at the times ends, can still be opened. A later
// sweep looks at it again.
func (p sweepPlan) keepRun(ends []time.Time) bool {
	for _, end := range ends {
		if end.After(p.now) {
			return true
		}
	}
	return false
}

// Sweep batch sizing: a sweep transaction should stay well under
// sweepTarget, because every write of the service waits while it runs (on
// bbolt), or for the rows it locks (on PostgreSQL). The batch shrinks when
// one takes longer than half the target and grows while they are fast.
const (
	defaultSweepBatch = 1000
	minSweepBatch     = 16
	maxSweepBatch     = 2000
	sweepTarget       = 50 * time.Millisecond
)

// nextBatch sizes the next batch of a sweep after one that took took.
func nextBatch(batch int, took time.Duration) int {
	switch {
	case took > sweepTarget/2:
		return max(batch/2, minSweepBatch)
	case took < sweepTarget/5:
		return min(batch*2, maxSweepBatch)
	}
	return batch
}

// Sweep deletes what has outlived its time, in short transactions: expired
// and revoked views and unreferenced HTML, then runs and their deliveries
// past Options.RunRetention and the turns of conversation history as old
// (by their At), then audit records past
// Options.AuditRetention (their index entries with them), revoked API
// keys as old, the usage counters of the UTC days that ended as long ago
// (the user ids in them with them; a day partly within the retention is
// kept whole), the arrivals of activities whose window is over, and the
// MCP authorization requests and the questions to people a day after
// they expired.
//
// Each part reads an index ordered by time from its start up to its
// cutoff, so it never looks at a record that is kept; each transaction
// collects a bounded batch of keys and then deletes them (never deleting
// under a moving cursor). A view's HTML is released with it, and a
// document deleted with its last view. A run past its retention is kept,
// and looked at again by the next sweep, while a view it made can still be
// opened. It stops early, with ctx's error and what it did so far, when
// ctx is cancelled. On PostgreSQL one replica sweeps at a time: a sweep
// that finds another replica's under way returns at once.
func (s *Store) Sweep(ctx context.Context) (SweepStats, error) {
	now := s.now()
	p := sweepPlan{now: now, authUntil: now.Add(-mcpAuthRequestKept), questionsUntil: now.Add(-questionKept)}
	if s.runRetention > 0 {
		p.runsUntil = now.Add(-s.runRetention)
	}
	if s.auditRetention > 0 {
		p.auditUntil = now.Add(-s.auditRetention)
	}
	return s.be.sweep(ctx, p)
}

// RunSweeper sweeps at once and then every interval until ctx is done,
// logging what each sweep removed. It returns when ctx is done or the store
// is closed; run it in its own goroutine. Every replica on PostgreSQL may
// run it: a sweep that finds another replica's under way leaves the work
// to it.
func (s *Store) RunSweeper(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Hour
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		start := time.Now()
		st, err := s.Sweep(ctx)
		attrs := []any{"views", st.Views, "html", st.HTML, "runs", st.Runs, "deliveries", st.Deliveries,
			"audit", st.Audit, "api_keys", st.APIKeys, "mcp_auth_requests", st.MCPAuthRequests, "questions", st.Questions, "history_turns", st.HistoryTurns, "usage_counters", st.UsageCounters, "runs_held", st.RunsHeld, "transactions", st.Transactions,
			"longest", st.Longest, "took", time.Since(start)}
		switch {
		case errors.Is(err, ErrClosed):
			return
		case err != nil && ctx.Err() == nil:
			s.log.Error("store sweep failed", append(attrs, "err", err)...)
		case st.removed():
			s.log.Info("store sweep", attrs...)
		default:
			s.log.Debug("store sweep", attrs...)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.stopped: // closed
			return
		case <-t.C:
		}
	}
}

// more is the next of a step that deletes from the start of its index:
// there may be more when the batch was full.
func more(full bool) []byte {
	if full {
		return []byte{}
	}
	return nil
}
