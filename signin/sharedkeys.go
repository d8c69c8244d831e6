package signin

import (
	"log/slog"
	"time"

	"teamsbot/internal/keyfile"
)

// CookieKeyFile is the name of the file under Options.DataDir that holds
// the cookie keys. Replicas behind one load balancer must share it: a
// session cookie sealed by one is opened by whichever serves the next
// request.
const CookieKeyFile = keyFileName

// CookieKeys is the cookie key file under dir, for `teamsbot keys` to
// list, rotate and retire its keys: the newest seals, every one opens.
func CookieKeys(dir string) keyfile.File { return cookieKeys(dir) }

// MakeCookieKey reads the cookie key file under dir, creating it when it
// is missing, as New does; an operator makes it once and gives the same
// file to every replica.
func MakeCookieKey(dir string) error {
	_, err := loadSealer(dir, time.Now(), slog.New(slog.DiscardHandler))
	return err
}
