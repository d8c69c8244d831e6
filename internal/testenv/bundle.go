package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Bundle is one file a package's build.mjs makes from the npm packages of
// package-lock.json, and the text the package embeds of it.
type Bundle struct {
	Name, Committed string
}

// CheckBuiltFromTheLock runs `node build.mjs OUT...` in the test's package
// folder, one output per bundle in their order, and fails t for each
// bundle whose build is not the committed text: a bump of a package in
// package-lock.json, or an edit of the build's inputs, without `go
// generate` then fails, so that what the binary embeds cannot drift from
// what the lock names. It needs Node and the npm packages (./test.sh
// installs both), and skips under -short.
func CheckBuiltFromTheLock(t *testing.T, generate string, bundles ...Bundle) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Node and the npm packages of package-lock.json; skipped under -short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: %v (./test.sh installs it)", err)
	}
	dir := t.TempDir()
	args := []string{"build.mjs"}
	for _, b := range bundles {
		args = append(args, filepath.Join(dir, b.Name))
	}
	if out, err := exec.Command(node, args...).CombinedOutput(); err != nil {
		t.Fatalf("build.mjs: %v (run npm ci at the repository root)\n%s", err, out)
	}
	for i, b := range bundles {
		built, err := os.ReadFile(args[i+1])
		if err != nil {
			t.Fatal(err)
		}
		if string(built) != b.Committed {
			t.Errorf("%s is not what the locked packages build (%d bytes built, %d committed): run %s", b.Name, len(built), len(b.Committed), generate)
		}
	}
}
