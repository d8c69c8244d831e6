package store

import (
	"context"
	"io"
	"time"
)

// backend is what a Store runs on: bbolt (boltStore) or PostgreSQL
// (pgStore). Both take and return the package's plain values and
// pass one contract test suite; Store forwards every method to it.
type backend interface {
	APIKey(ctx context.Context, id string) (APIKey, error)
	APIKeys(ctx context.Context, tenant string) ([]APIKey, error)
	ActiveTriggers(ctx context.Context) ([]Trigger, error)
	ActiveViews(ctx context.Context, tenant string, limit int, cursor string) ([]View, string, error)
	Append(ctx context.Context, recs ...AuditRecord) error
	Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	AuditPage(ctx context.Context, q AuditFilter, cursor string, limit int) (records []AuditRecord, next string, err error)
	Backup(ctx context.Context, w io.Writer) (int64, error)
	Bindings(ctx context.Context, tenant, agent string) ([]Binding, error)
	BindingsFor(ctx context.Context, tenant, agent string, subjects []string) ([]Binding, error)
	Close() error
	Conversation(ctx context.Context, key string) (ConversationRef, error)
	Conversations(ctx context.Context, tenant string) ([]ConversationRef, error)
	DeleteBinding(ctx context.Context, tenant, agent, kind, subject, role string, audit ...AuditRecord) error
	DeleteConversation(ctx context.Context, key string) error
	DeleteTrigger(ctx context.Context, tenant, id string, audit func(before Trigger) []AuditRecord) error
	Delivery(ctx context.Context, runID string) (Delivery, error)
	ExportAudit(ctx context.Context, q AuditFilter, fn func(AuditRecord) error) error
	GetRun(ctx context.Context, id string) (Run, error)
	Ping(ctx context.Context) error
	PolicySet(ctx context.Context, tenant string) (PolicySet, error)
	PutAPIKey(ctx context.Context, k APIKey, audit ...AuditRecord) error
	PutBinding(ctx context.Context, b Binding, audit ...AuditRecord) error
	PutConversation(ctx context.Context, ref ConversationRef) error
	PutDelivery(ctx context.Context, d Delivery) error
	PutPolicySet(ctx context.Context, p PolicySet, wantVersion uint64, audit ...AuditRecord) (prev PolicySet, err error)
	PutTenantSettings(ctx context.Context, ts TenantSettings, wantVersion uint64, audit ...AuditRecord) (prev TenantSettings, err error)
	PutTrigger(ctx context.Context, t Trigger, audit ...AuditRecord) error
	RecentRuns(ctx context.Context, tenant string, limit int) ([]Run, error)
	RecordArrival(ctx context.Context, key string, window time.Duration) error
	RemoveConversation(ctx context.Context, key, tenant, conversationID, reason string, audit func(paused [][2]Trigger) []AuditRecord) ([]Trigger, error)
	RevokeAPIKey(ctx context.Context, tenant, id, by string, audit func(before, after APIKey) []AuditRecord) (APIKey, error)
	RevokeView(ctx context.Context, tenant, id, by string, audit ...AuditRecord) error
	RunSweeper(ctx context.Context, interval time.Duration)
	SaveRun(ctx context.Context, run Run, views []NewView, audit []AuditRecord) error
	Seen(ctx context.Context, key string) (bool, error)
	Stats() Stats
	Sweep(ctx context.Context) (SweepStats, error)
	TenantSettings(ctx context.Context, tenant string) (TenantSettings, error)
	Trigger(ctx context.Context, tenant, id string) (Trigger, error)
	Triggers(ctx context.Context, tenant string) ([]Trigger, error)
	UpdateTrigger(ctx context.Context, tenant, id string, change func(*Trigger) error, audit func(before, after Trigger) []AuditRecord) (Trigger, error)
	UseAPIKey(ctx context.Context, tenant, id string, at time.Time, audit ...AuditRecord) error
	View(ctx context.Context, id string) (View, error)
	ViewHTML(ctx context.Context, sha256hex string) ([]byte, error)
	ViewTenant(ctx context.Context, id string) (string, error)
}

// Store is the service's state: the records described in the package
// doc, on bbolt (Open) or PostgreSQL (OpenPostgres). Its methods are safe
// for concurrent use, from one process or, on PostgreSQL, from several.
type Store struct {
	be backend
	// bolt is the bbolt backend, nil on PostgreSQL.
	bolt *boltStore
}

