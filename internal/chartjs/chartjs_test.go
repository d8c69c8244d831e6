package chartjs_test

import (
	"strings"
	"testing"

	"teamsbot/internal/chartjs"
	"teamsbot/internal/testenv"
)

// The committed chart.js is exactly what build.mjs makes from the locked
// Chart.js and esbuild: a bump of either in package-lock.json, or an edit
// of entry.js, without `go generate ./internal/chartjs` fails here.
func TestChartScriptIsBuiltFromTheLockedPackages(t *testing.T) {
	testenv.CheckBuiltFromTheLock(t, "go generate ./internal/chartjs", testenv.Bundle{Name: "chart.js", Committed: chartjs.Script()})
}

// The script names the Chart.js version package.json pins, and the hash
// allows it.
func TestScriptNamesThePinnedVersion(t *testing.T) {
	if !strings.HasPrefix(chartjs.Script(), "/*! Chart.js 4.6.1 ") {
		t.Fatalf("chart.js does not carry Chart.js 4.6.1: %.80s", chartjs.Script())
	}
	if h := chartjs.Hash(); !strings.HasPrefix(h, "'sha256-") {
		t.Fatalf("Hash() = %q", h)
	}
}
