package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// copyBatch is how many records one write of CopyToPostgres sends.
const copyBatch = 1000

// CopyCount is what CopyToPostgres did with one kind of record: how many
// the bbolt file holds, how many were inserted, and how many were there
// already (from an earlier copy).
type CopyCount struct {
	Kind           string
	Read, Inserted int
	AlreadyThere   int
	Skipped        int    // records that cannot be copied (see SkipReason)
	SkipReason     string // why, when Skipped > 0
}

// copyMarker is the meta key a copy sets in the database before it writes
// anything, so that running it again (after a failure half way, or to
// check) goes on rather than refuse a database that is not empty.
const copyMarker = "copied_from_bbolt"

// ErrNotEmpty is returned by CopyToPostgres for a database that already
// holds records of its own: a copy goes into a new database only.
var ErrNotEmpty = errors.New("store: the database already holds records")

// htmlDoc and arrival are the records of the copy that are not a type of
// their own: a document under its SHA-256, an activity's arrival.
type htmlDoc struct {
	sha  string
	data []byte
}

type arrival struct {
	key   string
	until time.Time
}

// CopyToPostgres copies every record of the bbolt store src into the
// PostgreSQL store dst: runs, views and their HTML, the audit log (with
// its sequence numbers), conversation references, deliveries, bindings,
// tenant settings, policy sets, API keys, triggers, the activities seen,
// people's MCP connections, the MCP authorization requests, the
// questions to people and the turns of conversation history (with their
// sequence numbers), each as the bytes it was stored as. It is
// idempotent: a record whose key is in dst already is left as it is, so
// running it again copies nothing twice and reports what was there. dst
// must be a new database, or one an earlier copy wrote into (ErrNotEmpty
// otherwise). src is read in one read transaction: the service must not
// be writing to it (Open's file lock sees to that).
//
// It reads every record through the bbolt storage (each, in an order that
// keeps the database's foreign keys whole: documents before views, runs
// before deliveries) and writes batches of them through the PostgreSQL
// storage (load), so that a new kind of record is copied by the storage
// functions that keep it.
func CopyToPostgres(ctx context.Context, src, dst *Store) ([]CopyCount, error) {
	from, ok := src.be.(*boltStore)
	if !ok {
		return nil, fmt.Errorf("store: copy: %w", invalid("the source is not a bbolt store"))
	}
	to, ok := dst.be.(*pgStore)
	if !ok {
		return nil, fmt.Errorf("store: copy: %w", invalid("the target is not a PostgreSQL store"))
	}
	if err := to.claimCopy(ctx); err != nil {
		return nil, err
	}
	var out []CopyCount
	count := func(kind string) *CopyCount {
		if len(out) == 0 || out[len(out)-1].Kind != kind {
			out = append(out, CopyCount{Kind: kind})
		}
		return &out[len(out)-1]
	}
	type item struct {
		kind string
		rec  any
	}
	var batch []item
	flush := func() error {
		inserted := make([]bool, len(batch))
		err := to.write(ctx, false, func(w writer) error {
			clear(inserted)
			for i, it := range batch {
				if err := w.(*pgTx).load(it.rec, func(ok bool) { inserted[i] = ok }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i, it := range batch {
			c := count(it.kind)
			if inserted[i] {
				c.Inserted++
			} else {
				c.AlreadyThere++
			}
		}
		batch = batch[:0]
		return nil
	}
	err := from.view(func(tx *bbolt.Tx) error {
		if err := (boltTx{tx}).each(ctx, func(kind string, rec any) error {
			if len(batch) > 0 && batch[len(batch)-1].kind != kind {
				if err := flush(); err != nil {
					return err
				}
			}
			c := count(kind)
			if rec == nil {
				return nil // a kind begins
			}
			c.Read++
			if why := copySkip(rec); why != "" {
				c.Skipped++
				c.SkipReason = why
				return nil
			}
			batch = append(batch, item{kind, rec})
			if len(batch) == copyBatch {
				return flush()
			}
			return nil
		}); err != nil {
			return err
		}
		return flush()
	})
	if err != nil {
		return out, fmt.Errorf("store: copy: %w", err)
	}
	// The audit log's and the history's numbers go on from the largest
	// copied.
	for _, table := range []string{"audit", "history"} {
		if _, err := to.pool.Exec(ctx, `SELECT setval(pg_get_serial_sequence('`+table+`', 'seq'), coalesce((SELECT max(seq) FROM `+table+`), 0) + 1, false)`); err != nil {
			return out, fmt.Errorf("store: copy: %s sequence: %w", table, err)
		}
	}
	return out, nil
}

// copySkip says why a record cannot be copied, or "": runs, views and
// conversation references are listed by tenant, and older versions kept
// tenant ids with a NUL byte, which PostgreSQL's text refuses.
func copySkip(rec any) string {
	var tenant string
	switch r := rec.(type) {
	case encoded[Run]:
		tenant = r.rec.TenantID
	case encoded[View]:
		tenant = r.rec.TenantID
	case encoded[ConversationRef]:
		tenant = r.rec.TenantID
	}
	if !keyablePart(tenant) {
		return "a tenant id with a NUL byte"
	}
	return ""
}

// claimCopy refuses a database with records of its own, and marks one
// without as the copy's.
func (s *pgStore) claimCopy(ctx context.Context) error {
	var marked bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM meta WHERE key = $1)`, copyMarker).Scan(&marked); err != nil {
		return fmt.Errorf("store: copy: %w", err)
	}
	if marked {
		return nil
	}
	var used bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs) OR EXISTS (SELECT 1 FROM views) OR EXISTS (SELECT 1 FROM audit)
		OR EXISTS (SELECT 1 FROM conversations) OR EXISTS (SELECT 1 FROM bindings) OR EXISTS (SELECT 1 FROM triggers)
		OR EXISTS (SELECT 1 FROM api_keys) OR EXISTS (SELECT 1 FROM tenant_settings) OR EXISTS (SELECT 1 FROM policy_sets)
		OR EXISTS (SELECT 1 FROM mcp_connections) OR EXISTS (SELECT 1 FROM mcp_auth_requests) OR EXISTS (SELECT 1 FROM history)
		OR EXISTS (SELECT 1 FROM questions)`).Scan(&used)
	if err != nil {
		return fmt.Errorf("store: copy: %w", err)
	}
	if used {
		return fmt.Errorf("store: copy: %w: copy into a new database", ErrNotEmpty)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`, copyMarker, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("store: copy: %w", err)
	}
	return nil
}
