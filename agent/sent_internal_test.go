package agent

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSentBodyIsLetGo checks that a model request's body is let go of once
// sent and its answer came, while Go's HTTP/2 client still holds the
// request for the answer that streams; and that net/http can still send
// it again before then.
func TestSentBodyIsLetGo(t *testing.T) {
	release := make(chan struct{})
	var got []byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer close(release)

	body := []byte(`{"stream":true,"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := srv.Client()
	x := &exchange{cancel: func(error) {}}
	var again []byte
	res, err := x.attempt(req, func(r *http.Request) (*http.Response, error) {
		// What net/http does to send a body again on another connection.
		rc, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		again, _ = io.ReadAll(rc)
		return client.Do(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("answered over %s, want HTTP/2", res.Proto)
	}
	if !bytes.Equal(got, body) || !bytes.Equal(again, body) {
		t.Fatalf("the server read %q and GetBody gave %q, want %q", got, again, body)
	}
	// The request is the one the client holds while the answer streams.
	if _, err := res.Request.GetBody(); !errors.Is(err, errBodyReleased) {
		t.Errorf("GetBody after the answer: %v, want %v", err, errBodyReleased)
	}
	sent, ok := res.Request.Body.(*sentOnce)
	if !ok {
		t.Fatalf("the request's body is a %T", res.Request.Body)
	}
	sent.mu.Lock()
	held := sent.rc != nil
	sent.mu.Unlock()
	if held {
		t.Error("the body sent still holds what it read from")
	}
	if n, err := sent.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("reading the body again: %d, %v; want 0, EOF", n, err)
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("Content-Type %q", res.Header.Get("Content-Type"))
	}
}