var (
	_ backend = (*boltStore)(nil)
	_ backend = (*pgStore)(nil)
)

// Open opens (creating and migrating) the bbolt store file at path. It
// creates the parent folder (mode 0700) and the file (mode 0600) if
// needed. If the file is held by someone else it fails with ErrLocked
// after Options.OpenTimeout, or sooner if ctx has an earlier deadline.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	b, err := open(ctx, path, opts, schema())
	if err != nil {
		return nil, err
	}
	return &Store{be: b, bolt: b}, nil
}

// PutBinding stores a binding, with the audit records of the change in the
// same commit: both are stored or neither is. Kind and role must be among
// the package's constants, and tenant, agent and subject ids present, at
// most 512 bytes of valid UTF-8 and free of NUL bytes (ErrInvalid
// otherwise, saying which, and nothing is written). A zero CreatedAt is
// set from the store's clock.
//
// It is idempotent: putting a binding that is already stored keeps its
// CreatedBy and CreatedAt (when it was first granted, and by whom) and
// only refreshes its DisplayName. The audit records are written either
// way, as a record of what was asked. An audit record's empty TenantID is
// the binding's; another tenant's is ErrInvalid.
func (s *Store) PutBinding(ctx context.Context, b Binding, audit ...AuditRecord) error {
	return s.be.PutBinding(ctx, b, audit...)
}

// DeleteBinding removes a binding, with the audit records of the change in
// the same commit. A binding that is not stored gives ErrNotFound, and its
// audit records are not written either. Arguments are checked as by
// PutBinding.
func (s *Store) DeleteBinding(ctx context.Context, tenant, agent, kind, subject, role string, audit ...AuditRecord) error {
	return s.be.DeleteBinding(ctx, tenant, agent, kind, subject, role, audit...)
}

// Bindings returns the bindings of an agent of tenant, or with agent ""
// those of every agent of the tenant (AllAgents' among them), ordered by
// agent, then subject, kind and role. Agent AllAgents returns only the
// bindings made for every agent. A tenant without bindings has none, and
// no error.
func (s *Store) Bindings(ctx context.Context, tenant, agent string) ([]Binding, error) {
	return s.be.Bindings(ctx, tenant, agent)
}

// BindingsFor returns the bindings that apply to a signed-in user on an
// agent: those of tenant whose Subject is one of subjects (the user's id
// and the ids of its groups), made for agent or for AllAgents. It is the
// lookup of every access decision, so it reads only the matching records:
// one seek per subject and agent. The agent's own bindings come first,
// then AllAgents', each ordered by subject, kind and role; a subject given
// twice counts once. No subjects, or none bound, give no bindings and no
// error.
//
// An empty subject, or more than 10,000 of them, is ErrInvalid: the
// caller has not identified the user, and denies.
func (s *Store) BindingsFor(ctx context.Context, tenant, agent string, subjects []string) ([]Binding, error) {
	return s.be.BindingsFor(ctx, tenant, agent, subjects)
}

// TenantSettings returns a tenant's settings. A tenant that stored none
// has the defaults (DefaultRunner, Version 0), and no error.
func (s *Store) TenantSettings(ctx context.Context, tenant string) (TenantSettings, error) {
	return s.be.TenantSettings(ctx, tenant)
}

// PutTenantSettings stores a tenant's settings if the stored ones are at
// wantVersion (0: none are stored), with the audit records of the change
// in the same commit, and returns the settings it replaced (the defaults
// if there were none). The stored Version is wantVersion plus one,
// whatever ts.Version says; a zero UpdatedAt is set from the store's
// clock. Settings at another version give ErrConflict: someone changed
// them since the caller read them, and their change stands. Audit records
// are checked as by PutBinding. On any error nothing is written and prev
// is zero.
func (s *Store) PutTenantSettings(ctx context.Context, ts TenantSettings, wantVersion uint64, audit ...AuditRecord) (prev TenantSettings, err error) {
	return s.be.PutTenantSettings(ctx, ts, wantVersion, audit...)
}

// PolicySet returns a tenant's policy set; ErrNotFound when it stored
// none, and the caller uses its default.
func (s *Store) PolicySet(ctx context.Context, tenant string) (PolicySet, error) {
	return s.be.PolicySet(ctx, tenant)
}

