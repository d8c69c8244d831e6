// Package store keeps the service's state in one bbolt file: agent runs,
// the views they made (the View record, its HTML kept once per SHA-256, and
// how long a view lives, ViewLifetime), the
// append-only audit log, the Bot Framework conversation references that
// proactive sends need, where each run's answer was delivered in Teams, and
// the records access is decided from: role bindings, tenant settings and
// each tenant's Cedar policy text. It runs the schema migrations when the
// file is opened and sweeps expired views away.
//
// It is the only package that knows bbolt. Its exported methods take and
// return plain values, never transactions or cursors, so that a second
// backend (PostgreSQL behind several replicas) could offer the same methods.
// It keeps the access records but does not decide who may read what, nor
// parse policies: callers check access first.
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
//	runs/
//	  <run id>                    -> Run as JSON
//	views/
//	  <view id>                   -> View as JSON
//	views_by_expiry/
//	  T(expiresAt) | <view id>    -> the view's HTML SHA-256 (hex)
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
//	deliveries/                   (since schema version 2)
//	  <run id>                    -> Delivery as JSON
//	bindings/                     (since schema version 3)
//	  <tenant> 0x00 <agent> 0x00 <subject> 0x00 <kind> 0x00 <role> 0x00 -> Binding as JSON
//	tenant_settings/              (since schema version 3)
//	  <tenant>                    -> TenantSettings as JSON
//	policy_sets/                  (since schema version 3)
//	  <tenant>                    -> PolicySet as JSON
//
// The layout is chosen for range scans. A sweep reads views_by_expiry from
// the start up to T(now), so it never reads a live view; the index value
// carries the HTML hash so that the sweep can release the document without
// decoding the view. The audit indexes end in the primary key (T | N), so an
// audit query by tenant, action or both seeks straight to
// prefix | T(from) and stops at prefix | T(to), reading only matching
// records. The audit bucket's own sequence numbers the records: it only
// grows, so two records written in the same nanosecond keep their order.
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
// A delivery is keyed by its run's id and is written only for a stored
// run, so it lives exactly as long as that run. Runs are never swept
// today, so neither are deliveries; a sweep of runs added later must delete
// their deliveries in the same transaction.
//
// # Writes
//
// Every write (SaveRun, Append, PutConversation, DeleteConversation,
// PutDelivery, PutBinding, DeleteBinding, PutTenantSettings, PutPolicySet)
// is validated and encoded in the caller's goroutine, then handed to one
// writer goroutine that commits at once when it is idle and, while a
// commit is under way, gathers every write that arrives into the next
// single transaction (group commit). A bbolt commit costs two fsyncs, so
// this is what lets many concurrent writers through without making a lone
// writer wait. A caller returns only after its transaction is on disk, and gets
// its own error: a write that fails inside the transaction is taken out and
// the others are committed without it. PutDelivery is a lazy write: the
// answer it records is already out, so an idle writer holds it back up to
// 5 ms for another write to share its commit, instead of committing it
// alone just before a write that someone waits for.
//
// The access writes take audit records and write them in the same
// transaction as the change, so that an admin's change and its audit
// record are both stored or neither is. PutPolicySet is optimistic: it
// names the version it replaces and gets ErrConflict if the stored set
// has moved on, so that of two admins editing at once the second does not
// silently undo the first. Two small records are encoded inside the
// transaction, because they depend on what is stored: tenant settings,
// whose version is the stored one's plus one, and a binding put again,
// which keeps its first grant's creator and time.
//
// # Schema
//
// meta/schema_version holds the number of the last migration applied.
// Open applies the missing migrations in order, each in its own transaction
// together with the new version number, and refuses a file whose version is
// newer than this code knows.
package store
