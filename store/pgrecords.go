package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The records on PostgreSQL: each kind's reads and writes, on the tables
// pgschema.go creates. A row holds the record's JSON (data) beside the
// columns its queries select and order by; a put inserts it, or upserts
// it over the row read in the same write (see pgTx.put).

// Each table's insert and, for an upsert, what follows it.
const (
	runInsert  = `INSERT INTO runs (id, tenant, created_ns, data) VALUES ($1, $2, $3, $4)`
	runUpsert  = ` ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, created_ns = excluded.created_ns, data = excluded.data`
	viewInsert = `INSERT INTO views (id, tenant, run_id, sha, created_ns, expires_ns, end_ns, revoked, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	viewUpsert = ` ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, run_id = excluded.run_id, sha = excluded.sha,
		created_ns = excluded.created_ns, expires_ns = excluded.expires_ns, end_ns = excluded.end_ns, revoked = excluded.revoked, data = excluded.data`
	htmlInsert         = `INSERT INTO html (sha, data) VALUES ($1, $2)`
	conversationInsert = `INSERT INTO conversations (key, tenant, data) VALUES ($1, $2, $3)`
	conversationUpsert = ` ON CONFLICT (key) DO UPDATE SET tenant = excluded.tenant, data = excluded.data`
	deliveryInsert     = `INSERT INTO deliveries (run_id, data) VALUES ($1, $2)`
	deliveryUpsert     = ` ON CONFLICT (run_id) DO UPDATE SET data = excluded.data`
	arrivalInsert      = `INSERT INTO activities (key, expires_ns) VALUES ($1, $2)`
	arrivalUpsert      = ` ON CONFLICT (key) DO UPDATE SET expires_ns = excluded.expires_ns`
	bindingInsert      = `INSERT INTO bindings (tenant, agent, subject, kind, role, data) VALUES ($1, $2, $3, $4, $5, $6)`
	bindingUpsert      = ` ON CONFLICT (tenant, agent, subject, kind, role) DO UPDATE SET data = excluded.data`
	settingsInsert     = `INSERT INTO tenant_settings (tenant, version, data) VALUES ($1, $2, $3)`
	policyInsert       = `INSERT INTO policy_sets (tenant, version, data) VALUES ($1, $2, $3)`
	versionedUpsert    = ` ON CONFLICT (tenant) DO UPDATE SET version = excluded.version, data = excluded.data`
	apiKeyInsert       = `INSERT INTO api_keys (id, tenant, revoked_ns, data) VALUES ($1, $2, $3, $4)`
	apiKeyUpsert       = ` ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, revoked_ns = excluded.revoked_ns, data = excluded.data`
	triggerInsert      = `INSERT INTO triggers (tenant, id, conversation_id, paused, data) VALUES ($1, $2, $3, $4, $5)`
	triggerUpsert      = ` ON CONFLICT (tenant, id) DO UPDATE SET conversation_id = excluded.conversation_id, paused = excluded.paused, data = excluded.data`
	mcpConnInsert      = `INSERT INTO mcp_connections (tenant, user_id, agent, server, last_used_ns, data) VALUES ($1, $2, $3, $4, $5, $6)`
	mcpConnUpsert      = ` ON CONFLICT (tenant, user_id, agent, server) DO UPDATE SET last_used_ns = excluded.last_used_ns, data = excluded.data`
	mcpAuthInsert      = `INSERT INTO mcp_auth_requests (id, state, expires_ns, data) VALUES ($1, $2, $3, $4)`
	mcpAuthUpsert      = ` ON CONFLICT (id) DO UPDATE SET state = excluded.state, expires_ns = excluded.expires_ns, data = excluded.data`
	questionInsert     = `INSERT INTO questions (id, expires_ns, data) VALUES ($1, $2, $3)`
	questionUpsert     = ` ON CONFLICT (id) DO UPDATE SET expires_ns = excluded.expires_ns, data = excluded.data`
	// ifAbsent makes an insert leave a stored row as it is.
	ifAbsent = ` ON CONFLICT DO NOTHING`
)

// Each record's row: the arguments of its table's insert.
func runRow(r encoded[Run]) []any {
	return []any{[]byte(r.rec.ID), r.rec.TenantID, ns(r.rec.CreatedAt), r.json}
}

func viewRow(v encoded[View]) []any {
	return []any{[]byte(v.rec.ID), v.rec.TenantID, []byte(v.rec.RunID), strings.ToLower(v.rec.HTMLSHA256),
		ns(v.rec.CreatedAt), ns(v.rec.ExpiresAt), ns(v.rec.end()), v.rec.Revoked(), v.json}
}

func conversationRow(c encoded[ConversationRef]) []any {
	return []any{[]byte(c.rec.Key), c.rec.TenantID, c.json}
}

func bindingRow(b encoded[Binding]) []any {
	return []any{b.rec.TenantID, b.rec.AgentID, b.rec.Subject, b.rec.Kind, b.rec.Role, b.json}
}

func apiKeyRow(k encoded[APIKey]) []any {
	return []any{k.rec.ID, k.rec.TenantID, nullNS(k.rec.RevokedAt), k.json}
}

func triggerRow(t encoded[Trigger]) []any {
	return []any{t.rec.TenantID, t.rec.ID, t.rec.ConversationID, t.rec.Paused, t.json}
}

func mcpConnRow(c encoded[MCPConnection]) []any {
	return []any{c.rec.TenantID, c.rec.UserID, c.rec.AgentID, c.rec.Server, nullNS(c.rec.LastUsedAt), c.json}
}

func mcpAuthRow(r encoded[MCPAuthRequest]) []any {
	return []any{r.rec.ID, r.rec.State, ns(r.rec.ExpiresAt), r.json}
}

func questionRow(q encoded[Question]) []any {
	return []any{q.rec.ID, ns(q.rec.ExpiresAt), q.json}
}

// nullNS is a time column that may be NULL (a key's revoked_ns, a
// connection's last_used_ns): NULL for a zero time.
func nullNS(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := ns(t)
	return &n
}

// getJSON reads and decodes the data column of the one row sql selects;
// none is ErrNotFound.
func pgGet[T any](t *pgTx, sql string, args ...any) (T, error) {
	var v T
	found := false
	err := t.query(sql, args, func(rows pgx.Rows) error {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return err
		}
		found = true
		return json.Unmarshal(data, &v)
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return v, err
}

// pgList decodes the data column of every row sql selects.
func pgList[T any](t *pgTx, sql string, args ...any) ([]T, error) {
	var out []T
	err := t.query(sql, args, func(rows pgx.Rows) error {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return err
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// Runs.

func (t *pgTx) run(id string) (Run, error) {
	return pgGet[Run](t, `SELECT data FROM runs WHERE id = $1`, []byte(id))
}

func (t *pgTx) recentRuns(tenant string, limit int) ([]Run, error) {
	return pgList[Run](t, `SELECT data FROM runs WHERE tenant = $1 ORDER BY created_ns DESC, id DESC LIMIT $2`, tenant, limit)
}

func (t *pgTx) putRun(r encoded[Run], old *Run) error {
	t.put(old != nil, runInsert, runUpsert, runRow(r)...)
	return nil
}

// Views and their documents.

func (t *pgTx) view(id string) (View, error) {
	return pgGet[View](t, `SELECT data FROM views WHERE id = $1`, []byte(id))
}

// views reads the views in id order, so that two writes lock them in
// the same order and never wait for each other crosswise.
func (t *pgTx) views(ids ...string) ([]View, error) {
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = []byte(id)
	}
	return pgList[View](t, `SELECT data FROM views WHERE id = ANY($1) ORDER BY id`, keys)
}

func (t *pgTx) html(sha string) ([]byte, error) {
	var html []byte
	err := t.query(`SELECT data FROM html WHERE sha = $1`, []any{sha}, func(rows pgx.Rows) error { return rows.Scan(&html) })
	if err == nil && html == nil {
		err = ErrNotFound
	}
	return html, err
}

// putView inserts the document first, ON CONFLICT DO NOTHING, which
// neither waits for nor locks a document stored already; the view's
// foreign key keeps it. A document the view no longer uses is deleted
// after, if no other view uses it.
func (t *pgTx) putView(v encoded[View], html []byte, old *View) error {
	sha := strings.ToLower(v.rec.HTMLSHA256)
	if old == nil || !strings.EqualFold(old.HTMLSHA256, sha) {
		t.queue(nil, htmlInsert+ifAbsent, sha, html)
	}
	t.put(old != nil, viewInsert, viewUpsert, viewRow(v)...)
	if old != nil && !strings.EqualFold(old.HTMLSHA256, sha) {
		dropped := strings.ToLower(old.HTMLSHA256)
		t.after = append(t.after, func(ctx context.Context, conn *pgxpool.Conn) error { return pgDropHTMLIfUnused(ctx, conn, dropped) })
	}
	return nil
}

// pgDropHTMLIfUnused deletes the document sha if no view uses it, as a
// view replaced by another document leaves it. A save taking it into use
// at the same time keeps it: its lock makes the delete skip the row, or
// its commit makes the foreign key refuse the delete, which a savepoint
// takes back; the sweep looks again later.
func pgDropHTMLIfUnused(ctx context.Context, conn *pgxpool.Conn, sha string) error {
	if _, err := conn.Exec(ctx, `SAVEPOINT drop_html`); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, `DELETE FROM html WHERE sha IN (
		SELECT h.sha FROM html h WHERE h.sha = $1 AND NOT EXISTS (SELECT 1 FROM views v WHERE v.sha = h.sha) FOR UPDATE SKIP LOCKED)`, sha)
	if isForeignKeyViolation(err) {
		_, err = conn.Exec(ctx, `ROLLBACK TO SAVEPOINT drop_html`)
		return err
	}
	if err != nil {
		return fmt.Errorf("html %s: %w", sha, err)
	}
	_, err = conn.Exec(ctx, `RELEASE SAVEPOINT drop_html`)
	return err
}

// activeViews leaves out the views that can no longer be opened in the
// query itself, so a page is short only at the end.
func (t *pgTx) activeViews(tenant string, now time.Time, pos []byte, _, limit int) ([]View, []byte, error) {
	// No position reads from the newest view.
	posNS, posID := int64(1<<63-1), []byte(nil)
	if pos != nil {
		posNS, posID = keyNS([8]byte(pos[:8])), pos[8:]
	}
	sql := `SELECT created_ns, id, data FROM views WHERE tenant = $1 AND end_ns > $2 ORDER BY created_ns DESC, id DESC LIMIT $3`
	args := []any{tenant, ns(now), limit + 1}
	if posID != nil {
		sql = `SELECT created_ns, id, data FROM views WHERE tenant = $1 AND end_ns > $2 AND (created_ns, id) < ($4, $5)
			ORDER BY created_ns DESC, id DESC LIMIT $3`
		args = append(args, posNS, posID)
	}
	var out []View
	var last, next []byte
	err := t.query(sql, args, func(rows pgx.Rows) error {
		if len(out) == limit {
			next = last
			return nil
		}
		var created int64
		var id, data []byte
		if err := rows.Scan(&created, &id, &data); err != nil {
			return err
		}
		var v View
		if err := json.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("view %q: %w", id, err)
		}
		k := nsKey(created)
		last = append(k[:], id...)
		out = append(out, v)
		return nil
	})
	return out, next, err
}

// Conversations.

func (t *pgTx) conversation(key string) (ConversationRef, error) {
	return pgGet[ConversationRef](t, `SELECT data FROM conversations WHERE key = $1`, []byte(key))
}

func (t *pgTx) conversations(tenant string) ([]ConversationRef, error) {
	return pgList[ConversationRef](t, `SELECT data FROM conversations WHERE tenant = $1 ORDER BY key`, tenant)
}

func (t *pgTx) putConversation(c encoded[ConversationRef]) error {
	t.put(true, conversationInsert, conversationUpsert, conversationRow(c)...)
	return nil
}

func (t *pgTx) deleteConversation(key string) error {
	t.queue(nil, `DELETE FROM conversations WHERE key = $1`, []byte(key))
	return nil
}

// Deliveries and arrivals.

func (t *pgTx) delivery(runID string) (Delivery, error) {
	return pgGet[Delivery](t, `SELECT data FROM deliveries WHERE run_id = $1`, []byte(runID))
}

// putDelivery is kept whole by the foreign key to its run, which a sweep
// cannot delete under it.
func (t *pgTx) putDelivery(d encoded[Delivery]) error {
	t.put(true, deliveryInsert, deliveryUpsert, []byte(d.rec.RunID), d.json)
	return nil
}

func (t *pgTx) arrival(key string) (time.Time, error) {
	var until int64
	found := false
	err := t.query(`SELECT expires_ns FROM activities WHERE key = $1`, []any{[]byte(key)}, func(rows pgx.Rows) error {
		found = true
		return rows.Scan(&until)
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return nsTime(until), err
}

func (t *pgTx) putArrival(key string, until time.Time) error {
	t.put(true, arrivalInsert, arrivalUpsert, []byte(key), ns(until))
	return nil
}

// Access records.

func (t *pgTx) bindings(tenant, agent string, subjects []string) ([]Binding, error) {
	switch {
	case agent == "":
		return pgList[Binding](t, `SELECT data FROM bindings WHERE tenant = $1 ORDER BY agent, subject, kind, role`, tenant)
	case subjects == nil:
		return pgList[Binding](t, `SELECT data FROM bindings WHERE tenant = $1 AND agent = $2 ORDER BY subject, kind, role`, tenant, agent)
	}
	return pgList[Binding](t, `SELECT data FROM bindings WHERE tenant = $1 AND agent = $2 AND subject = ANY($3)
		ORDER BY subject, kind, role`, tenant, agent, subjects)
}

func (t *pgTx) putBinding(b encoded[Binding], old *Binding) error {
	t.put(old != nil, bindingInsert, bindingUpsert, bindingRow(b)...)
	return nil
}

func (t *pgTx) deleteBinding(b Binding) error {
	t.queue(nil, `DELETE FROM bindings WHERE tenant = $1 AND agent = $2 AND subject = $3 AND kind = $4 AND role = $5`,
		b.TenantID, b.AgentID, b.Subject, b.Kind, b.Role)
	return nil
}

func (t *pgTx) tenantSettings(tenant string) (TenantSettings, error) {
	return pgGet[TenantSettings](t, `SELECT data FROM tenant_settings WHERE tenant = $1`, tenant)
}

func (t *pgTx) putTenantSettings(ts encoded[TenantSettings], old *TenantSettings) error {
	t.put(old != nil, settingsInsert, versionedUpsert, ts.rec.TenantID, int64(ts.rec.Version), ts.json)
	return nil
}

func (t *pgTx) policySet(tenant string) (PolicySet, error) {
	return pgGet[PolicySet](t, `SELECT data FROM policy_sets WHERE tenant = $1`, tenant)
}

func (t *pgTx) putPolicySet(p encoded[PolicySet], old *PolicySet) error {
	t.put(old != nil, policyInsert, versionedUpsert, p.rec.TenantID, int64(p.rec.Version), p.json)
	return nil
}

// API keys and triggers.

func (t *pgTx) apiKey(id string) (APIKey, error) {
	return pgGet[APIKey](t, `SELECT data FROM api_keys WHERE id = $1`, id)
}

func (t *pgTx) apiKeys(tenant string) ([]APIKey, error) {
	return pgList[APIKey](t, `SELECT data FROM api_keys WHERE tenant = $1 ORDER BY id`, tenant)
}

func (t *pgTx) putAPIKey(k encoded[APIKey], old *APIKey) error {
	t.put(old != nil, apiKeyInsert, apiKeyUpsert, apiKeyRow(k)...)
	return nil
}

func (t *pgTx) trigger(tenant, id string) (Trigger, error) {
	return pgGet[Trigger](t, `SELECT data FROM triggers WHERE tenant = $1 AND id = $2`, tenant, id)
}

func (t *pgTx) triggers(tenant, conversation string) ([]Trigger, error) {
	switch {
	case tenant == "":
		return pgList[Trigger](t, `SELECT data FROM triggers ORDER BY tenant, id`)
	case conversation == "":
		return pgList[Trigger](t, `SELECT data FROM triggers WHERE tenant = $1 ORDER BY id`, tenant)
	}
	return pgList[Trigger](t, `SELECT data FROM triggers WHERE tenant = $1 AND conversation_id = $2 ORDER BY id`, tenant, conversation)
}

func (t *pgTx) putTrigger(tr encoded[Trigger], old *Trigger) error {
	t.put(old != nil, triggerInsert, triggerUpsert, triggerRow(tr)...)
	return nil
}

func (t *pgTx) deleteTrigger(tr Trigger) error {
	t.queue(nil, `DELETE FROM triggers WHERE tenant = $1 AND id = $2`, tr.TenantID, tr.ID)
	return nil
}

// claimDue inserts the claim into trigger_claims, whose key a second
// claim of the same due time conflicts with, whatever the replica that
// made it read; only the latest claim is kept.
func (t *pgTx) claimDue(tr Trigger) error {
	due := ns(tr.LastDue)
	t.queue(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("due time %s claimed already: %w", tr.LastDue.UTC().Format(time.RFC3339), ErrConflict)
		}
		return nil
	}, `INSERT INTO trigger_claims (tenant, id, due_ns) VALUES ($1, $2, $3)`+ifAbsent, tr.TenantID, tr.ID, due)
	t.queue(nil, `DELETE FROM trigger_claims WHERE tenant = $1 AND id = $2 AND due_ns < $3`, tr.TenantID, tr.ID, due)
	return nil
}

// MCP connections and authorization requests.

func (t *pgTx) mcpConnection(tenant, user, agent, server string) (MCPConnection, error) {
	return pgGet[MCPConnection](t, `SELECT data FROM mcp_connections WHERE tenant = $1 AND user_id = $2 AND agent = $3 AND server = $4`,
		tenant, user, agent, server)
}

// mcpConnections selects on each column f sets, a statement per
// combination: a generic plan of one statement for every filter could not
// use an index for the columns it might leave out.
func (t *pgTx) mcpConnections(f MCPConnectionFilter) ([]MCPConnection, error) {
	sql, args := `SELECT data FROM mcp_connections WHERE tenant = $1`, []any{f.TenantID}
	for _, c := range []struct{ column, v string }{{"user_id", f.UserID}, {"agent", f.AgentID}, {"server", f.Server}} {
		if c.v != "" {
			args = append(args, c.v)
			sql += fmt.Sprintf(" AND %s = $%d", c.column, len(args))
		}
	}
	return pgList[MCPConnection](t, sql+` ORDER BY agent, server, user_id`, args...)
}

// mcpServerUses reads the index by tenant, agent and server alone, which
// includes last_used_ns.
func (t *pgTx) mcpServerUses(tenant string) ([]MCPServerUse, error) {
	var out []MCPServerUse
	err := t.query(`SELECT agent, server, count(*), max(last_used_ns) FROM mcp_connections WHERE tenant = $1
		GROUP BY agent, server ORDER BY agent, server`, []any{tenant}, func(rows pgx.Rows) error {
		var u MCPServerUse
		var people int64
		var last *int64
		if err := rows.Scan(&u.AgentID, &u.Server, &people, &last); err != nil {
			return err
		}
		u.People = int(people)
		if last != nil {
			u.LastUsedAt = nsTime(*last)
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

func (t *pgTx) putMCPConnection(c encoded[MCPConnection], old *MCPConnection) error {
	t.put(old != nil, mcpConnInsert, mcpConnUpsert, mcpConnRow(c)...)
	return nil
}

func (t *pgTx) deleteMCPConnection(c MCPConnection) error {
	t.queue(nil, `DELETE FROM mcp_connections WHERE tenant = $1 AND user_id = $2 AND agent = $3 AND server = $4`,
		c.TenantID, c.UserID, c.AgentID, c.Server)
	return nil
}

func (t *pgTx) mcpAuthRequest(id string) (MCPAuthRequest, error) {
	return pgGet[MCPAuthRequest](t, `SELECT data FROM mcp_auth_requests WHERE id = $1`, id)
}

func (t *pgTx) mcpAuthRequestByState(state string) (MCPAuthRequest, error) {
	return pgGet[MCPAuthRequest](t, `SELECT data FROM mcp_auth_requests WHERE state = $1`, state)
}

// putMCPAuthRequest inserts a new request, whose state the unique index
// keeps to one request across replicas; or replaces the stored one.
func (t *pgTx) putMCPAuthRequest(r encoded[MCPAuthRequest], old *MCPAuthRequest) error {
	t.put(old != nil, mcpAuthInsert, mcpAuthUpsert, mcpAuthRow(r)...)
	return nil
}

func (t *pgTx) question(id string) (Question, error) {
	return pgGet[Question](t, `SELECT data FROM questions WHERE id = $1`, id)
}

func (t *pgTx) putQuestion(q encoded[Question], old *Question) error {
	t.put(old != nil, questionInsert, questionUpsert, questionRow(q)...)
	return nil
}

func (t *pgTx) deleteQuestion(q Question) error {
	t.queue(nil, `DELETE FROM questions WHERE id = $1`, q.ID)
	return nil
}

// Conversation history.

// errEnough stops a read whose caller has what it wanted.
var errEnough = errors.New("enough rows read")

// turns reads history_by_conversation backwards from the newest turn of
// the conversation and agent, and stops reading once keep refuses one.
func (t *pgTx) turns(tenant, conversation, agent string, limit int, keep func(seq uint64, record, messages []byte) (bool, error)) error {
	err := t.query(`SELECT seq, data, messages FROM history WHERE tenant = $1 AND conversation_id = $2 AND agent = $3
		ORDER BY seq DESC LIMIT $4`, []any{tenant, conversation, agent, limit}, func(rows pgx.Rows) error {
		var seq int64
		var data, messages []byte
		if err := rows.Scan(&seq, &data, &messages); err != nil {
			return err
		}
		if more, err := keep(uint64(seq), data, messages); err != nil || !more {
			return cmp.Or(err, errEnough)
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}

// appendTurn inserts the turn, numbered by the identity column, which
// the insert returns.
func (t *pgTx) appendTurn(tr encoded[HistoryTurn], numbered func(uint64)) error {
	r := tr.rec
	t.queueRow(func(row pgx.Row) error {
		var seq int64
		if err := row.Scan(&seq); err != nil {
			return err
		}
		numbered(uint64(seq))
		return nil
	}, `INSERT INTO history (tenant, conversation_id, agent, at_ns, data, messages) VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`,
		r.TenantID, r.ConversationID, r.AgentID, ns(r.At), tr.json, []byte(r.Messages))
	return nil
}

// deleteTurns deletes the conversation's turns and its threads', each a
// range of history_by_conversation: two statements sent together.
func (t *pgTx) deleteTurns(tenant, conversation, threads string, deleted func(int)) error {
	n := 0
	t.queue(func(tag pgconn.CommandTag) error {
		n = int(tag.RowsAffected())
		return nil
	}, `DELETE FROM history WHERE tenant = $1 AND conversation_id = $2`, tenant, conversation)
	t.queue(func(tag pgconn.CommandTag) error {
		n += int(tag.RowsAffected())
		deleted(n)
		return nil
	}, `DELETE FROM history WHERE tenant = $1 AND conversation_id >= $2 AND conversation_id < $3`,
		tenant, threads, string(prefixEnd([]byte(threads))))
	return nil
}

// load queues the insert of a record as each yields it, leaving a stored
// row as it is, and tells inserted, once the write commits, whether it
// inserted it. A delivery whose run is not stored inserts nothing.
func (t *pgTx) load(rec any, inserted func(bool)) error {
	check := func(tag pgconn.CommandTag) error {
		inserted(tag.RowsAffected() > 0)
		return nil
	}
	switch r := rec.(type) {
	case htmlDoc:
		t.queue(check, htmlInsert+ifAbsent, r.sha, r.data)
	case encoded[Run]:
		t.queue(check, runInsert+ifAbsent, runRow(r)...)
	case encoded[View]:
		t.queue(check, viewInsert+ifAbsent, viewRow(r)...)
	case encoded[AuditRecord]:
		var m auditMatch
		if err := json.Unmarshal(r.json, &m); err != nil {
			return fmt.Errorf("audit record %d: %w", r.rec.Seq, err)
		}
		t.queue(check, `INSERT INTO audit (seq, time_ns, tenant, action, actor, tool, result, data) OVERRIDING SYSTEM VALUE
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`+ifAbsent, int64(r.rec.Seq), ns(r.rec.Time), []byte(r.rec.TenantID), []byte(r.rec.Action),
			column(m.Actor), column(m.Fields.Tool), column(m.Fields.Result), r.json)
	case encoded[ConversationRef]:
		t.queue(check, conversationInsert+ifAbsent, conversationRow(r)...)
	case encoded[Delivery]:
		t.queue(check, `INSERT INTO deliveries (run_id, data) SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1)`+ifAbsent,
			[]byte(r.rec.RunID), r.json)
	case encoded[Binding]:
		t.queue(check, bindingInsert+ifAbsent, bindingRow(r)...)
	case encoded[TenantSettings]:
		t.queue(check, settingsInsert+ifAbsent, r.rec.TenantID, int64(r.rec.Version), r.json)
	case encoded[PolicySet]:
		t.queue(check, policyInsert+ifAbsent, r.rec.TenantID, int64(r.rec.Version), r.json)
	case encoded[APIKey]:
		t.queue(check, apiKeyInsert+ifAbsent, apiKeyRow(r)...)
	case encoded[Trigger]:
		t.queue(check, triggerInsert+ifAbsent, triggerRow(r)...)
	case encoded[MCPConnection]:
		t.queue(check, mcpConnInsert+ifAbsent, mcpConnRow(r)...)
	case encoded[MCPAuthRequest]:
		t.queue(check, mcpAuthInsert+ifAbsent, mcpAuthRow(r)...)
	case encoded[Question]:
		t.queue(check, questionInsert+ifAbsent, questionRow(r)...)
	case encoded[HistoryTurn]:
		t.queue(check, `INSERT INTO history (seq, tenant, conversation_id, agent, at_ns, data, messages) OVERRIDING SYSTEM VALUE
			VALUES ($1, $2, $3, $4, $5, $6, $7)`+ifAbsent, int64(r.rec.Seq), r.rec.TenantID, r.rec.ConversationID, r.rec.AgentID,
			ns(r.rec.At), r.json, []byte(r.rec.Messages))
	case arrival:
		t.queue(check, arrivalInsert+ifAbsent, []byte(r.key), ns(r.until))
	case usageCount:
		t.queue(check, `INSERT INTO usage (tenant, day, metric, label, n) VALUES ($1, $2, $3, $4, $5)`+ifAbsent,
			[]byte(r.tenant), r.day, r.metric, []byte(r.label), r.n)
	default:
		return fmt.Errorf("no PostgreSQL row for a %T", rec)
	}
	return nil
}
