package signin

// UsedStates is how many finished sign-in states s remembers.
func UsedStates(s *Service) int {
	s.used.mu.Lock()
	defer s.used.mu.Unlock()
	return len(s.used.m)
}
