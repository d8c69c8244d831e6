package bot

import (
	"sync"
	"time"
)

// seenSet remembers keys (conversation and activity id) for a while so a
// request Teams retries after its 15-second timeout never runs the agent a
// second time. It is bounded: past max entries the oldest are forgotten.
type seenSet struct {
	ttl time.Duration
	max int

	mu    sync.Mutex
	at    map[string]time.Time
	order []seenEntry // insertion order, oldest first
}

type seenEntry struct {
	key string
	at  time.Time
}

func newSeenSet(ttl time.Duration, max int) *seenSet {
	return &seenSet{ttl: ttl, max: max, at: make(map[string]time.Time)}
}

// firstTime records key and reports whether it was not already there.
func (s *seenSet) firstTime(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.at[key]; ok && now.Sub(t) < s.ttl {
		return false
	}
	// Forget what expired or overflows, oldest first. Re-slicing forward
	// is amortised by append's reallocation.
	drop := 0
	for drop < len(s.order) {
		e := s.order[drop]
		if now.Sub(e.at) < s.ttl && len(s.order)-drop < s.max {
			break
		}
		// The key may have been added again later; only its own entry
		// removes it.
		if t, ok := s.at[e.key]; ok && t.Equal(e.at) {
			delete(s.at, e.key)
		}
		drop++
	}
	s.order = s.order[drop:]
	s.at[key] = now
	s.order = append(s.order, seenEntry{key, now})
	return true
}

// forget removes key, so a turn that was refused for lack of capacity can
// be accepted when Teams retries it.
func (s *seenSet) forget(key string) {
	s.mu.Lock()
	delete(s.at, key)
	s.mu.Unlock()
}
