package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/clientcred"
	"teamsbot/internal/testenv"
)

const (
	credAppID  = "6f1c1d2e-0000-4000-8000-00000000c0f1"
	credTenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
)

// credFiles are the files a credential test names: a good certificate
// file, one whose key belongs to another certificate, an expired one, and
// a federated token file.
type credFiles struct {
	cert, wrongKey, expired, token string
	pemKey                         string // a line of the good file's key, to look for in output
}

func newCredFiles(t *testing.T) credFiles {
	t.Helper()
	now := time.Now()
	good := testenv.NewCertificate(t, now.Add(-time.Hour), now.Add(365*24*time.Hour))
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	old := testenv.NewCertificate(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	token := filepath.Join(t.TempDir(), "azure-identity-token")
	if err := os.WriteFile(token, []byte("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzYSJ9.c2lnbmF0dXJl"), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(good.PEM(t, nil)), "\n")
	return credFiles{
		cert: good.File(t, nil), wrongKey: good.File(t, other), expired: old.File(t, nil), token: token,
		pemKey: lines[1],
	}
}

// A bot with an app id has exactly one credential: a secret, a certificate
// or a federated token file, or, with none of them, the token file Azure
// workload identity names. Each mistake is refused at start, naming the
// variables and saying what is wrong with a file; local mode takes none.
func TestConfigBotCredential(t *testing.T) {
	f := newCredFiles(t)
	missing := filepath.Join(t.TempDir(), "absent.pem")
	withApp := func(m map[string]string) map[string]string {
		m["TICKETIQ_BOT_APP_ID"], m["TICKETIQ_BOT_TENANT_ID"] = credAppID, credTenant
		return m
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		kind clientcred.Kind
		path string
		says []string
	}{
		{name: "secret", env: withApp(map[string]string{"TICKETIQ_BOT_APP_PASSWORD": "p"}), kind: clientcred.KindSecret},
		{name: "certificate", env: withApp(map[string]string{"TICKETIQ_BOT_CERT_FILE": f.cert}), kind: clientcred.KindCertificate, path: f.cert},
		{name: "federated", env: withApp(map[string]string{"TICKETIQ_BOT_FEDERATED_TOKEN_FILE": f.token}), kind: clientcred.KindFederated, path: f.token},
		{name: "workload identity's file", env: withApp(map[string]string{"AZURE_FEDERATED_TOKEN_FILE": f.token}), kind: clientcred.KindFederated, path: f.token},
		{name: "a secret wins over workload identity's file", env: withApp(map[string]string{"TICKETIQ_BOT_APP_PASSWORD": "p", "AZURE_FEDERATED_TOKEN_FILE": f.token}), kind: clientcred.KindSecret},
		{name: "local mode ignores workload identity's file", env: map[string]string{"AZURE_FEDERATED_TOKEN_FILE": f.token}, kind: clientcred.KindNone},
		{name: "none", env: withApp(map[string]string{}),
			says: []string{"TICKETIQ_BOT_APP_ID needs a credential", "TICKETIQ_BOT_APP_PASSWORD", "TICKETIQ_BOT_CERT_FILE", "TICKETIQ_BOT_FEDERATED_TOKEN_FILE"}},
		{name: "two", env: withApp(map[string]string{"TICKETIQ_BOT_APP_PASSWORD": "p", "TICKETIQ_BOT_CERT_FILE": f.cert}),
			says: []string{"TICKETIQ_BOT_APP_PASSWORD and TICKETIQ_BOT_CERT_FILE are all set", "exactly one"}},
		{name: "wrong key", env: withApp(map[string]string{"TICKETIQ_BOT_CERT_FILE": f.wrongKey}),
			says: []string{"TICKETIQ_BOT_CERT_FILE", f.wrongKey, "private key does not match"}},
		{name: "expired", env: withApp(map[string]string{"TICKETIQ_BOT_CERT_FILE": f.expired}),
			says: []string{"TICKETIQ_BOT_CERT_FILE", "expired on"}},
		{name: "no certificate file", env: withApp(map[string]string{"TICKETIQ_BOT_CERT_FILE": missing}),
			says: []string{"TICKETIQ_BOT_CERT_FILE", missing, "no such file"}},
		{name: "no token file", env: withApp(map[string]string{"TICKETIQ_BOT_FEDERATED_TOKEN_FILE": missing}),
			says: []string{"TICKETIQ_BOT_FEDERATED_TOKEN_FILE", missing, "no such file"}},
		{name: "workload identity's file missing", env: withApp(map[string]string{"AZURE_FEDERATED_TOKEN_FILE": missing}),
			says: []string{"AZURE_FEDERATED_TOKEN_FILE", missing}},
		{name: "a file without an app id", env: map[string]string{"TICKETIQ_BOT_CERT_FILE": f.cert},
			says: []string{"TICKETIQ_BOT_APP_ID and TICKETIQ_BOT_CERT_FILE must be set together"}},
		{name: "every mistake at once", env: withApp(map[string]string{"TICKETIQ_BOT_APP_PASSWORD": "s3cr3t", "TICKETIQ_BOT_CERT_FILE": f.wrongKey, "TICKETIQ_BOT_FEDERATED_TOKEN_FILE": missing}),
			says: []string{"are all set", "private key does not match", "TICKETIQ_BOT_FEDERATED_TOKEN_FILE: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(envOf(tc.env))
			if tc.says != nil {
				if err == nil {
					t.Fatalf("accepted, credential %v", cfg.BotCredential)
				}
				for _, s := range tc.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error does not say %q:\n%v", s, err)
					}
				}
				if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), f.pemKey) {
					t.Errorf("the error shows a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BotCredential.Kind() != tc.kind || cfg.BotCredential.Path() != tc.path {
				t.Errorf("credential %v (%q), want %q at %q", cfg.BotCredential, cfg.BotCredential.Kind(), tc.kind, tc.path)
			}
		})
	}
}

