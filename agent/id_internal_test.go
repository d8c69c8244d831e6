package agent

import (
	"slices"
	"testing"
	"time"
)

// Ids sort as the times they were made at (so that the store appends new
// views at the end of its tree), are URL-safe, and differ even when made
// in the same millisecond.
func TestIDsSortByTimeAndStayUnguessable(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var ids []string
	seen := map[string]bool{}
	for i := range 2000 {
		// Many ids a millisecond, and steps across bit boundaries.
		at := base.Add(time.Duration(i/4) * time.Millisecond).Add(time.Duration(i%4) * 37 * time.Hour)
		id := idAt(at)
		if len(id) != 26 {
			t.Fatalf("id %q has %d characters, want 26", id, len(id))
		}
		for _, c := range []byte(id) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("id %q is not URL-safe", id)
			}
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	// Same millisecond: the random part still differs.
	a, b := idAt(base), idAt(base)
	if a[:10] != b[:10] || a == b {
		t.Errorf("two ids of one millisecond: %q and %q; want the same clock, different random parts", a, b)
	}
	// Order: sorting the ids bytewise sorts them by time.
	type made struct {
		id string
		at time.Time
	}
	var all []made
	for i, id := range ids {
		all = append(all, made{id, base.Add(time.Duration(i/4) * time.Millisecond).Add(time.Duration(i%4) * 37 * time.Hour)})
	}
	slices.SortFunc(all, func(x, y made) int {
		if x.id < y.id {
			return -1
		}
		if x.id > y.id {
			return 1
		}
		return 0
	})
	for i := 1; i < len(all); i++ {
		if all[i].at.Before(all[i-1].at) {
			t.Fatalf("id %q (%s) sorts after %q (%s)", all[i].id, all[i].at, all[i-1].id, all[i-1].at)
		}
	}
	if idAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) > idAt(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Error("an id of 2026 sorts after one of 2100")
	}
}
