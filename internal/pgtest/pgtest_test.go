package pgtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv makes the test binary run TestChild's body: a test that asks
// for a database of a server that cannot be reached.
const childEnv = "PGTEST_CHILD"

func TestChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestUnreachableServerFails")
	}
	Database(t)
	t.Log("got a database")
}

// A test that needs PostgreSQL fails, rather than skips, when the server
// is not set or cannot be reached; under -short it is skipped.
func TestUnreachableServerFails(t *testing.T) {
	for _, c := range []struct {
		name, url, flag, want string
		fails                 bool
	}{
		{"unset", "", "", EnvURL + " is not set", true},
		{"unreachable", "postgres://nobody@127.0.0.1:1/postgres?connect_timeout=2", "", "cannot be reached", true},
		{"short", "", "-test.short", "left out under -short", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"-test.run=^TestChild$", "-test.v"}
			if c.flag != "" {
				args = append(args, c.flag)
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), childEnv+"=1", EnvURL+"="+c.url)
			out, err := cmd.CombinedOutput()
			if (err != nil) != c.fails || !strings.Contains(string(out), c.want) {
				t.Errorf("child (%v) printed:\n%s\nwant it to fail: %v, saying %q", err, out, c.fails, c.want)
			}
			if strings.Contains(string(out), "got a database") {
				t.Error("the child got a database")
			}
		})
	}
}
