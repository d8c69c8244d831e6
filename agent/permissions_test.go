package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/mcpapps"
)

// askingServer has one tool whose view asks for the camera, the
// microphone and forms.
func askingServer() *mcp.Server {
	const uri = "ui://asking/view.html"
	srv := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "record", InputSchema: map[string]any{"type": "object"},
		Meta: mcp.Meta{"ui": map[string]any{"resourceUri": uri}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("recording"), nil
		})
	srv.AddResource(&mcp.Resource{URI: uri, Name: "view", MIMEType: mcpapps.MIMEType},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mcpapps.MIMEType, Text: htmlPage("rec"),
				Meta: mcp.Meta{"ui": map[string]any{"permissions": map[string]any{"camera": map[string]any{}, "microphone": map[string]any{}, "forms": map[string]any{}}}}}}}, nil
		})
	return srv
}

// A view is granted what its resource asked for only where it is allowed
// for its server: forms always, the microphone once the configuration
// file or the tenant's admin allows it, the camera never here; the view
// record and its audit record say what was asked and what was granted.
func TestPermissionsGrantedOnlyWhereAllowed(t *testing.T) {
	tests := []struct {
		name       string
		configured []string
		tenant     []string
		want       []string
	}{
		{"nothing allowed", nil, nil, []string{"forms"}},
		{"allowed by the configuration file", []string{"microphone", "geolocation"}, nil, []string{"microphone", "forms"}},
		{"allowed by the tenant's admin", nil, []string{"microphone"}, []string{"microphone", "forms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			ax, err := access.New(access.Options{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			if tt.tenant != nil {
				admin := access.Person{TenantID: alice.TenantID, UserID: "user-admin", Roles: []string{access.PermAdmin}}
				if err := ax.SetAppPermissions(context.Background(), admin, "asking", tt.tenant); err != nil {
					t.Fatal(err)
				}
			}
			cfg := oneAgent(agent.ServerConfig{Name: "asking", Builtin: "asking", Permissions: tt.configured})
			s := newService(t, cfg, agent.Options{Store: st, AppsEnabled: true, Access: ax,
				Builtins: map[string]func() *mcp.Server{"asking": askingServer}})
			ans := run(t, s, "/record {}")
			if len(ans.Views) != 1 {
				t.Fatalf("views %d, refusals %+v", len(ans.Views), ans.Refusals)
			}
			v := ans.Views[0]
			if got := v.Granted.Names(); !slices.Equal(got, tt.want) {
				t.Errorf("granted %v, want %v", got, tt.want)
			}
			if got := v.Permissions.Names(); !slices.Equal(got, []string{"camera", "microphone", "forms"}) {
				t.Errorf("asked %v", got)
			}
			recs := audit(t, st, agent.AuditView)
			if len(recs) != 1 {
				t.Fatalf("%d view records", len(recs))
			}
			if got := fmt.Sprint(recs[0].Fields["permissionsAsked"]); got != "[camera microphone forms]" {
				t.Errorf("permissionsAsked %s", got)
			}
			if got, want := fmt.Sprint(recs[0].Fields["permissionsGranted"]), "["+strings.Join(tt.want, " ")+"]"; got != want {
				t.Errorf("permissionsGranted %s, want %s", got, want)
			}
		})
	}
}

func TestServerPermissionsConfig(t *testing.T) {
	_, err := agent.LoadConfig([]byte(`
agents:
  - id: default
    servers:
      - name: rec
        builtin: demo
        permissions: [microphone, usb]
`), getenv(nil))
	if err == nil || !strings.Contains(err.Error(), "permissions") || !strings.Contains(err.Error(), "usb") {
		t.Errorf("an unknown permission: %v", err)
	}
}