// PutPolicySet stores a tenant's policy set if the stored one is at
// wantVersion (0: none is stored), with the audit records of the change in
// the same commit, and returns the set it replaced (Version 0 and no text
// if there was none). The stored set's Version is wantVersion plus one,
// whatever p.Version says; a zero UpdatedAt is set from the store's clock.
// A stored set at another version gives ErrConflict: someone changed it
// since the caller read it, and their change stands. Text of more than
// MaxPolicySetText bytes, or not valid UTF-8, is ErrInvalid. Audit records
// are checked as by PutBinding. On any error nothing is written and prev
// is zero.
func (s *Store) PutPolicySet(ctx context.Context, p PolicySet, wantVersion uint64, audit ...AuditRecord) (prev PolicySet, err error) {
	return s.be.PutPolicySet(ctx, p, wantVersion, audit...)
}

// Seen reports whether the activity key (the bot's choice: conversation
// and activity id) arrived before and that arrival's window is not over.
// It only reads: a caller that must not run an activity twice at once
// keeps its own record of what is under way.
func (s *Store) Seen(ctx context.Context, key string) (bool, error) {
	return s.be.Seen(ctx, key)
}

// RecordArrival keeps the activity's arrival for window. It shares the
// commit of the next write (the run the activity starts, most often)
// rather than take one of its own: an activity whose run was never
// committed may well run again after a crash, and should.
func (s *Store) RecordArrival(ctx context.Context, key string, window time.Duration) error {
	return s.be.RecordArrival(ctx, key, window)
}

// Append adds audit records to the log in one commit, each with the next
// sequence number. A record with a zero Time is stamped with the store's
// clock; Seq is ignored. It returns once the records are on disk.
func (s *Store) Append(ctx context.Context, recs ...AuditRecord) error {
	return s.be.Append(ctx, recs...)
}

// Audit returns the matching records in time order (records with the same
// time in the order they were appended), oldest first unless q.Newest.
// A query by tenant, action or both reads only the matching records,
// through an index.
func (s *Store) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	return s.be.Audit(ctx, q)
}

// AuditPage returns one page of a tenant's audit records matching q,
// newest first (by Time, then newest appended), and the cursor of the next
// page: pass "" for the first page, then each page's next, until next is
// "". A limit of zero or less means DefaultPageSize; more than MaxPageSize
// means MaxPageSize.
//
// One page reads at most 5,000 index entries of the tenant (and action)
// in [From, To). When the filters on actor, tool or result match few of
// them, the page comes back short, even empty, with a next cursor to go
// on: a caller that wants a full page asks again. Every matching record is
// on exactly one page, and records appended meanwhile are on none of the
// pages still to come if they are newer than the cursor.
//
// A cursor is opaque and bound to its query: one edited, or made for
// another query (another tenant's, or other filters), is ErrInvalid, as
// are a filter without a tenant and a NUL byte in the tenant or action.
func (s *Store) AuditPage(ctx context.Context, q AuditFilter, cursor string, limit int) (records []AuditRecord, next string, err error) {
	return s.be.AuditPage(ctx, q, cursor, limit)
}

// ExportAudit calls fn with every audit record matching q, newest first,
// as AuditPage would return them page after page. It reads them in
// batches, each in a read transaction of its own that reads at most 1,000
// index entries and is closed before fn is called for that batch, then
// reopened at the key where it stopped: a long export never holds a
// transaction open (a writer growing the file waits for every open one),
// never holds more than one batch in memory, and fn may take its time and
// even write to the store. Records appended during the export are
// included if older than where it has got to.
//
// It stops at the first error fn returns, and returns it wrapped; it also
// stops when ctx is done. q is checked as by AuditPage.
func (s *Store) ExportAudit(ctx context.Context, q AuditFilter, fn func(AuditRecord) error) error {
	return s.be.ExportAudit(ctx, q, fn)
}

// PutConversation stores or replaces a conversation reference. A zero
// UpdatedAt is set from the store's clock. Its TenantID, a part of the
// conversations_by_tenant key, must be valid UTF-8 without NUL bytes.
func (s *Store) PutConversation(ctx context.Context, ref ConversationRef) error {
	return s.be.PutConversation(ctx, ref)
}

// Conversation returns a conversation reference.
func (s *Store) Conversation(ctx context.Context, key string) (ConversationRef, error) {
	return s.be.Conversation(ctx, key)
}

