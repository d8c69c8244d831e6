package viewpage

import (
	"log/slog"
	"time"

	"teamsbot/internal/keyfile"
)

// TokenKeyFile is the name of the file under DataDir that holds the frame
// token keys. Replicas behind one load balancer must share it: a frame
// token minted by one is verified by whichever serves the frame.
const TokenKeyFile = keyFileName

// TokenKeys is the frame token key file under dir, for `teamsbot keys` to
// list, rotate and retire its keys: the newest signs, every one verifies.
func TokenKeys(dir string) keyfile.File { return tokenKeyFile(dir) }

// MakeTokenKeys reads the frame token key file under dir, creating it with
// a fresh key when it is missing, as New does; an operator makes it once
// and gives the same file to every replica.
func MakeTokenKeys(dir string) error {
	_, err := loadTokenKeys(dir, time.Now(), slog.New(slog.DiscardHandler))
	return err
}
