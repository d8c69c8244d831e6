package main

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// floorBot is the least a Bot Framework bot can do for a message: check
// the Bot Connector's token (RS256, issuer, audience, lifetime, the
// serviceurl claim), and post one Adaptive Card as the reply with a cached
// bot token. No agent, no store. It is the best any bot can do here.
type floorBot struct {
	keys   map[string]*rsa.PublicKey
	card   json.RawMessage
	client *http.Client
	token  string
	parser *jwt.Parser
	// turns run after the 202, as a real bot's do; wg lets shutdown wait.
	wg sync.WaitGroup
}

// serveFloorBot runs the floor bot on addr until ctx ends. caFile, when
// set, is the only certificate it trusts for https.
func serveFloorBot(ctx context.Context, addr, metadataURL, tokenURL, cardFile, caFile string) error {
	card, err := os.ReadFile(cardFile)
	if err != nil {
		return fmt.Errorf("card: %w", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 128, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 5 * time.Second}
	if caFile != "" {
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return fmt.Errorf("certificate %s: no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	keys, err := fetchKeys(ctx, client, metadataURL)
	if err != nil {
		return err
	}
	tok, err := fetchBotToken(ctx, client, tokenURL)
	if err != nil {
		return err
	}
	fb := &floorBot{keys: keys, card: card, client: client, token: tok, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(channelIss), jwt.WithAudience(appID),
		jwt.WithExpirationRequired(), jwt.WithLeeway(5*time.Minute))}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: fb, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	fb.wg.Wait()
	return nil
}

// inActivity is the part of an activity the floor bot reads.
type inActivity struct {
	Type         string `json:"type"`
	ID           string `json:"id"`
	ServiceURL   string `json:"serviceUrl"`
	ChannelID    string `json:"channelId"`
	Conversation struct {
		ID string `json:"id"`
	} `json:"conversation"`
	From      json.RawMessage `json:"from"`
	Recipient json.RawMessage `json:"recipient"`
}

func (fb *floorBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/messages" {
		http.NotFound(w, r)
		return
	}
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	claims := jwt.MapClaims{}
	if !ok {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	if _, err := fb.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if k := fb.keys[kid]; k != nil {
			return k, nil
		}
		return nil, errors.New("unknown key")
	}); err != nil {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	var a inActivity
	if err := json.NewDecoder(io.LimitReader(r.Body, 256<<10)).Decode(&a); err != nil {
		http.Error(w, "bad activity", http.StatusBadRequest)
		return
	}
	if su, _ := claims["serviceurl"].(string); su != a.ServiceURL || !strings.HasPrefix(a.ServiceURL, "https://") {
		http.Error(w, "serviceUrl does not match the token", http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	if a.Type != "message" {
		return
	}
	fb.wg.Add(1)
	go func() {
		defer fb.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = fb.reply(ctx, a)
	}()
}

// reply posts the card to {serviceUrl}/v3/conversations/{id}/activities/{activityId}.
func (fb *floorBot) reply(ctx context.Context, a inActivity) error {
	body, err := json.Marshal(map[string]any{
		"type": "message", "from": a.Recipient, "recipient": a.From, "replyToId": a.ID,
		"conversation": map[string]string{"id": a.Conversation.ID},
		"attachments":  []map[string]any{{"contentType": "application/vnd.microsoft.card.adaptive", "content": fb.card}},
	})
	if err != nil {
		return fmt.Errorf("encoding the reply: %w", err)
	}
	target := strings.TrimSuffix(a.ServiceURL, "/") + "/v3/conversations/" + url.PathEscape(a.Conversation.ID) + "/activities/" + url.PathEscape(a.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("reply request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+fb.token)
	resp, err := fb.client.Do(req)
	if err != nil {
		return fmt.Errorf("reply: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("reply: status %d", resp.StatusCode)
	}
	return nil
}

// fetchKeys reads the OpenID metadata and its key set.
func fetchKeys(ctx context.Context, client *http.Client, metadataURL string) (map[string]*rsa.PublicKey, error) {
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, client, metadataURL, &meta); err != nil {
		return nil, fmt.Errorf("openid metadata: %w", err)
	}
	var set struct {
		Keys []struct {
			Kid, N, E string
		} `json:"keys"`
	}
	if err := getJSON(ctx, client, meta.JWKSURI, &set); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil {
			continue
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return keys, nil
}

// fetchBotToken gets the bot's client-credentials token once.
func fetchBotToken(ctx context.Context, client *http.Client, tokenURL string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {appID}, "client_secret": {appSecret},
		"scope": {"https://api.botframework.com/.default"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := doJSON(client, req, &tok); err != nil {
		return "", fmt.Errorf("bot token: %w", err)
	}
	return tok.AccessToken, nil
}

func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	return doJSON(client, req, v)
}

func doJSON(client *http.Client, req *http.Request, v any) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d", req.Method, req.URL.Redacted(), resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// serveNoop runs the view path's floor on addr until ctx ends: every
// request is answered 200 with ?n= bytes, so the floor moves as many bytes
// as the real answer it stands beside.
func serveNoop(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var mu sync.Mutex
	bodies := map[int][]byte{}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		n = min(max(n, 0), 1<<20)
		mu.Lock()
		b, ok := bodies[n]
		if !ok {
			b = bytes.Repeat([]byte("x"), n)
			bodies[n] = b
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(b)
	})}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
