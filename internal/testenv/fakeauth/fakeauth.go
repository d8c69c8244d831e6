// Package fakeauth is the other side of an MCP client's per-person
// authorization, for tests: an OAuth 2.1 authorization server
// ([AuthServer]) and an MCP server protected by it ([ResourceServer]), both
// on HTTPS loopback with certificates of their own, speaking the wire
// formats of the MCP specification's authorization
// (https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization)
// and of the documents it builds on:
//
//   - RFC 8414, OAuth 2.0 Authorization Server Metadata: the document at
//     /.well-known/oauth-authorization-server (and, as OpenID Connect
//     Discovery places it, /.well-known/openid-configuration).
//   - RFC 9728, OAuth 2.0 Protected Resource Metadata: the resource
//     server's document, and the resource_metadata parameter of its
//     WWW-Authenticate challenges.
//   - RFC 6750, Bearer Token Usage: the challenges' error codes
//     (invalid_token with 401, insufficient_scope with 403, none when the
//     request carried no token).
//   - RFC 7591, OAuth 2.0 Dynamic Client Registration.
//   - draft-ietf-oauth-client-id-metadata-document (Client ID Metadata
//     Documents): an https URL as client_id, whose document the
//     authorization server fetches and checks.
//   - RFC 8707, Resource Indicators: the resource parameter, required on
//     the authorization and token requests and bound into the token's aud.
//   - RFC 9207, Authorization Server Issuer Identification: iss in every
//     authorization response.
//   - RFC 7636, PKCE, with S256 only, required of every client.
//   - OAuth 2.1 (draft-ietf-oauth-v2-1): one-time codes, refresh tokens
//     rotated at each use, a replayed code or refresh token revoking its
//     grant.
//   - RFC 9068, JWT Profile for OAuth 2.0 Access Tokens: access tokens are
//     ES256 JWTs (typ at+jwt) with iss, sub (the person), aud (the
//     resource), scope, client_id, jti, iat and exp.
//   - RFC 7009, Token Revocation.
//
// Knobs ([AuthServer.Configure]) turn the authorization server into an
// attacker or a broken peer; counters ([AuthServer.Stats],
// [ResourceServer.Authorizations]) let a test see what a client sent.
// [StartTSExample] runs a third-party authorization and resource server,
// the MCP TypeScript SDK's example, when it is installed.
//
// Only tests import it.
package fakeauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"teamsbot/internal/testenv"
)

// The scopes of the resource server's tools, and the one that asks the
// authorization server for a refresh token (OpenID Connect's
// offline_access, which the MCP specification's clients add when the
// server lists it).
const (
	ScopeRead    = "crm.read"
	ScopeWrite   = "crm.write"
	ScopeOffline = "offline_access"
)

// listenTLS opens a loopback listener with a fresh self-signed ECDSA
// certificate for 127.0.0.1 and localhost. It returns the origin, the
// certificate and the listener; serve starts serving on it. The two are
// apart so that a server knows its own URL before its handler runs.
func listenTLS(t testing.TB) (origin string, cert *x509.Certificate, ln net.Listener) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "fakeauth test server"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // its own root, as httptest's certificate is
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	plain := testenv.Listen(t)
	ln = tls.NewListener(plain, &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
		NextProtos:   []string{"h2", "http/1.1"},
	})
	return "https://" + plain.Addr().String(), cert, ln
}

// serve serves h on ln until the test ends. TLS handshake errors (a client
// that does not trust the certificate, as some tests want) are not logged.
func serve(t testing.TB, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// Site is an HTTPS server on loopback with a certificate of its own.
type Site struct {
	// URL is the origin, https://127.0.0.1:port.
	URL string
	// Cert is the server's self-signed certificate: trust it with [Client].
	Cert *x509.Certificate
}

// ServeHTTPS serves h over HTTPS on a loopback port until the test ends,
// with a self-signed certificate made for it: for a client ID metadata
// document, or any page a test needs on an https origin.
func ServeHTTPS(t testing.TB, h http.Handler) *Site {
	t.Helper()
	origin, cert, ln := listenTLS(t)
	serve(t, ln, h)
	return &Site{URL: origin, Cert: cert}
}

// Client returns an HTTP client that trusts exactly the given certificates
// (and not the system's roots). Its Transport is an *http.Transport, which
// go-sdk's discovery requests keep, adding their own checks.
func Client(certs ...*x509.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: CertPool(certs...)},
		ForceAttemptHTTP2: true,
	}}
}

// CertPool is a pool of the given certificates, for a client built
// elsewhere.
func CertPool(certs ...*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}

// SPKI is the base64 SHA-256 of a certificate's public key, the form
// Chromium's --ignore-certificate-errors-spki-list takes: a headless
// Chromium given it trusts the servers of this package.
func SPKI(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
