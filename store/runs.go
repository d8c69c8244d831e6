package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"teamsbot/mcpapps"
)

// Run is one agent run and its notes.
type Run struct {
	ID       string `json:"id"`
	AgentID  string `json:"agentId"`
	TenantID string `json:"tenantId"`
	UserID   string `json:"userId,omitempty"`
	UserName string `json:"userName,omitempty"`
	Text     string `json:"text"` // the answer text
	// Notes are the run notes as the person read them.
	Notes []string `json:"notes,omitempty"`
	// Problems are what went wrong in the run, each under the reference
	// the person was shown, with the detail that only operators see.
	Problems  []RunProblem `json:"problems,omitempty"`
	ViewIDs   []string     `json:"viewIds,omitempty"`
	CreatedAt time.Time    `json:"createdAt"`
}

// RunProblem is something that went wrong in a run. The person reads Said
// and Ref in the answer; Detail (an error's text: a path, an exec error, a
// server's answer) is for operators, who find it by Ref here and in the
// log.
type RunProblem struct {
	Ref    string `json:"ref"`
	Said   string `json:"said"`
	Detail string `json:"detail"`
}

// NewView is a view with its HTML, as written by SaveRun.
type NewView struct {
	View View
	HTML []byte
}

// SaveRun writes a run, its views (HTML once per SHA-256) and its audit
// records in one commit. Concurrent calls share commits.
//
// Each view needs an ID, a non-empty HTML and an ExpiresAt. Its
// HTMLSHA256 is checked against the HTML (and filled in when empty); its
// RunID and TenantID default to the run's, and its ID is added to
// run.ViewIDs if missing. Tenant ids must be valid UTF-8 without NUL bytes.
// A view whose ID is already stored is replaced, unless it was revoked
// (ErrRevoked: saving it again must not bring it back). A run saved again
// keeps the view ids it had, so that its retention still sees every view
// it made. Audit records are stamped as by Append. An invalid argument
// returns ErrInvalid and writes nothing; SaveRun returns only once the
// commit is on disk.
func (s *Store) SaveRun(ctx context.Context, run Run, views []NewView, audit []AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op, err := s.prepareRun(run, views, audit)
	if err != nil {
		return err
	}
	if err := s.write(ctx, false, op.apply); err != nil {
		return fmt.Errorf("store: save run %s: %w", run.ID, err)
	}
	return nil
}

// SaveRunWithTurn is SaveRun and AppendTurn of the run's turn of its
// conversation, in one commit: a run is kept with its turn or not at all,
// and the turn costs no commit of its own, which every run of a
// conversation would otherwise wait for after its save. The turn is
// checked as AppendTurn checks it (ErrInvalid, and nothing is written);
// it returns the turn as stored, its Seq set.
func (s *Store) SaveRunWithTurn(ctx context.Context, run Run, views []NewView, audit []AuditRecord, turn HistoryTurn) (HistoryTurn, error) {
	if err := ctx.Err(); err != nil {
		return HistoryTurn{}, err
	}
	op, err := s.prepareRun(run, views, audit)
	if err != nil {
		return HistoryTurn{}, err
	}
	turn, enc, err := s.prepareTurn(turn)
	if err != nil {
		return HistoryTurn{}, err
	}
	var seq uint64
	err = s.write(ctx, false, func(w writer) error {
		seq = 0
		if err := op.apply(w); err != nil {
			return err
		}
		return w.appendTurn(enc, func(n uint64) { seq = n })
	})
	if err != nil {
		return HistoryTurn{}, fmt.Errorf("store: save run %s with its %s: %w", run.ID, turn.name(), err)
	}
	turn.Seq = seq
	return turn, nil
}

// preparedRun is a SaveRun checked and encoded outside the transaction.
type preparedRun struct {
	run   encoded[Run]
	views []preparedView
	ids   []string // the views'
	audit []preparedAudit
}

type preparedView struct {
	view encoded[View]
	html []byte
}

