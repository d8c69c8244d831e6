package signin

// UsedStates is how many finished sign-in states s remembers.
func UsedStates(s *Service) int {
	s.used.mu.Lock()
	defer s.used.mu.Unlock()
	return len(s.used.m)
}

// ForThisService is forThisService, for tests.
func (s *Service) ForThisService(token string) bool { return s.forThisService(token) }
