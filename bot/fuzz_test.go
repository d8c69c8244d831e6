package bot

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"teamsbot/internal/web"
	"testing"

	"github.com/golang-jwt/jwt/v4"
	"github.com/labstack/echo/v4"
)

// Whatever arrives at /api/messages gets an HTTP answer from the expected
// set and never a panic.
func FuzzActivity(f *testing.F) {
	h := newHarness(f, setup{local: true, quietLogs: true})
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	h.bot.Register(e)
	valid, _ := json.Marshal(h.message("channel", "19:c@thread.tacv2", "f-1", "/tools"))
	f.Add(string(valid))
	f.Add(`{"type":"invoke","name":"adaptiveCard/action","serviceUrl":"http://127.0.0.1:1","channelId":"msteams","conversation":{"id":"c"},"value":[1]}`)
	f.Add(`{"type":"conversationUpdate","serviceUrl":"http://127.0.0.1:1","channelId":"msteams","conversation":{"id":"c"},"recipient":{"id":"b"},"membersAdded":[{"id":"b"}]}`)
	f.Add(`{"type":"message","serviceUrl":"https://x","channelId":"msteams","conversation":{"id":"c"},"recipient":{"id":"b"},"entities":[{"type":"mention","mentioned":{"id":"b"},"text":""}],"text":"<at>b</at>"}`)
	f.Add(`{"type":"message","channelData":"x"}`)
	f.Add(`{"type":"installationUpdate","action":"remove","serviceUrl":"s","channelId":"c","conversation":{"id":"c"}}`)
	f.Add(`null`)
	f.Add(`{"timestamp":"yesterday"}`)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "127.0.0.1:3978" // a local tool, as local mode requires
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}

// Whatever an authenticated endpoint is sent as a token, signed by a
// published key or not, the validator answers with an *AuthError or
// accepts it for the serviceUrl it was given, and never panics.
// FuzzActivity runs in local mode and never reaches the validator.
func FuzzToken(f *testing.F) {
	h := newHarness(f, setup{quietLogs: true})
	key := h.bf.key("key-1")
	serviceURL := h.conn.srv.URL
	valid, _ := json.Marshal(h.claims())
	f.Add(`{"alg":"RS256","kid":"key-1","typ":"JWT"}`, string(valid), true)
	f.Add(`{"alg":"RS256","kid":"key-1"}`, `{"iss":"https://api.botframework.com","aud":{"x":1},"exp":1e300,"serviceurl":["a"]}`, true)
	f.Add(`{"alg":"RS256","kid":"key-1"}`, `{"iss":"https://api.botframework.com","aud":[null,1],"exp":-1,"nbf":"x"}`, true)
	f.Add(`{"alg":"none","kid":"key-1"}`, string(valid), false)
	f.Add(`{"alg":"RS256","kid":7}`, string(valid), true)
	f.Add(`{"alg":"RS256","kid":"key-1","crit":["exp"]}`, `null`, true)
	f.Add(`[]`, `[]`, false)
	f.Fuzz(func(t *testing.T, header, claims string, signed bool) {
		enc := base64.RawURLEncoding
		signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
		sig := "c2ln"
		if signed {
			s, err := jwt.SigningMethodRS256.Sign(signing, key)
			if err != nil {
				t.Fatal(err)
			}
			sig = s
		}
		got, err := h.bot.validator.Validate(context.Background(), "Bearer "+signing+"."+sig, serviceURL, "msteams")
		var ae *AuthError
		switch {
		case err == nil && got != serviceURL:
			t.Fatalf("accepted for serviceurl %q, the activity's is %q", got, serviceURL)
		case err != nil && !errors.As(err, &ae):
			t.Fatalf("error %v is not an *AuthError", err)
		}
	})
}