// DeleteConversation removes a conversation reference; unknown keys are not an error.
func (s *Store) DeleteConversation(ctx context.Context, key string) error {
	return s.be.DeleteConversation(ctx, key)
}

// Conversations returns the conversation references of tenant, ordered by
// key. It reads only the tenant's, through conversations_by_tenant; a
// tenant with none has none, and no error.
func (s *Store) Conversations(ctx context.Context, tenant string) ([]ConversationRef, error) {
	return s.be.Conversations(ctx, tenant)
}

// PutDelivery stores or replaces where a run's answer went. The run must
// be stored already (ErrNotFound otherwise), so that no delivery outlives
// the run it belongs to. A zero SentAt is set from the store's clock. Like
// SaveRun it goes through the shared writer, so concurrent turns record
// their deliveries in the same commits as each other's runs; and as the
// answer is already out when it is called, it is a lazy write: found alone
// by an idle writer it waits up to 5 ms for the next write (a next turn's
// run, most likely) to share a commit, rather than make that write wait.
func (s *Store) PutDelivery(ctx context.Context, d Delivery) error {
	return s.be.PutDelivery(ctx, d)
}

// Delivery returns where a run's answer went; ErrNotFound when it was
// never recorded (the run failed before its answer was sent, or it ran
// before deliveries were kept).
func (s *Store) Delivery(ctx context.Context, runID string) (Delivery, error) {
	return s.be.Delivery(ctx, runID)
}

// RevokeView revokes a view of tenant, at once and for good: from its
// commit on, View answers with an error wrapping ErrRevoked (which wraps
// ErrExpired and ErrNotFound), ActiveViews leaves it out, SaveRun will not
// store it again, and the next sweep deletes it (and its HTML with its
// last view) as if it had expired then. by is who revoked it (an Entra
// object id); it is kept in the view as RevokedBy.
//
// The audit records are written in the same commit, so that the
// revocation and its record are both stored or neither is; they are
// checked as by PutBinding. Given none, RevokeView writes one of its own:
// action AuditViewRevoke, actor by, and the view, run, server and tool in
// its fields.
//
// A view that is unknown, or of another tenant, is ErrNotFound, and the
// two cannot be told apart. A view that can no longer be opened is
// refused with ErrRevoked if it was revoked already and ErrExpired if it
// has expired; then nothing is written, audit records included.
func (s *Store) RevokeView(ctx context.Context, tenant, id, by string, audit ...AuditRecord) error {
	return s.be.RevokeView(ctx, tenant, id, by, audit...)
}

// ActiveViews returns one page of the views of tenant that can still be
// opened (not expired, not revoked), newest first (by CreatedAt), and the
// cursor of the next page: pass "" for the first, then each page's next,
// until it is "". A limit of zero or less means DefaultPageSize; more than
// MaxPageSize means MaxPageSize.
//
// It reads only the tenant's views, through views_by_tenant, whose values
// say when each view stops, so that views that no longer can be opened
// are skipped without being read; a page reads at most 5,000 index
// entries, and may come back short with a next cursor when it meets many
// of those. A cursor is bound to its tenant: another tenant's, or an
// edited one, is ErrInvalid.
func (s *Store) ActiveViews(ctx context.Context, tenant string, limit int, cursor string) ([]View, string, error) {
	return s.be.ActiveViews(ctx, tenant, limit, cursor)
}

// Stats returns the write counters, for metrics.
func (s *Store) Stats() Stats {
	return s.be.Stats()
}

// Close waits for the writes already handed in to commit, then closes the
// file. Later calls return ErrClosed.
func (s *Store) Close() error {
	return s.be.Close()
}

// Ping checks that the file is open and readable and its schema is current.
func (s *Store) Ping(ctx context.Context) error {
	return s.be.Ping(ctx)
}

// Backup writes a consistent copy of the whole file to w while the store
// keeps serving, and returns the number of bytes written. The copy is a
// valid store file that Open accepts. It holds one read transaction for
// the whole copy, so a writer that needs to grow the file waits for it: run
// it when the service is quiet.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return s.be.Backup(ctx, w)
}

