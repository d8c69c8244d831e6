// Package testenv holds what the tests of several packages share: a clock
// that moves only when told, a mockoidc user whose ID token carries the
// claims Microsoft Entra ID sends, a log buffer safe for concurrent
// writers, loopback listeners, and a Bot Connector for proactive sends.
//
// Only tests import it; docs/layout_test.go fails if the service does.
package testenv

import (
	"bytes"
	"encoding/json"
	"net"
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
