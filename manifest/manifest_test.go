package manifest_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"teamsbot/manifest"
)

const botID = "00000000-0000-4000-8000-0000000000b0"

func options() manifest.Options {
	return manifest.Options{
		Developer: "Contoso IT", WebsiteURL: "https://bot.contoso.example", PrivacyURL: "https://bot.contoso.example/privacy",
		TermsURL: "https://bot.contoso.example/terms", ShortName: "Assistant", FullName: "Contoso Assistant",
		ShortDescription: "Answers with your organisation's tools", FullDescription: "Ask a question; the answer names each interactive view and opens it.",
		BotID: botID, PublicBaseURL: "https://bot.contoso.example", SandboxBaseURL: "https://sandbox.contoso.example",
		SignInClientID: "11111111-2222-4333-8444-555555555555", SignInResource: "api://bot.contoso.example/11111111-2222-4333-8444-555555555555",
	}
}

// schema is the official Teams manifest schema 1.29, from shared/.
func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	// The schema as the project received it, beside the checkout; in a
	// checkout elsewhere, the same version as Microsoft's validator
	// package ships it (npm @microsoft/app-manifest, which ./test.sh
	// installs from the lock file; the two differ only in layout).
	f, err := os.Open(filepath.Join("..", "..", "shared", "schemas", "MicrosoftTeams.v1.29.schema.json"))
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(filepath.Join("..", "node_modules", "@microsoft", "app-manifest", "build", "json-schemas", "teams", "v1.29", "MicrosoftTeams.schema.json"))
	}
	if err != nil {
		t.Fatalf("the official schema (run ./test.sh, which installs it): %v", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	// The schema's patterns are ECMAScript's (some look ahead), as JSON
	// Schema says they are; Go's regexp cannot read them all.
	c.UseRegexpEngine(ecmaRegexp)
	if err := c.AddResource(manifest.SchemaURL, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(manifest.SchemaURL)
	if err != nil {
		t.Fatalf("compile the schema: %v", err)
	}
	return s
}

// ecmaRegexp compiles a pattern as ECMAScript does.
func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	return ecma{re}, nil
}

type ecma struct{ re *regexp2.Regexp }

func (e ecma) MatchString(s string) bool { ok, _ := e.re.MatchString(s); return ok }
func (e ecma) String() string            { return e.re.String() }

func unzip(t *testing.T, pkg []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(pkg), int64(len(pkg)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(r)
		r.Close()
		out[f.Name] = b.Bytes()
	}
	return out
}

// The package is flat, its manifest.json passes the official schema, and
// a broken manifest does not (so the validator really validates).
func TestPackageValidatesAgainstTheOfficialSchema(t *testing.T) {
	pkg, err := manifest.Build(options())
	if err != nil {
		t.Fatal(err)
	}
	files := unzip(t, pkg)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"color.png", "manifest.json", "outline.png"}) {
		t.Fatalf("package holds %v, want exactly manifest.json, color.png, outline.png at its root", names)
	}
	s := schema(t)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(files["manifest.json"]))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(doc); err != nil {
		t.Fatalf("manifest.json fails the schema: %v\n%s", err, files["manifest.json"])
	}
	var m map[string]any
	json.Unmarshal(files["manifest.json"], &m)
	if m["$schema"] != manifest.SchemaURL || m["id"] != manifest.AppIDFor(botID) {
		t.Errorf("$schema %v id %v", m["$schema"], m["id"])
	}
	if d := m["validDomains"].([]any); len(d) != 2 || d[0] != "bot.contoso.example" || d[1] != "sandbox.contoso.example" {
		t.Errorf("validDomains %v", d)
	}
	bot := m["bots"].([]any)[0].(map[string]any)
	if bot["botId"] != botID || len(bot["scopes"].([]any)) != 3 || !strings.Contains(string(files["manifest.json"]), `"/tools"`) {
		t.Errorf("bot %v", bot)
	}
	for _, broken := range []func(map[string]any){
		func(m map[string]any) { m["id"] = "not-a-guid" },
		func(m map[string]any) { m["accentColor"] = "blue" },
		func(m map[string]any) { m["name"].(map[string]any)["short"] = strings.Repeat("x", 31) },
		func(m map[string]any) { delete(m, "developer") },
	} {
		var c map[string]any
		json.Unmarshal(files["manifest.json"], &c)
		broken(c)
		b, _ := json.Marshal(c)
		doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err := s.Validate(doc); err == nil {
			t.Errorf("a broken manifest passed the schema: %s", b)
		}
	}
}

