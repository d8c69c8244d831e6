// Package clientcred is how the service's app registration proves who it is
// to Microsoft Entra ID's token endpoint in the OAuth 2.0 client credentials
// grant: with a client secret, with a certificate (a client assertion the
// service signs), or with a federated token that the platform writes to a
// file (Azure workload identity). The bot's own token (package bot) and
// Graph's app-only tokens (package access/graph) both use it, so that both
// accept the same three credentials.
//
// It owns loading and checking a credential once, at start, the form
// fields of each token request, and the one token source both use
// ([Source], and [Tenants] for one Source per tenant): an
// [golang.org/x/oauth2.TokenSource] whose requests golang.org/x/oauth2's
// clientcredentials makes, each with a fresh credential (a new assertion,
// or the token file read again); it keeps a token until shortly before it
// expires as oauth2.ReuseTokenSource does, but by the service's own clock
// and with a context for each caller; concurrent callers share one fetch
// (golang.org/x/sync/singleflight); a fetch is retried as package
// internal/retry allows; an error of the token endpoint becomes a
// [TokenError] that names its status and reason, never the form.
//
// The documents followed are "Microsoft identity platform and the OAuth 2.0
// client credentials flow" (the three kinds of token request),
// "Microsoft identity platform application authentication certificate
// credentials" (the assertion: header alg PS256, typ JWT and x5t#S256;
// claims aud, exp, iss, jti, nbf, sub and iat; PSS padding) and "Workload
// identity federation" with the Azure Workload Identity webhook's
// documentation (the projected service account token in
// AZURE_FEDERATED_TOKEN_FILE, sent as it is and re-read each time because
// the kubelet rotates it).
package clientcred

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// AssertionType is the client_assertion_type of a token request that
// carries a JWT instead of a secret, for a certificate and a federated
// token alike.
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLife is how long a signed assertion may be used: the document
// asks for "5-10 minutes after nbf at most", and each token request signs a
// fresh one, so the short end costs nothing.
const assertionLife = 5 * time.Minute

// minRSABits is the smallest RSA key Entra ID takes for a certificate
// credential.
const minRSABits = 2048

// maxFileBytes bounds what is read of a certificate or token file: a PEM
// key with its chain, or a projected service account token, is a few
// kilobytes; a larger file is a mistake, not a credential.
const maxFileBytes = 1 << 20

// Kind names a kind of credential, as logs and `teamsbot config` show it.
type Kind string

// The kinds of credential.
const (
	KindNone        Kind = ""
	KindSecret      Kind = "client secret"
	KindCertificate Kind = "certificate"
	KindFederated   Kind = "federated token file"
)

// Errors of loading and using a credential. Their messages never hold a
// secret, a key or a token.
var (
	// ErrCertificate means a certificate file cannot be used: missing,
	// unreadable, malformed, or holding the wrong key.
	ErrCertificate = errors.New("clientcred: certificate file unusable")
	// ErrKeyMismatch means the file's private key belongs to none of its
	// certificates; it wraps ErrCertificate.
	ErrKeyMismatch = fmt.Errorf("%w: its private key does not match its certificate", ErrCertificate)
	// ErrExpired means the certificate is past its NotAfter, or before its
	// NotBefore; it wraps ErrCertificate.
	ErrExpired = fmt.Errorf("%w: the certificate is not valid now", ErrCertificate)
	// ErrTokenFile means a federated token file cannot be read, or is
	// empty.
	ErrTokenFile = errors.New("clientcred: federated token file unusable")
	// ErrNone means a token request was made with no credential.
	ErrNone = errors.New("clientcred: no credential")
)

// Credential is one credential of an app registration. The zero value is
// no credential. It is immutable and safe for concurrent use; however it is
// printed or logged, only its kind and file path show.
type Credential struct {
	c *credential
}

type credential struct {
	kind   Kind
	secret string // KindSecret
	path   string // KindCertificate, KindFederated

	key        *rsa.PrivateKey
	cert       *x509.Certificate
	thumbprint string // x5t#S256
}

// Secret returns a client secret credential; an empty secret is no
// credential.
func Secret(secret string) Credential {
	if secret == "" {
		return Credential{}
	}
	return Credential{&credential{kind: KindSecret, secret: secret}}
}

// LoadCertificate reads a PEM file holding an RSA private key (PKCS #1 or
// PKCS #8, not encrypted) and its certificate, and checks what would make
// every token request fail: no key or certificate, a key that does not
// match the certificate (ErrKeyMismatch), a key too small for Entra ID, and
// a certificate that is not valid at now (ErrExpired). A file with a chain
// is fine: the certificate used is the one the key belongs to.
func LoadCertificate(path string, now time.Time) (Credential, error) {
	data, err := readFile(path)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	c, err := parseCertificate(data, now)
	if err != nil {
		return Credential{}, fmt.Errorf("%s: %w", path, err)
	}
	c.path = path
	return Credential{c}, nil
}

