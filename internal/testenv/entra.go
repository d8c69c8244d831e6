package testenv

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TeamsWebClientID is the Teams web client, one of the clients that ask
// Entra ID for Teams single sign-on tokens ("Configure your tab app in
// Microsoft Entra ID").
const TeamsWebClientID = "5e3ce6c0-2b1f-4285-8d4b-75ee78787346"

// EntraKeys plays Entra ID's signing keys for access tokens: a JSON Web Key
// Set served over https on loopback, as
// https://login.microsoftonline.com/common/discovery/v2.0/keys serves it
// ("Access tokens" and "Signing key rollover" in the Microsoft identity
// platform documentation), and the private key that signs tokens with it.
type EntraKeys struct {
	// URL is the key set's address; Client trusts its certificate.
	URL    string
	Client *http.Client
	kid    string
	key    *rsa.PrivateKey
}

// StartEntraKeys serves a fresh key set until the test ends.
func StartEntraKeys(t testing.TB) *EntraKeys {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k := &EntraKeys{kid: "test-key-1", key: key}
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": k.kid,
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	k.URL = srv.URL + "/common/discovery/v2.0/keys"
	k.Client = srv.Client()
	return k
}

// TeamsToken is what a Teams single sign-on access token says, v2.0 unless
// Version is "1.0". Zero fields get the values of a good token.
type TeamsToken struct {
	Audience, Tenant, User, Scope, Client, Version, Name string
	Roles                                                []string
	IssuedAt                                             time.Time
	Lifetime                                             time.Duration
	// Issuer overrides the issuer that Version and Tenant give.
	Issuer string
}

// Sign returns the token signed with the key set's key.
func (k *EntraKeys) Sign(t testing.TB, tok TeamsToken) string {
	t.Helper()
	return k.sign(t, tok, k.key)
}

// SignWithOtherKey returns the token signed by a key the set does not
// hold, under the same key id.
func (k *EntraKeys) SignWithOtherKey(t testing.TB, tok TeamsToken) string {
	t.Helper()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k.sign(t, tok, other)
}

func (k *EntraKeys) sign(t testing.TB, tok TeamsToken, key *rsa.PrivateKey) string {
	if tok.Version == "" {
		tok.Version = "2.0"
	}
	if tok.Scope == "" {
		tok.Scope = "access_as_user"
	}
	if tok.Client == "" {
		tok.Client = TeamsWebClientID
	}
	if tok.IssuedAt.IsZero() {
		tok.IssuedAt = time.Now()
	}
	if tok.Lifetime == 0 {
		tok.Lifetime = time.Hour
	}
	iss := tok.Issuer
	if iss == "" {
		iss = "https://login.microsoftonline.com/" + tok.Tenant + "/v2.0"
		if tok.Version == "1.0" {
			iss = "https://sts.windows.net/" + tok.Tenant + "/"
		}
	}
	claims := jwt.MapClaims{
		"aud": tok.Audience, "iss": iss, "iat": tok.IssuedAt.Unix(), "nbf": tok.IssuedAt.Unix(),
		"exp": tok.IssuedAt.Add(tok.Lifetime).Unix(), "tid": tok.Tenant, "oid": tok.User, "sub": "sub-" + tok.User,
		"scp": tok.Scope, "ver": tok.Version, "name": tok.Name,
	}
	if tok.Version == "1.0" {
		claims["appid"] = tok.Client
		claims["upn"] = tok.Name + "@example.com"
	} else {
		claims["azp"] = tok.Client
		claims["preferred_username"] = tok.Name + "@example.com"
	}
	if tok.Roles != nil {
		claims["roles"] = tok.Roles
	}
	j := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	j.Header["kid"] = k.kid
	s, err := j.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
