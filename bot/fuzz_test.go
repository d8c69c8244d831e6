package bot

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// Whatever arrives at /api/messages gets an HTTP answer from the expected
// set and never a panic.
func FuzzActivity(f *testing.F) {
	h := newHarness(f, setup{local: true, quietLogs: true})
	e := echo.New()
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
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
