package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"teamsbot/signin"
	"teamsbot/store"
)

// GET /backup on the internal listener copies the bbolt file while the
// service runs (it holds the file's lock, so nothing else can read it):
// the copy opens as a store and holds the run and the view the service
// had just made. The main listener never serves it.
func TestBackupWhileServing(t *testing.T) {
	connector := newRecordingConnector(t)
	base, logs, _ := startService(t, map[string]string{"TICKETIQ_METRICS_ADDR": "127.0.0.1:0"})
	internal := internalURL(t, logs)
	if l := logs.logLine("internal listener"); l == nil || !strings.Contains(l["serves"].(string), "/backup") {
		t.Errorf("the internal listener does not say it serves /backup: %v", l)
	}
	body, _ := json.Marshal(map[string]any{
		"type": "message", "id": "act-backup", "serviceUrl": connector.URL, "channelId": "msteams",
		"timestamp":    time.Now().UTC().Format(time.RFC3339),
		"from":         map[string]any{"id": "29:megan", "name": "Megan Bowen", "aadObjectId": signin.LocalPeople()[0].UserID},
		"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": "a:backup", "conversationType": "personal", "tenantId": signin.LocalTenant},
		"channelData":  map[string]any{"tenant": map[string]any{"id": signin.LocalTenant}},
		"text":         "/sales_report {}",
	})
	resp, err := http.Post(base+"/api/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if connector.waitAttachments(func(b []byte) string {
		if bytes.Contains(b, []byte("Sales report")) {
			return "answered"
		}
		return ""
	}) == "" {
		t.Fatal("no answer naming the Sales report view")
	}

	c := &http.Client{Timeout: 30 * time.Second}
	if code, _ := get(t, c, base+"/backup"); code != http.StatusNotFound {
		t.Errorf("GET /backup on the main listener: %d, want 404", code)
	}
	resp, err = c.Get(internal + "/backup")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "teamsbot.db") {
		t.Fatalf("GET /backup: %d %v", resp.StatusCode, resp.Header)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	st, err := store.Open(context.Background(), path, store.Options{OpenTimeout: time.Second})
	if err != nil {
		t.Fatalf("the copy does not open as a store: %v", err)
	}
	defer st.Close()
	runs, err := st.RecentRuns(context.Background(), signin.LocalTenant, 10)
	if err != nil || len(runs) != 1 || len(runs[0].ViewIDs) != 1 {
		t.Fatalf("runs in the copy: %+v, %v; want the one run with its view", runs, err)
	}
	v, err := st.View(context.Background(), runs[0].ViewIDs[0])
	if err != nil || v.Tool != "sales_report" {
		t.Errorf("the view in the copy: %+v, %v", v, err)
	}
	if html, err := st.ViewHTML(context.Background(), v.HTMLSHA256); err != nil || len(html) == 0 {
		t.Errorf("the view's HTML in the copy: %d bytes, %v", len(html), err)
	}
}
