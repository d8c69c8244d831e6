package agent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"teamsbot/agent"
)

// headerTrap is a server on loopback that records the headers of every
// request it gets, and answers 401.
type headerTrap struct {
	mu      sync.Mutex
	headers []http.Header
	srv     *httptest.Server
}

func newHeaderTrap(t *testing.T) *headerTrap {
	h := &headerTrap{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
		http.Error(w, "who are you", http.StatusUnauthorized)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// leaked lists the header values holding a secret that reached the trap.
func (h *headerTrap) leaked(secrets ...string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, hd := range h.headers {
		for k, vs := range hd {
			for _, v := range vs {
				for _, s := range secrets {
					if strings.Contains(v, s) {
						out = append(out, k+": "+v)
					}
				}
			}
		}
	}
	return out
}

// redirector answers every request with a 307 to the same path at target,
// which keeps the method and the body.
func redirector(t *testing.T, target string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// redirectTargets are the two kinds of place a redirect may lead that must
// never get credentials: another port of the same address (Go's client
// counts it as the same host, and copies Authorization there) and another
// host name (where Go drops Authorization but copies every other header,
// api-key among them).
var redirectTargets = []string{"another port", "another host"}

// at is the trap's URL, reached as the kind of target names.
func (h *headerTrap) at(kind string) string {
	if kind == "another host" {
		return strings.Replace(h.srv.URL, "127.0.0.1", "localhost", 1)
	}
	return h.srv.URL
}

// An MCP server's configured headers (often Authorization) are sent to
// its own origin only: a redirect elsewhere does not carry them.
func TestMCPHeadersNeverFollowARedirectToAnotherHost(t *testing.T) {
	for _, kind := range redirectTargets {
		t.Run(kind, func(t *testing.T) {
			trap := newHeaderTrap(t)
			from := redirector(t, trap.at(kind))
			cfg := oneAgent(agent.ServerConfig{Name: "crm", URL: from.URL + "/mcp", Headers: map[string]string{
				"Authorization": "Bearer mcp-secret", "X-Api-Token": "header-secret",
			}})
			s := newService(t, cfg, agent.Options{Store: openStore(t), AppsEnabled: true, ReadyCacheFor: 1})
			if err := s.Ready(context.Background()); err == nil {
				t.Errorf("Ready succeeded through a redirect to another host")
			}
			run(t, s, "/crm/lookup_customer {}")
			if got := trap.leaked("mcp-secret", "header-secret"); len(got) > 0 {
				t.Errorf("the other host got the configured headers: %q", got)
			}
		})
	}
}

// The model's API key (Azure's api-key header, or a bearer token) and its
// Entra ID token are sent to the configured endpoint only, never after a
// redirect to another host.
func TestModelKeyNeverFollowsARedirectToAnotherHost(t *testing.T) {
	for _, auth := range []string{"api-key", "bearer", "entra"} {
		for _, kind := range redirectTargets {
			t.Run(auth+"/"+kind, func(t *testing.T) {
				trap := newHeaderTrap(t)
				var asked atomic.Int32
				from := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					asked.Add(1)
					http.Redirect(w, r, trap.at(kind)+r.URL.RequestURI(), http.StatusTemporaryRedirect)
				}))
				t.Cleanup(from.Close)
				mc := agent.ModelConfig{APIKeyEnv: "MODEL_KEY"}
				switch auth {
				case "api-key":
					mc.APIVersion = "2024-10-21"
				case "entra":
					mc = agent.ModelConfig{APIVersion: "2024-10-21", Entra: true}
				}
				s := newService(t, openaiConfig(from.URL, mc), agent.Options{Store: openStore(t), AppsEnabled: true,
					Getenv:     getenv(map[string]string{"MODEL_KEY": "model-secret"}),
					ModelToken: func(context.Context, string) (string, error) { return "model-secret-token", nil }})
				_, err := s.Run(context.Background(), agent.Request{Person: alice, Text: "hi"})
				if got := trap.leaked("model-secret"); len(got) > 0 {
					t.Errorf("the other host got the model's key: %q", got)
				}
				if err == nil || strings.Contains(err.Error(), "model-secret") || !strings.Contains(err.Error(), "another origin") {
					t.Errorf("the error shows the key, or does not say why: %v", err)
				}
				if n := asked.Load(); n != 1 {
					t.Errorf("the endpoint was asked %d times: a redirect elsewhere is not tried again", n)
				}
			})
		}
	}
}
