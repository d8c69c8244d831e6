// Package teamsjs carries Microsoft's Teams JavaScript client library,
// @microsoft/teams-js (npm, the version pinned in package-lock.json), bundled
// at build time into one script that the binary embeds: pages shown inside
// Teams load it from this service, never from a CDN, and the service needs
// no Node at run time. The script defines one global, TeamsbotTeams, with
// teams-js's app and authentication namespaces.
//
// teams.js is made by build.mjs (esbuild from package-lock.json) from
// entry.js; `go generate ./internal/teamsjs` makes it again, and a test
// fails when the committed file is not what the locked packages build.
package teamsjs

import (
	_ "embed"

	"teamsbot/internal/web"
)

//go:generate node build.mjs teams.js

//go:embed teams.js
var script string

// Script is the bundled teams-js, for a page's own script element.
func Script() string { return script }

// Hash is the CSP source expression ('sha256-…') that allows Script.
func Hash() string { return web.CSPHash(script) }
