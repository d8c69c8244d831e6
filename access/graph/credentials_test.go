package graph_test

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"teamsbot/access/graph"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/testenv"
)

const (
	certApp = "ce470000-0d8e-4c4f-9a57-6f1b2c3d4e5f"
	fedApp  = "fed00000-0d8e-4c4f-9a57-6f1b2c3d4e5f"
)

// With a certificate, each tenant's token is asked for with an assertion
// that the fake's token endpoint verifies as Entra ID would (signature by
// the uploaded certificate's key, x5t#S256, iss, sub, jti, nbf, exp), whose
// audience is that tenant's own endpoint; Graph then answers with the
// tokens issued. No assertion reaches the logs.
func TestCertificateCredential(t *testing.T) {
	start := newClock().Now()
	cert := testenv.NewCertificate(t, start.Add(-time.Hour), start.Add(365*24*time.Hour))
	cred, err := clientcred.LoadCertificate(cert.File(t, nil), start)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *graph.Options) { o.ClientID, o.Credential = certApp, cred })
	e.fake.AddCertificateApp(certApp, cert.Cert)
	e.fake.SetNow(e.clock.Now)
	ctx := ctxFor(t, 10*time.Second)
	if got, err := e.client.MemberGroups(ctx, tenantA, alice, []string{readers}); err != nil || len(got) != 1 {
		t.Fatalf("tenant A: %v, %v", got, err)
	}
	if got, err := e.client.MemberGroups(ctx, tenantB, bart, []string{bGroup}); err != nil || len(got) != 1 {
		t.Fatalf("tenant B: %v, %v", got, err)
	}
	sent := e.fake.Assertions()
	if len(sent) != 2 {
		t.Fatalf("%d assertions, want one per tenant", len(sent))
	}
	for i, tenant := range []string{tenantA, tenantB} {
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(sent[i], claims); err != nil {
			t.Fatal(err)
		}
		if want := e.fake.URL() + "/" + tenant + "/oauth2/v2.0/token"; claims["aud"] != want {
			t.Errorf("assertion %d: aud %v, want %s", i, claims["aud"], want)
		}
		if strings.Contains(e.logs.String(), sent[i]) {
			t.Error("an assertion is in the logs")
		}
	}
}

// An assertion signed by a certificate the app registration does not hold
// is refused; Graph is not asked, and the error names Entra's reason.
func TestCertificateNotRegistered(t *testing.T) {
	start := newClock().Now()
	cert := testenv.NewCertificate(t, start.Add(-time.Hour), start.Add(time.Hour))
	uploaded := testenv.NewCertificate(t, start.Add(-time.Hour), start.Add(time.Hour))
	cred, err := clientcred.LoadCertificate(cert.File(t, nil), start)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *graph.Options) { o.ClientID, o.Credential = certApp, cred })
	e.fake.AddCertificateApp(certApp, uploaded.Cert)
	e.fake.SetNow(e.clock.Now)
	_, err = e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers})
	if !errors.Is(err, graph.ErrUnavailable) || !strings.Contains(err.Error(), "AADSTS700027") {
		t.Fatalf("err = %v, want ErrUnavailable naming AADSTS700027", err)
	}
	if n := e.fake.Counts().CheckMemberGroups; n != 0 {
		t.Errorf("%d Graph calls without a token", n)
	}
}

// With a federated token file, the token request sends the file's current
// content; once the token is due for renewal, the next fetch sends what
// the platform rotated into the file.
func TestFederatedCredentialFollowsRotation(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const issuer, subject = "https://oidc.prod-aks.azure.com/0c0c0c0c-0000-4000-8000-000000000a55/", "system:serviceaccount:teamsbot:teamsbot"
	path := filepath.Join(t.TempDir(), "azure-identity-token")
	clk := newClock()
	rotate := func() string {
		t.Helper()
		now := clk.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
			"iss": issuer, "sub": subject, "aud": []string{"api://AzureADTokenExchange"},
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".new", []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	first := rotate()
	cred, err := clientcred.FederatedTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *graph.Options) { o.ClientID, o.Credential, o.Now = fedApp, cred, clk.Now })
	e.fake.AddFederatedApp(fedApp, issuer, subject, &key.PublicKey)
	e.fake.SetNow(clk.Now)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := e.client.MemberGroups(ctx, tenantA, alice, []string{readers}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(56 * time.Minute) // past the token's renewal, and the cached answer's
	second := rotate()
	if _, err := e.client.MemberGroups(ctx, tenantA, alice, []string{readers}); err != nil {
		t.Fatal(err)
	}
	sent := e.fake.Assertions()
	if len(sent) != 2 || sent[0] != first || sent[1] != second {
		t.Fatalf("sent %d assertions; want the file's content at each fetch, the rotated one second", len(sent))
	}
	if logs := e.logs.String(); strings.Contains(logs, first) || strings.Contains(logs, second) {
		t.Error("a federated token is in the logs")
	}
}

// A token endpoint that answers with a redirect is not followed: a 307
// would post the form, and the credential in it, to wherever it points.
func TestTokenRequestFollowsNoRedirect(t *testing.T) {
	var e *env
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, e.fake.URL()+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	e = newEnv(t, func(o *graph.Options) { o.TokenURL = redirector.URL + "/{tenant}/oauth2/v2.0/token" })
	_, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers})
	if !errors.Is(err, graph.ErrUnavailable) || !strings.Contains(err.Error(), "status 307") {
		t.Fatalf("err = %v, want ErrUnavailable with status 307", err)
	}
	if n := e.fake.Counts().Token; n != 0 {
		t.Errorf("the redirect was followed: %d token requests reached the endpoint", n)
	}
}
