package docs

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layout is README's layout table as rules: the project packages each
// package may import. internal/netaddr, internal/textclip, internal/guid,
// internal/web, internal/web/csp, internal/clientcred, internal/suggest,
// internal/retry, internal/prom and internal/keyfile are the shared
// conventions (typed settings, text clipping, GUIDs, HTTP errors,
// Content-Security-Policy headers, the app's credential and tokens for
// Entra ID's token endpoint, "did you mean", retrying a call, declaring
// metrics, key files with key ids) and are open to every package that
// needs them; internal/testenv and internal/pgtest are for tests only.
var layout = map[string][]string{
	"teamsbot/cmd/teamsbot":        {"*"},
	"teamsbot/mcpapps":             {},
	"teamsbot/agent":               {"teamsbot/mcpapps", "teamsbot/access", "teamsbot/store", "teamsbot/agent/demo"},
	"teamsbot/agent/demo":          {"teamsbot/mcpapps"},
	"teamsbot/access":              {"teamsbot/store"},
	"teamsbot/access/graph":        {},
	"teamsbot/store":               {"teamsbot/mcpapps"},
	"teamsbot/cards":               {"teamsbot/mcpapps"},
	"teamsbot/bot":                 {"teamsbot/agent", "teamsbot/access", "teamsbot/cards", "teamsbot/store"},
	"teamsbot/signin":              {"teamsbot/internal/teamsjs"},
	"teamsbot/viewpage":            {"teamsbot/agent", "teamsbot/access", "teamsbot/mcpapps", "teamsbot/signin", "teamsbot/store", "teamsbot/internal/teamsjs"},
	"teamsbot/admin":               {"teamsbot/access", "teamsbot/signin", "teamsbot/store", "teamsbot/triggers"},
	"teamsbot/triggers":            {"teamsbot/access", "teamsbot/bot", "teamsbot/cards", "teamsbot/store"},
	"teamsbot/manifest":            {},
	"teamsbot/playground":          {"teamsbot/bot", "teamsbot/signin", "teamsbot/store", "teamsbot/viewpage"},
	"teamsbot/docs":                {},
	"teamsbot/bench/load":          {"teamsbot/store"},
	"teamsbot/internal/netaddr":    {},
	"teamsbot/internal/textclip":   {},
	"teamsbot/internal/guid":       {},
	"teamsbot/internal/web":        {"teamsbot/internal/web/csp"},
	"teamsbot/internal/web/csp":    {},
	"teamsbot/internal/clientcred": {"teamsbot/internal/retry"},
	"teamsbot/internal/retry":      {},
	"teamsbot/internal/prom":       {},
	"teamsbot/internal/keyfile":    {},
	"teamsbot/internal/suggest":    {},
	"teamsbot/internal/testenv":    {},
	"teamsbot/internal/pgtest":     {},
	"teamsbot/internal/teamsjs":    {},
}

// shared are the internal packages any package may import.
var shared = []string{"teamsbot/internal/netaddr", "teamsbot/internal/textclip", "teamsbot/internal/web", "teamsbot/internal/web/csp", "teamsbot/internal/guid", "teamsbot/internal/clientcred", "teamsbot/internal/suggest", "teamsbot/internal/retry", "teamsbot/internal/prom", "teamsbot/internal/keyfile"}

// onlyIn names third-party packages that only some packages may import:
// Echo stays in the HTTP parts, the Graph SDK in its one small package
// (it costs minutes to compile), test tools in tests.
var onlyIn = map[string][]string{
	"github.com/labstack/echo/v4":              {"teamsbot/bot", "teamsbot/viewpage", "teamsbot/signin", "teamsbot/cmd/teamsbot", "teamsbot/internal/web", "teamsbot/admin", "teamsbot/playground", "teamsbot/triggers"},
	"github.com/microsoftgraph/msgraph-sdk-go": {"teamsbot/access/graph"},
	"go.etcd.io/bbolt":                         {"teamsbot/store"},
	"github.com/jackc/pgx/v5":                  {"teamsbot/store", "teamsbot/internal/pgtest", "teamsbot/bench/load"},
	"github.com/oauth2-proxy/mockoidc":         {"teamsbot/internal/testenv"},
	"github.com/chromedp/chromedp":             {"teamsbot/internal/testenv"},
}

// TestLayoutImports fails when a package imports what README's layout
// table does not allow it, or when a program package imports test tools.
func TestLayoutImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "teamsbot/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		allowed, ok := layout[pkg]
		if !ok && strings.HasPrefix(pkg, "teamsbot/access/graph/") {
			// The fake Graph, for tests, with the fake Entra's checks.
			allowed, ok = []string{"teamsbot/internal/testenv"}, true
		}
		if !ok {
			t.Errorf("package %s is not in the layout table: add it to README and to this test", pkg)
			continue
		}
		seen++
		for _, imp := range imports {
			if strings.HasPrefix(imp, "teamsbot/") {
				if slices.Contains(allowed, "*") && imp != "teamsbot/internal/testenv" {
					continue
				}
				if !slices.Contains(allowed, imp) && !slices.Contains(shared, imp) {
					t.Errorf("%s imports %s, which the layout does not allow", pkg, imp)
				}
				continue
			}
			for prefix, owners := range onlyIn {
				if (imp == prefix || strings.HasPrefix(imp, prefix+"/")) && !slices.Contains(owners, pkg) &&
					!strings.HasPrefix(pkg, "teamsbot/access/graph/") {
					t.Errorf("%s imports %s, which only %v may", pkg, imp, owners)
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("only %d packages listed", seen)
	}
}

// TestServiceLinksNoTestTools checks the binary's whole dependency graph:
// nothing meant for tests ends up in the service.
func TestServiceLinksNoTestTools(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "teamsbot/cmd/teamsbot").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.SplitSeq(string(out), "\n") {
		for _, bad := range []string{"teamsbot/internal/testenv", "teamsbot/internal/pgtest", "teamsbot/access/graph/fakegraph", "github.com/oauth2-proxy/mockoidc", "github.com/chromedp/"} {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("the service links %s", dep)
			}
		}
	}
}
