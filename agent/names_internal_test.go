package agent

import (
	"strings"
	"testing"
)

// Tool names sent to a Chat Completions API must match
// ^[a-zA-Z0-9_-]{1,64}$; the mapping from server/tool is one-to-one and
// stable.
func TestOpenAIToolNamesAreSafeAndOneToOne(t *testing.T) {
	long := strings.Repeat("t", 70)
	tools := []ToolSpec{
		{Name: "demo/sales_report", Server: "demo", Tool: "sales_report"},
		{Name: "crm.v2/find customer", Server: "crm.v2", Tool: "find customer"},
		{Name: "crm.v2/find.customer", Server: "crm.v2", Tool: "find.customer"}, // sanitizes to the same name
		{Name: "srv/" + long, Server: "srv", Tool: long},
		{Name: "srv/" + long + "x", Server: "srv", Tool: long + "x"},
		{Name: "ünï/cödé", Server: "ünï", Tool: "cödé"},
	}
	to, from := toolNames(tools)
	if len(from) != len(tools) {
		t.Fatalf("names collide: %v", to)
	}
	for _, tl := range tools {
		n := to[tl.Name]
		if !openAIName.MatchString(n) {
			t.Errorf("%q -> %q does not match the pattern", tl.Name, n)
		}
		if from[n] != tl.Name {
			t.Errorf("%q -> %q -> %q", tl.Name, n, from[n])
		}
	}
	if to["demo/sales_report"] != "demo__sales_report" {
		t.Errorf("plain name mapped to %q", to["demo/sales_report"])
	}
	again, _ := toolNames(tools)
	for k, v := range to {
		if again[k] != v {
			t.Errorf("mapping of %q changed between turns: %q, %q", k, v, again[k])
		}
	}
}
