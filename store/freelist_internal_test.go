package store

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// noFreelist is bbolt's mark, in a meta page, of a file whose free list
// was not written: an open must walk every page to rebuild it.
const noFreelist = 0xffffffffffffffff

// fileFreelist reads the free list's page id from the newer of the file's
// two meta pages (bbolt's layout: a 16-byte page header, then magic,
// version, page size and flags of 4 bytes each, the root bucket's 16
// bytes, the free list's page id, the high-water page id and the txid).
func fileFreelist(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.LittleEndian.Uint32(b[16+8:]))
	var best, txid uint64
	for i := range 2 {
		m := b[i*pageSize+16:]
		if tx := binary.LittleEndian.Uint64(m[48:]); i == 0 || tx > txid {
			txid, best = tx, binary.LittleEndian.Uint64(m[32:])
		}
	}
	return best
}

// A clean close leaves the free list in the file, so that the next open
// need not walk it; a commit after that drops it again, as NoFreelistSync
// has every commit do, so a file whose writer was killed is walked.
func TestCleanCloseKeepsTheFreeList(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	st, err := Open(ctx, path, Options{OpenTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := st.RecordArrival(ctx, "conv\x00act-"+string(rune('a'+i%26))+time.Duration(i).String(), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// While the store is open its commits skip the free list.
	if got := fileFreelist(t, path); got != noFreelist {
		t.Errorf("an open store's last commit wrote the free list (page %d); commits should skip it", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileFreelist(t, path); got == noFreelist {
		t.Fatal("a clean close left no free list: the next open walks the whole file")
	}

	// The next open reads it and works; its first commit drops it.
	st, err = Open(ctx, path, Options{OpenTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if seen, err := st.Seen(ctx, "conv\x00act-a0s"); err != nil || !seen {
		t.Errorf("after reopening: Seen = %v, %v; want the arrival kept", seen, err)
	}
	if err := st.RecordArrival(ctx, "conv\x00after", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := fileFreelist(t, path); got != noFreelist {
		t.Errorf("a commit after reopening kept the free list (page %d): a crash now would leave a stale one", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// bbolt itself agrees the file is sound.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Errorf("bbolt's check after a clean close: %v", err)
	}
}
