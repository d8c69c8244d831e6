package fakegraph_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/access/graph/fakegraph"
)

const (
	tenant  = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	other   = "0a0a0a0a-0000-4000-8000-000000000000"
	app     = "5a3b1f3e-0d8e-4c4f-9a57-6f1b2c3d4e5f"
	secret  = "s3cr3t~value"
	user    = "aaaaaaaa-0000-4000-8000-000000000001"
	outer   = "bbbbbbbb-0000-4000-8000-000000000001"
	inner   = "bbbbbbbb-0000-4000-8000-000000000002"
	cycle   = "bbbbbbbb-0000-4000-8000-000000000003"
	unused  = "bbbbbbbb-0000-4000-8000-000000000004"
	missing = "cccccccc-0000-4000-8000-000000000000"
)

func setup(t *testing.T) *fakegraph.Server {
	f := fakegraph.New(t)
	f.AddApp(app, secret)
	f.AddUser(tenant, user)
	f.AddTenant(other)
	for _, g := range []string{outer, inner, cycle, unused} {
		f.AddGroup(tenant, g, "group "+g[len(g)-1:])
	}
	// user ∈ inner ∈ outer, and outer ∈ cycle ∈ inner closes a loop.
	f.AddMember(tenant, inner, user)
	f.AddMember(tenant, outer, inner)
	f.AddMember(tenant, cycle, outer)
	f.AddMember(tenant, inner, cycle)
	return f
}

