package testenv

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// ValidateTeamsManifest runs Microsoft's manifest validator, npm
// @microsoft/app-manifest 1.1.2 (the library behind the Agents Toolkit's
// `validate --manifest-file`), on a manifest.json through
// manifest/testdata/validate.cjs, offline. It returns the validator's
// errors; a validator that cannot run fails the test (it skips only under
// -short).
func ValidateTeamsManifest(t *testing.T, manifestJSON []byte) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Node and npm @microsoft/app-manifest; skipped under -short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed, so the official validator cannot run: %v (./test.sh installs it)", err)
	}
	// This file is internal/testenv/manifest.go: the script is two
	// folders up, whichever package's test calls it.
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "..", "manifest", "testdata", "validate.cjs")
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, manifestJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, script, path).Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		stderr := ""
		if exit != nil {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("the official validator could not run (%v; run npm ci at the repository root):\n%s%s", err, out, stderr)
	}
	var res struct{ Errors []string }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the validator's output %q: %v", out, err)
	}
	if (err == nil) != (len(res.Errors) == 0) {
		t.Fatalf("the validator exited with %v but reported %q", err, res.Errors)
	}
	return res.Errors
}
