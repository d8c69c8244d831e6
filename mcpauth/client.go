package mcpauth

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"teamsbot/internal/netaddr"
)

// newClient is the client for authorization servers. An authorization
// server is not trusted: each request is bounded in time, each answer in
// size, and only https is spoken (plain http on loopback only when
// Options.AllowHTTP), on the first request as on every redirect.
func (b *Broker) newClient() *http.Client {
	var base http.RoundTripper = http.DefaultTransport
	if hc := b.opts.HTTPClient; hc != nil && hc.Transport != nil {
		base = hc.Transport
	}
	t := &guardedTransport{base: base, allowHTTP: b.opts.AllowHTTP, limit: maxMetadataBytes}
	return &http.Client{
		Transport: t,
		Timeout:   b.opts.RequestTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("more than 3 redirects")
			}
			return t.allowed(req.URL)
		},
	}
}

// errInsecure refuses an authorization server's endpoint that is not
// https.
var errInsecure = errors.New("an authorization server's address must be https")

// errTooLarge refuses an answer larger than maxMetadataBytes.
var errTooLarge = errors.New("the authorization server's answer is too large")

// guardedTransport refuses plain http and cuts answers at limit: reading
// past it is an error, not a silently shortened document.
type guardedTransport struct {
	base      http.RoundTripper
	allowHTTP bool
	limit     int64
}

func (t *guardedTransport) allowed(u *url.URL) error {
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && t.allowHTTP && netaddr.IsLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%w: %s", errInsecure, netaddr.Redact(u.String()))
}

// RoundTrip implements http.RoundTripper.
func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.allowed(req.URL); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.limit {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes", errTooLarge, resp.ContentLength)
	}
	resp.Body = &cappedBody{r: resp.Body, left: t.limit}
	return resp, nil
}

// cappedBody errors once more than its limit has been read.
type cappedBody struct {
	r    io.ReadCloser
	left int64
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

func (c *cappedBody) Close() error { return c.r.Close() }
