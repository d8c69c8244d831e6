package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"
)

// viewPath is one request of the view path, and the same number of bytes
// from the no-op floor.
type viewPath struct {
	name   string
	method string
	url    string // absolute, on the service
	body   []byte
	size   int // bytes the service answered, which the floor answers too
}

// signedIn is a client with a session of the local development sign-in,
// as the person who owns the benchmark's views.
func signedIn(ctx context.Context, base string) (*http.Client, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, fmt.Errorf("cookie jar: %w", err)
	}
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	form := url.Values{"tenant": {homeTenant}, "user": {userOID}, "name": {"Ada Lovelace"},
		"roles": {"agents.read agents.run"}, "return": {"/"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/signin/local", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("sign-in request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sign-in: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("sign-in: status %d", resp.StatusCode)
	}
	return c, nil
}

// viewPaths reads the view's info (fresh frame tokens) and lists the four
// requests of the view path with the sizes of their answers.
func viewPaths(ctx context.Context, c *http.Client, base, viewID string) ([]viewPath, error) {
	paths := []viewPath{{name: "view API", method: http.MethodGet, url: base + "/api/mcp-apps/" + viewID}}
	var info struct {
		ProxyURL string `json:"proxyUrl"`
		ViewURL  string `json:"viewUrl"`
	}
	data, err := fetch(ctx, c, paths[0].method, paths[0].url, nil, base)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("view info: %w", err)
	}
	paths = append(paths,
		viewPath{name: "proxy document", method: http.MethodGet, url: base + info.ProxyURL},
		viewPath{name: "view document", method: http.MethodGet, url: base + info.ViewURL},
		viewPath{name: "tool call", method: http.MethodPost, url: base + "/api/mcp-apps/" + viewID + "/call",
			body: []byte(`{"name":"refresh_sales","arguments":{}}`)},
	)
	for i := range paths {
		data, err := fetch(ctx, c, paths[i].method, paths[i].url, paths[i].body, base)
		if err != nil {
			return nil, err
		}
		paths[i].size = len(data)
	}
	return paths, nil
}

// fetch makes one request as the page would (same origin) and returns the
// body of a 200.
func fetch(ctx context.Context, c *http.Client, method, u string, body []byte, origin string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: reading: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: status %d", method, strings.SplitN(u, "?", 2)[0], resp.StatusCode)
	}
	return data, nil
}

// requestOp is one timed request, for closedLoop.
func requestOp(c *http.Client, method, u string, body []byte, origin string) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		if _, err := fetch(ctx, c, method, u, body, origin); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
}