func (s *Store) prepareRun(run Run, views []NewView, audit []AuditRecord) (*preparedRun, error) {
	if err := checkID("run", run.ID); err != nil {
		return nil, err
	}
	// Tenant ids are parts of index keys: no NUL, and valid UTF-8 so
	// that JSON keeps them as the keys have them.
	if err := checkText("run tenant", run.TenantID, maxIDLen); err != nil {
		return nil, fmt.Errorf("run %s: %w", run.ID, err)
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = s.now()
	}
	op := &preparedRun{views: make([]preparedView, 0, len(views)), ids: make([]string, 0, len(views))}
	for _, nv := range views {
		v := nv.View
		if err := checkID("view", v.ID); err != nil {
			return nil, err
		}
		if slices.Contains(op.ids, v.ID) {
			return nil, invalid("view %s given twice", v.ID)
		}
		if len(nv.HTML) == 0 {
			return nil, invalid("view %s: no HTML", v.ID)
		}
		if v.ExpiresAt.IsZero() {
			return nil, invalid("view %s: no expiry", v.ID)
		}
		sha := mcpapps.HTMLSHA256(nv.HTML)
		if v.HTMLSHA256 != "" && !strings.EqualFold(v.HTMLSHA256, sha) {
			return nil, invalid("view %s: HTML SHA-256 is %s, the view says %s", v.ID, sha, v.HTMLSHA256)
		}
		v.HTMLSHA256 = sha
		switch v.RunID {
		case "":
			v.RunID = run.ID
		case run.ID:
		default:
			return nil, invalid("view %s belongs to run %s, not %s", v.ID, v.RunID, run.ID)
		}
		if v.TenantID == "" {
			v.TenantID = run.TenantID
		} else if err := checkText("view tenant", v.TenantID, maxIDLen); err != nil {
			return nil, fmt.Errorf("view %s: %w", v.ID, err)
		}
		if v.Revoked() || v.RevokedBy != "" {
			return nil, invalid("view %s: a new view cannot be revoked already", v.ID)
		}
		if v.CreatedAt.IsZero() {
			v.CreatedAt = run.CreatedAt
		}
		if !slices.Contains(run.ViewIDs, v.ID) {
			run.ViewIDs = append(run.ViewIDs, v.ID)
		}
		enc, err := encode(v)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", v.ID, err)
		}
		op.views = append(op.views, preparedView{view: enc, html: nv.HTML})
		op.ids = append(op.ids, v.ID)
	}
	var err error
	if op.run, err = encode(run); err != nil {
		return nil, fmt.Errorf("run %s: %w", run.ID, err)
	}
	if op.audit, err = s.prepareAudit(audit); err != nil {
		return nil, err
	}
	return op, nil
}

// apply writes a prepared run: a stored view revoked is refused, and a
// run stored already keeps its view ids, its record then encoded here,
// inside the transaction.
func (op *preparedRun) apply(w writer) error {
	stored, err := w.views(op.ids...)
	if err != nil {
		return err
	}
	var old map[string]*View
	for i, v := range stored {
		if v.Revoked() {
			return fmt.Errorf("view %s: %w", v.ID, ErrRevoked)
		}
		if old == nil {
			old = make(map[string]*View, len(stored))
		}
		old[v.ID] = &stored[i]
	}
	run, prev := op.run, (*Run)(nil)
	switch r, err := w.run(run.rec.ID); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		prev = &r
		if ids := mergeIDs(r.ViewIDs, run.rec.ViewIDs); len(ids) > len(run.rec.ViewIDs) {
			again := run.rec
			again.ViewIDs = ids
			if run, err = encode(again); err != nil {
				return fmt.Errorf("run %s: %w", again.ID, err)
			}
		}
	}
	for _, v := range op.views {
		if err := w.putView(v.view, v.html, old[v.view.rec.ID]); err != nil {
			return err
		}
	}
	if err := w.putRun(run, prev); err != nil {
		return err
	}
	if prev == nil {
		// A run counts once in the usage rollup: when it is first saved.
		if err := w.addUsage(mergeUsage(keyableUsage(usageOfRun(run.rec)))); err != nil {
			return err
		}
	}
	return w.appendAudit(op.audit)
}

// mergeIDs returns old followed by the ids of add that old lacks.
func mergeIDs(old, add []string) []string {
	out := slices.Clone(old)
	for _, id := range add {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// GetRun returns a run.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	return get(ctx, s, "run", id, reader.run)
}

// RecentRuns returns up to limit runs of tenant, newest first (by
// CreatedAt). A limit of zero or less means DefaultPageSize; more than
// MaxPageSize means MaxPageSize. It reads only the tenant's runs.
func (s *Store) RecentRuns(ctx context.Context, tenant string, limit int) ([]Run, error) {
	return list(ctx, s, "recent runs", tenant, func(r reader) ([]Run, error) { return r.recentRuns(tenant, pageLimit(limit)) })
}
