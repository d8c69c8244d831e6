package signin

import "teamsbot/internal/keyfile"

// CookieKeyFile is the name of the file under Options.DataDir that holds
// the cookie keys. Replicas behind one load balancer must share it: a
// session cookie sealed by one is opened by whichever serves the next
// request.
const CookieKeyFile = keyFileName

// CookieKeys is the cookie key file under dir, for `teamsbot keys` to
// list, rotate and retire its keys: the newest seals, every one opens.
func CookieKeys(dir string) keyfile.File { return cookieKeys(dir) }