// Sweep deletes what has outlived its time, in short transactions: expired
// and revoked views and unreferenced HTML, then runs and their deliveries
// past Options.RunRetention, then audit records past
// Options.AuditRetention (their index entries with them).
//
// Each part reads an index ordered by time from its start up to its
// cutoff, so it never looks at a record that is kept; each transaction
// collects a bounded batch of keys and then deletes them (never deleting
// under a moving cursor). A view's HTML is released with it, and a
// document deleted with its last view. A run past its retention is kept,
// and looked at again by the next sweep, while a view it made can still be
// opened. It stops early, with ctx's error and what it did so far, when
// ctx is cancelled.
func (s *Store) Sweep(ctx context.Context) (SweepStats, error) {
	return s.be.Sweep(ctx)
}

// RunSweeper sweeps at once and then every interval until ctx is done,
// logging what each sweep removed. It returns when ctx is done or the store
// is closed; run it in its own goroutine.
func (s *Store) RunSweeper(ctx context.Context, interval time.Duration) {
	s.be.RunSweeper(ctx, interval)
}

// PutAPIKey stores a new API key, with the audit records of its creation
// in the same commit. An id already stored (in any tenant) is ErrConflict;
// ids, agent and creator are checked as binding parts, the name is at most
// 200 bytes, the hash 64 hex digits (ErrInvalid otherwise). A zero
// CreatedAt is set from the store's clock.
func (s *Store) PutAPIKey(ctx context.Context, k APIKey, audit ...AuditRecord) error {
	return s.be.PutAPIKey(ctx, k, audit...)
}

// APIKey returns a key by its id alone, whatever its tenant: the runs API
// learns the tenant from the key. Unknown ids are ErrNotFound.
func (s *Store) APIKey(ctx context.Context, id string) (APIKey, error) {
	return s.be.APIKey(ctx, id)
}

// APIKeys returns the tenant's keys, revoked ones too, newest first.
func (s *Store) APIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	return s.be.APIKeys(ctx, tenant)
}

// RevokeAPIKey revokes a key of tenant for good, with the audit records
// audit makes of it before and after, in the same commit, and returns the
// revoked key. A key that is unknown or of another tenant is ErrNotFound;
// one revoked already is ErrConflict, and nothing is written.
func (s *Store) RevokeAPIKey(ctx context.Context, tenant, id, by string, audit func(before, after APIKey) []AuditRecord) (APIKey, error) {
	return s.be.RevokeAPIKey(ctx, tenant, id, by, audit)
}

// UseAPIKey records that a key of tenant was used at at (its LastUsedAt),
// with the audit records of the use in the same commit. A revoked key is
// ErrConflict: it was revoked after the caller read it.
func (s *Store) UseAPIKey(ctx context.Context, tenant, id string, at time.Time, audit ...AuditRecord) error {
	return s.be.UseAPIKey(ctx, tenant, id, at, audit...)
}

// PutTrigger stores a new trigger, with the audit records of its creation
// in the same commit. An id already stored in the tenant is ErrConflict;
// ids are checked as binding parts, the name is at most 200 bytes, the
// text at most MaxTriggerText (ErrInvalid otherwise). A zero CreatedAt is
// set from the store's clock, and a zero LastDue to CreatedAt: the first
// run is the first due time after the trigger was made. The store does
// not parse the cron expression or the time zone; the caller does.
func (s *Store) PutTrigger(ctx context.Context, t Trigger, audit ...AuditRecord) error {
	return s.be.PutTrigger(ctx, t, audit...)
}

// Trigger returns a trigger of tenant; ErrNotFound when it has none of
// that id.
func (s *Store) Trigger(ctx context.Context, tenant, id string) (Trigger, error) {
	return s.be.Trigger(ctx, tenant, id)
}

// Triggers returns the tenant's triggers, ordered by name.
func (s *Store) Triggers(ctx context.Context, tenant string) ([]Trigger, error) {
	return s.be.Triggers(ctx, tenant)
}

// ActiveTriggers returns every tenant's triggers that are not paused, for
// the scheduler. Triggers are few (an admin makes each), so it reads them
// all in one short transaction.
func (s *Store) ActiveTriggers(ctx context.Context) ([]Trigger, error) {
	return s.be.ActiveTriggers(ctx)
}

