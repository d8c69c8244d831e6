package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// maxAuditName bounds tenant ids and actions, which are index key parts.
const maxAuditName = 256

// AuditRecord is one entry of the append-only audit log.
type AuditRecord struct {
	Seq      uint64         `json:"seq"` // set by the store
	Time     time.Time      `json:"time"`
	TenantID string         `json:"tenantId"`
	Action   string         `json:"action"` // e.g. agent.mcp_app.view
	Actor    string         `json:"actor,omitempty"`
	Fields   map[string]any `json:"fields,omitempty"`
}

// AuditQuery selects audit records; zero fields match everything.
type AuditQuery struct {
	TenantID string
	Action   string
	From, To time.Time // [From, To)
	// Limit caps how many records come back; zero or less means all.
	Limit int
	// Newest returns the records newest first, so that with Limit the
	// most recent ones come back; by default the oldest come first.
	Newest bool
}

// preparedAudit is one record checked and encoded outside the
// transaction; its sequence number is drawn inside it. Beside the JSON it
// carries what AuditFilter filters on, as the JSON reads back, which
// PostgreSQL keeps in columns of their own.
type preparedAudit struct {
	at     time.Time
	tenant string
	action string
	match  auditMatch
	value  []byte
	// usage are the counters of the usage rollup the record adds to
	// (usageOfAudit), added in the same commit.
	usage []usageCount
}

// prepareAudit checks and encodes records. A record without a time gets
// the store's clock. The action is required; an empty tenant is allowed
// for events that belong to no tenant.
func (s *Store) prepareAudit(recs []AuditRecord) ([]preparedAudit, error) {
	out := make([]preparedAudit, 0, len(recs))
	for i, r := range recs {
		if err := checkAuditName("action", r.Action, false); err != nil {
			return nil, fmt.Errorf("audit record %d: %w", i, err)
		}
		if err := checkAuditName("tenant", r.TenantID, true); err != nil {
			return nil, fmt.Errorf("audit record %d: %w", i, err)
		}
		if r.Time.IsZero() {
			r.Time = s.now()
		}
		r.Seq = 0 // the log numbers it
		value, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("audit record %d (%s): %w", i, r.Action, err)
		}
		m, err := matchOf(r, value)
		if err != nil {
			return nil, fmt.Errorf("audit record %d (%s): %w", i, r.Action, err)
		}
		out = append(out, preparedAudit{at: r.Time, tenant: r.TenantID, action: r.Action, match: m, value: value,
			usage: keyableUsage(usageOfAudit(r))})
	}
	return out, nil
}

// matchOf is what the filters look at in r, as its JSON value reads back:
// the strings of r themselves when they are valid UTF-8 (which JSON keeps
// as they are), or else decoded from value.
func matchOf(r AuditRecord, value []byte) (auditMatch, error) {
	tool, tok := r.Fields["tool"].(string)
	result, rok := r.Fields["result"].(string)
	_, tany := r.Fields["tool"]
	_, rany := r.Fields["result"]
	if (tok || !tany) && (rok || !rany) && utf8.ValidString(r.Actor) && utf8.ValidString(tool) && utf8.ValidString(result) {
		var m auditMatch
		m.Actor = r.Actor
		if tok {
			m.Fields.Tool = tool
		}
		if rok {
			m.Fields.Result = result
		}
		return m, nil
	}
	var m auditMatch
	err := json.Unmarshal(value, &m)
	return m, err
}

func checkAuditName(what, v string, emptyOK bool) error {
	switch {
	case v == "" && !emptyOK:
		return invalid("the %s is empty", what)
	case len(v) > maxAuditName:
		return invalid("the %s is %d bytes long, at most %d", what, len(v), maxAuditName)
	case strings.IndexByte(v, 0) >= 0:
		return invalid("the %s contains a NUL byte", what)
	}
	return nil
}

// prepareTenantAudit checks and encodes the audit records of a change to
// tenant's records. A record without a tenant is the change's tenant's;
// one naming another tenant is refused, so that an admin of one tenant
// never writes into another's audit log.
func (s *Store) prepareTenantAudit(tenant string, recs []AuditRecord) ([]preparedAudit, error) {
	own := make([]AuditRecord, len(recs)) // never change the caller's slice
	for i, r := range recs {
		switch r.TenantID {
		case "":
			r.TenantID = tenant
		case tenant:
		default:
			return nil, invalid("audit record %d is of tenant %.128s, the change of tenant %s", i, r.TenantID, tenant)
		}
		own[i] = r
	}
	return s.prepareAudit(own)
}

// Append adds audit records to the log in one commit, each with the next
// sequence number. A record with a zero Time is stamped with the store's
// clock; Seq is ignored. It returns once the records are on disk.
func (s *Store) Append(ctx context.Context, recs ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	prepared, err := s.prepareAudit(recs)
	if err != nil {
		return err
	}
	if err := s.write(ctx, false, func(w writer) error { return w.appendAudit(prepared) }); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	return nil
}

// Audit returns the matching records in time order (records with the same
// time in the order they were appended), oldest first unless q.Newest.
// A query by tenant, action or both reads only the matching records,
// through an index.
func (s *Store) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if strings.IndexByte(q.TenantID, 0) >= 0 || strings.IndexByte(q.Action, 0) >= 0 {
		return nil, invalid("audit query: NUL byte in tenant or action")
	}
	var out []AuditRecord
	err := s.be.read(ctx, func(r reader) error {
		var err error
		out, err = r.audit(q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: audit query: %w", err)
	}
	return out, nil
}

// auditFor makes the audit records of a change to tenant's records with
// audit and appends them in w: the change's and its records' commit is
// one. It runs inside the write, which may run it more than once: audit
// must only build records.
func (s *Store) auditFor(w writer, tenant string, audit func() []AuditRecord) error {
	prepared, err := s.prepareTenantAudit(tenant, audit())
	if err != nil {
		return err
	}
	return w.appendAudit(prepared)
}
