package store

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// backend is the storage a Store runs on: bbolt (boltStore) or PostgreSQL
// (pgStore). It does I/O only: every check, default and invariant is the
// Store's, written once in its methods, and a backend stores the records
// it is given and reads back the records it is asked for. What each
// storage must do its own way is here too: sweeps in bounded batches,
// backup, statistics, ping and close.
type backend interface {
	// read runs fn with a reader. On bbolt it is one read transaction,
	// which fn must keep short; on PostgreSQL each read is a statement of
	// its own, seeing what is committed when it runs.
	read(ctx context.Context, fn func(r reader) error) error
	// write runs fn in one transaction and commits it; an error from fn
	// writes nothing. fn may run more than once (a bbolt group whose
	// other write failed, a PostgreSQL transaction aborted for a
	// deadlock or a conflict), so it must only read, compute and put: no
	// I/O of its own, and nothing kept from a previous run but what it
	// resets. A lazy write is one nobody waits on to carry on: bbolt may
	// hold it back for another write to share its commit.
	write(ctx context.Context, lazy bool, fn func(w writer) error) error
	// writeLater is a lazy write nobody waits for: it returns at once,
	// and then is called once with what write would return, from
	// whichever goroutine committed it (bbolt's writer), so it must be
	// quick and must not use the store.
	writeLater(ctx context.Context, fn func(w writer) error, then func(error))
	// sweep deletes what p says has outlived its time, in bounded
	// batches, each a transaction of its own.
	sweep(ctx context.Context, p sweepPlan) (SweepStats, error)
	backup(ctx context.Context, w io.Writer) (int64, error)
	// commits counts the transactions writes were committed in.
	commits() uint64
	ping(ctx context.Context) error
	close() error
}

// reader reads records. A missing record is ErrNotFound. Inside a write,
// on PostgreSQL, what it reads is locked until the commit (FOR UPDATE),
// so that a record read, changed and put back cannot change in between;
// a record found missing there is inserted by the put that follows, and
// a concurrent insert of the same key makes the transaction run again.
type reader interface {
	run(id string) (Run, error)
	// recentRuns returns up to limit runs of tenant, newest first.
	recentRuns(tenant string, limit int) ([]Run, error)
	view(id string) (View, error)
	// views returns the stored views among ids, in any order: one read
	// for a run's views.
	views(ids ...string) ([]View, error)
	html(sha string) ([]byte, error)
	// activeViews returns, newest first, up to limit views of tenant
	// whose end is after now, reading from just before pos (the position
	// T(created) | id of a view; nil: the newest) at most scan index
	// entries, and the position to go on from, nil at the end.
	activeViews(tenant string, now time.Time, pos []byte, scan, limit int) ([]View, []byte, error)
	audit(q AuditQuery) ([]AuditRecord, error)
	// auditPage appends to out, newest first, the records p selects
	// from just before pos (T | N; nil: the newest), reading at most
	// scan records and keeping at most limit, and returns the position
	// of the last record read and whether the range goes on after it.
	auditPage(p *auditPlan, pos []byte, scan, limit int, out []AuditRecord) ([]AuditRecord, []byte, bool, error)
	conversation(key string) (ConversationRef, error)
	// conversations returns tenant's references, ordered by key.
	conversations(tenant string) ([]ConversationRef, error)
	delivery(runID string) (Delivery, error)
	// arrival returns when the window of an activity's arrival ends.
	arrival(key string) (time.Time, error)
	// bindings returns tenant's bindings ordered by agent, subject, kind
	// and role: of every agent when agent is "", else of agent alone,
	// and then of subjects alone unless subjects is nil.
	bindings(tenant, agent string, subjects []string) ([]Binding, error)
	tenantSettings(tenant string) (TenantSettings, error)
	policySet(tenant string) (PolicySet, error)
	apiKey(id string) (APIKey, error)
	// apiKeys returns tenant's keys ordered by id.
	apiKeys(tenant string) ([]APIKey, error)
	trigger(tenant, id string) (Trigger, error)
	// triggers returns the triggers of tenant posting into
	// conversation, ordered by tenant and id: "" is every tenant, or
	// every conversation.
	triggers(tenant, conversation string) ([]Trigger, error)
	mcpConnection(tenant, user, agent, server string) (MCPConnection, error)
	// mcpConnections returns tenant's connections that f selects, at
	// least: what the storage's keys or indexes narrow it to (the Store
	// keeps exactly f's and sorts them).
	mcpConnections(f MCPConnectionFilter) ([]MCPConnection, error)
	// mcpServerUses counts tenant's connections per agent and server,
	// without reading their records. Outside a write only.
	mcpServerUses(tenant string) ([]MCPServerUse, error)
	mcpAuthRequest(id string) (MCPAuthRequest, error)
	mcpAuthRequestByState(state string) (MCPAuthRequest, error)
	question(id string) (Question, error)
	// turns calls keep with the turns of a conversation of tenant made
	// by agent, newest first, at most limit of them, until keep returns
	// false or an error: each turn's Seq, its record's JSON and its
	// messages, which are the backend's and valid only during the call.
	// The store decodes them (Store.History), remembering the records it
	// decoded. It reads no other conversation's or agent's turns.
	// usage returns tenant's usage counters of the days [first, end).
	usage(tenant string, first, end int32) ([]usageRow, error)
	turns(tenant, conversation, agent string, limit int, keep func(seq uint64, record, messages []byte) (bool, error)) error
}