// UpdateTrigger changes a trigger of tenant in one commit: change edits
// the stored record (returning an error writes nothing, and the error is
// returned wrapped), and audit, when not nil, makes the audit records of
// the change from the record before and after it, written in the same
// commit. Both may run more than once and must only compute. The id,
// tenant, conversation and creator cannot change; Version goes up by one.
// An unknown trigger is ErrNotFound. It returns the trigger as stored.
//
// The scheduler claims a due time with it (compare LastDue, set the new
// one) before it starts the run, so that the claim is on disk first and a
// restart never runs that due time again.
func (s *Store) UpdateTrigger(ctx context.Context, tenant, id string, change func(*Trigger) error, audit func(before, after Trigger) []AuditRecord) (Trigger, error) {
	return s.be.UpdateTrigger(ctx, tenant, id, change, audit)
}

// DeleteTrigger deletes a trigger of tenant, with the audit records audit
// makes of it in the same commit. An unknown trigger is ErrNotFound.
func (s *Store) DeleteTrigger(ctx context.Context, tenant, id string, audit func(before Trigger) []AuditRecord) error {
	return s.be.DeleteTrigger(ctx, tenant, id, audit)
}

// RemoveConversation forgets that the app is in a conversation of tenant
// (the reference under key) and pauses, with reason, every active trigger
// that posts into it, in one commit with the audit records audit makes of
// the triggers it paused (given before and after each). It returns the
// triggers paused. The app was uninstalled there, or the Bot Connector
// refused a send: retrying would fail the same way.
//
// A removal happens once: when no reference is stored under key (it was
// never kept, or an earlier removal took it), nothing is written, audit is
// not called, and the error wraps ErrNotFound. Teams announces one
// uninstall twice (an installationUpdate and a conversationUpdate), and a
// send refused with 403 may race either; whichever comes second finds the
// reference gone inside the same transaction that would write its record.
func (s *Store) RemoveConversation(ctx context.Context, key, tenant, conversationID, reason string, audit func(paused [][2]Trigger) []AuditRecord) ([]Trigger, error) {
	return s.be.RemoveConversation(ctx, key, tenant, conversationID, reason, audit)
}

// SaveRun writes a run, its views (HTML once per SHA-256) and its audit
// records in one commit. Concurrent calls share commits.
//
// Each view needs an ID, a non-empty HTML and an ExpiresAt. Its
// HTMLSHA256 is checked against the HTML (and filled in when empty); its
// RunID and TenantID default to the run's, and its ID is added to
// run.ViewIDs if missing. Tenant ids must be valid UTF-8 without NUL bytes. A view whose ID is already stored is replaced.
// Audit records are stamped as by Append. An invalid argument returns
// ErrInvalid and writes nothing; SaveRun returns only once the commit is
// on disk.
func (s *Store) SaveRun(ctx context.Context, run Run, views []NewView, audit []AuditRecord) error {
	return s.be.SaveRun(ctx, run, views, audit)
}

// ViewTenant returns the tenant of a view, expired or not (until a sweep
// removes it), so that a caller can answer another tenant's expired view
// exactly like one that does not exist, rather than tell it expired.
func (s *Store) ViewTenant(ctx context.Context, id string) (string, error) {
	return s.be.ViewTenant(ctx, id)
}

// View returns a view. It returns an error wrapping ErrNotFound for an
// unknown id, one wrapping ErrExpired (which also matches ErrNotFound)
// for a view whose ExpiresAt is at or before now, even if no sweep has
// deleted it yet, and one wrapping ErrRevoked (which also matches
// ErrExpired and ErrNotFound) for a revoked view.
func (s *Store) View(ctx context.Context, id string) (View, error) {
	return s.be.View(ctx, id)
}

// ViewHTML returns the HTML with the given SHA-256 (hex). It is kept while
// any stored view uses it; callers reach it through View, which refuses
// expired views.
func (s *Store) ViewHTML(ctx context.Context, sha256hex string) ([]byte, error) {
	return s.be.ViewHTML(ctx, sha256hex)
}

// GetRun returns a run.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	return s.be.GetRun(ctx, id)
}

// RecentRuns returns up to limit runs of tenant, newest first (by
// CreatedAt). A limit of zero or less means DefaultPageSize; more than
// MaxPageSize means MaxPageSize. It reads only the tenant's runs, through
// runs_by_tenant.
func (s *Store) RecentRuns(ctx context.Context, tenant string, limit int) ([]Run, error) {
	return s.be.RecentRuns(ctx, tenant, limit)
}
