// Package fluent carries Microsoft's Fluent 2 design for the service's
// pages (the admin console, the sign-in pages, the view page's chrome):
// @fluentui/web-components and @fluentui/tokens (npm, the versions pinned
// in package-lock.json), bundled at build time into one script and one
// stylesheet that the binary embeds, so that no page loads anything from
// a CDN and the service needs no Node at run time.
//
// fluent.css holds the Fluent 2 design tokens as CSS custom properties,
// for Fluent's web light and dark themes (by the system's colour scheme)
// and Teams' default, dark and contrast themes (html data-theme, which the
// view page's Teams script sets from the Teams context), followed by
// base.css, which styles native elements (buttons, inputs, selects,
// tables, fieldsets, message bars) with them: a page looks like Microsoft
// 365 and its forms work with JavaScript off. Under forced colours
// (Windows high contrast) the browser's system colours win.
//
// fluent.js defines fluent-button, fluent-dialog and fluent-dialog-body,
// sets the whole Fluent theme that matches (and follows changes of the
// colour scheme and of data-theme), and makes every form with a
// data-confirm attribute ask in a Fluent dialog before it posts; confirmed,
// the form posts confirm=yes. Its templates need the Trusted Types policy
// TrustedTypesPolicy on a page that requires Trusted Types.
//
// Both are made by build.mjs (esbuild from package-lock.json) from
// entry.js and base.css; `go generate ./internal/fluent` makes them again,
// and a test fails when the committed files are not what the locked
// packages build.
package fluent

import (
	_ "embed"

	"teamsbot/internal/web/csp"
)

//go:generate node build.mjs fluent.js fluent.css

//go:embed fluent.js
var script string

//go:embed fluent.css
var style string

// TrustedTypesPolicy is the Trusted Types policy that Script creates
// (FAST's, for its templates): a page that requires Trusted Types for
// scripts names it in its trusted-types directive.
const TrustedTypesPolicy = "fast-html"

// Script is the bundled Fluent web components and theme, for a page's own
// script element, after teams-js and the page's Teams script where the
// page has them.
func Script() string { return script }

// ScriptHash is the CSP source expression ('sha256-…') that allows Script.
func ScriptHash() string { return csp.Hash(script) }

// CSS is the tokens and the native elements' styles, for a page's own
// style element, before the page's own stylesheet.
func CSS() string { return style }

// CSSHash is the CSP source expression ('sha256-…') that allows CSS.
func CSSHash() string { return csp.Hash(style) }
