package mcpauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"teamsbot/internal/testenv/fakeauth"
	"teamsbot/mcpauth"
)

// The service's app registration, pre-registered with Entra ID for the
// server.
const (
	entraClient = "5d1f0a8e-2f51-4f0c-9e1a-8d2c7e1b4a90"
	entraSecret = "entra-client-secret"
)

// entraEnv is a server protected by (a fake of) Microsoft Entra ID: the
// authorization server refuses the resource parameter as Entra ID's v2.0
// endpoints do, and takes the on-behalf-of grant of assertions signed by
// key for this service's client id.
func entraEnv(t *testing.T, o envOpts) (*env, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	o.knobs = append(o.knobs, func(k *fakeauth.Knobs) {
		k.Entra = true
		k.OnBehalfOf = func(assertion string) (string, error) {
			var c jwt.RegisteredClaims
			tok, err := jwt.ParseWithClaims(assertion, &c, func(*jwt.Token) (any, error) { return &key.PublicKey, nil })
			if err != nil || !tok.Valid {
				return "", errors.New("the assertion's signature does not verify")
			}
			if !c.VerifyAudience(entraClient, true) {
				return "", errors.New("the assertion is not for this client")
			}
			return c.Subject, nil
		}
	})
	inner := o.server
	o.server = func(e *env, s *mcpauth.Server) {
		s.Entra = true
		s.ClientID, s.ClientSecret = entraClient, entraSecret
		s.Scopes = []string{s.URL + "/.default", fakeauth.ScopeOffline}
		s.Authority = e.as.URL
		if inner != nil {
			inner(e, s)
		}
	}
	e := newEnv(t, o)
	e.as.AddClient(entraClient, entraSecret, e.base+mcpauth.CallbackPath)
	return e, key
}

// assertion is the person's access token for this service, as Teams
// single sign-on or the view page's sign-in gives it.
func assertion(t *testing.T, key *ecdsa.PrivateKey, p person, aud string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.RegisteredClaims{
		Subject: p.account, Audience: jwt.ClaimStrings{aud}, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	})
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEntraConnectsWithoutResource: Entra ID's v2.0 endpoints refuse the
// resource parameter; with entra set, the service sends none (the scopes
// name the resource), the person connects with the pre-registered client,
// and the token is refreshed without it. Without entra the same server
// refuses the authorization, as Entra ID would.
func TestEntraConnectsWithoutResource(t *testing.T) {
	ctx := ctxFor(t)
	e, _ := entraEnv(t, envOpts{knobs: []func(*fakeauth.Knobs){func(k *fakeauth.Knobs) { k.AccessTokenLifetime = 31 * time.Second }}})
	if got, err := e.call(ctx, ada, e.consenting(ada), "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("whoami: %q, %v", got, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if got, err := e.call(ctx, ada, newPrompter(nil), "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("after the token expired: %q, %v", got, err)
	}
	stats := e.as.Stats()
	if len(stats.Resources) != 0 || stats.Refreshes != 1 {
		t.Errorf("resources sent %v (want none), refreshes %d (want 1)", stats.Resources, stats.Refreshes)
	}

	plain, _ := entraEnv(t, envOpts{server: func(_ *env, s *mcpauth.Server) { s.Entra = false }})
	if _, err := plain.call(ctx, ada, plain.consenting(ada), "whoami"); !errors.Is(err, mcpauth.ErrRefused) {
		t.Errorf("without entra: %v, want the authorization refused", err)
	}
}

// TestOnBehalfOf: a person who signs in to this service with Entra ID is
// connected to the Entra server on their behalf (their access token for
// this service exchanged for one of the server, never passed on), and no
// run asks them; an assertion for another client is refused and audited,
// and the Connect card remains.
func TestOnBehalfOf(t *testing.T) {
	ctx := ctxFor(t)
	e, key := entraEnv(t, envOpts{})
	mine := assertion(t, key, ada, entraClient)
	e.b.SignedIn(ctx, ada.mcp(), mine)
	pr := newPrompter(nil)
	if got, err := e.call(ctx, ada, pr, "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("whoami after the sign-in: %q, %v", got, err)
	}
	if p, _ := pr.snapshot(); len(p) != 0 {
		t.Errorf("asked %d times, want never", len(p))
	}
	if e.as.Stats().OnBehalfOf != 1 {
		t.Errorf("on-behalf-of grants: %d", e.as.Stats().OnBehalfOf)
	}
	conn := e.audit(mcpauth.ActionConnected)
	if len(conn) != 1 || conn[0].Fields["registration"] != "on-behalf-of" {
		t.Errorf("connected audit: %+v", conn)
	}
	for _, h := range e.rs.Authorizations() {
		if strings.TrimPrefix(h, "Bearer ") == mine {
			t.Fatal("the person's own token reached the server")
		}
	}

	// Grace's assertion is for another client: refused, audited, not kept.
	e.b.SignedIn(ctx, grace.mcp(), assertion(t, key, grace, "another-client"))
	if _, err := e.st.MCPConnection(ctx, tenant, grace.id, "default", "crm"); err == nil {
		t.Error("a refused exchange was kept as a connection")
	}
	refused := e.audit(mcpauth.ActionRefused)
	if len(refused) != 1 || !strings.Contains(refused[0].Fields["why"].(string), "on-behalf-of") {
		t.Errorf("refusals: %+v", refused)
	}
}

// TestConnectLinkSignsInOnBehalf: the Connect link of an Entra server goes
// through a fresh sign-in, whose assertion connects the person on their
// behalf: the waiting run goes on, with no consent page of the server.
func TestConnectLinkSignsInOnBehalf(t *testing.T) {
	ctx := ctxFor(t)
	e, key := entraEnv(t, envOpts{freshSignIn: true})
	br := e.browser(ada)
	var pages []string
	pr := newPrompter(func(ctx context.Context, p mcpauth.Prompt) (int, string, error) {
		resp, _, err := br.get(ctx, p.URL)
		if err != nil {
			return 0, "", err
		}
		signIn, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || signIn.Path != "/signin" {
			return resp.StatusCode, "", errors.New("the Connect link did not lead to a sign-in: " + resp.Header.Get("Location"))
		}
		// The sign-in (Entra ID) hands the service the person's assertion.
		e.b.SignedIn(ctx, ada.mcp(), assertion(t, key, ada, entraClient))
		resp, body, err := br.get(ctx, e.base+signIn.Query().Get("return"))
		pages = append(pages, body)
		return resp.StatusCode, body, err
	})
	if got, err := e.call(ctx, ada, pr, "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("whoami: %q, %v (%v)", got, err, pr.errs)
	}
	<-pr.done
	if len(pages) != 1 || !strings.Contains(pages[0], "connected with your Microsoft account") {
		t.Errorf("the page after the sign-in: %q", pages)
	}
	if _, o := pr.snapshot(); !slices.Equal(o, []mcpauth.Outcome{mcpauth.Connected}) {
		t.Errorf("outcomes %v", o)
	}
	if n := e.as.Stats().CodesIssued; n != 0 {
		t.Errorf("%d consent codes issued, want none: the person was asked by the server", n)
	}
}
