package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"teamsbot/mcpapps"
)

// maxIDLen bounds ids used as keys; bbolt allows 32 KiB, ours are GUIDs.
const maxIDLen = 512

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
// run.ViewIDs if missing. Tenant ids must be valid UTF-8 without NUL bytes. A view whose ID is already stored is replaced.
// Audit records are stamped as by Append. An invalid argument returns
// ErrInvalid and writes nothing; SaveRun returns only once the commit is
// on disk.
func (s *boltStore) SaveRun(ctx context.Context, run Run, views []NewView, audit []AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op, err := s.prepareRun(run, views, audit)
	if err != nil {
		return err
	}
	if err := s.write(ctx, op.apply); err != nil {
		return fmt.Errorf("store: save run %s: %w", run.ID, err)
	}
	return nil
}

// preparedRun is a SaveRun encoded outside the transaction.
type preparedRun struct {
	runID   []byte
	run     []byte
	rec     Run // what run encodes, for a run saved again (see apply)
	created [8]byte
	tenant  string
	views   []preparedView
	audit   []preparedAudit
}

type preparedView struct {
	id      []byte
	value   []byte
	expiry  [8]byte
	created [8]byte
	tenant  string
	sha     []byte // hex
	html    []byte
}

func checkID(what, id string) error {
	switch {
	case id == "":
		return invalid("%s is empty", what)
	case len(id) > maxIDLen:
		return invalid("%s is %d bytes long, at most %d", what, len(id), maxIDLen)
	}
	return nil
}

func (s *base) prepareRun(run Run, views []NewView, audit []AuditRecord) (*preparedRun, error) {
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
	op := &preparedRun{runID: []byte(run.ID), views: make([]preparedView, 0, len(views))}
	seen := make(map[string]bool, len(views))
	for _, nv := range views {
		v := nv.View
		if err := checkID("view", v.ID); err != nil {
			return nil, err
		}
		if seen[v.ID] {
			return nil, invalid("view %s given twice", v.ID)
		}
		seen[v.ID] = true
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
		value, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", v.ID, err)
		}
		op.views = append(op.views, preparedView{
			id: []byte(v.ID), value: value, expiry: timeKey(v.ExpiresAt), created: timeKey(v.CreatedAt),
			tenant: v.TenantID, sha: []byte(sha), html: nv.HTML,
		})
	}
	var err error
	if op.run, err = json.Marshal(run); err != nil {
		return nil, fmt.Errorf("run %s: %w", run.ID, err)
	}
	op.rec, op.created, op.tenant = run, timeKey(run.CreatedAt), run.TenantID
	if op.audit, err = s.prepareAudit(audit); err != nil {
		return nil, err
	}
	return op, nil
}

