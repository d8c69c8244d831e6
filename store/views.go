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
	ID        string    `json:"id"`
	AgentID   string    `json:"agentId"`
	TenantID  string    `json:"tenantId"`
	UserID    string    `json:"userId,omitempty"`
	UserName  string    `json:"userName,omitempty"`
	Text      string    `json:"text"` // the answer text
	Notes     []string  `json:"notes,omitempty"`
	ViewIDs   []string  `json:"viewIds,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
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
// run.ViewIDs if missing. A view whose ID is already stored is replaced.
// Audit records are stamped as by Append. An invalid argument returns
// ErrInvalid and writes nothing; SaveRun returns only once the commit is
// on disk.
func (s *Store) SaveRun(ctx context.Context, run Run, views []NewView, audit []AuditRecord) error {
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
	runID []byte
	run   []byte
	views []preparedView
	audit []preparedAudit
}

type preparedView struct {
	id     []byte
	value  []byte
	expiry [8]byte
	sha    []byte // hex
	html   []byte
}

func checkID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%s: empty id: %w", what, ErrInvalid)
	case len(id) > maxIDLen:
		return fmt.Errorf("%s: id of %d bytes, at most %d: %w", what, len(id), maxIDLen, ErrInvalid)
	}
	return nil
}

func (s *Store) prepareRun(run Run, views []NewView, audit []AuditRecord) (*preparedRun, error) {
	if err := checkID("run", run.ID); err != nil {
		return nil, err
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
			return nil, fmt.Errorf("view %s given twice: %w", v.ID, ErrInvalid)
		}
		seen[v.ID] = true
		if len(nv.HTML) == 0 {
			return nil, fmt.Errorf("view %s: no HTML: %w", v.ID, ErrInvalid)
		}
		if v.ExpiresAt.IsZero() {
			return nil, fmt.Errorf("view %s: no expiry: %w", v.ID, ErrInvalid)
		}
		sha := mcpapps.HTMLSHA256(nv.HTML)
		if v.HTMLSHA256 != "" && !strings.EqualFold(v.HTMLSHA256, sha) {
			return nil, fmt.Errorf("view %s: HTML SHA-256 is %s, the view says %s: %w", v.ID, sha, v.HTMLSHA256, ErrInvalid)
		}
		v.HTMLSHA256 = sha
		switch v.RunID {
		case "":
			v.RunID = run.ID
		case run.ID:
		default:
			return nil, fmt.Errorf("view %s belongs to run %s, not %s: %w", v.ID, v.RunID, run.ID, ErrInvalid)
		}
		if v.TenantID == "" {
			v.TenantID = run.TenantID
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
			id: []byte(v.ID), value: value, expiry: timeKey(v.ExpiresAt), sha: []byte(sha), html: nv.HTML,
		})
	}
	var err error
	if op.run, err = json.Marshal(run); err != nil {
		return nil, fmt.Errorf("run %s: %w", run.ID, err)
	}
	if op.audit, err = s.prepareAudit(audit); err != nil {
		return nil, err
	}
	return op, nil
}

func (op *preparedRun) apply(tx *bbolt.Tx) error {
	viewsB := tx.Bucket([]byte(bucketViews))
	expiryB := tx.Bucket([]byte(bucketViewsByExpiry))
	for _, v := range op.views {
		old := viewsB.Get(v.id)
		var oldExpiry [8]byte
		var oldSHA []byte
		if old != nil {
			var hdr struct {
				HTMLSHA256 string    `json:"htmlSha256"`
				ExpiresAt  time.Time `json:"expiresAt"`
			}
			if err := json.Unmarshal(old, &hdr); err != nil {
				return fmt.Errorf("view %s: stored record: %w", v.id, err)
			}
			oldExpiry, oldSHA = timeKey(hdr.ExpiresAt), []byte(hdr.HTMLSHA256)
		}
		// Take the new reference before dropping the old one, so that
		// replacing a view by one with the same HTML keeps the document.
		if err := addHTMLRef(tx, v.sha, v.html); err != nil {
			return err
		}
		if old != nil {
			if err := expiryB.Delete(expiryKey(oldExpiry, v.id)); err != nil {
				return err
			}
			if _, err := dropHTMLRef(tx, oldSHA); err != nil {
				return err
			}
		}
		if err := viewsB.Put(v.id, v.value); err != nil {
			return err
		}
		if err := expiryB.Put(expiryKey(v.expiry, v.id), v.sha); err != nil {
			return err
		}
	}
	if err := tx.Bucket([]byte(bucketRuns)).Put(op.runID, op.run); err != nil {
		return err
	}
	return appendAudit(tx, op.audit)
}

func expiryKey(t [8]byte, id []byte) []byte {
	return append(append(make([]byte, 0, 8+len(id)), t[:]...), id...)
}

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
func (s *Store) ViewTenant(ctx context.Context, id string) (string, error) {
	v, err := getJSON[View](ctx, s, bucketViews, "view", id)
	if err != nil {
		return "", err
	}
	return v.TenantID, nil
}

// View returns a view. It returns an error wrapping ErrNotFound for an
// unknown id, and one wrapping ErrExpired (which also matches ErrNotFound)
// for a view whose ExpiresAt is at or before now, even if no sweep has
// deleted it yet.
func (s *Store) View(ctx context.Context, id string) (View, error) {
	v, err := getJSON[View](ctx, s, bucketViews, "view", id)
	if err != nil {
		return View{}, err
	}
	if v.Expired(s.now()) {
		return View{}, fmt.Errorf("view %s expired at %s: %w", id, v.ExpiresAt.UTC().Format(time.RFC3339), ErrExpired)
	}
	return v, nil
}

// ViewHTML returns the HTML with the given SHA-256 (hex). It is kept while
// any stored view uses it; callers reach it through View, which refuses
// expired views.
func (s *Store) ViewHTML(ctx context.Context, sha256hex string) ([]byte, error) {
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
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	return getJSON[Run](ctx, s, bucketRuns, "run", id)
}

// getJSON reads and decodes the record key of bucket; an unknown key gives
// ErrNotFound. what names the record in errors. Unmarshal copies every
// string and raw message out of the mapped page, so nothing of the
// transaction outlives it.
func getJSON[T any](ctx context.Context, s *Store, bucket, what, key string) (T, error) {
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
