package access

import "context"

// ElicitationAllowed reports whether the tenant lets server ask its people
// for input (elicitation).
func (s *Service) ElicitationAllowed(ctx context.Context, tenantID, server string) bool {
	return true
}
