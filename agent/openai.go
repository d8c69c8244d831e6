package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/textclip"
	"time"
)

// OpenAIModel is a model behind an OpenAI-compatible Chat Completions API
// with tool calling: OpenAI itself, Azure OpenAI, or a local server.
type OpenAIModel struct {
	endpoint string
	model    string
	key      string
	azure    bool
	client   *http.Client
}

// NewOpenAIModel returns a model for cfg. key may be empty (local servers
// need none); base is the HTTP transport, nil for the default one.
func NewOpenAIModel(cfg ModelConfig, key string, base http.RoundTripper) (*OpenAIModel, error) {
	root := cfg.BaseURL
	if root == "" {
		root = DefaultOpenAIBaseURL
	}
	u, err := url.Parse(strings.TrimRight(root, "/") + "/chat/completions")
	if err != nil {
		return nil, fmt.Errorf("model baseURL: %w", err)
	}
	if cfg.APIVersion != "" {
		q := u.Query()
		q.Set("api-version", cfg.APIVersion)
		u.RawQuery = q.Encode()
	}
	timeout, err := parseTimeout(cfg.Timeout, DefaultModelTimeout)
	if err != nil {
		return nil, fmt.Errorf("model timeout: %w", err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &OpenAIModel{
		endpoint: u.String(),
		model:    cfg.Model,
		key:      key,
		azure:    cfg.Azure || cfg.APIVersion != "",
		// The key (api-key or Authorization) and the conversation are for
		// the configured endpoint only: Go's client would copy api-key to
		// any host a redirect names, and Authorization to another port.
		client: &http.Client{Transport: base, Timeout: timeout, CheckRedirect: netaddr.SameOriginRedirects},
	}, nil
}

// Wire format of the Chat Completions API (the parts used here).
type (
	chatRequest struct {
		Model      string     `json:"model"`
		Messages   []chatMsg  `json:"messages"`
		Tools      []chatTool `json:"tools,omitempty"`
		ToolChoice string     `json:"tool_choice,omitempty"`
	}
	chatMsg struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatTool struct {
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Parameters  any    `json:"parameters"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatResponse struct {
		Choices []struct {
			Message      chatMsg `json:"message"`
			FinishReason string  `json:"finish_reason"`
		} `json:"choices"`
	}
	chatError struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
)

var openAIName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolNames maps each offered tool to a name the API accepts
// (^[a-zA-Z0-9_-]{1,64}$) and back. "server/tool" becomes "server__tool"
// with other characters replaced by "_"; a name that is too long or taken
// is shortened and given a hash of the original, so the mapping stays
// one-to-one and the same from turn to turn.
func toolNames(tools []ToolSpec) (map[string]string, map[string]string) {
	to := make(map[string]string, len(tools))
	from := make(map[string]string, len(tools))
	for _, t := range tools {
		name := sanitize(t.Server) + "__" + sanitize(t.Tool)
		if len(name) > 64 || from[name] != "" || !openAIName.MatchString(name) {
			sum := sha256.Sum256([]byte(t.Name))
			h := hex.EncodeToString(sum[:4])
			if len(name) > 55 {
				name = name[:55]
			}
			name += "_" + h
		}
		to[t.Name] = name
		from[name] = t.Name
	}
	return to, from
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

func strPtr(s string) *string { return &s }

// Next implements Model.
func (m *OpenAIModel) Next(ctx context.Context, t Turn) (Message, error) {
	to, from := toolNames(t.Tools)
	req := chatRequest{Model: m.model}
	req.Messages = append(req.Messages, chatMsg{Role: "system", Content: strPtr(systemPrompt(t.AgentName))})
	for _, msg := range t.Messages {
		switch msg.Role {
		case RoleUser:
			req.Messages = append(req.Messages, chatMsg{Role: "user", Content: strPtr(msg.Text)})
		case RoleAssistant:
			cm := chatMsg{Role: "assistant"}
			if msg.Text != "" || len(msg.ToolCalls) == 0 {
				cm.Content = strPtr(msg.Text)
			}
			for _, c := range msg.ToolCalls {
				var tc chatToolCall
				tc.ID, tc.Type = c.ID, "function"
				tc.Function.Name = to[c.Name]
				if tc.Function.Name == "" {
					tc.Function.Name = sanitize(c.Name)
				}
				tc.Function.Arguments = string(c.Arguments)
				cm.ToolCalls = append(cm.ToolCalls, tc)
			}
			req.Messages = append(req.Messages, cm)
		case RoleTool:
			text := msg.Text
			if msg.IsError {
				text = "Error: " + text
			}
			req.Messages = append(req.Messages, chatMsg{Role: "tool", Content: strPtr(text), ToolCallID: msg.ToolCallID})
		}
	}
	for _, s := range t.Tools {
		params := s.InputSchema
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		desc := s.Description
		if s.Title != "" && s.Title != s.Tool {
			desc = s.Title + ". " + desc
		}
		req.Tools = append(req.Tools, chatTool{Type: "function", Function: chatFunction{Name: to[s.Name], Description: desc, Parameters: params}})
	}
	switch {
	case len(req.Tools) == 0:
	case t.Final:
		// The tools stay described (the history names them), but none may
		// be called now.
		req.ToolChoice = "none"
	default:
		req.ToolChoice = "auto"
	}

	resp, err := m.post(ctx, req)
	if err != nil {
		return Message{}, err
	}
	if len(resp.Choices) == 0 {
		return Message{}, fmt.Errorf("%w: the response has no choices", ErrModel)
	}
	cm := resp.Choices[0].Message
	out := Message{Role: RoleAssistant}
	if cm.Content != nil {
		out.Text = *cm.Content
	}
	for _, tc := range cm.ToolCalls {
		name := from[tc.Function.Name]
		if name == "" {
			name = tc.Function.Name // not offered: the run refuses it
		}
		args := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			args = json.RawMessage("{}")
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Name: name, Arguments: args})
	}
	return out, nil
}

func systemPrompt(agent string) string {
	if agent == "" {
		agent = "an assistant"
	}
	return "You are " + agent + ". Use the tools offered when they help answer. " +
		"Some tool results are also shown to the person as an interactive view; describe the result in words."
}

// post sends one request; HTTP errors become errors wrapping ErrModel with
// the status and the API's own message (never the key).
func (m *OpenAIModel) post(ctx context.Context, body chatRequest) (*chatResponse, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the request: %w", ErrModel, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.endpoint, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if m.key != "" {
		if m.azure {
			req.Header.Set("api-key", m.key)
		} else {
			req.Header.Set("Authorization", "Bearer "+m.key)
		}
	}
	start := time.Now()
	resp, err := m.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) && uerr.Timeout() {
			return nil, fmt.Errorf("%w: no answer from %s within %s", ErrModel, req.URL.Host, time.Since(start).Round(time.Millisecond))
		}
		return nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the response: %w", ErrModel, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(data))
		var ce chatError
		if json.Unmarshal(data, &ce) == nil && ce.Error.Message != "" {
			msg = ce.Error.Message
			if code := fmt.Sprint(ce.Error.Code); ce.Error.Code != nil && code != "" {
				msg += " (" + code + ")"
			}
		}
		return nil, fmt.Errorf("%w: HTTP %d from %s: %s", ErrModel, resp.StatusCode, req.URL.Host, textclip.Clip(msg, 300))
	}
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%w: the response is not Chat Completions JSON: %w", ErrModel, err)
	}
	return &out, nil
}

var _ Model = (*OpenAIModel)(nil)
var _ Model = (*BuiltinModel)(nil)
