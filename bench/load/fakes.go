package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Identities every target is configured with. The tenants are many because
// the service paces its sends per tenant and per conversation under Teams'
// documented rate limits: real load at hundreds of turns a second comes
// from many tenants and conversations, never one.
const (
	appID       = "6f1c1d2e-0000-4000-8000-00000000b07a"
	appSecret   = "bench-app-password"
	homeTenant  = "72f988bf-0000-4000-8000-0000000000aa"
	userOID     = "0b5e0a7e-0000-4000-8000-000000000001"
	channelIss  = "https://api.botframework.com"
	botToken    = "bench-bot-token"
	tenantCount = 400
)

// tenantID is the i-th tenant of the workload (0 is the bot's own).
func tenantID(i int) string {
	if i%tenantCount == 0 {
		return homeTenant
	}
	return fmt.Sprintf("72f988bf-0000-4000-8000-%012x", i%tenantCount)
}

// allTenants is TICKETIQ_BOT_ALLOWED_TENANTS for the workload.
func allTenants() string {
	ids := make([]string, tenantCount)
	for i := range ids {
		ids[i] = tenantID(i)
	}
	return strings.Join(ids, ",")
}

// fakes are the Bot Framework's side of the benchmark, on 127.0.0.1: the
// OpenID metadata and its key set, the token endpoint (one plain listener),
// and the Bot Connector over https with a self-signed certificate whose PEM
// is caFile. The connector tells the load generator when a turn's answer
// arrived.
type fakes struct {
	key      *rsa.PrivateKey
	plain    *http.Server
	plainURL string
	tls      *http.Server
	connURL  string
	caFile   string

	mu      sync.Mutex
	waiters map[string]chan struct{}

	// observe, when set, is told of every activity the connector takes.
	observe func(connectorCall)

	messages, typing, tokens, other, ids atomic.Int64
}

// connectorCall is one activity the Bot Connector took, as observe sees
// it: At is stamped as the handler starts, before the body is read, the
// earliest moment Go's server gives a request to a handler.
type connectorCall struct {
	At           time.Time
	Conversation string
	Type         string
	// StreamType and StreamID come from a streaminfo entity, if any;
	// AssignedID is the id the connector answered with (a stream's first
	// update gets the stream's id so).
	StreamType, StreamID, AssignedID string
	Body                             []byte
}

// startFakes starts the fakes; dir receives the certificate.
func startFakes(ctx context.Context, dir string) (*fakes, error) {
	return startObservedFakes(ctx, dir, nil)
}

// startObservedFakes starts the fakes with observe told of each activity
// the connector takes, from its handler's goroutine.
func startObservedFakes(ctx context.Context, dir string, observe func(connectorCall)) (*fakes, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	f := &fakes{key: key, waiters: map[string]chan struct{}{}, observe: observe}

	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	f.plainURL = "http://" + pl.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/.well-known/openidconfiguration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                channelIss,
			"authorization_endpoint":                "https://invalid.botframework.com",
			"jwks_uri":                              f.plainURL + "/v1/.well-known/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"token_endpoint_auth_methods_supported": []string{"private_key_jwt"},
		})
	})
	mux.HandleFunc("GET /v1/.well-known/keys", func(w http.ResponseWriter, _ *http.Request) {
		pub := f.key.PublicKey
		writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]any{{
			"kty": "RSA", "use": "sig", "kid": "bench-key",
			"n":            base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
			"e":            base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
			"x5t":          "bench-key",
			"endorsements": []string{"msteams"},
		}}})
	})
	mux.HandleFunc("POST /{tenant}/oauth2/v2.0/token", func(w http.ResponseWriter, r *http.Request) {
		f.tokens.Add(1)
		_ = r.ParseForm()
		writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": botToken})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		f.other.Add(1)
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_found"})
	})
	f.plain = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.plain.Serve(pl) }()

	cert, pemBytes, err := selfSigned()
	if err != nil {
		return nil, err
	}
	f.caFile = filepath.Join(dir, "connector-ca.pem")
	if err := os.WriteFile(f.caFile, pemBytes, 0o600); err != nil {
		return nil, fmt.Errorf("writing the certificate: %w", err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	f.connURL = "https://" + tl.Addr().String()
	f.tls = &http.Server{
		Handler:           http.HandlerFunc(f.connector),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = f.tls.ServeTLS(tl, "", "") }()
	context.AfterFunc(ctx, func() { f.close() })
	return f, nil
}

func (f *fakes) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.plain.Shutdown(ctx)
	_ = f.tls.Shutdown(ctx)
}