// The icons have Teams' sizes; the outline is white on transparent.
func TestIcons(t *testing.T) {
	pkg, err := manifest.Build(options())
	if err != nil {
		t.Fatal(err)
	}
	files := unzip(t, pkg)
	decode := func(name string) image.Image {
		img, err := png.Decode(bytes.NewReader(files[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return img
	}
	color := decode("color.png")
	if b := color.Bounds(); b.Dx() != 192 || b.Dy() != 192 {
		t.Errorf("color.png is %v", b)
	}
	for y := range 192 {
		for x := range 192 {
			if _, _, _, a := color.At(x, y).RGBA(); a != 0xffff {
				t.Fatalf("color.png is not opaque at %d,%d", x, y)
			}
		}
	}
	outline := decode("outline.png")
	if b := outline.Bounds(); b.Dx() != 32 || b.Dy() != 32 {
		t.Errorf("outline.png is %v", b)
	}
	transparent := 0
	for y := range 32 {
		for x := range 32 {
			r, g, b, a := outline.At(x, y).RGBA()
			switch {
			case a == 0:
				transparent++
			case a == 0xffff && r == 0xffff && g == 0xffff && b == 0xffff:
			default:
				t.Fatalf("outline.png at %d,%d is %v, neither transparent nor white", x, y, outline.At(x, y))
			}
		}
	}
	if transparent < 32*32/2 || transparent == 32*32 {
		t.Errorf("outline.png: %d of 1024 pixels transparent", transparent)
	}
}

// Every missing or invalid input is named in one error, and nothing is
// written.
func TestEveryMistakeAtOnce(t *testing.T) {
	o := manifest.Options{BotID: "not-a-guid", Version: "1.0", AccentColor: "red", ShortName: strings.Repeat("n", 31),
		WebsiteURL: "http://bot.example", PublicBaseURL: "https://bot.example", SignInClientID: "x"}
	var w bytes.Buffer
	err := manifest.Write(&w, o)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"bot id", "version", "accent color", "short name has 31", "developer name is required",
		"short description is required", "website URL", "privacy URL", "terms of use URL", "sign-in client id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
	if w.Len() != 0 {
		t.Errorf("%d bytes written despite the error", w.Len())
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Errorf("not one joined error: %T", err)
	}
	// Each mistake names its input, for the command line to name the flag
	// or the variable that sets it.
	var inputs []string
	for _, e := range joined.Unwrap() {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				var ie *manifest.InputError
				if errors.As(e, &ie) {
					inputs = append(inputs, ie.Input)
				}
			}
		}
	}
	for _, want := range []string{"BotID", "Version", "AccentColor", "ShortName", "Developer", "ShortDescription", "WebsiteURL", "PrivacyURL", "TermsURL", "SignInClientID"} {
		if !slices.Contains(inputs, want) {
			t.Errorf("no mistake names the input %s: %v", want, inputs)
		}
	}
}

// The app id derived from the bot id is stable and differs between bots;
// one input gives the same package.
func TestStableAppID(t *testing.T) {
	a, b := manifest.AppIDFor(botID), manifest.AppIDFor("00000000-0000-4000-8000-0000000000b1")
	if a != manifest.AppIDFor(strings.ToUpper(botID)) || a == b {
		t.Errorf("ids %s %s", a, b)
	}
	p1, _ := manifest.Build(options())
	p2, _ := manifest.Build(options())
	if !bytes.Equal(p1, p2) {
		t.Error("the same options gave two packages")
	}
}
