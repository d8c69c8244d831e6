package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/internal/testenv/fakeauth"
	"teamsbot/internal/web"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// personalWorld is an agent with one server reached as each person (auth:
// person), protected by an authorization server, and the service's pages
// for the Connect link, on https loopback.
type personalWorld struct {
	svc   *agent.Service
	st    *store.Store
	as    *fakeauth.AuthServer
	rs    *fakeauth.ResourceServer
	site  *fakeauth.Site
	trust *http.Client
}

func newPersonalWorld(t *testing.T, wait time.Duration, tweaks ...func(*agent.Options)) *personalWorld {
	t.Helper()
	w := &personalWorld{st: openStore(t)}
	w.as = fakeauth.StartAuthServer(t)
	w.rs = fakeauth.StartResourceServer(t, w.as)
	ec := echo.New()
	ec.HTTPErrorHandler = web.ErrorHandler(nil)
	w.site = fakeauth.ServeHTTPS(t, ec)
	w.trust = fakeauth.Client(w.as.Cert, w.rs.Cert, w.site.Cert)
	w.as.Configure(func(k *fakeauth.Knobs) { k.DocumentClient = fakeauth.Client(w.site.Cert) })
	b, err := mcpauth.New(mcpauth.Options{Store: w.st, PublicBaseURL: netaddr.MustParseOrigin(w.site.URL), DataDir: t.TempDir(),
		HTTPClient: w.trust, Wait: wait, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := b.NewPages(func(r *http.Request) (mcpauth.Signed, error) {
		c, err := r.Cookie("test-person")
		if err != nil {
			return mcpauth.Signed{}, err
		}
		return mcpauth.Signed{TenantID: "t1", UserID: c.Value, Name: "Ada Lovelace"}, nil
	}, func(string, string) string { return "/signin" })
	if err != nil {
		t.Fatal(err)
	}
	pages.Register(ec)
	cfg, err := agent.LoadConfig([]byte(`
agents:
  - id: default
    servers:
      - name: crm
        url: `+w.rs.URL+`
        auth: person
`), getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	opts := agent.Options{Store: w.st, Auth: b, HTTPClient: w.trust, AppsEnabled: true}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	w.svc = newService(t, cfg, opts)
	return w
}

// asker plays the bot's Connect card and the person who follows it.
type asker struct {
	w      *personalWorld
	user   string // who follows the link; "" nobody
	mu     sync.Mutex
	asked  int
	ended  []mcpauth.Outcome
	follow sync.WaitGroup
}

func (a *asker) Ask(ctx context.Context, p mcpauth.Prompt) (mcpauth.Asked, error) {
	a.mu.Lock()
	a.asked++
	a.mu.Unlock()
	if a.user != "" {
		a.follow.Go(func() {
			hc := *a.w.trust
			hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			get := func(u string) *http.Response {
				req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, u, nil)
				req.AddCookie(&http.Cookie{Name: "test-person", Value: a.user})
				resp, err := hc.Do(req)
				if err != nil {
					return nil
				}
				resp.Body.Close()
				return resp
			}
			resp := get(p.URL)
			if resp == nil || resp.StatusCode != http.StatusSeeOther {
				return
			}
			res, err := fakeauth.AnswerConsent(context.WithoutCancel(ctx), &hc, resp.Header.Get("Location"), fakeauth.Alice, true)
			if err != nil {
				return
			}
			get(a.w.site.URL + mcpauth.CallbackPath + "?" + url.Values{"code": {res.Code}, "state": {res.State}, "iss": {res.Iss}}.Encode())
		})
	}
	return a, nil
}

func (a *asker) Outcome(_ context.Context, o mcpauth.Outcome) {
	a.mu.Lock()
	a.ended = append(a.ended, o)
	a.mu.Unlock()
}

// A run that calls a tool of a server the person has not connected asks
// them (the bot's Connect card), waits while they connect, and answers
// with the tool's result as them; the next run asks nobody.
func TestRunAsksThePersonToConnect(t *testing.T) {
	w := newPersonalWorld(t, 20*time.Second)
	a := &asker{w: w, user: "u1"}
	ans, err := w.svc.Run(context.Background(), agent.Request{Person: agent.Person{TenantID: "t1", UserID: "u1", Name: "Ada Lovelace"}, Text: "/crm/whoami {}", Connect: a})
	if err != nil {
		t.Fatal(err)
	}
	a.follow.Wait()
	if !strings.Contains(ans.Text, fakeauth.Alice) || len(ans.ToolErrors) != 0 {
		t.Fatalf("answer %q, errors %+v, notes %q", ans.Text, ans.ToolErrors, ans.Notes)
	}
	if a.asked != 1 || len(a.ended) != 1 || a.ended[0] != mcpauth.Connected {
		t.Errorf("asked %d, outcomes %v", a.asked, a.ended)
	}
	again := &asker{w: w}
	ans, err = w.svc.Run(context.Background(), agent.Request{Person: agent.Person{TenantID: "t1", UserID: "u1"}, Text: "/crm/whoami {}", Connect: again})
	if err != nil || !strings.Contains(ans.Text, fakeauth.Alice) || again.asked != 0 {
		t.Errorf("second run: %q, %v, asked %d", ans.Text, err, again.asked)
	}
}

// A run without a person (a trigger) leaves a server reached as each
// person out, and its notes say why; nobody is asked.
func TestRunWithoutAPersonLeavesPersonalServersOut(t *testing.T) {
	w := newPersonalWorld(t, 20*time.Second)
	ans, err := w.svc.Run(context.Background(), agent.Request{Person: agent.Person{TenantID: "t1"}, Text: "/crm/whoami {}"})
	if err != nil && !errors.Is(err, agent.ErrModel) {
		t.Fatal(err)
	}
	if !hasNote(ans.Notes, "crm", "each person") {
		t.Errorf("notes %q do not say why crm was left out", ans.Notes)
	}
	if len(ans.ToolErrors) != 1 || !strings.Contains(ans.ToolErrors[0].Message, "each person") {
		t.Errorf("tool errors %+v", ans.ToolErrors)
	}
}

// When nobody connects in time the run answers without the server, says
// why in the person's words, and the card hears TimedOut.
func TestRunAnswersWithoutTheServerAfterTheWait(t *testing.T) {
	w := newPersonalWorld(t, 300*time.Millisecond)
	a := &asker{w: w}
	ans, err := w.svc.Run(context.Background(), agent.Request{Person: agent.Person{TenantID: "t1", UserID: "u1"}, Text: "/crm/whoami {}", Connect: a})
	if err != nil && !errors.Is(err, agent.ErrModel) {
		t.Fatal(err)
	}
	if len(ans.ToolErrors) != 1 || !strings.Contains(ans.ToolErrors[0].Message, "not connected in time") {
		t.Errorf("tool errors %+v", ans.ToolErrors)
	}
	if a.asked != 1 || len(a.ended) != 1 || a.ended[0] != mcpauth.TimedOut {
		t.Errorf("asked %d, outcomes %v", a.asked, a.ended)
	}
}

// A view's tool call reaches a server reached as each person as the view's
// owner, the person of its run, and asks nobody: once their connection
// has gone, the call fails with words the view can show.
func TestViewCallUsesTheOwnersConnection(t *testing.T) {
	w := newPersonalWorld(t, 20*time.Second)
	owner := agent.Person{TenantID: "t1", UserID: "u1", Name: "Ada Lovelace"}
	a := &asker{w: w, user: "u1"}
	if _, err := w.svc.Run(context.Background(), agent.Request{Person: owner, Text: "/crm/whoami {}", Connect: a}); err != nil {
		t.Fatal(err)
	}
	a.follow.Wait()
	v := store.View{ID: "v1", AgentID: "default", TenantID: "t1", UserID: "u1", UserName: "Ada Lovelace", Server: "crm", Tool: "whoami"}
	res, err := w.svc.CallFromView(context.Background(), v, owner, "whoami", []byte(`{}`))
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), fakeauth.Alice) {
		t.Fatalf("the view's call as its owner: %+v, %v", res, err)
	}
	if _, err := w.st.DeleteMCPConnections(context.Background(), store.MCPConnectionFilter{TenantID: "t1", UserID: "u1"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = w.svc.CallFromView(context.Background(), v, owner, "whoami", []byte(`{}`))
	if !errors.Is(err, mcpauth.ErrNotConnected) {
		t.Fatalf("after the connection went: %v, want ErrNotConnected", err)
	}
	var words interface{ Words() string }
	if !errors.As(err, &words) || !strings.Contains(words.Words(), "connect it") {
		t.Errorf("no words for the view: %v", err)
	}
}

// A person's own session declares elicitation unless their tenant's
// admin turned the server's questions off; then the server is not told
// the client asks at all.
func TestPersonalSessionDeclaresQuestionsAsTheTenantAllows(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	ctx := context.Background()
	w := newPersonalWorld(t, 20*time.Second, func(o *agent.Options) {
		ax, err := access.New(access.Options{Store: o.Store, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		admin := access.Person{TenantID: "t1", UserID: "user-admin", Roles: []string{access.PermAdmin}}
		if _, err := ax.SetPolicies(ctx, admin, access.DefaultPolicyText, 0); err != nil {
			t.Fatal(err)
		}
		o.Access = ax
	})
	off, err := w.st.TenantSettings(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	off.TenantID, off.ElicitationOff = "t1", []string{"crm"}
	if _, err := w.st.PutTenantSettings(ctx, off, off.Version); err != nil {
		t.Fatal(err)
	}
	ask := func(user, want string) {
		t.Helper()
		p := agent.Person{TenantID: "t1", UserID: user, Name: "Ada Lovelace"}
		a := &asker{w: w, user: user}
		ans, err := w.svc.Run(ctx, agent.Request{Person: p, Text: "/crm/can_ask {}", Connect: a})
		a.follow.Wait()
		if err != nil || !strings.Contains(ans.Text, want) {
			t.Errorf("%s: %q, %v, notes %q", user, ans.Text, err, ans.Notes)
		}
	}
	ask("u1", "can ask: false")
	cur, err := w.st.TenantSettings(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	cur.ElicitationOff = nil
	if _, err := w.st.PutTenantSettings(ctx, cur, cur.Version); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute) // past access's cache of the tenant's settings
	ask("u2", "can ask: true")
}
