package teamsjs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"teamsbot/internal/teamsjs"
	"teamsbot/internal/testenv"
)

// The committed teams.js is exactly what build.mjs makes from the locked
// @microsoft/teams-js and esbuild: a bump of either in package-lock.json,
// or an edit of entry.js, without `go generate ./internal/teamsjs` fails
// here, so the embedded script cannot drift from what the lock names.
func TestTeamsScriptIsBuiltFromTheLockedPackages(t *testing.T) {
	testenv.CheckBuiltFromTheLock(t, "go generate ./internal/teamsjs", testenv.Bundle{Name: "teams.js", Committed: teamsjs.Script()})
}

// package.json pins teams-js exactly (a 2.x of 2.19 or later, which the
// cloud.microsoft hosts need, per "Prerequisites for tabs"), and the
// embedded script names that version.
func TestTeamsJSIsPinned(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	v := pkg.DevDependencies["@microsoft/teams-js"]
	var major, minor, patch int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); n != 3 || fmt.Sprintf("%d.%d.%d", major, minor, patch) != v {
		t.Fatalf("package.json has @microsoft/teams-js %q, want an exact version", v)
	}
	if major != 2 || minor < 19 {
		t.Fatalf("@microsoft/teams-js %s: want 2.19 or later in 2.x", v)
	}
	if !strings.HasPrefix(teamsjs.Script(), "/*! @microsoft/teams-js "+v+" ") {
		t.Fatalf("teams.js does not carry teams-js %s: %.80s", v, teamsjs.Script())
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
