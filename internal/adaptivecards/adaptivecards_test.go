package adaptivecards_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"teamsbot/internal/adaptivecards"
	"teamsbot/internal/testenv"
)

// The committed cards.js is exactly what build.mjs makes from the locked
// adaptivecards and esbuild and this package's sources: a bump of either
// in package-lock.json, or an edit of entry.js, hostconfig.js or
// markdown.js, without `go generate ./internal/adaptivecards` fails here.
func TestCardsScriptIsBuiltFromTheLockedPackages(t *testing.T) {
	testenv.CheckBuiltFromTheLock(t, "go generate ./internal/adaptivecards", testenv.Bundle{Name: "cards.js", Committed: adaptivecards.Script()})
}

// package.json pins adaptivecards exactly, and the embedded script names
// that version.
func TestRendererIsPinned(t *testing.T) {
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
	v := pkg.DevDependencies["adaptivecards"]
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("package.json has adaptivecards %q, want an exact version", v)
	}
	if !strings.HasPrefix(adaptivecards.Script(), "/*! adaptivecards "+v+" ") {
		t.Fatalf("cards.js does not carry adaptivecards %s: %.80s", v, adaptivecards.Script())
	}
}

// Policies names every Trusted Types policy the script creates, and
// nothing else: a page's trusted-types directive made from it lets the
// script load and allows no policy of anyone else's.
func TestPoliciesAreTheScripts(t *testing.T) {
	var created []string
	for _, m := range regexp.MustCompile(`createPolicy\("([^"]+)"`).FindAllStringSubmatch(adaptivecards.Script(), -1) {
		created = append(created, m[1])
	}
	want := slices.Clone(adaptivecards.Policies())
	slices.Sort(created)
	slices.Sort(want)
	if !slices.Equal(created, want) {
		t.Fatalf("the script creates the policies %q, Policies says %q", created, want)
	}
	if !strings.Contains(adaptivecards.Script(), "TeamsbotCards") {
		t.Fatal("cards.js does not define TeamsbotCards")
	}
	if h := adaptivecards.Hash(); !strings.HasPrefix(h, "'sha256-") {
		t.Fatalf("Hash() = %q", h)
	}
}

// The script runs no code made from strings: the pages that load it allow
// neither eval nor new Function.
func TestNoEval(t *testing.T) {
	if m := regexp.MustCompile(`\beval\(|new Function\(|setTimeout\("`).FindString(adaptivecards.Script()); m != "" {
		t.Fatalf("cards.js calls %s", m)
	}
}
