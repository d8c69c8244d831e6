package viewpage

import "teamsbot/internal/keyfile"

// TokenKeyFile is the name of the file under DataDir that holds the frame
// token keys. Replicas behind one load balancer must share it: a frame
// token minted by one is verified by whichever serves the frame.
const TokenKeyFile = keyFileName

// TokenKeys is the frame token key file under dir, for `teamsbot keys` to
// list, rotate and retire its keys: the newest signs, every one verifies.
func TokenKeys(dir string) keyfile.File { return tokenKeyFile(dir) }
