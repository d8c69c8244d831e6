// Package store keeps the service's state: agent runs, the views they
// made (the View record, its HTML kept once per SHA-256, and how long a
// view lives, ViewLifetime), the append-only audit log, the Bot Framework
// conversation references that proactive sends need, where each run's
// answer was delivered in Teams, and the records access is decided from:
// role bindings, tenant settings and each tenant's Cedar policy text, the
// API keys and scheduled triggers that start runs without a person, and
// people's authorizations to MCP servers: each person's connection to a
// server of an agent (its OAuth tokens sealed by the caller) and the
// authorizations under way, which a run waits on; the questions MCP
// servers ask people during a tool call (elicitation), which a run waits
// on too; and the history of conversations, each turn as the model read
// it, which the next runs of the conversation read.
// It keeps them in one bbolt file (Open), the default, or in a PostgreSQL
// database that several replicas of the service share (OpenPostgres). It
// runs each one's schema migrations when it is opened, lists a tenant's
// records for its admins (audit log pages and exports, active views,
// recent runs, conversations, MCP connections), revokes views, and sweeps
// away expired and revoked views, the runs, deliveries, turns of history
// and audit records past their retention, the usage counters of the days
// past the audit retention, and MCP authorization requests and questions
// a day after they expired. CopyToPostgres copies a bbolt store into a new
// database.
//
// It is the only package that knows bbolt and PostgreSQL. Its exported
// methods take and return plain values, never transactions or cursors.
// It keeps the access records but does not decide who may read what, nor
// parse policies: callers check access first.
//
// # Rules and storage
//
// The rules of the records are the Store's methods, written once for both
// storages: each checks its input, fills in what the store's clock
// defaults, reads what it depends on, decides, and puts the records. The
// storage under it is a backend (backend.go): bbolt's (boltStore) or
// PostgreSQL's (pgStore), doing I/O only. A backend runs a function in a
// read or a write transaction, with a reader or a writer: small typed
// functions per record that get, list, put and delete it, given records
// already checked and encoded, and returning records decoded. What each
// storage does its own way is the backend's too: sweeping in bounded
// batches, a trigger's claim of a due time, backup, ping and close. One
// contract test suite runs on both.
//
// Where each rule lives:
//
//	checks of ids, tenants, texts           check.go; each record's check method
//	runs and views (SaveRun): defaults,     runs.go (prepareRun, preparedRun.apply)
//	  a revoked view not saved again,
//	  a run saved again keeps its views
//	a view revoked or expired (View),       views.go
//	  revoking one (RevokeView)
//	the audit log: stamping, what filters   audit.go, auditpage.go
//	  see, a change's records in its
//	  tenant, pages and their cursors
//	conversations, deliveries (a delivery   conversations.go, deliveries.go
//	  needs its run), arrivals seen         activities.go
//	bindings kept as first granted,         access.go (putVersioned)
//	  versions of settings and policy sets
//	API keys (revoked, used), triggers      triggers.go
//	  (id, tenant, conversation, creator
//	  kept; versions; due-time claims),
//	  a removed conversation's triggers
//	MCP connections (a use written once a   mcpauth.go
//	  minute at most, LastUsedAt never
//	  back), authorization requests (id
//	  and state unique, who and what kept,
//	  versions, sizes, statuses)
//	questions to people (id unique, who     questions.go
//	  and where kept, versions, sizes,
//	  statuses)
//	conversation history: turns numbered,  history.go
//	  their checks, History's budgets
//	  (whole turns, the newest first),
//	  ClearHistory of a channel's threads
//	the usage rollup: what a run or an      usage.go (usageOfAudit, usageOfRun,
//	  audit record counts for, Overview       Overview)
//	retention: what a sweep deletes, a run  sweep.go (sweepPlan)
//	  kept while a view of it is open
//
// A new kind of record is one rule in a Store method, a get and a put on
// the reader and writer with one small function on each backend
// (boltrecords.go, pgrecords.go), its bucket or table in each schema, and
// a line in each storage's list that the copy uses (boltTx.each,
// pgTx.load).
//
// # Bucket tree
//
// Keys are bytes; "|" below only separates the parts of a key and is not
// stored. T is a time as 8 bytes big-endian (Unix nanoseconds with the sign
// bit flipped, so that byte order is time order); N is a sequence number as
// 8 bytes big-endian; 0x00 ends a variable-length part (tenant, agent and
// subject ids, kinds, roles and actions may not contain it).
//
//	meta/
//	  "schema_version"            -> N: the last migration applied
//	  "cursor_key"                -> 32 random bytes that sign listing cursors (since 4)
//	runs/
//	  <run id>                    -> Run as JSON
//	runs_by_time/                 (since schema version 4)
//	  T(createdAt) | <run id>     -> empty
//	runs_by_tenant/               (since schema version 4)
//	  <tenant> 0x00 | T(createdAt) | <run id> -> empty
//	views/
//	  <view id>                   -> View as JSON
//	views_by_expiry/
//	  T(end) | <view id>          -> the view's HTML SHA-256 (64 hex digits) | T(createdAt) | <tenant>
//	                                 (before version 4: the hash alone)
//	views_by_tenant/              (since schema version 4)
//	  <tenant> 0x00 | T(createdAt) | <view id> -> T(end)
//	html/
//	  <SHA-256 hex>               -> the HTML bytes, as given
//	html_refs/
//	  <SHA-256 hex>               -> N: how many stored views use this HTML
//	audit/
//	  T(time) | N(seq)            -> AuditRecord as JSON (its seq comes from the key)
//	audit_by_tenant/
//	  <tenant> 0x00 | T | N       -> empty
//	audit_by_action/
//	  <action> 0x00 | T | N       -> empty
//	audit_by_tenant_action/
//	  <tenant> 0x00 <action> 0x00 | T | N -> empty
//	conversations/
//	  <key>                       -> ConversationRef as JSON
//	conversations_by_tenant/      (since schema version 4)
//	  <tenant> 0x00 <key>         -> empty
//	deliveries/                   (since schema version 2)
//	  <run id>                    -> Delivery as JSON
//	bindings/                     (since schema version 3)
//	  <tenant> 0x00 <agent> 0x00 <subject> 0x00 <kind> 0x00 <role> 0x00 -> Binding as JSON
//	tenant_settings/              (since schema version 3)
//	  <tenant>                    -> TenantSettings as JSON
//	policy_sets/                  (since schema version 3)
//	  <tenant>                    -> PolicySet as JSON
//	api_keys/                     (since schema version 5)
//	  <tenant> 0x00 <key id>      -> APIKey as JSON (the secret's SHA-256, never the secret)
//	api_key_ids/                  (since schema version 5)
//	  <key id>                    -> <tenant>: the runs API knows a key by its id alone
//	triggers/                     (since schema version 5)
//	  <tenant> 0x00 <trigger id>  -> Trigger as JSON
//	triggers_by_conversation/     (since schema version 5)
//	  <tenant> 0x00 <conversation id> 0x00 <trigger id> -> empty
//	activities/                   (since schema version 6)
//	  <conversation id> 0x00 <activity id> -> T (8 bytes): when its window ends
//	activities_by_expiry/         (since schema version 6)
//	  T <conversation id> 0x00 <activity id> -> empty, for the sweep
//	mcp_connections/              (since schema version 7)
//	  <tenant> 0x00 <user> 0x00 <agent> 0x00 <server> 0x00 -> MCPConnection as JSON (tokens sealed by the caller)
//	mcp_connections_by_server/    (since schema version 7)
//	  <tenant> 0x00 <agent> 0x00 <server> 0x00 <user> 0x00 -> T(lastUsedAt), or empty when never used
//	mcp_auth_requests/            (since schema version 7)
//	  <request id>                -> MCPAuthRequest as JSON
//	mcp_auth_by_state/            (since schema version 7)
//	  <state>                     -> <request id>: the callback knows a request by its state
//	mcp_auth_by_expiry/           (since schema version 7)
//	  T(expiresAt) | <request id> -> <state>, for the sweep
//	history/                      (since schema version 8)
//	  <tenant> 0x00 <conversation id> 0x00 <agent> 0x00 | N(seq)
//	                              -> T(at) | L | HistoryTurn as JSON | its messages
//	history_by_time/              (since schema version 8)
//	  T(at) | N(seq)              -> the turn's key in history/, for the sweep
//	usage/                        (since schema version 9)
//	  <tenant> 0x00 | D(day) | <metric> 0x00 <label> -> N: the count
//	                                 (D: UTC days since 1970, 4 bytes, sign flipped)
//	questions/                    (since schema version 10)
//	  <question id>               -> Question as JSON
//	questions_by_expiry/          (since schema version 10)
//	  T(expiresAt) | <question id> -> empty, for the sweep
//
// A view's end is when it stops being served: its ExpiresAt, or when it
// was revoked (RevokeView moves both index entries to that time).
//
// The layout is chosen for range scans. A sweep reads views_by_expiry from
// the start up to T(now), so it never reads a live view; the index value
// carries the HTML hash and the rest of the view's views_by_tenant key, so
// that the sweep can release the document and drop that entry without
// decoding the view. The audit indexes end in the primary key (T | N), so an
// audit query by tenant, action or both seeks straight to
// prefix | T(from) and stops at prefix | T(to), reading only matching
// records. The audit bucket's own sequence numbers the records: it only
// grows, so two records written in the same nanosecond keep their order.
// The sweep deletes audit records from the start of audit/ up to
// T(now - AuditRetention), each with its three index entries (rebuilt from
// the record's tenant and action), and runs from the start of runs_by_time
// up to T(now - RunRetention), each with its runs_by_tenant entry and its
// delivery, skipping a run while a view it lists can still be opened.
// The usage counters are keyed by tenant first: the sweep reads each
// tenant's counters from the start of its prefix up to
// <tenant> 0x00 | D(usageDaysBefore), the first day kept (whose end is
// after now - AuditRetention), then seeks to <tenant> 0x01, the next
// tenant, reading one kept key per tenant.
//
// The listings read one tenant's prefix newest first, from the end of the
// prefix (or the cursor's position) backwards: an audit page through
// audit_by_tenant or audit_by_tenant_action, active views through
// views_by_tenant (whose value lets it skip views that have ended without
// reading them), recent runs through runs_by_tenant, conversations through
// conversations_by_tenant. A listing's cursor is its position (the key
// after the tenant's prefix) with an HMAC, keyed by meta/cursor_key, over
// the position and the query, so that it cannot be edited or used with
// another tenant's query. Filters that no index answers (an audit
// record's actor, tool, result) are checked on each record read, and a
// page reads at most a bounded number of index entries, so that a
// filter matching little makes short pages rather than long requests.
//
// html_refs counts the views (live or expired but not yet swept) that point
// at a document. Saving a view increments it, deleting or replacing a view
// decrements it, and the document is deleted in the same transaction as
// the last view that used it, so no document outlives its views and none is
// ever deleted while a view still needs it.
//
// Every access record is keyed by its tenant first, and every method that
// reads one takes the tenant and reads only under it: a binding's key
// starts with <tenant> 0x00, and as no part may contain 0x00, tenant
// "t-a" never reads the keys of tenant "t-ab". Within a tenant and agent,
// a binding's key goes on with its subject, so that the lookup made at
// every access decision (BindingsFor: a user's id and its groups' ids) is
// one seek per subject, for the agent and for the bindings of every agent
// (agent "*"), reading only the bindings that match.
//
// API keys and triggers are keyed by their tenant first, like the access
// records. A trigger's claim of a due time (UpdateTrigger moving LastDue)
// is committed before its run starts, so a restart never runs a due time
// twice. RemoveConversation deletes a conversation reference, clears its
// history (its threads' too) and pauses the triggers of
// triggers_by_conversation under it in one commit, with their audit
// record. Revoked API keys are swept once their revocation is
// older than the audit retention; triggers are deleted only by an admin.
//
// A person's MCP connection is keyed by tenant, user, agent and server,
// so that a person's connections are one prefix; mcp_connections_by_server
// holds the same keys by agent and server, with the last use as value,
// so that an admin's count of people per server (MCPServerUses) reads
// that index alone, never the sealed tokens. A use (UseMCPConnection) is
// written when the stored one is a minute old or more, as a lazy write.
// An authorization request is keyed by its id, and by its OAuth state in
// mcp_auth_by_state, which refuses a second request with the same state;
// the sweep reads mcp_auth_by_expiry up to T(now - 24h), whose value
// names the state entry to delete with the request.
//
// A question is keyed by its id alone, which its card's answer names
// whichever replica it reaches; questions_by_expiry holds the same id
// under T(ExpiresAt), and the sweep reads it up to T(now - 24h).
//
// A turn of history is keyed by its tenant, conversation and agent, then
// its Seq, which the history bucket's own sequence numbers, so that a
// later turn has a larger one and the turns of one conversation and agent
// are one prefix in the order they were appended: History reads that
// prefix backwards from its end, the newest turn first, and stops at the
// turn count or the token budget, never reading another conversation's.
// Its value is T(at), then L (the length of the record's JSON, 4 bytes
// big-endian), the record's JSON without its messages, and the messages
// as the agent gave them: a read decodes the small record and copies the
// messages, never parsing them. ClearHistory reads the prefix of the
// conversation (every agent's turns) and that of its threads, <tenant>
// 0x00 followed by the conversation id and ";messageid=", and deletes
// each turn with its history_by_time entry, whose key the value's T(at)
// gives. The sweep reads history_by_time up to T(now - RunRetention).
//
// A delivery is keyed by its run's id and is written only for a stored
// run (PutDelivery's rule), so it lives exactly as long as that run: the
// sweep deletes it in the same transaction as its run.
//
// Tenant ids are key parts of the _by_tenant indexes, so runs, views and
// conversation references refuse a tenant id with a NUL byte, as access
// records do.
//
// # Tables
//
// On PostgreSQL each bucket is a table (pgschema.go has them whole). A
// row holds the record as the same JSON, in data (bytea, byte for byte),
// beside columns of what its queries filter and order on; times are bigint
// Unix nanoseconds clamped as the bbolt keys are, so that both order and
// cut alike.
//
//	runs            id, tenant, created_ns            by time; by tenant, time
//	html            sha                               once per SHA-256
//	views           id, tenant, run_id, sha,          by end (the sweep); by tenant,
//	                created_ns, expires_ns,             created (listings); by run,
//	                end_ns, revoked                     by document
//	audit           seq (identity), time_ns, tenant,  by time; by action; by tenant
//	                action, actor, tool, result         and time; by tenant and each
//	                (since version 2)                   of action, actor, tool, result
//	conversations   key, tenant                       by tenant
//	deliveries      run_id                            (cascades with its run)
//	bindings        tenant, agent, subject, kind,     the key
//	                role
//	tenant_settings tenant, version                   the key
//	policy_sets     tenant, version                   the key
//	api_keys        id, tenant, revoked_ns            by tenant; revoked, by time
//	triggers        tenant, id, conversation_id,      by tenant, conversation
//	                paused
//	trigger_claims  tenant, id, due_ns                the claims of due times
//	activities      key, expires_ns                   by expiry
//	mcp_connections tenant, user_id, agent, server,   the key (a person's); by tenant,
//	  (version 3)   last_used_ns                        agent, server with last_used_ns
//	mcp_auth_       id, state, expires_ns             the key; state (unique); by
//	  requests                                          expiry (the sweep)
//	  (version 3)
//	history         seq (identity), tenant,           by tenant, conversation, agent
//	  (version 4)     conversation_id, agent, at_ns,    and seq (History, ClearHistory);
//	                  messages                          by at_ns (the sweep)
//	usage           tenant, day, metric, label, n     the key (the overview's range);
//	  (version 5)                                       by day (the sweep, version 6)
//	questions       id, expires_ns                    the key; by expiry (the sweep)
//	  (version 7)
//	meta            key                               the cursor key, a copy's mark
//
// A turn's row holds its record's JSON in data and its messages, as given,
// in messages. History is one query, ORDER BY seq DESC LIMIT on the index
// by tenant, conversation, agent and seq, read backwards
// (TestHistoryPlanUsesAnIndex); ClearHistory two, the conversation's and
// its threads' ranges of the same index, sent together.
//
// A page of the audit log is one query: the tenant's index with the most
// selective filter given (person, tool, action, result, in that order),
// the others checked on the rows it reads, at most 5,000 of them as on
// bbolt; an export is such a query per batch. HTML is kept once per
// SHA-256 and released by its views' foreign key as pgschema.go says; one
// replica sweeps at a time, under an advisory lock.
//
// # Writes
//
// On bbolt every write is validated and encoded in the caller's
// goroutine, then handed to one writer goroutine that commits at once
// when it is idle and, while a commit is under way, gathers every write
// that arrives into the next single transaction (group commit). A bbolt
// commit costs two fsyncs, so this is what lets many concurrent writers
// through without making a lone writer wait. A caller returns only after
// its transaction is on disk, and gets its own error: a write that fails
// inside the transaction is taken out and the others are committed
// without it. PutDelivery and RecordArrival are lazy writes: the answer
// is already out, so an idle writer holds them back up to 5 ms for another
// write to share its commit, instead of committing one alone just before
// a write that someone waits for.
//
// On PostgreSQL each write is a transaction, committed before the method
// returns, whose statements are queued and sent together with its next
// read or its commit: a write that only puts (Append, PutConversation) is
// one round trip, and one that reads first (SaveRun: its views and run)
// takes a round trip per read, the first beginning the transaction, and
// one for the writes and the commit. What a write reads is locked until it
// commits (FOR UPDATE), and a row it found missing is inserted, so that
// two writes of one record never both succeed on what they read: the
// second waits, or fails and is run again.
//
// The audit records of a change are written in the same commit as the
// change, so that an admin's change and its record are both stored or
// neither is. PutTenantSettings and PutPolicySet are optimistic: they
// name the version they replace and get ErrConflict if the stored record
// has moved on, so that of two admins editing at once the second does not
// silently undo the first. A few records are encoded inside the
// transaction, because they depend on what is stored: a binding put
// again, which keeps its first grant's creator and time; a run saved
// again, which keeps the view ids it had; a revoked view; a changed key
// or trigger.
//
// # Schema
//
// meta/schema_version holds the number of the last migration applied to
// the bbolt file (boltschema.go), and the schema_migrations table those
// applied to the database (pgschema.go). Opening applies the missing
// migrations in order and refuses a file or database whose version is
// newer than this code knows. A migration that rewrites every record of a
// kind does so in transactions of a bounded batch each and records its
// version in a last one: bbolt's version 4 indexes every run, view and
// conversation, 10,000 records a transaction; PostgreSQL's version 2 fills
// the audit log's actor, tool and result from its JSON, 10,000 rows a
// transaction, then indexes them. Stopped half way, a migration is run
// again from the start at the next open, which is harmless: it only puts
// what it computes. The fixtures in testdata/fixtures are a file and a
// database an earlier version wrote; the tests open them with this one.
package store
