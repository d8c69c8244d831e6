package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// teamsbot manifest writes the package from the settings and the flags,
// and names every mistake at once without writing anything.
func TestManifestCommand(t *testing.T) {
	env := envOf(map[string]string{
		"TICKETIQ_BOT_APP_ID": "00000000-0000-4000-8000-0000000000b0", "TICKETIQ_BOT_APP_PASSWORD": "p",
		"TICKETIQ_BOT_TENANT_ID": "72f988bf-86f1-41af-91ab-2d7cd011db47", "TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example",
	})
	out := filepath.Join(t.TempDir(), "teamsbot.zip")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"teamsbot", "manifest", "-o", out, "-developer", "Contoso IT",
		"-website", "https://bot.contoso.example", "-privacy", "https://bot.contoso.example/privacy", "-terms", "https://bot.contoso.example/terms"}, env, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if len(zr.File) != 3 || !strings.Contains(stdout.String(), "wrote "+out) {
		t.Errorf("%d files; said %q", len(zr.File), stdout.String())
	}

	bad := filepath.Join(t.TempDir(), "bad.zip")
	err = run(t.Context(), []string{"teamsbot", "manifest", "-o", bad, "-website", "http://insecure.example", "-accent", "blue"}, env, &stdout, &stderr)
	if err == nil {
		t.Fatal("a package without developer, privacy and terms was written")
	}
	for _, want := range []string{"developer name is required", "website URL", "privacy URL", "terms of use URL", "accent color"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	if _, serr := os.Stat(bad); !os.IsNotExist(serr) {
		t.Errorf("a file was written despite the errors")
	}
}
