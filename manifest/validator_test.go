package manifest_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"teamsbot/internal/testenv"
	"teamsbot/manifest"
)

// The package's manifest.json passes Microsoft's own validator; manifests
// broken against the schema's patterns or its required keys fail it with
// each fault named, so the validator really reads what it is given.
func TestPackagePassesTheOfficialValidator(t *testing.T) {
	pkg, err := manifest.Build(options())
	if err != nil {
		t.Fatal(err)
	}
	good := unzip(t, pkg)["manifest.json"]
	if errs := testenv.ValidateTeamsManifest(t, good); len(errs) != 0 {
		t.Fatalf("the official validator refuses manifest.json:\n%s\n%s", strings.Join(errs, "\n"), good)
	}

	for name, c := range map[string]struct {
		breakIt func(m map[string]any)
		want    []string
	}{
		"patterns":        {func(m map[string]any) { m["id"], m["accentColor"] = "not-a-guid", "blue" }, []string{"/id", "/accentColor"}},
		"a required key":  {func(m map[string]any) { delete(m["developer"].(map[string]any), "websiteUrl") }, []string{"websiteUrl"}},
		"the bot's scope": {func(m map[string]any) { m["bots"].([]any)[0].(map[string]any)["scopes"] = []any{"everywhere"} }, []string{`key "bots"`}},
	} {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		c.breakIt(m)
		bad, _ := json.Marshal(m)
		all := strings.Join(testenv.ValidateTeamsManifest(t, bad), "\n")
		for _, want := range c.want {
			if !strings.Contains(all, want) {
				t.Errorf("a manifest broken in %s: the errors do not name %s:\n%s", name, want, all)
			}
		}
	}
}

// With the Teams tab additions (views open in Stage View, Teams single
// sign-on) the manifest still passes Microsoft's own validator, names the
// page's domain in validDomains (Stage View opens only content on a valid
// domain) and carries webApplicationInfo with the application ID URI on
// that domain; without a sign-in client id the package is refused.
func TestTeamsTabManifestPassesTheOfficialValidator(t *testing.T) {
	o := options()
	o.TeamsTab = true
	pkg, err := manifest.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	good := unzip(t, pkg)["manifest.json"]
	if errs := testenv.ValidateTeamsManifest(t, good); len(errs) != 0 {
		t.Fatalf("the official validator refuses the Teams tab manifest:\n%s\n%s", strings.Join(errs, "\n"), good)
	}
	var m struct {
		ValidDomains       []string          `json:"validDomains"`
		WebApplicationInfo map[string]string `json:"webApplicationInfo"`
	}
	if err := json.Unmarshal(good, &m); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.ValidDomains, "bot.contoso.example") {
		t.Errorf("validDomains %v lack the page's domain", m.ValidDomains)
	}
	if m.WebApplicationInfo["id"] != o.SignInClientID || m.WebApplicationInfo["resource"] != "api://bot.contoso.example/"+o.SignInClientID {
		t.Errorf("webApplicationInfo %v", m.WebApplicationInfo)
	}

	o.SignInClientID, o.SignInResource = "", ""
	if _, err := manifest.Build(o); err == nil || !strings.Contains(err.Error(), "webApplicationInfo") {
		t.Errorf("a Teams tab manifest without single sign-on: %v", err)
	}
	o = options()
	o.TeamsTab = true
	o.SignInResource = "api://other.example/" + o.SignInClientID
	if _, err := manifest.Build(o); err == nil || !strings.Contains(err.Error(), "application ID URI") {
		t.Errorf("a Teams tab manifest with a resource on another host: %v", err)
	}
}
