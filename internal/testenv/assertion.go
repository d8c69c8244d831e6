package testenv

import (
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// AssertionType is the client_assertion_type Entra ID takes, for a
// certificate's assertion and a federated token alike.
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// FederatedAudience is the audience Entra ID accepts in a federated token.
const FederatedAudience = "api://AzureADTokenExchange"

// FederatedCredential is a federated identity credential of an app
// registration ("Workload identity federation"): tokens of Issuer about
// Subject, signed with Key.
type FederatedCredential struct {
	Issuer, Subject string
	Key             *rsa.PublicKey
}

// EntraApp is what a fake Entra token endpoint knows of an app
// registration's credentials besides a secret: the certificate uploaded to
// it and its federated identity credential, either of which may be nil.
// It remembers the jti of every assertion it took, as Entra ID refuses one
// it has seen. It is safe for concurrent use.
type EntraApp struct {
	Cert      *x509.Certificate
	Federated *FederatedCredential

	mu   sync.Mutex
	jtis map[string]bool
}

// CheckAssertion returns why the client assertion in form does not prove
// the app clientID at the token endpoint endpoint (the assertion's
// audience), judged at now, as an error_description in Entra's
// "AADSTS<code>: <message>" shape; "" when it does.
//
// A certificate's assertion is checked as "Microsoft identity platform
// application authentication certificate credentials" describes it: a
// PS256 signature by the uploaded certificate's key, found by its x5t#S256
// thumbprint; typ JWT; aud the endpoint; iss and sub the client id; a jti
// never seen before; nbf and exp around now, at most 10 minutes apart. A
// federated token ("Workload identity federation") must be signed by the
// credential's issuer's key, about its subject, for FederatedAudience, and
// not expired. Tests look at the status and the reason, not at the codes.
func (a *EntraApp) CheckAssertion(form url.Values, clientID, endpoint string, now time.Time) string {
	if form.Get("client_assertion_type") != AssertionType {
		return "AADSTS700023: client_assertion_type must be " + AssertionType + "."
	}
	if form.Has("client_secret") {
		return "AADSTS700025: Only one client credential may be presented."
	}
	raw := form.Get("client_assertion")
	header := map[string]any{}
	if head, _, ok := strings.Cut(raw, "."); ok {
		if b, err := base64.RawURLEncoding.DecodeString(head); err == nil {
			_ = json.Unmarshal(b, &header)
		}
	}
	claims := jwt.MapClaims{}
	if thumb, ok := header["x5t#S256"].(string); ok {
		return a.checkCertificate(raw, thumb, header, claims, clientID, endpoint, now)
	}
	f := a.Federated
	if f == nil {
		return "AADSTS70021: No matching federated identity record found for presented assertion."
	}
	p := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if _, err := p.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return f.Key, nil }); err != nil {
		return "AADSTS700211: No matching federated identity record found for presented assertion issuer, or its signature does not verify."
	}
	sub, _ := claims["sub"].(string)
	switch {
	case !claims.VerifyIssuer(f.Issuer, true):
		return "AADSTS700211: No matching federated identity record found for presented assertion issuer."
	case sub != f.Subject:
		return "AADSTS700213: No matching federated identity record found for presented assertion subject."
	case !claims.VerifyAudience(FederatedAudience, true):
		return "AADSTS700212: No matching federated identity record found for presented assertion audience."
	case !claims.VerifyExpiresAt(now.Unix(), true):
		return "AADSTS700024: Client assertion is not within its valid time range."
	}
	return ""
}

func (a *EntraApp) checkCertificate(raw, thumb string, header map[string]any, claims jwt.MapClaims, clientID, endpoint string, now time.Time) string {
	if a.Cert == nil {
		return "AADSTS700027: The certificate used to sign the client assertion is not registered on the application."
	}
	sum := sha256.Sum256(a.Cert.Raw)
	if thumb != base64.RawURLEncoding.EncodeToString(sum[:]) {
		return "AADSTS700027: The certificate used to sign the client assertion is not registered on the application."
	}
	p := jwt.NewParser(jwt.WithValidMethods([]string{"PS256"}), jwt.WithoutClaimsValidation())
	if _, err := p.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return a.Cert.PublicKey, nil }); err != nil {
		return "AADSTS700027: Client assertion failed signature validation."
	}
	iss, _ := claims["iss"].(string)
	sub, _ := claims["sub"].(string)
	jti, _ := claims["jti"].(string)
	exp, _ := claims["exp"].(float64)
	nbf, _ := claims["nbf"].(float64)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case header["typ"] != "JWT":
		return "AADSTS50027: JWT token is invalid or malformed."
	case !claims.VerifyAudience(endpoint, true):
		return "AADSTS50027: The client assertion's audience is not this token endpoint."
	case iss != clientID || sub != clientID:
		return "AADSTS700021: Client assertion application identifier doesn't match 'client_id' parameter."
	case jti == "" || a.jtis[jti]:
		return "AADSTS700024: Client assertion contains a jti that was already used."
	case !claims.VerifyExpiresAt(now.Unix(), true) || !claims.VerifyNotBefore(now.Unix(), true):
		return "AADSTS700024: Client assertion is not within its valid time range."
	case exp-nbf > (10 * time.Minute).Seconds():
		return "AADSTS700024: Client assertion is valid for longer than allowed."
	}
	if a.jtis == nil {
		a.jtis = map[string]bool{}
	}
	a.jtis[jti] = true
	return ""
}
