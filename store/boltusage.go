package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// The usage rollup on bbolt: usage/ keyed
// <tenant> 0x00 | D | <metric> 0x00 <label>, where D is the day as 4
// bytes big-endian with the sign bit flipped, so that a tenant's days
// are one range in time order; the value is the count, 8 bytes
// big-endian.

// dayKey is d as 4 bytes that sort in day order.
func dayKey(d int32) [4]byte {
	var k [4]byte
	binary.BigEndian.PutUint32(k[:], uint32(d)^(1<<31))
	return k
}

// usageKey is the key of one counter.
func usageKey(tenant string, day int32, metric, label string) []byte {
	d := dayKey(day)
	k := make([]byte, 0, len(tenant)+1+4+len(metric)+1+len(label))
	k = append(append(k, tenant...), 0)
	k = append(k, d[:]...)
	k = append(append(k, metric...), 0)
	return append(k, label...)
}

func (t boltTx) addUsage(cs []usageCount) error {
	if len(cs) == 0 {
		return nil
	}
	b := t.bucket(bucketUsage)
	for _, c := range cs {
		k := usageKey(c.tenant, c.day, c.metric, c.label)
		n := c.n
		if v := b.Get(k); len(v) == 8 {
			n += int64(binary.BigEndian.Uint64(v))
		}
		if err := b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n))); err != nil {
			return err
		}
	}
	return nil
}

func (t boltTx) usage(tenant string, first, end int32) ([]usageRow, error) {
	prefix := indexKey(nil, tenant)
	lo, hi := dayKey(first), dayKey(end)
	from, to := append(bytes.Clone(prefix), lo[:]...), append(bytes.Clone(prefix), hi[:]...)
	var out []usageRow
	c := t.bucket(bucketUsage).Cursor()
	for k, v := c.Seek(from); k != nil && bytes.Compare(k, to) < 0; k, v = c.Next() {
		rest := k[len(prefix):]
		if len(rest) < 5 || len(v) != 8 {
			return nil, fmt.Errorf("usage key %q is not one the store writes", k)
		}
		metric, label, ok := bytes.Cut(rest[4:], []byte{0})
		if !ok {
			return nil, fmt.Errorf("usage key %q is not one the store writes", k)
		}
		out = append(out, usageRow{day: int32(binary.BigEndian.Uint32(rest[:4]) ^ (1 << 31)), metric: string(metric),
			label: string(label), n: int64(binary.BigEndian.Uint64(v))})
	}
	return out, nil
}

// migrateV9 makes the usage rollup's bucket afresh (a migration stopped
// half way left some counts in it), and backfillV9 counts the runs and
// audit records already stored, by the rule new ones are counted by.
func migrateV9(tx *bbolt.Tx) error {
	if tx.Bucket([]byte(bucketUsage)) != nil {
		if err := tx.DeleteBucket([]byte(bucketUsage)); err != nil {
			return fmt.Errorf("bucket %s: %w", bucketUsage, err)
		}
	}
	if _, err := tx.CreateBucket([]byte(bucketUsage)); err != nil {
		return fmt.Errorf("bucket %s: %w", bucketUsage, err)
	}
	return nil
}

// Phases of backfillV9; its position is a phase byte and the last key done.
const (
	fillUsageRuns  = 'r'
	fillUsageAudit = 'a'
)

func backfillV9(tx *bbolt.Tx, after []byte) ([]byte, error) {
	phase, key := byte(fillUsageRuns), []byte(nil)
	if len(after) > 0 {
		phase, key = after[0], after[1:]
	}
	bucket := bucketRuns
	count := func(v []byte) ([]usageCount, error) {
		var r Run
		err := json.Unmarshal(v, &r)
		return usageOfRun(r), err
	}
	if phase == fillUsageAudit {
		bucket = bucketAudit
		count = func(v []byte) ([]usageCount, error) {
			var r AuditRecord
			err := json.Unmarshal(v, &r)
			return usageOfAudit(r), err
		}
	}
	c := tx.Bucket([]byte(bucket)).Cursor()
	k, v := c.First()
	if key != nil {
		k, v = c.Seek(key)
		if k != nil && bytes.Equal(k, key) {
			k, v = c.Next()
		}
	}
	var cs []usageCount
	n := 0
	for ; k != nil && n < migrateBatch; k, v = c.Next() {
		add, err := count(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", bucket, k, err)
		}
		cs = append(cs, keyableUsage(add)...)
		key = bytes.Clone(k)
		n++
	}
	if err := (boltTx{tx}).addUsage(mergeUsage(cs)); err != nil {
		return nil, err
	}
	switch {
	case k != nil:
		return append([]byte{phase}, key...), nil
	case phase == fillUsageRuns:
		return []byte{fillUsageAudit}, nil
	}
	return nil, nil
}
