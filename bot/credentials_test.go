package bot

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/testenv"
)

// With a certificate, the bot's token request carries a client assertion
// that the fake token endpoint verifies as Entra ID would (signature by the
// uploaded certificate's key, x5t#S256, aud, iss, sub, jti, nbf and exp),
// and the token it issues is what the answer reaches the connector with.
// Neither the assertion nor the token is logged.
func TestCertificateCredentialAnswers(t *testing.T) {
	h := newHarness(t, setup{cred: credCertificate})
	if s, b := h.send(h.message("personal", "a:cert", "cert-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the answer", hasReplyTo("cert-1"))
	h.shutdown()
	reply, _ := replyTo(calls, "cert-1")
	if reply.Auth != "Bearer bot-token-1" {
		t.Errorf("answer sent with %q, want the token issued for the assertion, bot-token-1", reply.Auth)
	}
	got := h.tokens.receivedAssertions()
	if len(got) != 1 {
		t.Fatalf("%d assertions received, want 1", len(got))
	}
	if logs := h.logs.String(); strings.Contains(logs, got[0]) || strings.Contains(logs, "bot-token-1") {
		t.Error("the assertion or the bot token appears in the logs")
	}
	if !strings.Contains(h.logs.String(), "certificate "+h.bot.opts.Credential.Path()) {
		t.Errorf("the start-up line does not name the credential's kind and file:\n%s", h.logs.String())
	}
}

// A renewed token is asked for with a new assertion, for its own jti: the
// fake refuses an assertion it has seen.
func TestCertificateCredentialRenews(t *testing.T) {
	h := newHarness(t, setup{cred: credCertificate})
	ctx := context.Background()
	first, err := h.bot.conn.tokens.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(56 * time.Minute)
	second, err := h.bot.conn.tokens.Token(ctx)
	if err != nil || second == first {
		t.Fatalf("renewal: %q, %v; want a new token", second, err)
	}
	if a := h.tokens.receivedAssertions(); len(a) != 2 || a[0] == a[1] {
		t.Errorf("assertions %d, the same twice: %v", len(a), len(a) == 2 && a[0] == a[1])
	}
}

// The fake is no rubber stamp: an assertion signed by a certificate the app
// registration does not hold, or judged by a clock past its exp, is
// refused, and the bot's error names Entra's reason without the assertion.
func TestCertificateCredentialRefusedByEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		edit       func(h *harness)
	}{
		{"another certificate uploaded", "AADSTS700027", func(h *harness) {
			other := testenv.NewCertificate(t, h.now().Add(-time.Hour), h.now().Add(time.Hour))
			h.tokens.app.Cert = other.Cert
		}},
		{"assertion expired on arrival", "AADSTS700024", func(h *harness) {
			h.tokens.now = func() time.Time { return h.now().Add(6 * time.Minute) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, setup{cred: credCertificate})
			h.tokens.mu.Lock()
			tc.edit(h)
			h.tokens.mu.Unlock()
			_, err := h.bot.conn.tokens.Token(context.Background())
			if !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Token = %v, want ErrToken naming %s", err, tc.says)
			}
			if a := h.tokens.receivedAssertions(); len(a) != 1 || strings.Contains(err.Error(), a[0]) {
				t.Errorf("the error holds the assertion, or none was sent: %v", err)
			}
		})
	}
}

// With a federated token file, the token request sends the file's current
// content; after the platform rotates the file, the next token fetch sends
// the new token, and the answers reach the connector with each issued
// token.
func TestFederatedCredentialFollowsRotation(t *testing.T) {
	h := newHarness(t, setup{cred: credFederated})
	first := h.rotateServiceAccountToken()
	if s, b := h.send(h.message("personal", "a:wi", "wi-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the first answer", hasReplyTo("wi-1"))
	if a := h.tokens.receivedAssertions(); len(a) != 1 || a[0] != first {
		t.Fatalf("sent %d assertions; the first is the file's content: %v", len(a), len(a) == 1 && a[0] == first)
	}

	// The kubelet writes a new token; the bot's own token lasts 3599 s and
	// is renewed five minutes before it ends.
	h.clock.Advance(56 * time.Minute)
	second := h.rotateServiceAccountToken()
	if s, b := h.send(h.message("personal", "a:wi", "wi-2", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the answer after the rotation", hasReplyTo("wi-2"))
	h.shutdown()
	a := h.tokens.receivedAssertions()
	if len(a) != 2 || a[1] != second {
		t.Fatalf("sent %d assertions; want the rotated token second", len(a))
	}
	for id, want := range map[string]string{"wi-1": "Bearer bot-token-1", "wi-2": "Bearer bot-token-2"} {
		if reply, _ := replyTo(calls, id); reply.Auth != want {
			t.Errorf("%s answered with %q, want %q", id, reply.Auth, want)
		}
	}
	if logs := h.logs.String(); strings.Contains(logs, first) || strings.Contains(logs, second) {
		t.Error("a federated token appears in the logs")
	}
}

// A federated token of another service account is refused by the endpoint:
// the subject is part of the federated credential.
func TestFederatedCredentialOfAnotherSubjectRefused(t *testing.T) {
	h := newHarness(t, setup{cred: credFederated})
	h.sa.subject = "system:serviceaccount:default:someone-else"
	h.rotateServiceAccountToken()
	_, err := h.bot.conn.tokens.Token(context.Background())
	if !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), "AADSTS700213") {
		t.Fatalf("Token = %v, want ErrToken naming AADSTS700213", err)
	}
}

// A token endpoint that answers with a redirect is not followed: a 307
// would post the form, assertion and all, to wherever it points.
func TestTokenRequestFollowsNoRedirect(t *testing.T) {
	var target string
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	h := newHarness(t, setup{cred: credCertificate, tokenURL: redirector.URL + "/" + testTenant + "/oauth2/v2.0/token"})
	target = h.tokens.url()
	_, err := h.bot.conn.tokens.Token(context.Background())
	if !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), "answered 307") {
		t.Fatalf("Token = %v, want ErrToken for the 307", err)
	}
	if n := h.tokens.callCount(); n != 0 {
		t.Errorf("the redirect was followed: %d requests reached the token endpoint", n)
	}
}