func parseCertificate(data []byte, now time.Time) (*credential, error) {
	var key *rsa.PrivateKey
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch block.Type {
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%w: a certificate does not parse: %w", ErrCertificate, err)
			}
			certs = append(certs, cert)
		case "PRIVATE KEY", "RSA PRIVATE KEY":
			if key != nil {
				return nil, fmt.Errorf("%w: more than one private key", ErrCertificate)
			}
			k, err := parseKey(block)
			if err != nil {
				return nil, err
			}
			key = k
		case "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("%w: the private key is encrypted; store it unencrypted in a file only the service can read", ErrCertificate)
		case "EC PRIVATE KEY":
			return nil, fmt.Errorf("%w: the private key is not RSA", ErrCertificate)
		}
	}
	switch {
	case key == nil && len(certs) == 0:
		return nil, fmt.Errorf("%w: no PEM private key or certificate in it", ErrCertificate)
	case key == nil:
		return nil, fmt.Errorf("%w: no private key in it (PEM PRIVATE KEY or RSA PRIVATE KEY)", ErrCertificate)
	case len(certs) == 0:
		return nil, fmt.Errorf("%w: no certificate in it (PEM CERTIFICATE)", ErrCertificate)
	}
	if bits := key.N.BitLen(); bits < minRSABits {
		return nil, fmt.Errorf("%w: the RSA key has %d bits; Entra ID needs at least %d", ErrCertificate, bits, minRSABits)
	}
	var cert *x509.Certificate
	for _, c := range certs {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && pub.Equal(&key.PublicKey) {
			cert = c
			break
		}
	}
	if cert == nil {
		return nil, ErrKeyMismatch
	}
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("%w: it expired on %s", ErrExpired, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(cert.NotBefore) {
		return nil, fmt.Errorf("%w: it is valid only from %s", ErrExpired, cert.NotBefore.UTC().Format(time.RFC3339))
	}
	sum := sha256.Sum256(cert.Raw)
	return &credential{
		kind: KindCertificate, key: key, cert: cert,
		thumbprint: base64.RawURLEncoding.EncodeToString(sum[:]),
	}, nil
}

// parseKey reads an RSA private key; its errors never hold key bytes.
func parseKey(block *pem.Block) (*rsa.PrivateKey, error) {
	if block.Type == "RSA PRIVATE KEY" {
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: the RSA private key does not parse", ErrCertificate)
		}
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: the private key does not parse", ErrCertificate)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: the private key is %T, not RSA", ErrCertificate, k)
	}
	return rk, nil
}

// FederatedTokenFile returns a credential that sends the content of the
// file at path, re-read for every token request. The file must be readable
// and not empty now, so that a wrong path fails at start rather than at the
// first reply.
func FederatedTokenFile(path string) (Credential, error) {
	c := &credential{kind: KindFederated, path: path}
	if _, err := c.readToken(); err != nil {
		return Credential{}, err
	}
	return Credential{c}, nil
}

func (c *credential) readToken() (string, error) {
	data, err := readFile(c.path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	tok := string(bytes.TrimSpace(data))
	if tok == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrTokenFile, c.path)
	}
	return tok, nil
}

// readFile reads at most maxFileBytes of a file; its errors name the path
// and never the content.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFileBytes)
	}
	return data, nil
}

// IsZero reports whether c is no credential.
func (c Credential) IsZero() bool { return c.c == nil }

// Kind is c's kind; KindNone for the zero Credential.
func (c Credential) Kind() Kind {
	if c.c == nil {
		return KindNone
	}
	return c.c.kind
}

// Path is the certificate or token file, or "" for a secret.
func (c Credential) Path() string {
	if c.c == nil {
		return ""
	}
	return c.c.path
}

// NotAfter is when a certificate credential expires; zero for the other
// kinds, so that the start-up log can warn of it.
func (c Credential) NotAfter() time.Time {
	if c.c == nil || c.c.cert == nil {
		return time.Time{}
	}
	return c.c.cert.NotAfter
}

// Thumbprint is a certificate's base64url SHA-256 thumbprint, as its
// assertions name it in x5t#S256; "" for the other kinds.
func (c Credential) Thumbprint() string {
	if c.c == nil {
		return ""
	}
	return c.c.thumbprint
}

// Apply adds to form what proves the app clientID to the token endpoint
// tokenURL: client_secret, or client_assertion_type and client_assertion.
// A certificate signs a new assertion for tokenURL, valid from now; a
// federated token file is read again, since the platform rotates it.
// The caller sends the form and must never log it.
func (c Credential) Apply(ctx context.Context, form url.Values, clientID, tokenURL string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.c == nil {
		return ErrNone
	}
	switch c.c.kind {
	case KindSecret:
		form.Set("client_secret", c.c.secret)
	case KindCertificate:
		a, err := c.c.assertion(clientID, tokenURL, now)
		if err != nil {
			return err
		}
		form.Set("client_assertion_type", AssertionType)
		form.Set("client_assertion", a)
	case KindFederated:
		tok, err := c.c.readToken()
		if err != nil {
			return err
		}
		form.Set("client_assertion_type", AssertionType)
		form.Set("client_assertion", tok)
	}
	return nil
}

// assertion signs the JWT of "certificate credentials": the audience is the
// token endpoint itself, so an assertion cannot be replayed at another one.
func (c *credential) assertion(clientID, tokenURL string, now time.Time) (string, error) {
	jti, err := newGUID()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodPS256, jwt.MapClaims{
		"aud": tokenURL,
		"iss": clientID,
		"sub": clientID,
		"jti": jti,
		"nbf": now.Unix(),
		"iat": now.Unix(),
		"exp": now.Add(assertionLife).Unix(),
	})
	tok.Header["typ"] = "JWT"
	tok.Header["x5t#S256"] = c.thumbprint
	s, err := tok.SignedString(c.key)
	if err != nil {
		return "", fmt.Errorf("%w: signing the assertion: %w", ErrCertificate, err)
	}
	return s, nil
}

// newGUID is a random (version 4) GUID, the jti the document shows.
func newGUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// String names the kind and the file, never the secret or the key.
func (c Credential) String() string {
	switch c.Kind() {
	case KindNone:
		return "none"
	case KindSecret:
		return string(KindSecret) + " [redacted]"
	default:
		return string(c.c.kind) + " " + c.c.path
	}
}

// Format prints String for every verb, %#v and %d included, so that no
// format of a struct holding a Credential can reach the key or the secret.
func (c Credential) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue logs String.
func (c Credential) LogValue() slog.Value { return slog.StringValue(c.String()) }
