// Package adaptivecards carries Microsoft's Adaptive Cards renderer,
// adaptivecards (npm, the version pinned in package-lock.json), bundled at
// build time with Teams' host configuration (light and dark) and a
// markdown writer for card text into one script that the binary embeds:
// the playground lays cards out with the renderer Teams' own web client is
// built on, loaded from this service, never from a CDN, and the service
// needs no Node at run time. The script defines one global, TeamsbotCards
// (see entry.js).
//
// The renderer writes card text into the page through three Trusted Types
// policies of its own (Policies), which a page that loads it must allow;
// the only HTML they pass is what markdown.js writes, from text it has
// escaped first.
//
// cards.js is made by build.mjs (esbuild from package-lock.json) from
// entry.js, hostconfig.js and markdown.js; `go generate
// ./internal/adaptivecards` makes it again, and a test fails when the
// committed file is not what the locked packages build.
package adaptivecards

import (
	_ "embed"

	"teamsbot/internal/web"
)

//go:generate node build.mjs cards.js

//go:embed cards.js
var script string

// Script is the bundled renderer, for a page's own script element.
func Script() string { return script }

// Hash is the CSP source expression ('sha256-…') that allows Script.
func Hash() string { return web.CSPHash(script) }

// Policies are the Trusted Types policy names the renderer creates when it
// loads, for a page's trusted-types directive: without them the script
// stops at its first line under require-trusted-types-for 'script'.
func Policies() []string {
	return []string{
		"adaptivecards#markdownPassthroughPolicy",
		"adaptivecards#restoreContentsPolicy",
		"adaptivecards#deprecatedExportedFunctionPolicy",
	}
}
