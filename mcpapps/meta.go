package mcpapps

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrMalformedMeta reports _meta.ui (or the legacy _meta["ui/resourceUri"])
// whose JSON types or values do not follow the MCP Apps specification.
var ErrMalformedMeta = errors.New("malformed MCP Apps _meta")

// legacyResourceURIKey is the flat, deprecated form of _meta.ui.resourceUri
// that the official server helper still writes beside the nested one.
const legacyResourceURIKey = "ui/resourceUri"

// ReadToolUI reads _meta.ui (and the legacy _meta["ui/resourceUri"]) of a tool.
//
// The nested _meta.ui.resourceUri wins over the legacy key when both are set.
// The URI is returned as declared: CheckURI judges its scheme, so that a
// non-ui:// URI is refused (and audited) like any other bad resource.
//
// Malformed metadata gives an error wrapping ErrMalformedMeta, and then the
// returned ToolUI has no resource and is visible to nobody: a caller that
// keeps going anyway fails closed rather than offering the tool to everyone.
func ReadToolUI(meta mcp.Meta) (ToolUI, error) {
	t, err := readToolUI(meta)
	if err != nil {
		return ToolUI{Visibility: []string{}}, err
	}
	return t, nil
}

func readToolUI(meta mcp.Meta) (ToolUI, error) {
	var t ToolUI
	ui, err := metaObject(meta, "ui", "_meta.ui")
	if err != nil {
		return t, err
	}
	if ui != nil {
		if t.ResourceURI, err = stringField(ui, "resourceUri", "_meta.ui.resourceUri"); err != nil {
			return t, err
		}
		if t.Visibility, err = readVisibility(ui["visibility"]); err != nil {
			return t, err
		}
	}
	if t.ResourceURI == "" {
		v, err := jsonValue(meta[legacyResourceURIKey], `_meta["ui/resourceUri"]`)
		if err != nil {
			return t, err
		}
		if t.ResourceURI, err = asString(v, `_meta["ui/resourceUri"]`); err != nil {
			return t, err
		}
	}
	return t, nil
}

