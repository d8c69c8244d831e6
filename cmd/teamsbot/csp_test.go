package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/teamsjs"
	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

var updatePolicies = flag.Bool("update", false, "rewrite testdata/csp-policies.txt from what the service serves")

// policiesFile lists the Content-Security-Policy of every page and
// document the service serves, as TestEveryPagePolicy finds them.
const policiesFile = "testdata/csp-policies.txt"

// TestEveryPagePolicy asks the whole service for each of its pages and
// documents, as a browser would (signed in where the page needs it, inside
// Teams' frame where that is the case), and compares each one's
// Content-Security-Policy with the list in testdata/csp-policies.txt, byte
// for byte. A hash source is written there as the file it allows
// ('sha256(viewpage/assets/page.js)') or, for a script written in Go, as
// the inline element of the page it allows; a hash that allows nothing the
// repository or the page holds fails the test. Run with -update to rewrite
// the list after a deliberate change, and read the diff.
func TestEveryPagePolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service twice")
	}
	names := hashNames(t)
	var got []pagePolicy

	// Local mode: the playground, the local sign-in, the console, a view
	// with its frames on the page's own origin, an error page.
	t.Run("local mode", func(t *testing.T) {
		base, _, _ := startService(t, map[string]string{})
		megan, admin := signin.LocalPeople()[0], signin.LocalAdmin()
		anon := &http.Client{Timeout: 20 * time.Second}
		got = append(got,
			fetchPolicy(t, anon, "GET / (the playground's start page)", base+"/", nil, http.StatusOK),
			fetchPolicy(t, anon, "GET /playground", base+"/playground", nil, http.StatusOK),
			fetchPolicy(t, anon, "GET /signin (the local sign-in)", base+"/signin?return=/", nil, http.StatusOK),
			fetchPolicy(t, anon, "GET /no-such-page (the error page)", base+"/no-such-page", nil, http.StatusNotFound),
		)
		adminClient := signInLocal(t, base, signin.LocalTenant, admin.UserID, strings.Join(admin.Roles, " "))
		got = append(got, fetchPolicy(t, adminClient, "GET /admin (the console)", base+"/admin", nil, http.StatusOK))

		viewID := playgroundView(t, base, megan)
		owner := signInLocal(t, base, signin.LocalTenant, megan.UserID, strings.Join(megan.Roles, " "))
		got = append(got, fetchPolicy(t, owner, "GET /mcp-apps/{id} (the view page)", base+"/mcp-apps/"+viewID, nil, http.StatusOK))
		info := viewInfoOf(t, owner, base, viewID)
		framed := map[string]string{"Sec-Fetch-Dest": "iframe"}
		got = append(got,
			fetchPolicy(t, anon, "GET /sandbox/proxy (frames on the page's origin)", base+info.ProxyURL, framed, http.StatusOK),
			fetchPolicy(t, anon, "GET /sandbox/views/{id} (the demo's sales report)", base+info.ViewURL, framed, http.StatusOK),
		)
	})

	// Teams mode with Entra ID (a mock provider) and a separate sandbox
	// origin: the bare address, the Teams sign-in shell, the page, the
	// proxy framed inside Teams, the popup's last page.
	t.Run("Teams mode", func(t *testing.T) {
		connector := newRecordingConnector(t)
		const publicBase, sandboxBase = "https://teams.example.test", "https://sandbox.example.test"
		m := testenv.StartMockOIDC(t)
		base, logs, _ := startService(t, map[string]string{
			"TICKETIQ_PUBLIC_BASE_URL":      publicBase,
			"TICKETIQ_SANDBOX_BASE_URL":     sandboxBase,
			"TICKETIQ_OIDC_ISSUER":          m.Issuer(),
			"TICKETIQ_OIDC_CLIENT_ID":       m.ClientID,
			"TICKETIQ_OIDC_CLIENT_SECRET":   m.ClientSecret,
			"TICKETIQ_OIDC_ALLOWED_TENANTS": "tenant-1",
			"TICKETIQ_TEAMS_TAB":            "true",
			"TICKETIQ_PLAYGROUND":           "false",
		})
		activity := map[string]any{
			"type": "message", "id": "act-1", "timestamp": time.Now().UTC().Format(time.RFC3339),
			"serviceUrl": connector.URL, "channelId": "msteams",
			"from":         map[string]any{"id": "29:user", "name": "Ada Lovelace", "aadObjectId": "user-oid-1"},
			"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
			"conversation": map[string]any{"id": "a:personal-1", "conversationType": "personal", "tenantId": "tenant-1"},
			"channelData":  map[string]any{"tenant": map[string]any{"id": "tenant-1"}},
			"text":         "/sales_report {}",
		}
		body, _ := json.Marshal(activity)
		resp, err := http.Post(base+"/api/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		openRe := regexp.MustCompile(regexp.QuoteMeta(publicBase) + `/mcp-apps/([A-Za-z0-9_-]+)`)
		viewID := connector.waitAttachments(func(b []byte) string {
			if m := openRe.FindSubmatch(b); m != nil {
				return string(m[1])
			}
			return ""
		})
		if viewID == "" {
			t.Fatalf("no answer card with an Open button\n%s", logs)
		}
		hosts := hostsTo{publicBase: base, sandboxBase: base}
		anon := &http.Client{Timeout: 20 * time.Second, Transport: hosts,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		framed := map[string]string{"Sec-Fetch-Dest": "iframe"}
		got = append(got,
			fetchPolicy(t, anon, "GET / (no playground)", publicBase+"/", nil, http.StatusOK),
			fetchPolicy(t, anon, "GET /mcp-apps/{id} inside Teams' frame, signed out (the Teams sign-in shell)", publicBase+"/mcp-apps/"+viewID, framed, http.StatusOK),
		)
		jar, _ := cookiejar.New(nil)
		person := &http.Client{Jar: jar, Timeout: 20 * time.Second, Transport: hosts}
		m.QueueUser(&testenv.EntraUser{TID: "tenant-1", OID: "user-oid-1", Name: "Ada Lovelace"})
		if code, body := get(t, person, publicBase+"/signin?return=/"); code != http.StatusOK {
			t.Fatalf("sign-in: %d %.400s", code, body)
		}
		got = append(got, fetchPolicy(t, person, "GET /mcp-apps/{id} (the view page, Teams mode)", publicBase+"/mcp-apps/"+viewID, framed, http.StatusOK))
		info := viewInfoOf(t, person, publicBase, viewID)
		got = append(got,
			fetchPolicy(t, anon, "GET /sandbox/proxy (Teams mode, a separate sandbox origin)", info.ProxyURL, framed, http.StatusOK),
			fetchPolicy(t, anon, "GET /sandbox/views/{id} (Teams mode, a separate sandbox origin)", info.ViewURL, framed, http.StatusOK),
			fetchPolicy(t, person, "GET /signin/teams/done (the Teams sign-in popup's last page)", publicBase+"/signin/teams/done", nil, http.StatusOK),
		)
	})
	if t.Failed() {
		return
	}

	var b strings.Builder
	b.WriteString("# The Content-Security-Policy of every page and document the service serves,\n" +
		"# as TestEveryPagePolicy (cmd/teamsbot/csp_test.go) finds them: a hash source is\n" +
		"# written as the file whose SHA-256 it is, or as the inline element of the page\n" +
		"# it allows. `go test ./cmd/teamsbot -run TestEveryPagePolicy -update` rewrites it.\n")
	for _, p := range got {
		fmt.Fprintf(&b, "\n%s\n  %s\n", p.page, nameHashes(t, p, names))
	}
	if *updatePolicies {
		if err := os.WriteFile(policiesFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(policiesFile)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != b.String() {
		t.Errorf("the pages' policies changed; got:\n%s\nwant (%s):\n%s", b.String(), policiesFile, want)
	}
}

// pagePolicy is one page's policy and the inline elements its body holds.
type pagePolicy struct {
	page, csp string
	inline    []string
}

// fetchPolicy gets u as the page described by page and returns its
// Content-Security-Policy.
func fetchPolicy(t *testing.T, c *http.Client, page, u string, header map[string]string, wantStatus int) pagePolicy {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != wantStatus || csp == "" {
		t.Errorf("%s: %d with CSP %q, want %d with one\n%.400s", page, resp.StatusCode, csp, wantStatus, body)
	}
	return pagePolicy{page: page, csp: csp, inline: inlineElements(string(body))}
}

var inlineRe = regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`)

// inlineElements returns the text of each inline <script> and <style>
// element of a page, named by kind and position.
func inlineElements(body string) []string {
	var out []string
	for _, m := range inlineRe.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1]+"\x00"+m[2])
	}
	return out
}

// viewInfoOf returns the frame URLs the view API gives the view's owner.
func viewInfoOf(t *testing.T, c *http.Client, base, id string) (info struct{ ProxyURL, ViewURL string }) {
	t.Helper()
	code, body := get(t, c, base+"/api/mcp-apps/"+id)
	if code != http.StatusOK {
		t.Fatalf("view API: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// hostsTo sends a browser's requests for each public host to the
// service's loopback address, as a reverse proxy would.
type hostsTo map[string]string

func (h hostsTo) RoundTrip(r *http.Request) (*http.Response, error) {
	for public, local := range h {
		if strings.HasPrefix(r.URL.String(), public+"/") {
			return publicHost{public, local}.RoundTrip(r)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

var hashRe = regexp.MustCompile(`'sha256-([A-Za-z0-9+/=]+)'`)

func sha256Source(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// hashNames maps the SHA-256 (base64) of every script and style file of
// the repository, and of the bundled teams-js, to its name.
func hashNames(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); d.IsDir() || ext != ".js" && ext != ".css" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		names[sha256Source(string(b))] = filepath.ToSlash(rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names[strings.TrimSuffix(strings.TrimPrefix(teamsjs.Hash(), "'sha256-"), "'")] = "teams-js, bundled by internal/teamsjs"
	return names
}

// nameHashes writes each hash source of p's policy as what it allows.
func nameHashes(t *testing.T, p pagePolicy, names map[string]string) string {
	return hashRe.ReplaceAllStringFunc(p.csp, func(src string) string {
		h := hashRe.FindStringSubmatch(src)[1]
		if n, ok := names[h]; ok {
			return "'sha256(" + n + ")'"
		}
		for i, el := range p.inline {
			kind, text, _ := strings.Cut(el, "\x00")
			if sha256Source(text) == h {
				return fmt.Sprintf("'sha256(the page's inline <%s> number %d)'", kind, i+1)
			}
		}
		t.Errorf("%s: %s allows no file of the repository and no inline element of the page", p.page, src)
		return src
	})
}