// writer is a reader that also stores records. A put given the record it
// replaces (old, read in the same write) replaces it; given nil it adds
// a new one. The records come encoded: the JSON is made outside the
// transaction, where it can be, so that a bbolt commit, which every
// writer waits for, only copies bytes.
type writer interface {
	reader
	putRun(r encoded[Run], old *Run) error
	// putView stores v with its document html (nil when old has the
	// same one), releasing old's document when v has another.
	putView(v encoded[View], html []byte, old *View) error
	// appendAudit appends the records in order, each numbered by the
	// log (its Seq), and adds their usage counts (addUsage).
	appendAudit(recs []preparedAudit) error
	// addUsage adds counts to the usage rollup's counters, creating
	// those missing; counts come merged and ordered (mergeUsage).
	addUsage(cs []usageCount) error
	// putConversation stores or replaces a reference.
	putConversation(c encoded[ConversationRef]) error
	// deleteConversation deletes a reference if there is one.
	deleteConversation(key string) error
	// putDelivery stores or replaces a delivery; its run is stored.
	putDelivery(d encoded[Delivery]) error
	// putArrival stores or replaces an activity's arrival.
	putArrival(key string, until time.Time) error
	putBinding(b encoded[Binding], old *Binding) error
	deleteBinding(b Binding) error
	putTenantSettings(ts encoded[TenantSettings], old *TenantSettings) error
	putPolicySet(p encoded[PolicySet], old *PolicySet) error
	putAPIKey(k encoded[APIKey], old *APIKey) error
	putTrigger(t encoded[Trigger], old *Trigger) error
	deleteTrigger(t Trigger) error
	// claimDue records that t's due time t.LastDue was claimed, and is
	// ErrConflict when it was already. On bbolt, whose writes are one
	// after another, the stored LastDue is the claim; PostgreSQL keeps
	// claims apart, so that replicas never run a due time twice.
	claimDue(t Trigger) error
	// putMCPConnection stores a connection; one stored under the same
	// tenant, user, agent and server is old.
	putMCPConnection(c encoded[MCPConnection], old *MCPConnection) error
	deleteMCPConnection(c MCPConnection) error
	// putMCPAuthRequest stores a request and its index entries (by state,
	// by expiry), dropping old's.
	putMCPAuthRequest(r encoded[MCPAuthRequest], old *MCPAuthRequest) error
	// putQuestion stores a question and its entry by expiry, dropping
	// old's.
	putQuestion(q encoded[Question], old *Question) error
	deleteQuestion(q Question) error
	// appendTurn stores a turn (its JSON without a Seq), numbered by the
	// history's one sequence, and tells numbered its Seq: at once on
	// bbolt, once the statement is sent on PostgreSQL.
	appendTurn(t encoded[HistoryTurn], numbered func(seq uint64)) error
	// deleteTurns deletes tenant's turns of the conversation and of the
	// conversations whose id starts with threads, and tells deleted how
	// many: at once on bbolt, once the statement is sent on PostgreSQL.
	deleteTurns(tenant, conversation, threads string, deleted func(n int)) error
}

// encoded is a record with its JSON.
type encoded[T any] struct {
	rec  T
	json []byte
}

// encode encodes rec.
func encode[T any](rec T) (encoded[T], error) {
	b, err := json.Marshal(rec)
	return encoded[T]{rec: rec, json: b}, err
}
