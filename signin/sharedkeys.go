package signin

import "log/slog"

// CookieKeyFile is the name of the file under Options.DataDir that holds
// the cookie key. Replicas behind one load balancer must share it: a
// session cookie sealed by one is opened by whichever serves the next
// request.
const CookieKeyFile = keyFileName

// MakeCookieKey reads the cookie key file under dir, creating it when it
// is missing, as New does; an operator makes it once and gives the same
// file to every replica.
func MakeCookieKey(dir string) error {
	_, err := loadOrCreateKey(dir, slog.New(slog.DiscardHandler))
	return err
}