// readVisibility reads _meta.ui.visibility: absent (nil result) means both
// callers; a present list, even an empty one, means exactly its members.
func readVisibility(v any) ([]string, error) {
	const path = "_meta.ui.visibility"
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, malformed(path, "want an array of strings, got %s", jsonType(v))
	}
	out := make([]string, 0, 2)
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, malformed(fmt.Sprintf("%s[%d]", path, i), "want a string, got %s", jsonType(e))
		}
		if s != VisibilityModel && s != VisibilityApp {
			return nil, malformed(fmt.Sprintf("%s[%d]", path, i), "unknown value %.64q (want %q or %q)", s, VisibilityModel, VisibilityApp)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// VisibleTo reports whether who ("model" or "app") may call the tool; an
// absent visibility means both. It asks whether the list includes who, not
// whether it equals some value: ["app"] and [] both hide a tool from the model.
func (t ToolUI) VisibleTo(who string) bool {
	if who != VisibilityModel && who != VisibilityApp {
		return false
	}
	if t.Visibility == nil {
		return true
	}
	return slices.Contains(t.Visibility, who)
}

// ReadResourceUI reads _meta.ui from the content item, or failing that from
// the resources/list entry (either may be nil). The whole object is taken
// from one place; the two are not merged, so the list entry cannot widen
// what the content item declares.
//
// A permission counts as asked for when its key is present with an object
// (the specification's {}) or true; false or null does not ask. Unknown
// keys are ignored, so a newer server still works (an unknown CSP field is
// never added to the policy). Wrong JSON types give an error wrapping
// ErrMalformedMeta.
func ReadResourceUI(item, listEntry mcp.Meta) (ResourceUI, error) {
	src, where := item, "content item"
	if item["ui"] == nil {
		src, where = listEntry, "resources/list entry"
	}
	ui, err := metaObject(src, "ui", "_meta.ui")
	if err != nil || ui == nil {
		return ResourceUI{}, withWhere(err, where)
	}
	r, err := readResourceUI(ui)
	if err != nil {
		return ResourceUI{}, withWhere(err, where)
	}
	return r, nil
}

func readResourceUI(ui map[string]any) (ResourceUI, error) {
	var r ResourceUI
	var err error
	if csp := ui["csp"]; csp != nil {
		m, ok := csp.(map[string]any)
		if !ok {
			return r, malformed("_meta.ui.csp", "want an object, got %s", jsonType(csp))
		}
		fields := []struct {
			key string
			dst *[]string
		}{
			{"connectDomains", &r.CSP.ConnectDomains},
			{"resourceDomains", &r.CSP.ResourceDomains},
			{"frameDomains", &r.CSP.FrameDomains},
			{"baseUriDomains", &r.CSP.BaseURIDomains},
		}
		for _, f := range fields {
			if *f.dst, err = stringList(m[f.key], "_meta.ui.csp."+f.key); err != nil {
				return r, err
			}
		}
	}
	if perms := ui["permissions"]; perms != nil {
		m, ok := perms.(map[string]any)
		if !ok {
			return r, malformed("_meta.ui.permissions", "want an object, got %s", jsonType(perms))
		}
		fields := []struct {
			key string
			dst *bool
		}{
			{"camera", &r.Permissions.Camera},
			{"microphone", &r.Permissions.Microphone},
			{"geolocation", &r.Permissions.Geolocation},
			{"clipboardWrite", &r.Permissions.ClipboardWrite},
			{"forms", &r.Permissions.Forms},
		}
		for _, f := range fields {
			switch v := m[f.key].(type) {
			case nil:
			case map[string]any:
				*f.dst = true
			case bool:
				*f.dst = v
			default:
				return r, malformed("_meta.ui.permissions."+f.key, "want an object such as {}, got %s", jsonType(v))
			}
		}
	}
	if r.Domain, err = stringField(ui, "domain", "_meta.ui.domain"); err != nil {
		return r, err
	}
	switch v := ui["prefersBorder"].(type) {
	case nil:
	case bool:
		r.PrefersBorder = &v
	default:
		return r, malformed("_meta.ui.prefersBorder", "want a boolean, got %s", jsonType(v))
	}
	return r, nil
}

// metaObject returns meta[key] as a JSON object, or nil when it is absent or
// null.
func metaObject(meta mcp.Meta, key, path string) (map[string]any, error) {
	v, err := jsonValue(meta[key], path)
	if err != nil || v == nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed(path, "want an object, got %s", jsonType(v))
	}
	return m, nil
}

// jsonValue turns whatever Go value sits in a Meta into plain JSON values
// (map[string]any, []any, string, float64, bool, nil). Metadata decoded from
// the wire already has that shape, but an in-process server may have put
// []string or its own structs there; one round trip through JSON reads both
// the same way, and a value JSON cannot hold becomes an error, not a panic.
func jsonValue(v any, path string) (any, error) {
	switch v.(type) {
	case nil, string, bool, float64:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, malformed(path, "not representable as JSON: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, malformed(path, "not representable as JSON: %v", err)
	}
	return out, nil
}

func stringField(m map[string]any, key, path string) (string, error) {
	return asString(m[key], path)
}

func asString(v any, path string) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", malformed(path, "want a string, got %s", jsonType(v))
	}
}

func stringList(v any, path string) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, malformed(path, "want an array of strings, got %s", jsonType(v))
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, malformed(fmt.Sprintf("%s[%d]", path, i), "want a string, got %s", jsonType(e))
		}
		out[i] = s
	}
	return out, nil
}

// jsonType names the JSON type of a value produced by jsonValue, for errors.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func malformed(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformedMeta, path, fmt.Sprintf(format, args...))
}

func withWhere(err error, where string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w (on the %s)", err, where)
}
