package fakeauth

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"teamsbot/internal/testenv"
)

// TSPackage and TSVersion are the npm package [StartTSExample] runs: the
// MCP TypeScript SDK, version 1.
const (
	TSPackage = "@modelcontextprotocol/sdk"
	TSVersion = "1.32.2"
)

// TSExample is the MCP TypeScript SDK's example server
// (dist/esm/examples/server/simpleStreamableHttp.js) run with --oauth and
// --oauth-strict: an MCP server protected by the SDK's bearer middleware,
// and beside it the SDK's authorization server routes with its
// DemoInMemoryAuthProvider, a third-party authorization server. The demo
// approves every request at once (no consent page, the person is always
// "demo_user"), registers clients dynamically, issues opaque access tokens
// of an hour that the MCP server checks by introspection, with the
// resource's audience under --oauth-strict, and no refresh tokens. Both
// speak plain http on localhost.
type TSExample struct {
	// MCPURL is the MCP endpoint, http://localhost:port/mcp.
	MCPURL string
	// Issuer is the authorization server, http://localhost:port/.
	Issuer string
	// Log is what the servers printed.
	Log *testenv.LogBuffer
}

// StartTSExample starts the example under node until the test ends. Its
// ports are free ones picked on 127.0.0.1 and passed in MCP_PORT and
// MCP_AUTH_PORT (the example's only settings; it listens on every
// interface). It skips the test when the npm package is not installed in
// the repository's node_modules, and fails it for anything else.
func StartTSExample(t testing.TB) *TSExample {
	t.Helper()
	// This file is internal/testenv/fakeauth/tsexample.go: the repository
	// root is three folders up, whichever package's test calls it.
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "..", "node_modules", TSPackage)
	manifest, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, dirErr := os.Stat(dir); errors.Is(dirErr, fs.ErrNotExist) {
			t.Skipf("the npm package %s@%s is not installed in node_modules: it is a devDependency in package.json; run npm ci at the repository root", TSPackage, TSVersion)
		}
	}
	if err != nil {
		t.Fatalf("reading %s's package.json: %v", TSPackage, err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(manifest, &pkg); err != nil || pkg.Version != TSVersion {
		t.Fatalf("node_modules holds %s %q, not %s (%v): run npm ci at the repository root", TSPackage, pkg.Version, TSVersion, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed, so %s cannot run: %v", TSPackage, err)
	}
	mcpPort, authPort := freePort(t), freePort(t)
	log := &testenv.LogBuffer{}
	cmd := exec.Command(node, filepath.Join(dir, "dist", "esm", "examples", "server", "simpleStreamableHttp.js"), "--oauth", "--oauth-strict")
	cmd.Env = append(os.Environ(), "MCP_PORT="+mcpPort, "MCP_AUTH_PORT="+authPort)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s's example: %v", TSPackage, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for _, port := range []string{mcpPort, authPort} {
		for deadline := time.Now().Add(30 * time.Second); ; {
			if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				t.Fatalf("%s's example exited (%v):\n%s", TSPackage, waitErr, log)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's example did not listen on port %s within 30 s:\n%s", TSPackage, port, log)
			}
		}
	}
	return &TSExample{
		MCPURL: "http://localhost:" + mcpPort + "/mcp",
		Issuer: "http://localhost:" + authPort + "/",
		Log:    log,
	}
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on loopback: %v", err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