func (op *preparedRun) apply(tx *bbolt.Tx) error {
	viewsB := tx.Bucket([]byte(bucketViews))
	expiryB := tx.Bucket([]byte(bucketViewsByExpiry))
	byTenantB := tx.Bucket([]byte(bucketViewsByTenant))
	for _, v := range op.views {
		old := viewsB.Get(v.id)
		var hdr viewHeader
		if old != nil {
			if err := json.Unmarshal(old, &hdr); err != nil {
				return fmt.Errorf("view %s: stored record: %w", v.id, err)
			}
			if !hdr.RevokedAt.IsZero() {
				// Saving it again must not bring it back.
				return fmt.Errorf("view %s: %w", v.id, ErrRevoked)
			}
		}
		// Take the new reference before dropping the old one, so that
		// replacing a view by one with the same HTML keeps the document.
		if err := addHTMLRef(tx, v.sha, v.html); err != nil {
			return err
		}
		if old != nil {
			if err := expiryB.Delete(timeIDKey(timeKey(hdr.end()), v.id)); err != nil {
				return err
			}
			if err := byTenantB.Delete(tenantTimeKey(hdr.TenantID, timeKey(hdr.CreatedAt), v.id)); err != nil {
				return err
			}
			if _, err := dropHTMLRef(tx, []byte(hdr.HTMLSHA256)); err != nil {
				return err
			}
		}
		if err := viewsB.Put(v.id, v.value); err != nil {
			return err
		}
		if err := expiryB.Put(timeIDKey(v.expiry, v.id), expiryValue(v.sha, v.created, v.tenant)); err != nil {
			return err
		}
		if err := byTenantB.Put(tenantTimeKey(v.tenant, v.created, v.id), v.expiry[:]); err != nil {
			return err
		}
	}
	runs := tx.Bucket([]byte(bucketRuns))
	byTime := tx.Bucket([]byte(bucketRunsByTime))
	runsByTenant := tx.Bucket([]byte(bucketRunsByTenant))
	value := op.run
	if old := runs.Get(op.runID); old != nil {
		// Saved again (a retry, or more views): drop the old index
		// entries, and keep the view ids it had, so that the run's
		// retention still sees every view it made. Only then is the run
		// encoded here, inside the transaction.
		var prev struct {
			TenantID  string    `json:"tenantId"`
			CreatedAt time.Time `json:"createdAt"`
			ViewIDs   []string  `json:"viewIds"`
		}
		if err := json.Unmarshal(old, &prev); err != nil {
			return fmt.Errorf("run %s: stored record: %w", op.runID, err)
		}
		created := timeKey(prev.CreatedAt)
		if err := byTime.Delete(timeIDKey(created, op.runID)); err != nil {
			return err
		}
		if err := runsByTenant.Delete(tenantTimeKey(prev.TenantID, created, op.runID)); err != nil {
			return err
		}
		if ids := mergeIDs(prev.ViewIDs, op.rec.ViewIDs); len(ids) > len(op.rec.ViewIDs) {
			r := op.rec
			r.ViewIDs = ids
			var err error
			if value, err = json.Marshal(r); err != nil {
				return fmt.Errorf("run %s: %w", op.runID, err)
			}
		}
	}
	if err := runs.Put(op.runID, value); err != nil {
		return err
	}
	if err := byTime.Put(timeIDKey(op.created, op.runID), []byte{}); err != nil {
		return err
	}
	if err := runsByTenant.Put(tenantTimeKey(op.tenant, op.created, op.runID), []byte{}); err != nil {
		return err
	}
	return appendAudit(tx, op.audit)
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

// timeIDKey is T | id: the key of views_by_expiry and runs_by_time.
func timeIDKey(t [8]byte, id []byte) []byte {
	return append(append(make([]byte, 0, 8+len(id)), t[:]...), id...)
}

// tenantTimeKey is <tenant> 0x00 | T | id: the key of views_by_tenant and
// runs_by_tenant.
func tenantTimeKey(tenant string, t [8]byte, id []byte) []byte {
	return indexKey(timeIDKey(t, id), tenant)
}

// expiryValue is a views_by_expiry value: the HTML hash (64 hex digits),
// then the view's creation time and tenant, from which the sweep rebuilds
// its views_by_tenant key.
func expiryValue(sha []byte, created [8]byte, tenant string) []byte {
	v := make([]byte, 0, len(sha)+8+len(tenant))
	return append(append(append(v, sha...), created[:]...), tenant...)
}

// shaHexLen is the length of an HTML hash in hex.
const shaHexLen = 64

// addHTMLRef counts one more view using the document sha, storing html if
// it is not stored yet.
func addHTMLRef(tx *bbolt.Tx, sha, html []byte) error {
	refs := tx.Bucket([]byte(bucketHTMLRefs))
	var n uint64
	if v := refs.Get(sha); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if n == 0 {
		if err := tx.Bucket([]byte(bucketHTML)).Put(sha, html); err != nil {
			return err
		}
	}
	return refs.Put(sha, u64(n+1))
}

// dropHTMLRef counts one view less using the document sha and deletes the
// document with its last reference; it reports whether it did.
func dropHTMLRef(tx *bbolt.Tx, sha []byte) (bool, error) {
	refs := tx.Bucket([]byte(bucketHTMLRefs))
	var n uint64
	if v := refs.Get(sha); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if n > 1 {
		return false, refs.Put(sha, u64(n-1))
	}
	if err := refs.Delete(sha); err != nil {
		return false, err
	}
	if err := tx.Bucket([]byte(bucketHTML)).Delete(sha); err != nil {
		return false, err
	}
	return true, nil
}

// ViewTenant returns the tenant of a view, expired or not (until a sweep
// removes it), so that a caller can answer another tenant's expired view
// exactly like one that does not exist, rather than tell it expired.
func (s *boltStore) ViewTenant(ctx context.Context, id string) (string, error) {
	v, err := getJSON[View](ctx, s, bucketViews, "view", id)
	if err != nil {
		return "", err
	}
	return v.TenantID, nil
}

// View returns a view. It returns an error wrapping ErrNotFound for an
// unknown id, one wrapping ErrExpired (which also matches ErrNotFound)
// for a view whose ExpiresAt is at or before now, even if no sweep has
// deleted it yet, and one wrapping ErrRevoked (which also matches
// ErrExpired and ErrNotFound) for a revoked view.
func (s *boltStore) View(ctx context.Context, id string) (View, error) {
	v, err := getJSON[View](ctx, s, bucketViews, "view", id)
	if err != nil {
		return View{}, err
	}
	if v.Revoked() {
		return View{}, fmt.Errorf("view %s revoked at %s: %w", id, v.RevokedAt.UTC().Format(time.RFC3339), ErrRevoked)
	}
	if v.Expired(s.now()) {
		return View{}, fmt.Errorf("view %s expired at %s: %w", id, v.ExpiresAt.UTC().Format(time.RFC3339), ErrExpired)
	}
	return v, nil
}

// ViewHTML returns the HTML with the given SHA-256 (hex). It is kept while
// any stored view uses it; callers reach it through View, which refuses
// expired views.
func (s *boltStore) ViewHTML(ctx context.Context, sha256hex string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var html []byte
	err := s.read(func(tx *bbolt.Tx) error {
		data := tx.Bucket([]byte(bucketHTML)).Get([]byte(strings.ToLower(sha256hex)))
		if data == nil {
			return ErrNotFound
		}
		html = bytes.Clone(data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("view HTML %.128s: %w", sha256hex, err)
	}
	return html, nil
}

// GetRun returns a run.
func (s *boltStore) GetRun(ctx context.Context, id string) (Run, error) {
	return getJSON[Run](ctx, s, bucketRuns, "run", id)
}

// RecentRuns returns up to limit runs of tenant, newest first (by
// CreatedAt). A limit of zero or less means DefaultPageSize; more than
// MaxPageSize means MaxPageSize. It reads only the tenant's runs, through
// runs_by_tenant.
func (s *boltStore) RecentRuns(ctx context.Context, tenant string, limit int) ([]Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("runs tenant", tenant); err != nil {
		return nil, err
	}
	limit = pageLimit(limit)
	prefix := indexKey(nil, tenant)
	var out []Run
	err := s.read(func(tx *bbolt.Tx) error {
		runs := tx.Bucket([]byte(bucketRuns))
		c := tx.Bucket([]byte(bucketRunsByTenant)).Cursor()
		for k, _ := seekLastUnder(c, prefix, nil); k != nil && len(out) < limit; k, _ = c.Prev() {
			if !bytes.HasPrefix(k, prefix) || len(k) < len(prefix)+8 {
				break
			}
			id := k[len(prefix)+8:]
			data := runs.Get(id)
			if data == nil {
				return fmt.Errorf("runs_by_tenant: no run %q", id)
			}
			var r Run
			if err := json.Unmarshal(data, &r); err != nil {
				return fmt.Errorf("run %q: %w", id, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: recent runs of tenant %s: %w", tenant, err)
	}
	return out, nil
}

// getJSON reads and decodes the record key of bucket; an unknown key gives
// ErrNotFound. what names the record in errors. Unmarshal copies every
// string and raw message out of the mapped page, so nothing of the
// transaction outlives it.
func getJSON[T any](ctx context.Context, s *boltStore, bucket, what, key string) (T, error) {
	var v T
	if err := ctx.Err(); err != nil {
		return v, err
	}
	err := s.read(func(tx *bbolt.Tx) error {
		data := tx.Bucket([]byte(bucket)).Get([]byte(key))
		if data == nil {
			return ErrNotFound
		}
		return json.Unmarshal(data, &v)
	})
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s %.128s: %w", what, key, err)
	}
	return v, nil
}
