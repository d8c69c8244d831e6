package chartjs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"teamsbot/internal/chartjs"
)

// The committed chart.js is exactly what build.mjs makes from the locked
// Chart.js and esbuild: a bump of either in package-lock.json, or an edit
// of entry.js, without `go generate ./internal/chartjs` fails here.
func TestChartScriptIsBuiltFromTheLockedPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Node and the npm packages of package-lock.json; skipped under -short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: %v (./test.sh installs it)", err)
	}
	out := filepath.Join(t.TempDir(), "chart.js")
	if b, err := exec.Command(node, "build.mjs", out).CombinedOutput(); err != nil {
		t.Fatalf("build.mjs: %v (run npm ci at the repository root)\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(built) != chartjs.Script() {
		t.Fatalf("chart.js is not what the locked packages build (%d bytes built, %d committed): run go generate ./internal/chartjs", len(built), len(chartjs.Script()))
	}
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
