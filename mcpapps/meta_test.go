package mcpapps

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaJSON decodes a tool's or resource's _meta as it arrives on the wire.
func metaJSON(t testing.TB, s string) mcp.Meta {
	t.Helper()
	if s == "" {
		return nil
	}
	var m mcp.Meta
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}

func TestReadToolUI(t *testing.T) {
	tests := []struct {
		name      string
		meta      string
		wantURI   string
		wantModel bool
		wantApp   bool
	}{
		{"no meta", ``, "", true, true},
		{"no ui", `{"other":1}`, "", true, true},
		{"ui null", `{"ui":null}`, "", true, true},
		{"resource uri", `{"ui":{"resourceUri":"ui://weather/view.html"}}`, "ui://weather/view.html", true, true},
		{"legacy key only", `{"ui/resourceUri":"ui://old/view.html"}`, "ui://old/view.html", true, true},
		{"nested wins over legacy", `{"ui":{"resourceUri":"ui://new"},"ui/resourceUri":"ui://old"}`, "ui://new", true, true},
		{"empty nested falls back to legacy", `{"ui":{"resourceUri":""},"ui/resourceUri":"ui://old"}`, "ui://old", true, true},
		{"uri returned as declared, scheme judged by CheckURI", `{"ui":{"resourceUri":"https://x.example/v"}}`, "https://x.example/v", true, true},
		{"absent visibility means both", `{"ui":{"resourceUri":"ui://a"}}`, "ui://a", true, true},
		{"model only", `{"ui":{"visibility":["model"]}}`, "", true, false},
		{"app only", `{"ui":{"resourceUri":"ui://a","visibility":["app"]}}`, "ui://a", false, true},
		{"both listed", `{"ui":{"visibility":["model","app"]}}`, "", true, true},
		{"both listed in the other order", `{"ui":{"visibility":["app","model"]}}`, "", true, true},
		{"empty list means nobody", `{"ui":{"visibility":[]}}`, "", false, false},
		{"duplicates", `{"ui":{"visibility":["app","app"]}}`, "", false, true},
		{"unknown keys ignored", `{"ui":{"resourceUri":"ui://a","csp":{"connectDomains":["x"]},"future":true}}`, "ui://a", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadToolUI(metaJSON(t, tt.meta))
			if err != nil {
				t.Fatalf("ReadToolUI: %v", err)
			}
			if got.ResourceURI != tt.wantURI {
				t.Errorf("ResourceURI = %q, want %q", got.ResourceURI, tt.wantURI)
			}
			if m := got.VisibleTo(VisibilityModel); m != tt.wantModel {
				t.Errorf("VisibleTo(model) = %v, want %v", m, tt.wantModel)
			}
			if a := got.VisibleTo(VisibilityApp); a != tt.wantApp {
				t.Errorf("VisibleTo(app) = %v, want %v", a, tt.wantApp)
			}
		})
	}
}

