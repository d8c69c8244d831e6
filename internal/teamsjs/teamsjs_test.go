package teamsjs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"teamsbot/internal/teamsjs"
)

// The committed teams.js is exactly what build.mjs makes from the locked
// @microsoft/teams-js and esbuild: a bump of either in package-lock.json,
// or an edit of entry.js, without `go generate ./internal/teamsjs` fails
// here, so the embedded script cannot drift from what the lock names.
func TestTeamsScriptIsBuiltFromTheLockedPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Node and the npm packages of package-lock.json; skipped under -short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: %v (./test.sh installs it)", err)
	}
	out := filepath.Join(t.TempDir(), "teams.js")
	if b, err := exec.Command(node, "build.mjs", out).CombinedOutput(); err != nil {
		t.Fatalf("build.mjs: %v (run npm ci at the repository root)\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(built) != teamsjs.Script() {
		t.Fatalf("teams.js is not what the locked packages build (%d bytes built, %d committed): run go generate ./internal/teamsjs", len(built), len(teamsjs.Script()))
	}
	lock, err := os.ReadFile(filepath.Join("..", "..", "node_modules", "@microsoft", "teams-js", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(teamsjs.Script(), "@microsoft/teams-js ") || !strings.Contains(string(lock), `"version"`) {
		t.Fatal("teams.js does not name the teams-js version it carries")
	}
}

// The script defines the global the pages use, and the hash allows it.
func TestScriptAndHash(t *testing.T) {
	if !strings.Contains(teamsjs.Script(), "TeamsbotTeams") {
		t.Fatal("teams.js does not define TeamsbotTeams")
	}
	if h := teamsjs.Hash(); !strings.HasPrefix(h, "'sha256-") {
		t.Fatalf("Hash() = %q", h)
	}
}
