package signin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"teamsbot/internal/netaddr"
	"teamsbot/signin"
)

const (
	tenantA = "aaaaaaaa-1111-1111-1111-111111111111"
	tenantB = "bbbbbbbb-2222-2222-2222-222222222222"
	tenantC = "cccccccc-3333-3333-3333-333333333333"
)

// entraFront serves a discovery document shaped like Entra's multi-tenant
// one (GET https://login.microsoftonline.com/organizations/v2.0/.well-known/openid-configuration,
// "OpenID Connect on the Microsoft identity platform"): its issuer is the
// literal https://<host>/{tenantid}/v2.0, and the endpoints are mockoidc's,
// which signs the tokens. discoveredIssuer, when set, replaces the issuer.
func entraFront(t *testing.T, m *mockoidc.MockOIDC, discoveredIssuer string) *httptest.Server {
	t.Helper()
	var front *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /organizations/v2.0/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss := front.URL + "/{tenantid}/v2.0"
		if discoveredIssuer != "" {
			iss = discoveredIssuer
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                iss,
			"authorization_endpoint":                m.AuthorizationEndpoint(),
			"token_endpoint":                        m.TokenEndpoint(),
			"jwks_uri":                              m.JWKSEndpoint(),
			"userinfo_endpoint":                     m.UserinfoEndpoint(),
			"response_modes_supported":              []string{"query", "fragment", "form_post"},
			"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
			"scopes_supported":                      []string{"openid", "profile", "email", "offline_access"},
			"subject_types_supported":               []string{"pairwise"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
			"claims_supported":                      []string{"sub", "iss", "aud", "exp", "iat", "nonce", "name", "preferred_username", "oid", "tid", "roles"},
			"tenant_region_scope":                   nil,
			"cloud_instance_name":                   "microsoftonline.com",
		})
	})
	front = httptest.NewServer(mux)
	t.Cleanup(front.Close)
	return front
}

func multiTenantOptions(m *mockoidc.MockOIDC, front *httptest.Server, allowed ...string) signin.Options {
	return signin.Options{
		Issuer:         front.URL + "/organizations/v2.0",
		ClientID:       m.ClientID,
		ClientSecret:   m.ClientSecret,
		AllowedTenants: allowed,
	}
}

// With the organizations endpoint, iss must be the template with the
// token's own tid, and that tid must be an onboarded tenant.
func TestMultiTenantIssuerChecked(t *testing.T) {
	m := startMock(t)
	front := entraFront(t, m, "")
	e := newEnv(t, multiTenantOptions(m, front, tenantA, strings.ToUpper(tenantB)), false)
	issuerOf := func(tid string) string { return front.URL + "/" + tid + "/v2.0" }

	cases := []struct {
		name       string
		tid, iss   string
		wantStatus int
	}{
		{"onboarded tenant, its own issuer", tenantA, issuerOf(tenantA), http.StatusSeeOther},
		{"second onboarded tenant, listed in upper case", tenantB, issuerOf(tenantB), http.StatusSeeOther},
		{"tid of one tenant, iss of another", tenantA, issuerOf(tenantB), http.StatusBadRequest},
		{"iss is the template itself", tenantA, front.URL + "/{tenantid}/v2.0", http.StatusBadRequest},
		{"iss of the organizations endpoint", tenantA, front.URL + "/organizations/v2.0", http.StatusBadRequest},
		{"iss on another host", tenantA, "https://login.microsoftonline.com/" + tenantA + "/v2.0", http.StatusBadRequest},
		{"tenant not onboarded, its own issuer", tenantC, issuerOf(tenantC), http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.jar.SetCookies(mustURL(e.srv.URL), []*http.Cookie{{Name: "teamsbot-session", Path: "/", MaxAge: -1}})
			u := alice()
			u.TID, u.Issuer = tc.tid, tc.iss
			m.QueueUser(u)
			resp, body := e.finish(e.begin("/mcp-apps/v"))
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			s, code := e.whoami()
			if tc.wantStatus != http.StatusSeeOther {
				if code != http.StatusUnauthorized {
					t.Errorf("signed in as %+v after a refused token", s)
				}
				return
			}
			if code != http.StatusOK || s.TenantID != tc.tid || s.UserID != u.OID {
				t.Errorf("whoami: %d %+v, want tenant %s", code, s, tc.tid)
			}
		})
	}
}

func TestMultiTenantNeedsAllowList(t *testing.T) {
	m := startMock(t)
	front := entraFront(t, m, "")
	opts := multiTenantOptions(m, front)
	opts.PublicBaseURL = netaddr.MustParseOrigin("http://127.0.0.1:1")
	opts.DataDir = t.TempDir()
	_, err := signin.New(context.Background(), opts)
	if !errors.Is(err, signin.ErrConfig) || !strings.Contains(err.Error(), "AllowedTenants") {
		t.Fatalf("New with an empty allow-list: %v, want a clear ErrConfig", err)
	}
	opts.Issuer = "https://login.microsoftonline.com/common/v2.0"
	if _, err := signin.New(context.Background(), opts); !errors.Is(err, signin.ErrConfig) {
		t.Fatalf("New with common and no allow-list: %v, want ErrConfig", err)
	}
}

// Getting past discovery does not mean trusting any issuer it names.
func TestMultiTenantDiscoveryIssuerChecked(t *testing.T) {
	m := startMock(t)
	for _, iss := range []string{"https://evil.example/{tenantid}/v2.0", "http://127.0.0.1:1/" + tenantA + "/v2.0"} {
		front := entraFront(t, m, iss)
		opts := multiTenantOptions(m, front, tenantA)
		opts.PublicBaseURL = netaddr.MustParseOrigin("http://127.0.0.1:1")
		opts.DataDir = t.TempDir()
		_, err := signin.New(context.Background(), opts)
		if !errors.Is(err, signin.ErrConfig) || !strings.Contains(err.Error(), "expected") {
			t.Errorf("discovered issuer %s: New: %v, want ErrConfig naming the expected issuer", iss, err)
		}
	}
}
