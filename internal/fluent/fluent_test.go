package fluent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"teamsbot/internal/fluent"
	"teamsbot/internal/testenv"
)

// The committed fluent.js and fluent.css are exactly what build.mjs makes
// from the locked @fluentui packages and esbuild: a bump of either in
// package-lock.json, or an edit of entry.js, base.css or the token list,
// without `go generate ./internal/fluent` fails here, so what the binary
// embeds cannot drift from what the lock names.
func TestFluentIsBuiltFromTheLockedPackages(t *testing.T) {
	testenv.CheckBuiltFromTheLock(t, "go generate ./internal/fluent", testenv.Bundle{Name: "fluent.js", Committed: fluent.Script()}, testenv.Bundle{Name: "fluent.css", Committed: fluent.CSS()})
}

// package.json pins the web components exactly, and the embedded script
// names that version.
func TestWebComponentsArePinned(t *testing.T) {
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
	v := pkg.DevDependencies["@fluentui/web-components"]
	if v == "" || strings.ContainsAny(v, "^~<>=* ") {
		t.Fatalf("package.json has @fluentui/web-components %q, want an exact version", v)
	}
	if !strings.HasPrefix(fluent.Script(), "/*! @fluentui/web-components "+v+" ") {
		t.Fatalf("fluent.js does not carry @fluentui/web-components %s: %.80s", v, fluent.Script())
	}
}

// The stylesheet has every theme the pages follow, the script the
// components and the confirmation, and the hashes allow them.
func TestScriptStyleAndHashes(t *testing.T) {
	css := fluent.CSS()
	for _, want := range []string{"--colorNeutralBackground1:", "@media (prefers-color-scheme: dark)", `html[data-theme="dark"]`,
		`html[data-theme="contrast"]`, "@media (forced-colors: active)"} {
		if !strings.Contains(css, want) {
			t.Errorf("fluent.css lacks %q", want)
		}
	}
	for _, want := range []string{"fluent-dialog", "fluent-button", "data-confirm", `createPolicy("` + fluent.TrustedTypesPolicy + `"`} {
		if !strings.Contains(fluent.Script(), want) {
			t.Errorf("fluent.js lacks %q", want)
		}
	}
	for _, h := range []string{fluent.ScriptHash(), fluent.CSSHash()} {
		if !strings.HasPrefix(h, "'sha256-") {
			t.Errorf("hash %q", h)
		}
	}
}
