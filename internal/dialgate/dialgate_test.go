package dialgate_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"teamsbot/internal/dialgate"
)

// server is an HTTPS server on loopback whose handlers hold every request
// until release, counting the connections made to it.
type server struct {
	srv     *httptest.Server
	conns   atomic.Int64
	arrived chan struct{}
	release chan struct{}
}

func newServer(t *testing.T, h2 bool, streams uint32) *server {
	s := &server{arrived: make(chan struct{}, 10000), release: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.arrived <- struct{}{}
		<-s.release
		io.WriteString(w, r.Proto)
	}))
	s.srv.EnableHTTP2 = h2
	s.srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: int(streams)}
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// transport is a transport trusting s's certificate, gated or not.
func (s *server) transport(gated bool) http.RoundTripper {
	tr := &http.Transport{
		TLSClientConfig:     s.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone(),
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 1000,
	}
	if gated {
		return dialgate.New(tr)
	}
	return tr
}

// burst sends n requests at once through rt, waits until all have
// reached the handlers, releases them and returns their protocols.
func burst(t *testing.T, s *server, rt http.RoundTripper, n int) []string {
	t.Helper()
	client := &http.Client{Transport: rt, Timeout: time.Minute}
	protos := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			resp, err := client.Get(s.srv.URL)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			protos[i] = string(b)
		})
	}
	for range n {
		select {
		case <-s.arrived:
		case err := <-errs:
			t.Fatalf("a request failed: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("the requests did not all arrive")
		}
	}
	close(s.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a request failed: %v", err)
	}
	return protos
}

// 400 requests at once to an HTTP/2 server that takes 100 streams on a
// connection are carried by a handful of connections, two dialled at a
// time; without the gate net/http dials one for nearly every request.
func TestBurstSharesConnections(t *testing.T) {
	const n = 400
	plain := newServer(t, true, 100)
	burst(t, plain, plain.transport(false), n)
	s := newServer(t, true, 100)
	protos := burst(t, s, s.transport(true), n)
	for i, p := range protos {
		if p != "HTTP/2.0" {
			t.Fatalf("request %d went over %q, want HTTP/2.0", i, p)
		}
	}
	got := s.conns.Load()
	t.Logf("%d requests at once: %d connections gated, %d without the gate", n, got, plain.conns.Load())
	// Four would carry them all; a few more are dialled when a dial
	// waiting for its place looks before the new connection reached its
	// request (a busy machine), never one a request.
	if got < n/100 || got > 4*n/100 {
		t.Errorf("%d requests at once, 100 streams a connection: %d connections, want %d to %d", n, got, n/100, 4*n/100)
	}
}

// An HTTP/1.1 server still gets a connection per request in flight: the
// gate lets them be dialled one after the other, and none is lost.
func TestHTTP1StillGetsAConnectionPerRequest(t *testing.T) {
	const n = 50
	s := newServer(t, false, 0)
	protos := burst(t, s, s.transport(true), n)
	for i, p := range protos {
		if p != "HTTP/1.1" {
			t.Fatalf("request %d went over %q, want HTTP/1.1", i, p)
		}
	}
	if got := s.conns.Load(); got != n {
		t.Errorf("%d requests in flight over HTTP/1.1: %d connections, want %d", n, got, n)
	}
}

// A server whose certificate the client does not trust is refused, as
// by net/http itself.
func TestUntrustedCertificateRefused(t *testing.T) {
	s := newServer(t, true, 100)
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{}}
	_, err := (&http.Client{Transport: dialgate.New(tr), Timeout: 10 * time.Second}).Get(s.srv.URL)
	if err == nil {
		t.Fatal("a server with an unknown certificate was trusted")
	}
}
