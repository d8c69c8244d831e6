package testenv

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Post is one activity a Connector took: where it went and its JSON.
type Post struct {
	ConversationID string
	ReplyTo        string // the activity replied to; empty for a proactive send
	ID             string // the id the connector gave it
	Type           string
	Raw            []byte
}

// Connector is a Bot Connector service for tests of proactive sends, as
// "Bot Framework REST API reference: Conversations" defines the calls
// used: POST /v3/conversations/{id}/activities[/{replyToId}] answered with
// a ResourceResponse {"id": ...}, and PUT on an activity to update it. A
// conversation marked with Forbid is answered 403 with the code Teams
// sends once the app was removed (BotNotInConversationRoster). It does
// not check tokens: the bot's own tests do, against their fake.
type Connector struct {
	URL string

	mu        sync.Mutex
	posts     []Post
	forbidden map[string]bool
	changed   chan struct{}
}

// StartConnector starts a Connector on 127.0.0.1, closed when t ends.
func StartConnector(t testing.TB) *Connector {
	c := &Connector{forbidden: map[string]bool{}, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *Connector) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v3/conversations/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 || len(parts) > 3 || parts[1] != "activities" || (r.Method != http.MethodPost && r.Method != http.MethodPut) {
		http.Error(w, `{"error":{"code":"NotFound"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var a struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &a) != nil || a.Type == "" {
		http.Error(w, `{"error":{"code":"BadArgument"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forbidden[parts[0]] {
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":{"code":"BotNotInConversationRoster","message":"The bot is not part of the conversation roster."}}`)
		return
	}
	p := Post{ConversationID: parts[0], Type: a.Type, Raw: raw, ID: "1:" + strconv.Itoa(len(c.posts)+1)}
	if len(parts) == 3 {
		p.ReplyTo = parts[2]
		if r.Method == http.MethodPut {
			p.ID = parts[2]
		}
	}
	c.posts = append(c.posts, p)
	close(c.changed)
	c.changed = make(chan struct{})
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": p.ID})
}

// Forbid answers every later call to the conversation with 403.
func (c *Connector) Forbid(conversationID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forbidden[conversationID] = true
}

// Posts returns the activities taken so far.
func (c *Connector) Posts() []Post {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Post(nil), c.posts...)
}

// Messages returns the message activities posted into a conversation.
func (c *Connector) Messages(conversationID string) []Post {
	var out []Post
	for _, p := range c.Posts() {
		if p.ConversationID == conversationID && p.Type == "message" {
			out = append(out, p)
		}
	}
	return out
}

// WaitMessages waits until a conversation has at least n messages, failing
// t after a generous limit.
func (c *Connector) WaitMessages(t testing.TB, conversationID string, n int) []Post {
	t.Helper()
	limit := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if got := c.Messages(conversationID); len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-limit:
			t.Fatalf("connector: %d messages in %s, waited for %d", len(c.Messages(conversationID)), conversationID, n)
		}
	}
}
