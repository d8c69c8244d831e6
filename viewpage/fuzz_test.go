package viewpage_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The server side of the bridge: whatever body a view's page posts to
// POST /api/mcp-apps/{id}/call, signed in as the view's owner and from the
// same origin, the answer is JSON with a status from the expected set,
// never a 500 and never a panic; 200 only for a tool the view may call.
func FuzzCallBody(f *testing.F) {
	e := newEnv(f, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	cl := e.client(alice())
	callURL := e.base + "/api/mcp-apps/" + v.ID + "/call"
	header := map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin", "Origin": e.base}
	for _, s := range []string{
		`{"name":"refresh_sales","arguments":{"region":"Global","quarter":"2026-Q3","revision":1}}`,
		`{"name":"refresh_sales"}`,
		`{"name":"lookup_customer","arguments":{"query":"Acme"}}`,
		`{"name":"refresh_sales","arguments":[1,2]}`,
		`{"name":"","arguments":{}}`,
		`{"name":"refresh_sales","arguments":null}`,
		`{"name":"refresh_sales","arguments":{"region":{"a":[[[[[[[[[[[]]]]]]]]]]]}}}`,
		`{"name":"refresh_sales"} {"name":"x"}`,
		`{"name":"refresh_sales","arguments":"{}"}`,
		`{"name":"refresh\u0000sales"}`,
		`{"name":"../../admin","arguments":{}}`,
		`[`,
		`null`,
		``,
		`{"name":1}`,
		strings.Repeat(`[`, 10000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := do(t, cl, http.MethodPost, callURL, header, body)
		switch r.status {
		case http.StatusOK:
			// Keys are matched exactly: decode as a map, not a struct.
			var req map[string]any
			if json.Unmarshal([]byte(body), &req) != nil || req["name"] != "refresh_sales" {
				t.Fatalf("200 for %q: %s", body, r.body)
			}
		case http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusBadGateway:
		default:
			t.Fatalf("status %d for %q: %s", r.status, body, r.body)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("Content-Type %q for %q", ct, body)
		}
	})
}
