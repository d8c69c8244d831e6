// Package chartjs carries Chart.js (npm, the version pinned in
// package-lock.json) with the admin console's overview charts, bundled at
// build time into one script that the binary embeds: the console loads it
// from this service, never from a CDN, and the service needs no Node at
// run time. The script draws each canvas[data-chart] of the page from the
// table beside it.
//
// chart.js is made by build.mjs (esbuild from package-lock.json) from
// entry.js; `go generate ./internal/chartjs` makes it again, and a test
// fails when the committed file is not what the locked packages build.
package chartjs

import (
	_ "embed"

	"teamsbot/internal/web"
)

//go:generate node build.mjs chart.js

//go:embed chart.js
var script string

// Script is the bundled script, for a page's own script element.
func Script() string { return script }

// Hash is the CSP source expression ('sha256-…') that allows Script.
func Hash() string { return web.CSPHash(script) }
