package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/access"
)

// Data rules: the tools an agent's or a tenant's rules deny, and the
// redaction of every string of a result before the model or a view sees it.

// dataRules are compiled data rules: an agent's, and with the tenant's
// own added for one call.
type dataRules struct {
	deny   []string
	redact []*regexp.Regexp
}

func compileRules(rc RulesConfig) dataRules {
	r := dataRules{deny: rc.DenyTools}
	for _, p := range rc.Redact {
		r.redact = append(r.redact, regexp.MustCompile(p)) // validated in New
	}
	return r
}

// with returns the rules and the tenant's own together; neither is
// changed, since the agent's are shared by every call.
func (r dataRules) with(t access.Rules) dataRules {
	if len(t.Deny) == 0 && len(t.Redact) == 0 {
		return r
	}
	return dataRules{deny: slices.Concat(r.deny, t.Deny), redact: slices.Concat(r.redact, t.Redact)}
}

// denies reports the deny rule matching server/tool, if any.
func (r dataRules) denies(server, tool string) (string, bool) {
	for _, d := range r.deny {
		if d == tool || d == server+"/"+tool || d == server+"/*" {
			return d, true
		}
	}
	return "", false
}

const redacted = "[redacted]"

func (r dataRules) redactString(s string) string {
	for _, re := range r.redact {
		s = re.ReplaceAllLiteralString(s, redacted)
	}
	return s
}

// redactResult replaces matching text in every string of a result that
// the model or a view may see, in place: text, every part of a resource
// link and an embedded resource, image and audio metadata, annotations,
// icons, structuredContent (keys included) and every _meta. Only binary
// data (an image's bytes, a resource's blob) is left as it is: a pattern
// of text cannot match it meaningfully. A content type the rules cannot
// walk is withheld rather than passed through. The result is fresh from
// the wire and nobody else holds it.
func (r dataRules) redactResult(res *mcp.CallToolResult) {
	if len(r.redact) == 0 || res == nil {
		return
	}
	res.Meta = r.redactMeta(res.Meta)
	for i, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			c.Text = r.redactString(c.Text)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		case *mcp.ImageContent:
			c.MIMEType = r.redactString(c.MIMEType)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		case *mcp.AudioContent:
			c.MIMEType = r.redactString(c.MIMEType)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		case *mcp.ResourceLink:
			c.URI, c.Name, c.Title = r.redactString(c.URI), r.redactString(c.Name), r.redactString(c.Title)
			c.Description, c.MIMEType = r.redactString(c.Description), r.redactString(c.MIMEType)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
			for j := range c.Icons {
				ic := &c.Icons[j]
				ic.Source, ic.MIMEType = r.redactString(ic.Source), r.redactString(ic.MIMEType)
				ic.Theme = mcp.IconTheme(r.redactString(string(ic.Theme)))
				for k := range ic.Sizes {
					ic.Sizes[k] = r.redactString(ic.Sizes[k])
				}
			}
		case *mcp.EmbeddedResource:
			if rc := c.Resource; rc != nil {
				rc.URI, rc.MIMEType, rc.Text = r.redactString(rc.URI), r.redactString(rc.MIMEType), r.redactString(rc.Text)
				rc.Meta = r.redactMeta(rc.Meta)
			}
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		default:
			res.Content[i] = &mcp.TextContent{Text: fmt.Sprintf("[a %T part was withheld: the data rules cannot redact it]", c)}
		}
	}
	res.StructuredContent = r.redactValue(res.StructuredContent)
}

// redactMeta redacts a _meta map; nil stays nil so that it is still left
// out on the wire.
func (r dataRules) redactMeta(m mcp.Meta) mcp.Meta {
	if m == nil {
		return nil
	}
	out, _ := r.redactValue(map[string]any(m)).(map[string]any)
	return mcp.Meta(out)
}

func (r dataRules) redactAnnotations(a *mcp.Annotations) *mcp.Annotations {
	if a == nil {
		return nil
	}
	a.LastModified = r.redactString(a.LastModified)
	for i := range a.Audience {
		a.Audience[i] = mcp.Role(r.redactString(string(a.Audience[i])))
	}
	return a
}

func (r dataRules) redactValue(v any) any {
	switch v := v.(type) {
	case string:
		return r.redactString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[r.redactString(k)] = r.redactValue(x)
		}
		return out
	case []any:
		for i, x := range v {
			v[i] = r.redactValue(x)
		}
		return v
	case json.RawMessage:
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return v
		}
		return r.redactValue(x)
	default:
		return v
	}
}