// getToken runs the client credentials grant and returns the answer's
// status and decoded body.
func getToken(t *testing.T, f *fakegraph.Server, tenantID string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := f.Client().PostForm(strings.ReplaceAll(f.TokenURL(), "{tenant}", tenantID), form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func credentials(f *fakegraph.Server) url.Values {
	return url.Values{"grant_type": {"client_credentials"}, "client_id": {app}, "client_secret": {secret}, "scope": {f.Scope()}}
}

func mustToken(t *testing.T, f *fakegraph.Server, tenantID string) string {
	t.Helper()
	status, body := getToken(t, f, tenantID, credentials(f))
	if status != http.StatusOK {
		t.Fatalf("token: status %d, %v", status, body)
	}
	return body["access_token"].(string)
}

// do sends a Graph request and returns the status and decoded body.
func do(t *testing.T, f *fakegraph.Server, method, path, tok string, body io.Reader, header http.Header) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.BaseURL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestToken(t *testing.T) {
	f := setup(t)
	status, body := getToken(t, f, tenant, credentials(f))
	if status != http.StatusOK || body["token_type"] != "Bearer" || body["expires_in"] != float64(3599) || body["access_token"] == "" {
		t.Fatalf("got %d %v", status, body)
	}
	bad := []struct {
		name   string
		tenant string
		edit   func(url.Values)
		status int
		code   string
	}{
		{"wrong secret", tenant, func(v url.Values) { v.Set("client_secret", "nope") }, 401, "invalid_client"},
		{"unknown app", tenant, func(v url.Values) { v.Set("client_id", missing) }, 400, "unauthorized_client"},
		{"unknown tenant", missing, func(url.Values) {}, 400, "invalid_request"},
		{"other grant", tenant, func(v url.Values) { v.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
		{"scope without .default", tenant, func(v url.Values) { v.Set("scope", "User.Read.All") }, 400, "invalid_scope"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			form := credentials(f)
			tc.edit(form)
			status, body := getToken(t, f, tc.tenant, form)
			if status != tc.status || body["error"] != tc.code || !strings.HasPrefix(body["error_description"].(string), "AADSTS") {
				t.Errorf("got %d %v, want %d %s", status, body, tc.status, tc.code)
			}
		})
	}
	if got := f.TokenRequests(tenant); got != 5 {
		t.Errorf("TokenRequests(%s) = %d, want 5", tenant, got)
	}
}

func TestCheckMemberGroups(t *testing.T) {
	f := setup(t)
	tok := mustToken(t, f, tenant)
	status, body := do(t, f, "POST", "/users/"+user+"/checkMemberGroups", tok,
		strings.NewReader(`{"groupIds":["`+outer+`","`+unused+`","`+strings.ToUpper(cycle)+`","`+missing+`"]}`), jsonHeader)
	if status != http.StatusOK {
		t.Fatalf("status %d %v", status, body)
	}
	if diff := cmp.Diff([]any{outer, cycle}, body["value"]); diff != "" {
		t.Errorf("value (-want +got):\n%s", diff)
	}
}

func TestCheckMemberGroupsGzip(t *testing.T) {
	f := setup(t)
	tok := mustToken(t, f, tenant)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, `{"groupIds":["`+inner+`"]}`)
	zw.Close()
	h := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	status, body := do(t, f, "POST", "/users/"+user+"/checkMemberGroups", tok, &buf, h)
	if status != http.StatusOK || cmp.Diff([]any{inner}, body["value"]) != "" {
		t.Fatalf("got %d %v", status, body)
	}
}

func TestGraphErrors(t *testing.T) {
	f := setup(t)
	tok := mustToken(t, f, tenant)
	otherTok := mustToken(t, f, other)
	ids := func(n int) string {
		var s []string
		for range n {
			s = append(s, `"`+unused+`"`)
		}
		return `{"groupIds":[` + strings.Join(s, ",") + `]}`
	}
	tests := []struct {
		name   string
		path   string
		tok    string
		body   string
		status int
		code   string
	}{
		{"no token", "/users/" + user + "/checkMemberGroups", "", ids(1), 401, "InvalidAuthenticationToken"},
		{"forged token", "/users/" + user + "/checkMemberGroups", "forged", ids(1), 401, "InvalidAuthenticationToken"},
		{"user of another tenant", "/users/" + user + "/checkMemberGroups", otherTok, ids(1), 404, "Request_ResourceNotFound"},
		{"unknown user", "/users/" + missing + "/checkMemberGroups", tok, ids(1), 404, "Request_ResourceNotFound"},
		{"21 ids", "/users/" + user + "/checkMemberGroups", tok, ids(21), 400, "Request_BadRequest"},
		{"no groupIds", "/users/" + user + "/checkMemberGroups", tok, `{}`, 400, "Request_BadRequest"},
		{"unknown field", "/users/" + user + "/checkMemberGroups", tok, `{"groupIds":[],"x":1}`, 400, "BadRequest"},
		{"unknown group", "/groups/" + missing + "?$select=displayName", tok, "", 404, "Request_ResourceNotFound"},
		{"unknown property", "/groups/" + outer + "?$select=mail", tok, "", 400, "BadRequest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method, h := "POST", jsonHeader
			if tc.body == "" {
				method, h = "GET", nil
			}
			status, body := do(t, f, method, tc.path, tc.tok, strings.NewReader(tc.body), h)
			if status != tc.status || errorCode(body) != tc.code {
				t.Errorf("got %d %v, want %d %s", status, body, tc.status, tc.code)
			}
		})
	}
}

func TestGetGroup(t *testing.T) {
	f := setup(t)
	tok := mustToken(t, f, tenant)
	status, body := do(t, f, "GET", "/groups/"+outer+"?%24select=displayName", tok, nil, nil)
	if status != http.StatusOK || body["displayName"] != "group 1" || body["id"] != nil {
		t.Fatalf("got %d %v", status, body)
	}
	status, body = do(t, f, "GET", "/groups/"+outer, tok, nil, nil)
	if status != http.StatusOK || body["displayName"] != "group 1" || body["id"] != outer {
		t.Fatalf("got %d %v", status, body)
	}
	if got := f.Counts().GetGroup; got != 2 {
		t.Errorf("Counts().GetGroup = %d, want 2", got)
	}
}

func TestKnobs(t *testing.T) {
	f := setup(t)
	tok := mustToken(t, f, tenant)
	path := "/groups/" + outer + "?$select=displayName"

	f.Throttle(2, 1500*time.Millisecond)
	for range 2 {
		req, _ := http.NewRequest("GET", f.BaseURL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := f.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
			t.Errorf("throttled: got %d Retry-After %q, want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if status, _ := do(t, f, "GET", path, tok, nil, nil); status != 200 {
		t.Errorf("after throttling: status %d", status)
	}

	f.Down(true)
	if status, body := do(t, f, "GET", path, tok, nil, nil); status != 503 || errorCode(body) != "serviceNotAvailable" {
		t.Errorf("down: got %d %v", status, body)
	}
	if status, body := getToken(t, f, tenant, credentials(f)); status != 503 || body["error"] != "temporarily_unavailable" {
		t.Errorf("down, token: got %d %v", status, body)
	}
	f.Down(false)
	f.TokenDown(true)
	if status, _ := getToken(t, f, tenant, credentials(f)); status != 503 {
		t.Errorf("token down: token status %d", status)
	}
	if status, _ := do(t, f, "GET", path, tok, nil, nil); status != 200 {
		t.Errorf("token down: Graph status %d", status)
	}
	f.TokenDown(false)

	f.Delay(100 * time.Millisecond)
	start := time.Now()
	do(t, f, "GET", path, tok, nil, nil)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("delayed request took %v", d)
	}
	want := fakegraph.Counts{Token: 3, GetGroup: 6}
	if diff := cmp.Diff(want, f.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}
