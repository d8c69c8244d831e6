package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// urlWithCredentials is a URL with user info, as an operator might paste
// into the wrong variable or a configuration file.
const urlWithCredentials = "https://admin:pa55word@db.example.com:5432/teamsbot"

// No configuration mistake prints a URL's user info, whichever variable or
// file key holds it: not the error of `teamsbot config` or `teamsbot
// serve`, not the output of `teamsbot config`, not the start-up log.
func TestConfigNeverShowsURLCredentials(t *testing.T) {
	check := func(t *testing.T, what, text string) {
		t.Helper()
		if strings.Contains(text, "pa55word") {
			t.Errorf("%s shows the URL's password:\n%s", what, text)
		}
	}
	for _, v := range settings() {
		if v.name == "TICKETIQ_DATA" {
			continue // a folder of that name is made, and is no mistake
		}
		t.Run(v.name, func(t *testing.T) {
			env := map[string]string{v.name: urlWithCredentials, "TICKETIQ_DATA": t.TempDir()}
			if strings.HasPrefix(v.name, "TICKETIQ_BOT_") && v.name != "TICKETIQ_BOT_APP_ID" {
				env["TICKETIQ_BOT_APP_ID"] = "app"
			}
			for _, cmd := range []string{"config", "serve"} {
				var out, errOut bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				err := run(ctx, []string{"teamsbot", cmd}, envOf(env), &out, &errOut)
				cancel()
				check(t, cmd+"'s output", out.String()+errOut.String())
				if err != nil {
					check(t, cmd+"'s error", err.Error())
				}
			}
		})
	}
	t.Run("config file", func(t *testing.T) {
		for name, body := range map[string]string{
			"timeout":     "agents:\n  - id: default\n    servers:\n      - name: crm\n        url: https://crm.example.com/mcp\n        timeout: " + urlWithCredentials + "\n",
			"server url":  "agents:\n  - id: default\n    servers:\n      - name: crm\n        url: " + urlWithCredentials + "\n",
			"model kind":  "agents:\n  - id: default\n    model: {kind: " + urlWithCredentials + "}\n",
			"model url":   "agents:\n  - id: default\n    model: {kind: openai, model: m, baseURL: " + urlWithCredentials + "}\n",
			"unknown key": "agents:\n  - id: default\n    " + "x: " + urlWithCredentials + "\n",
			"not yaml":    "agents: [" + urlWithCredentials + "\n",
			"a list":      "agents:\n  - id: " + "[" + urlWithCredentials + "]\n",
			"server name": "agents:\n  - id: default\n    servers:\n      - name: \"" + urlWithCredentials + "\"\n        builtin: demo\n",
			"command":     "agents:\n  - id: default\n    servers:\n      - name: s\n        command: [\"" + urlWithCredentials + "\"]\n        url: https://crm.example.com\n",
		} {
			path := filepath.Join(t.TempDir(), "agents.yaml")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"teamsbot", "config"}, envOf(map[string]string{"TICKETIQ_CONFIG": path}), &out, &errOut)
			if err == nil {
				t.Errorf("%s: no error", name)
				continue
			}
			check(t, name, err.Error()+out.String()+errOut.String())
		}
	})
	t.Run("config output", func(t *testing.T) {
		var out bytes.Buffer
		env := map[string]string{"TICKETIQ_BOT_TOKEN_URL": "https://login.example.com/token?client_secret=pa55word"}
		if err := run(context.Background(), []string{"teamsbot", "config"}, envOf(env), &out, &out); err != nil {
			t.Fatal(err)
		}
		check(t, "teamsbot config", out.String())
		if !strings.Contains(out.String(), "https://login.example.com/token") {
			t.Errorf("teamsbot config hides the URL's host and path:\n%s", out.String())
		}
	})
}
