// Package testenv holds what the tests of several packages share: a clock
// that moves only when told, a mockoidc user whose ID token carries the
// claims Microsoft Entra ID sends, a log buffer safe for concurrent
// writers, loopback listeners, self-signed certificates made per test (no
// private key is ever committed), a Bot Connector for proactive sends,
// Microsoft's Teams manifest validator run offline, the fake Entra token
// endpoint's check of client assertions (EntraApp), and headless Chromium
// with tabs that run scripts in any frame (StartChromium, SharedChromium,
// Tab).
//
// Only tests (and access/graph/fakegraph, itself for tests) import it;
// docs/layout_test.go fails if the service does.
package testenv

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// Clock is an injected clock that moves only when told. It is safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock that reads t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// EntraUser is a mockoidc user whose ID token carries the claims Microsoft
// Entra ID puts in its v2.0 ID tokens (tid, oid, name, preferred_username,
// roles), following "ID token claims reference" in the Microsoft identity
// platform documentation. Issuer and Nonce, when set, replace what mockoidc
// would sign, to build tokens a real provider must never send.
type EntraUser struct {
	TID, OID, Name, UPN string
	Roles               []string
	Issuer              string
	Nonce               *string
}

// entraClaims are the claims of EntraUser's ID token.
type entraClaims struct {
	*mockoidc.IDTokenClaims
	TID               string   `json:"tid,omitempty"`
	OID               string   `json:"oid,omitempty"`
	Name              string   `json:"name,omitempty"`
	PreferredUsername string   `json:"preferred_username,omitempty"`
	Roles             []string `json:"roles,omitempty"`
}

// ID is the token's subject.
func (u *EntraUser) ID() string { return "sub-" + u.OID }

// Userinfo is what mockoidc's userinfo endpoint answers.
func (u *EntraUser) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]string{"sub": u.ID()})
}

// Claims are the ID token's claims.
func (u *EntraUser) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	if u.Issuer != "" {
		base.Issuer = u.Issuer
	}
	if u.Nonce != nil {
		base.Nonce = *u.Nonce
	}
	return &entraClaims{
		IDTokenClaims:     base,
		TID:               u.TID,
		OID:               u.OID,
		Name:              u.Name,
		PreferredUsername: u.UPN,
		Roles:             u.Roles,
	}, nil
}

// LogBuffer collects log lines written from several goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Listen returns a TCP listener on a free port of 127.0.0.1, closed when
// the test ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on loopback: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// StartMockOIDC runs mockoidc on 127.0.0.1, stopped when the test ends.
func StartMockOIDC(t testing.TB) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatalf("mockoidc: %v", err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return m
}

// Certificate is a self-signed certificate and its RSA key, made for one
// test, as an app registration's certificate credential.
type Certificate struct {
	Cert *x509.Certificate
	Key  *rsa.PrivateKey
}

// NewCertificate makes a 2048-bit RSA key and a self-signed certificate for
// it, valid from notBefore to notAfter.
func NewCertificate(t testing.TB, notBefore, notAfter time.Time) *Certificate {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return NewCertificateFor(t, key, notBefore, notAfter)
}

// NewCertificateFor makes a self-signed certificate for key, valid from
// notBefore to notAfter.
func NewCertificateFor(t testing.TB, key *rsa.PrivateKey, notBefore, notAfter time.Time) *Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "teamsbot test app"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Certificate{Cert: cert, Key: key}
}

// PEM is key (PKCS #8) then the certificate, as TICKETIQ_BOT_CERT_FILE
// holds them. A nil key means the certificate's own.
func (c *Certificate) PEM(t testing.TB, key *rsa.PrivateKey) []byte {
	t.Helper()
	if key == nil {
		key = c.Key
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Cert.Raw})...)
}

// File writes PEM(key) to a file of the test's own, mode 0600, and
// returns its path.
func (c *Certificate) File(t testing.TB, key *rsa.PrivateKey) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(path, c.PEM(t, key), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