// metadataURL is the OpenID metadata every target validates tokens with.
func (f *fakes) metadataURL() string { return f.plainURL + "/v1/.well-known/openidconfiguration" }

// tokenURL is the client-credentials endpoint of the bot's tenant.
func (f *fakes) tokenURL() string { return f.plainURL + "/" + homeTenant + "/oauth2/v2.0/token" }

// selfSigned makes a certificate for 127.0.0.1, valid for a day.
func selfSigned() (tls.Certificate, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "bench connector"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate: %w", err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, pemBytes, nil
}

// channelToken is what the Bot Connector signs for a request to the bot;
// like the connector, the load generator reuses it.
func (f *fakes) channelToken() (string, error) {
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": channelIss, "aud": appID, "serviceurl": f.connURL,
		"nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(2 * time.Hour).Unix(),
	})
	tok.Header["kid"] = "bench-key"
	s, err := tok.SignedString(f.key)
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	return s, nil
}

// expect returns a channel closed when the answer to activityID arrives.
func (f *fakes) expect(activityID string) <-chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	f.waiters[activityID] = ch
	f.mu.Unlock()
	return ch
}

// forget drops a waiter whose turn gave up.
func (f *fakes) forget(activityID string) {
	f.mu.Lock()
	delete(f.waiters, activityID)
	f.mu.Unlock()
}

// connector is the Bot Connector's POST and PUT of
// /v3/conversations/{id}/activities[/{activityId}]: it checks the bot
// token, reads the activity, and answers with a ResourceResponse.
func (f *fakes) connector(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	rest, ok := strings.CutPrefix(r.URL.Path, "/v3/conversations/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 || len(parts) > 3 || parts[1] != "activities" || (r.Method != http.MethodPost && r.Method != http.MethodPut) {
		f.other.Add(1)
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": "NotFound"}})
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+botToken {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "Unauthorized"}})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var a struct {
		Type      string `json:"type"`
		ReplyToID string `json:"replyToId"`
		Entities  []struct {
			Type       string `json:"type"`
			StreamID   string `json:"streamId"`
			StreamType string `json:"streamType"`
		} `json:"entities"`
	}
	if err != nil || json.Unmarshal(body, &a) != nil || a.Type == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": "BadArgument"}})
		return
	}
	replyTo := a.ReplyToID
	if len(parts) == 3 {
		replyTo = parts[2]
	}
	// Every answer names an activity of its own: a stream's id is its
	// first update's.
	id := "1:" + strconv.FormatInt(f.ids.Add(1), 10)
	if f.observe != nil {
		c := connectorCall{At: at, Conversation: parts[0], Type: a.Type, AssignedID: id, Body: body}
		for _, e := range a.Entities {
			if e.Type == "streaminfo" {
				c.StreamType, c.StreamID = e.StreamType, e.StreamID
			}
		}
		f.observe(c)
	}
	if a.Type == "message" {
		f.messages.Add(1)
		f.mu.Lock()
		ch := f.waiters[replyTo]
		delete(f.waiters, replyTo)
		f.mu.Unlock()
		if ch != nil {
			close(ch)
		}
	} else {
		f.typing.Add(1)
	}
	status := http.StatusCreated
	if r.Method == http.MethodPut {
		status = http.StatusOK
	}
	writeJSON(w, status, map[string]any{"id": id})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
