package clientcred_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"teamsbot/internal/clientcred"
	"teamsbot/internal/testenv"
	"teamsbot/internal/textclip"
)

const (
	clientID = "6f1c1d2e-0000-4000-8000-00000000c1e7"
	tokenURL = "https://login.microsoftonline.com/72f988bf-0000-4000-8000-0000000000aa/oauth2/v2.0/token"
)

var now = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// The assertion a certificate signs is the one "certificate credentials"
// documents: PS256 over the header typ JWT and x5t#S256, the SHA-256
// thumbprint of the DER certificate; aud the token endpoint, iss and sub
// the client id, a GUID jti, nbf and iat now, exp five minutes later.
func TestCertificateAssertion(t *testing.T) {
	cert := testenv.NewCertificate(t, now.Add(-time.Hour), now.Add(365*24*time.Hour))
	cred, err := clientcred.LoadCertificate(cert.File(t, nil), now)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{}
	if err := cred.Apply(context.Background(), form, clientID, tokenURL, now); err != nil {
		t.Fatal(err)
	}
	if got := form.Get("client_assertion_type"); got != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		t.Errorf("client_assertion_type %q", got)
	}
	if form.Has("client_secret") {
		t.Error("a certificate credential sent client_secret")
	}
	claims := jwt.MapClaims{}
	p := jwt.NewParser(jwt.WithValidMethods([]string{"PS256"}), jwt.WithoutClaimsValidation())
	tok, err := p.ParseWithClaims(form.Get("client_assertion"), claims, func(*jwt.Token) (any, error) { return &cert.Key.PublicKey, nil })
	if err != nil {
		t.Fatalf("the assertion does not verify with the certificate's key: %v", err)
	}
	sum := sha256.Sum256(cert.Cert.Raw)
	if tok.Header["typ"] != "JWT" || tok.Header["x5t#S256"] != base64.RawURLEncoding.EncodeToString(sum[:]) {
		t.Errorf("header %v", tok.Header)
	}
	if cred.Thumbprint() != tok.Header["x5t#S256"] {
		t.Errorf("Thumbprint %q, header %v", cred.Thumbprint(), tok.Header["x5t#S256"])
	}
	want := map[string]any{"aud": tokenURL, "iss": clientID, "sub": clientID,
		"nbf": float64(now.Unix()), "iat": float64(now.Unix()), "exp": float64(now.Add(5 * time.Minute).Unix())}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %v", k, claims[k], v)
		}
	}
	jti, _ := claims["jti"].(string)
	if len(jti) != 36 || strings.Count(jti, "-") != 4 {
		t.Errorf("jti %q is not a GUID", jti)
	}
	again := url.Values{}
	if err := cred.Apply(context.Background(), again, clientID, tokenURL, now); err != nil {
		t.Fatal(err)
	}
	if again.Get("client_assertion") == form.Get("client_assertion") {
		t.Error("two requests sent the same assertion; each needs its own jti")
	}
}

// Each mistake in a certificate file is refused when it is loaded, with
// words that say which.
func TestCertificateFileRefused(t *testing.T) {
	good := testenv.NewCertificate(t, now.Add(-time.Hour), now.Add(time.Hour))
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	expired := testenv.NewCertificate(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	future := testenv.NewCertificate(t, now.Add(24*time.Hour), now.Add(48*time.Hour))
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pemOf := string(good.PEM(t, nil))
	keyPart := pemOf[:strings.Index(pemOf, "-----BEGIN CERTIFICATE")]
	certPart := pemOf[len(keyPart):]
	for _, tc := range []struct {
		name, path, says string
		is               error
	}{
		{"missing", filepath.Join(dir, "nope.pem"), "no such file", clientcred.ErrCertificate},
		{"not PEM", write("junk.pem", []byte("hello")), "no PEM private key or certificate", clientcred.ErrCertificate},
		{"key only", write("key.pem", []byte(keyPart)), "no certificate", clientcred.ErrCertificate},
		{"certificate only", write("cert.pem", []byte(certPart)), "no private key", clientcred.ErrCertificate},
		{"wrong key", good.File(t, other), "does not match", clientcred.ErrKeyMismatch},
		{"expired", expired.File(t, nil), "expired on", clientcred.ErrExpired},
		{"not yet valid", future.File(t, nil), "valid only from", clientcred.ErrExpired},
		{"small key", write("small.pem", testenv.NewCertificateFor(t, small, now.Add(-time.Hour), now.Add(time.Hour)).PEM(t, nil)), "1024 bits", clientcred.ErrCertificate},
		{"encrypted", write("enc.pem", []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"+certPart)), "encrypted", clientcred.ErrCertificate},
	} {
		_, err := clientcred.LoadCertificate(tc.path, now)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.is, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY-----\n") {
			t.Errorf("%s: the error holds key material", tc.name)
		}
	}
}

// A federated token file is read again for every token request, so a
// token the platform rotated is what the next request sends.
func TestFederatedTokenFileReRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "azure-identity-token")
	if err := os.WriteFile(path, []byte("eyJ.first.token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cred, err := clientcred.FederatedTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"eyJ.first.token", "eyJ.second.token"} {
		if want == "eyJ.second.token" {
			if err := os.WriteFile(path, []byte(want), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		form := url.Values{}
		if err := cred.Apply(context.Background(), form, clientID, tokenURL, now); err != nil {
			t.Fatal(err)
		}
		if form.Get("client_assertion") != want || form.Get("client_assertion_type") != clientcred.AssertionType {
			t.Errorf("sent %q (%q), want %q", form.Get("client_assertion"), form.Get("client_assertion_type"), want)
		}
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cred.Apply(context.Background(), url.Values{}, clientID, tokenURL, now); !errors.Is(err, clientcred.ErrTokenFile) {
		t.Errorf("an emptied file: %v, want ErrTokenFile", err)
	}
	if _, err := clientcred.FederatedTokenFile(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, clientcred.ErrTokenFile) {
		t.Errorf("a missing file: %v, want ErrTokenFile", err)
	}
}

// However a credential is printed or logged, only its kind and path show.
func TestCredentialNeverPrintsSecrets(t *testing.T) {
	cert := testenv.NewCertificate(t, now.Add(-time.Hour), now.Add(time.Hour))
	certCred, err := clientcred.LoadCertificate(cert.File(t, nil), now)
	if err != nil {
		t.Fatal(err)
	}
	secret := clientcred.Secret("s3cr3t-client-value")
	d := cert.Key.D.String()
	holder := struct{ A, B clientcred.Credential }{certCred, secret}
	var logs testenv.LogBuffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("cred", "a", certCred, "b", secret)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		out := fmt.Sprintf(verb, holder) + logs.String()
		if strings.Contains(out, "s3cr3t") || strings.Contains(out, textclip.Prefix(d, 20)) ||
			strings.Contains(out, cert.Key.N.String()[:20]) {
			t.Errorf("%s shows a secret: %s", verb, out)
		}
	}
	if got := fmt.Sprint(certCred); !strings.Contains(got, "certificate") || !strings.Contains(got, "app.pem") {
		t.Errorf("a certificate prints as %q; want its kind and path", got)
	}
	if (clientcred.Credential{}).Apply(context.Background(), url.Values{}, clientID, tokenURL, now) == nil {
		t.Error("no credential applied without error")
	}
}