// `teamsbot config` shows the credential files' paths and never their
// content, and says when the token file came from workload identity.
func TestConfigCommandShowsCredentialPathsOnly(t *testing.T) {
	f := newCredFiles(t)
	token, err := os.ReadFile(f.token)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TICKETIQ_BOT_CERT_FILE": f.cert}, `TICKETIQ_BOT_CERT_FILE="` + f.cert + `"` + "\t(set)"},
		{map[string]string{"TICKETIQ_BOT_FEDERATED_TOKEN_FILE": f.token}, `TICKETIQ_BOT_FEDERATED_TOKEN_FILE="` + f.token + `"` + "\t(set)"},
		{map[string]string{"AZURE_FEDERATED_TOKEN_FILE": f.token}, `TICKETIQ_BOT_FEDERATED_TOKEN_FILE="` + f.token + `"` + "\t(from AZURE_FEDERATED_TOKEN_FILE, set by Azure workload identity)"},
	} {
		tc.env["TICKETIQ_BOT_APP_ID"], tc.env["TICKETIQ_BOT_TENANT_ID"] = credAppID, credTenant
		var out bytes.Buffer
		if err := run(t.Context(), []string{"teamsbot", "config"}, envOf(tc.env), &out, &out); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		if !strings.Contains(s, tc.want) {
			t.Errorf("%v: output lacks %q:\n%s", tc.env, tc.want, s)
		}
		if strings.Contains(s, "PRIVATE KEY") || strings.Contains(s, f.pemKey) || strings.Contains(s, string(token)) {
			t.Errorf("%v: key material or a token printed:\n%s", tc.env, s)
		}
	}
}

// The service starts with a certificate or a federated token file for both
// the bot and Graph; the start-up line names the kind and the file, and
// the logs hold neither key nor token.
func TestRunWithCredentialFiles(t *testing.T) {
	f := newCredFiles(t)
	token, err := os.ReadFile(f.token)
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"TICKETIQ_BOT_CERT_FILE": f.cert, "TICKETIQ_BOT_FEDERATED_TOKEN_FILE": f.token} {
		_, logs, stop := startService(t, map[string]string{
			"TICKETIQ_BOT_APP_ID": credAppID, "TICKETIQ_BOT_TENANT_ID": credTenant, name: path,
			"TICKETIQ_LOG_LEVEL": "debug",
		})
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		line := logs.logLine("starting")
		if line == nil || !strings.HasSuffix(line["bot_credential"].(string), " "+path) {
			t.Errorf("%s: the start line does not name the credential: %v", name, line)
		}
		if out := logs.String(); strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, f.pemKey) || strings.Contains(out, string(token)) {
			t.Errorf("%s: key material or a token in the logs:\n%s", name, out)
		}
	}
}

// A certificate that expires within a month is warned of at start, with
// its date and file.
func TestRunWarnsOfExpiringCertificate(t *testing.T) {
	now := time.Now()
	path := testenv.NewCertificate(t, now.Add(-time.Hour), now.Add(10*24*time.Hour)).File(t, nil)
	_, logs, stop := startService(t, map[string]string{
		"TICKETIQ_BOT_APP_ID": credAppID, "TICKETIQ_BOT_TENANT_ID": credTenant, "TICKETIQ_BOT_CERT_FILE": path,
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	line := logs.logLine("the bot's certificate expires soon: upload a new one to the app registration and set TICKETIQ_BOT_CERT_FILE to it")
	if line == nil || line["file"] != path || line["level"] != "WARN" {
		t.Errorf("no warning of the expiring certificate: %v\n%s", line, logs)
	}
}