func TestReadToolUIMalformed(t *testing.T) {
	tests := []struct {
		name    string
		meta    string
		wantMsg string // part of the error that tells a person what is wrong
	}{
		{"ui is a string", `{"ui":"ui://a"}`, "_meta.ui: want an object, got string"},
		{"ui is an array", `{"ui":[]}`, "_meta.ui: want an object, got array"},
		{"resourceUri is a number", `{"ui":{"resourceUri":7}}`, "_meta.ui.resourceUri: want a string, got number"},
		{"legacy is an object", `{"ui/resourceUri":{}}`, `_meta["ui/resourceUri"]: want a string, got object`},
		{"visibility is a string", `{"ui":{"visibility":"app"}}`, "_meta.ui.visibility: want an array of strings, got string"},
		{"visibility holds a number", `{"ui":{"visibility":["app",1]}}`, "_meta.ui.visibility[1]: want a string, got number"},
		{"unknown visibility", `{"ui":{"visibility":["model","admin"]}}`, `_meta.ui.visibility[1]: unknown value "admin"`},
		{"visibility is case sensitive", `{"ui":{"visibility":["Model"]}}`, `unknown value "Model"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadToolUI(metaJSON(t, tt.meta))
			if !errors.Is(err, ErrMalformedMeta) {
				t.Fatalf("err = %v, want ErrMalformedMeta", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantMsg)
			}
			if got.ResourceURI != "" || got.VisibleTo(VisibilityModel) || got.VisibleTo(VisibilityApp) {
				t.Errorf("on error got %+v, want no resource and visible to nobody", got)
			}
		})
	}
}

// An in-process server may put Go values, not decoded JSON, in _meta.
func TestReadToolUIGoValues(t *testing.T) {
	type uiMeta struct {
		ResourceURI string   `json:"resourceUri"`
		Visibility  []string `json:"visibility"`
	}
	for name, meta := range map[string]mcp.Meta{
		"typed slice": {"ui": map[string]any{"resourceUri": "ui://a", "visibility": []string{"app"}}},
		"struct":      {"ui": uiMeta{ResourceURI: "ui://a", Visibility: []string{"app"}}},
		"pointer":     {"ui": &uiMeta{ResourceURI: "ui://a", Visibility: []string{"app"}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ReadToolUI(meta)
			if err != nil {
				t.Fatal(err)
			}
			if got.ResourceURI != "ui://a" || got.VisibleTo(VisibilityModel) || !got.VisibleTo(VisibilityApp) {
				t.Errorf("got %+v, want ui://a for the app only", got)
			}
		})
	}
	for name, meta := range map[string]mcp.Meta{
		"channel": {"ui": make(chan int)},
		"NaN":     {"ui": map[string]any{"resourceUri": math.NaN()}},
		"func":    {"ui/resourceUri": func() {}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadToolUI(meta); !errors.Is(err, ErrMalformedMeta) {
				t.Errorf("err = %v, want ErrMalformedMeta", err)
			}
		})
	}
}

func TestVisibleToUnknownCaller(t *testing.T) {
	for _, ui := range []ToolUI{{}, {Visibility: []string{"model", "app"}}} {
		for _, who := range []string{"", "Model", "user", "model "} {
			if ui.VisibleTo(who) {
				t.Errorf("%+v.VisibleTo(%q) = true, want false", ui, who)
			}
		}
	}
}

func TestReadResourceUI(t *testing.T) {
	yes := true
	no := false
	tests := []struct {
		name  string
		item  string
		entry string
		want  ResourceUI
	}{
		{"nothing", ``, ``, ResourceUI{}},
		{
			"full declaration on the item",
			`{"ui":{"csp":{"connectDomains":["https://api.example.com"],"resourceDomains":["https://cdn.example.com"],
			  "frameDomains":["https://www.youtube.com"],"baseUriDomains":["https://base.example.com"]},
			  "permissions":{"camera":{},"microphone":{},"geolocation":{},"clipboardWrite":{},"forms":{}},
			  "domain":"abc.example.net","prefersBorder":true}}`,
			``,
			ResourceUI{
				CSP: CSPDomains{
					ConnectDomains:  []string{"https://api.example.com"},
					ResourceDomains: []string{"https://cdn.example.com"},
					FrameDomains:    []string{"https://www.youtube.com"},
					BaseURIDomains:  []string{"https://base.example.com"},
				},
				Permissions:   Permissions{Camera: true, Microphone: true, Geolocation: true, ClipboardWrite: true, Forms: true},
				Domain:        "abc.example.net",
				PrefersBorder: &yes,
			},
		},
		{
			"list entry used when the item has no ui",
			`{"other":1}`,
			`{"ui":{"permissions":{"forms":{}},"prefersBorder":false}}`,
			ResourceUI{Permissions: Permissions{Forms: true}, PrefersBorder: &no},
		},
		{
			"item wins, no merging with the list entry",
			`{"ui":{"csp":{"connectDomains":["https://a.example.com"]}}}`,
			`{"ui":{"csp":{"resourceDomains":["https://b.example.com"]},"permissions":{"forms":{}}}}`,
			ResourceUI{CSP: CSPDomains{ConnectDomains: []string{"https://a.example.com"}}},
		},
		{
			"permission presence asks, even with content; true asks; false and null do not",
			`{"ui":{"permissions":{"camera":{"why":"scan"},"microphone":true,"geolocation":false,"clipboardWrite":null}}}`,
			``,
			ResourceUI{Permissions: Permissions{Camera: true, Microphone: true}},
		},
		{
			"entries kept as declared; BuildCSP judges them",
			`{"ui":{"csp":{"connectDomains":["http://x", "'unsafe-eval'", ""]}}}`,
			``,
			ResourceUI{CSP: CSPDomains{ConnectDomains: []string{"http://x", "'unsafe-eval'", ""}}},
		},
		{
			"unknown keys ignored",
			`{"ui":{"csp":{"workerDomains":["https://w.example.com"]},"permissions":{"usb":{}},"future":1}}`,
			``,
			ResourceUI{},
		},
		{"nulls are absent", `{"ui":{"csp":null,"permissions":null,"domain":null,"prefersBorder":null}}`, ``, ResourceUI{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadResourceUI(metaJSON(t, tt.item), metaJSON(t, tt.entry))
			if err != nil {
				t.Fatalf("ReadResourceUI: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadResourceUI (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadResourceUIMalformed(t *testing.T) {
	tests := []struct {
		name    string
		item    string
		entry   string
		wantMsg string
	}{
		{"ui is a string", `{"ui":"x"}`, ``, "_meta.ui: want an object, got string (on the content item)"},
		{"list entry ui is an array", ``, `{"ui":[1]}`, "_meta.ui: want an object, got array (on the resources/list entry)"},
		{"csp is an array", `{"ui":{"csp":[]}}`, ``, "_meta.ui.csp: want an object, got array"},
		{"domains is a string", `{"ui":{"csp":{"connectDomains":"https://a.example.com"}}}`, ``, "_meta.ui.csp.connectDomains: want an array of strings, got string"},
		{"domain entry is a number", `{"ui":{"csp":{"frameDomains":["https://a.example.com",3]}}}`, ``, "_meta.ui.csp.frameDomains[1]: want a string, got number"},
		{"permissions is true", `{"ui":{"permissions":true}}`, ``, "_meta.ui.permissions: want an object, got boolean"},
		{"permission is a string", `{"ui":{"permissions":{"forms":"yes"}}}`, ``, "_meta.ui.permissions.forms: want an object such as {}, got string"},
		{"permission is an array", `{"ui":{"permissions":{"camera":[]}}}`, ``, "_meta.ui.permissions.camera: want an object such as {}, got array"},
		{"domain is a number", `{"ui":{"domain":1}}`, ``, "_meta.ui.domain: want a string, got number"},
		{"prefersBorder is a string", `{"ui":{"prefersBorder":"true"}}`, ``, "_meta.ui.prefersBorder: want a boolean, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadResourceUI(metaJSON(t, tt.item), metaJSON(t, tt.entry))
			if !errors.Is(err, ErrMalformedMeta) {
				t.Fatalf("err = %v, want ErrMalformedMeta", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantMsg)
			}
			if diff := cmp.Diff(ResourceUI{}, got); diff != "" {
				t.Errorf("on error want the zero ResourceUI, got:\n%s", diff)
			}
		})
	}
}

// FuzzReadToolUI feeds arbitrary JSON objects to the metadata readers: they
// must never panic, and what they return must keep their promises.
func FuzzReadToolUI(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"ui":{"resourceUri":"ui://a","visibility":["app"]}}`,
		`{"ui/resourceUri":"ui://b","ui":{"visibility":[]}}`,
		`{"ui":{"visibility":["model","bogus"]}}`,
		`{"ui":{"csp":{"connectDomains":["https://a.example.com",1]},"permissions":{"forms":{}},"prefersBorder":true}}`,
		`{"ui":{"csp":{"resourceDomains":["https://*.example.com","http://x"]},"domain":"d"}}`,
		`{"ui":[{"ui":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var meta mcp.Meta
		if err := json.Unmarshal(data, &meta); err != nil {
			return
		}
		ui, err := ReadToolUI(meta)
		if err != nil {
			if !errors.Is(err, ErrMalformedMeta) {
				t.Errorf("error %v does not wrap ErrMalformedMeta", err)
			}
			if ui.ResourceURI != "" || ui.VisibleTo(VisibilityModel) || ui.VisibleTo(VisibilityApp) {
				t.Errorf("on error got %+v, want nothing visible", ui)
			}
		} else {
			for _, v := range ui.Visibility {
				if v != VisibilityModel && v != VisibilityApp {
					t.Errorf("visibility holds %q", v)
				}
			}
		}
		for _, pair := range [][2]mcp.Meta{{meta, nil}, {nil, meta}, {meta, meta}} {
			r, err := ReadResourceUI(pair[0], pair[1])
			if err != nil {
				if !errors.Is(err, ErrMalformedMeta) {
					t.Errorf("error %v does not wrap ErrMalformedMeta", err)
				}
				continue
			}
			BuildCSP(r.CSP)
		}
	})
}
