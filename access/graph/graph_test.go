package graph_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/access/graph"
	"teamsbot/access/graph/fakegraph"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/testenv"
)

const (
	tenantA = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	tenantB = "0b0b0b0b-0000-4000-8000-00000000000b"
	appID   = "5a3b1f3e-0d8e-4c4f-9a57-6f1b2c3d4e5f"
	secret  = "Xq8~not.a.real.secret-but-never-logged"

	alice = "a11ce000-0000-4000-8000-000000000001" // in readers directly
	bob   = "b0b00000-0000-4000-8000-000000000002" // in team, which is in readers
	carol = "ca401000-0000-4000-8000-000000000003" // in no group
	dave  = "da7e0000-0000-4000-8000-000000000004" // in deep3 ⊂ deep2 ⊂ deep1
	bart  = "ba470000-0000-4000-8000-00000000000b" // tenant B only
	ghost = "00000000-dead-4000-8000-000000000000" // nowhere

	readers = "9e000000-0000-4000-8000-000000000001"
	team    = "9e000000-0000-4000-8000-000000000002"
	admins  = "9e000000-0000-4000-8000-000000000003"
	deep1   = "9e000000-0000-4000-8000-000000000011"
	deep2   = "9e000000-0000-4000-8000-000000000012"
	deep3   = "9e000000-0000-4000-8000-000000000013"
	bGroup  = "9e000000-0000-4000-8000-0000000000b1"
)

// guid returns the i-th of a family of GUIDs.
func guid(family, i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", family, i) }

// newFake returns a fake with two tenants and the users and groups above.
func newFake(t testing.TB) *fakegraph.Server {
	f := fakegraph.New(t)
	f.AddApp(appID, secret)
	for _, u := range []string{alice, bob, carol, dave} {
		f.AddUser(tenantA, u)
	}
	f.AddGroup(tenantA, readers, "Agent readers")
	f.AddGroup(tenantA, team, "Support team")
	f.AddGroup(tenantA, admins, "Agent admins")
	f.AddGroup(tenantA, deep1, "Deep 1")
	f.AddGroup(tenantA, deep2, "Deep 2")
	f.AddGroup(tenantA, deep3, "Deep 3")
	f.AddMember(tenantA, readers, alice)
	f.AddMember(tenantA, team, bob)
	f.AddMember(tenantA, readers, team)
	f.AddMember(tenantA, deep3, dave)
	f.AddMember(tenantA, deep2, deep3)
	f.AddMember(tenantA, deep1, deep2)
	f.AddUser(tenantB, bart)
	f.AddGroup(tenantB, bGroup, "B readers")
	f.AddMember(tenantB, bGroup, bart)
	return f
}

// clock is an injectable clock that moves only when told.
type (
	clock      = testenv.Clock
	syncBuffer = testenv.LogBuffer
)

func newClock() *clock { return testenv.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

type env struct {
	fake   *fakegraph.Server
	client *graph.Client
	clock  *clock
	logs   *syncBuffer
}

// newEnv returns a client of a fresh fake. edit, if not nil, changes the
// options first. At the end of the test it checks that the logs hold no
// secret and no token.
func newEnv(t testing.TB, edit func(*graph.Options)) *env {
	t.Helper()
	e := &env{fake: newFake(t), clock: newClock(), logs: &syncBuffer{}}
	opts := graph.Options{
		BaseURL:    e.fake.BaseURL(),
		TokenURL:   e.fake.TokenURL(),
		ClientID:   appID,
		Credential: clientcred.Secret(secret),
		HTTPClient: e.fake.Client(),
		Now:        e.clock.Now,
		Logger:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&opts)
	}
	c, err := graph.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.client = c
	t.Cleanup(func() {
		logs := e.logs.String()
		if strings.Contains(logs, secret) {
			t.Errorf("the logs hold the client secret:\n%s", logs)
		}
		for _, tok := range e.fake.IssuedTokens() {
			if strings.Contains(logs, tok) {
				t.Errorf("the logs hold an access token:\n%s", logs)
			}
		}
	})
	return e
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestMemberGroups(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name   string
		user   string
		groups []string
		want   []string
	}{
		{"direct", alice, []string{readers, admins}, []string{readers}},
		{"nested", bob, []string{admins, readers, team}, []string{readers, team}},
		{"nested three deep", dave, []string{deep1, deep2, admins}, []string{deep1, deep2}},
		{"not a member", carol, []string{readers, team, admins}, []string{}},
		{"groups of another tenant are not seen", alice, []string{bGroup}, []string{}},
		{"caller's spelling and order, no duplicates", alice, []string{strings.ToUpper(readers), admins, readers}, []string{strings.ToUpper(readers)}},
		{"no groups asked", alice, nil, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, tc.user, tc.groups)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MemberGroups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemberGroupsChunked(t *testing.T) {
	e := newEnv(t, nil)
	var groups []string
	for i := range 45 {
		g := guid(0x6e, i)
		groups = append(groups, g)
		e.fake.AddGroup(tenantA, g, fmt.Sprint("chunk ", i))
	}
	// The fake refuses more than 20 ids per call, as Graph does; members
	// fall in every chunk, one of them through nesting.
	e.fake.AddMember(tenantA, groups[3], alice)
	e.fake.AddMember(tenantA, groups[25], alice)
	e.fake.AddMember(tenantA, groups[44], groups[25])
	got, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, groups)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{groups[3], groups[25], groups[44]}, got); diff != "" {
		t.Errorf("MemberGroups (-want +got):\n%s", diff)
	}
	if n := e.fake.Counts().CheckMemberGroups; n != 3 {
		t.Errorf("%d checkMemberGroups calls for 45 groups, want 3", n)
	}
}

func TestCache(t *testing.T) {
	e := newEnv(t, func(o *graph.Options) { o.CacheTTL = time.Minute })
	ctx := ctxFor(t, 10*time.Second)
	ask := func(user string, groups ...string) []string {
		t.Helper()
		got, err := e.client.MemberGroups(ctx, tenantA, user, groups)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	calls := func() int { return e.fake.Counts().CheckMemberGroups }

	ask(alice, readers, admins)
	// The same question, in another order: the same set of groups.
	if got := ask(alice, admins, readers); !cmp.Equal(got, []string{readers}) {
		t.Errorf("cached answer %v, want [%s]", got, readers)
	}
	if calls() != 1 {
		t.Fatalf("second lookup made a Graph call: %d calls", calls())
	}
	e.clock.Advance(time.Minute - time.Second)
	ask(alice, readers, admins)
	if calls() != 1 {
		t.Fatalf("lookup before the TTL made a Graph call: %d calls", calls())
	}
	e.clock.Advance(time.Second)
	ask(alice, readers, admins)
	if calls() != 2 {
		t.Fatalf("lookup after the TTL was answered from the cache: %d calls", calls())
	}
	// Another set of groups is another question.
	ask(alice, readers)
	if calls() != 3 {
		t.Fatalf("lookup of another set of groups was answered from the cache: %d calls", calls())
	}
}

func TestCacheBound(t *testing.T) {
	e := newEnv(t, func(o *graph.Options) { o.CacheEntries = 2 })
	ctx := ctxFor(t, 10*time.Second)
	calls := func() int { return e.fake.Counts().CheckMemberGroups }
	ask := func(user string, wantCalls int) {
		t.Helper()
		if _, err := e.client.MemberGroups(ctx, tenantA, user, []string{readers}); err != nil {
			t.Fatal(err)
		}
		if calls() != wantCalls {
			t.Fatalf("after asking about %s: %d Graph calls, want %d", user, calls(), wantCalls)
		}
	}
	ask(alice, 1)
	ask(bob, 2)
	ask(carol, 3) // alice, the oldest, goes
	ask(carol, 3)
	ask(bob, 3)
	ask(alice, 4) // asked again; bob, now the oldest, goes
	ask(carol, 4)
	ask(bob, 5)
}

func TestFailuresNotCached(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.TokenDown(true)
	if _, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers}); err == nil {
		t.Fatal("no error while the token endpoint is down")
	}
	// Entra's 503 (temporarily_unavailable) asks for a retry: the token
	// request was tried as often as the token source's policy allows.
	down := e.fake.TokenRequests(tenantA)
	if down != clientcred.DefaultRetry().Attempts {
		t.Errorf("%d token requests while the endpoint was down, want %d", down, clientcred.DefaultRetry().Attempts)
	}
	e.fake.TokenDown(false)
	got, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers})
	if err != nil || !cmp.Equal(got, []string{readers}) {
		t.Fatalf("after recovery: %v, %v", got, err)
	}
	if n := e.fake.TokenRequests(tenantA) - down; n != 1 {
		t.Errorf("%d token requests after recovery, want 1: the failure was cached", n)
	}
	if _, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, ghost, []string{readers}); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("unknown user: %v", err)
	}
	e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, ghost, []string{readers})
	if n := e.fake.Counts().CheckMemberGroups; n != 3 {
		t.Errorf("%d checkMemberGroups calls, want 3: a not-found answer was cached", n)
	}
}

func TestCoalescing(t *testing.T) {
	e := newEnv(t, nil)
	// Slow answers make the lookups overlap: without coalescing each one
	// would miss the cache and call Graph.
	e.fake.Delay(200 * time.Millisecond)
	ctx := ctxFor(t, 10*time.Second)
	const n = 10
	results := make([][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		groups := []string{readers, admins, team}
		if i%2 == 1 {
			groups = []string{team, admins, readers}
		}
		wg.Go(func() {
			<-start
			results[i], errs[i] = e.client.MemberGroups(ctx, tenantA, bob, groups)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		want := []string{readers, team}
		if i%2 == 1 {
			want = []string{team, readers}
		}
		if errs[i] != nil || !cmp.Equal(results[i], want) {
			t.Errorf("lookup %d: %v, %v; want %v", i, results[i], errs[i], want)
		}
	}
	if got := e.fake.Counts(); got.CheckMemberGroups != 1 || got.Token != 1 {
		t.Errorf("%d concurrent lookups made %d Graph calls and %d token requests, want 1 and 1", n, got.CheckMemberGroups, got.Token)
	}
}

func TestCoalescedLeaderCancelled(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Delay(300 * time.Millisecond)
	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := e.client.MemberGroups(leaderCtx, tenantA, alice, []string{readers})
		leaderErr <- err
	}()
	time.Sleep(100 * time.Millisecond) // the leader is waiting for its token
	followerErr := make(chan error, 1)
	var got []string
	go func() {
		var err error
		got, err = e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers})
		followerErr <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-leaderErr; !errors.Is(err, graph.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled leader: %v", err)
	}
	// The follower does not inherit the leader's cancellation.
	if err := <-followerErr; err != nil || !cmp.Equal(got, []string{readers}) {
		t.Errorf("follower: %v, %v", got, err)
	}
}

func TestTokenPerTenant(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	for _, u := range []string{alice, bob, carol, dave} {
		if _, err := e.client.MemberGroups(ctx, tenantA, u, []string{readers}); err != nil {
			t.Fatal(err)
		}
	}
	// A token of tenant A would not see bart: the fake takes the tenant
	// from the token, as Graph does.
	got, err := e.client.MemberGroups(ctx, tenantB, bart, []string{bGroup, readers})
	if err != nil || !cmp.Equal(got, []string{bGroup}) {
		t.Fatalf("tenant B: %v, %v", got, err)
	}
	if _, err := e.client.MemberGroups(ctx, tenantA, bart, []string{bGroup}); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("tenant B's user through tenant A: %v, want ErrNotFound", err)
	}
	if _, err := e.client.GroupName(ctx, tenantB, bGroup); err != nil {
		t.Fatal(err)
	}
	if a, b := e.fake.TokenRequests(tenantA), e.fake.TokenRequests(tenantB); a != 1 || b != 1 {
		t.Errorf("token requests: tenant A %d, tenant B %d; want 1 each", a, b)
	}
}

func TestTokenRenewedBeforeExpiry(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	users := []string{alice, bob, carol}
	for i, step := range []time.Duration{0, 50 * time.Minute, 5 * time.Minute} {
		e.clock.Advance(step)
		if _, err := e.client.MemberGroups(ctx, tenantA, users[i], []string{readers}); err != nil {
			t.Fatal(err)
		}
	}
	// 3599 s tokens: kept at 50 minutes, renewed at 55, five minutes
	// before they expire.
	if n := e.fake.TokenRequests(tenantA); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}

func TestTokenSharedFetch(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Delay(200 * time.Millisecond)
	ctx := ctxFor(t, 10*time.Second)
	var wg sync.WaitGroup
	// Different users: no coalescing of lookups, only of the token.
	for _, u := range []string{alice, bob, carol, dave} {
		wg.Go(func() {
			if _, err := e.client.MemberGroups(ctx, tenantA, u, []string{readers}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.fake.TokenRequests(tenantA); n != 1 {
		t.Errorf("4 concurrent first lookups made %d token requests, want 1", n)
	}
}

func TestThrottledThenAnswered(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Throttle(1, time.Second)
	start := time.Now()
	got, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers})
	if err != nil || !cmp.Equal(got, []string{readers}) {
		t.Fatalf("%v, %v", got, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %v, before Retry-After's 1s", d)
	}
	if n := e.fake.Counts().CheckMemberGroups; n != 2 {
		t.Errorf("%d checkMemberGroups calls, want 2", n)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "tenant="+tenantA) || !strings.Contains(logs, "status=429") {
		t.Errorf("no log line for the throttled call:\n%s", logs)
	}
}

func TestThrottledPastDeadline(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Throttle(1, 30*time.Second)
	start := time.Now()
	_, err := e.client.MemberGroups(ctxFor(t, 2*time.Second), tenantA, alice, []string{readers})
	if !errors.Is(err, graph.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("gave up after %v, not at once", d)
	}
	if n := e.fake.Counts().CheckMemberGroups; n != 1 {
		t.Errorf("%d checkMemberGroups calls, want 1", n)
	}
}

func TestThrottledWithoutDeadline(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Throttle(1, time.Minute)
	start := time.Now()
	_, err := e.client.MemberGroups(context.Background(), tenantA, alice, []string{readers})
	if !errors.Is(err, graph.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("gave up after %v, not at once", d)
	}
}

func TestGraphDown(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := e.client.MemberGroups(ctx, tenantA, alice, []string{readers}); err != nil {
		t.Fatal(err)
	}
	e.fake.Down(true)
	start := time.Now()
	_, err := e.client.MemberGroups(ctxFor(t, 2*time.Second), tenantA, bob, []string{readers})
	if !errors.Is(err, graph.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("gave up after %v", d)
	}
	if n := e.fake.Counts().CheckMemberGroups; n != 2 {
		t.Errorf("%d checkMemberGroups calls, want 2", n)
	}
	if _, err := e.client.GroupName(ctxFor(t, 2*time.Second), tenantA, readers); !errors.Is(err, graph.ErrUnavailable) {
		t.Errorf("GroupName: err = %v, want ErrUnavailable", err)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "tenant="+tenantA) || !strings.Contains(logs, "status=503") {
		t.Errorf("no log line for the failure:\n%s", logs)
	}
}

func TestTokenEndpointDown(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.TokenDown(true)
	_, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers})
	if !errors.Is(err, graph.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := e.fake.Counts().CheckMemberGroups; n != 0 {
		t.Errorf("%d Graph calls without a token", n)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "tenant="+tenantA) || !strings.Contains(logs, "status=503") {
		t.Errorf("no log line for the failure:\n%s", logs)
	}
}

func TestWrongSecret(t *testing.T) {
	e := newEnv(t, func(o *graph.Options) { o.Credential = clientcred.Secret("wrong-" + secret) })
	_, err := e.client.MemberGroups(ctxFor(t, 10*time.Second), tenantA, alice, []string{readers})
	if !errors.Is(err, graph.ErrUnavailable) || !strings.Contains(err.Error(), "AADSTS7000215") {
		t.Fatalf("err = %v, want ErrUnavailable naming AADSTS7000215", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error holds the secret: %v", err)
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := e.client.MemberGroups(ctx, tenantA, ghost, []string{readers}); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("unknown user: err = %v, want ErrNotFound", err)
	}
	if _, err := e.client.GroupName(ctx, tenantA, guid(0x404, 1)); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("unknown group: err = %v, want ErrNotFound", err)
	}
}

func TestGroupName(t *testing.T) {
	e := newEnv(t, nil)
	got, err := e.client.GroupName(ctxFor(t, 10*time.Second), tenantA, strings.ToUpper(readers))
	if err != nil {
		t.Fatal(err)
	}
	if got != "Agent readers" {
		t.Errorf("GroupName = %q, want %q", got, "Agent readers")
	}
}

func TestMalformedIDs(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	_, err := e.client.MemberGroups(ctx, "contoso.onmicrosoft.com", alice, []string{readers, "Agent readers", "{" + team + "}"})
	for _, bad := range []string{"contoso.onmicrosoft.com", "Agent readers", "{" + team + "}"} {
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("MemberGroups error %v does not name %q", err, bad)
		}
	}
	if _, err := e.client.MemberGroups(ctx, tenantA, "alice@contoso.com", []string{readers}); err == nil || !strings.Contains(err.Error(), "alice@contoso.com") {
		t.Errorf("MemberGroups error %v does not name the user id", err)
	}
	if _, err := e.client.GroupName(ctx, tenantA, "readers"); err == nil || !strings.Contains(err.Error(), `"readers"`) {
		t.Errorf("GroupName error %v does not name the group id", err)
	}
	if got := e.fake.Counts(); got != (fakegraph.Counts{}) {
		t.Errorf("requests made for malformed ids: %+v", got)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := graph.New(graph.Options{
		BaseURL:  "http://graph.example.com/v1.0",
		TokenURL: "https://login.example.com/common/oauth2/v2.0/token",
		CacheTTL: -time.Second,
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"BaseURL", "{tenant}", "ClientID", "Credential", "CacheTTL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// A person's display name comes from Graph once, then from the cache
// until it expires; a person Graph does not know is ErrNotFound, cached
// too; another tenant's person is not found in this one.
func TestUserName(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.AddPerson(tenantA, alice, "Alice Wilber")
	ctx := ctxFor(t, 10*time.Second)
	for range 3 {
		got, err := e.client.UserName(ctx, tenantA, strings.ToUpper(alice))
		if err != nil || got != "Alice Wilber" {
			t.Fatalf("UserName = %q, %v; want Alice Wilber", got, err)
		}
	}
	if n := e.fake.Counts().GetUser; n != 1 {
		t.Errorf("Graph was asked %d times for one name, want once", n)
	}
	for range 2 {
		if _, err := e.client.UserName(ctx, tenantA, "dddddddd-0000-4000-8000-000000000009"); !errors.Is(err, graph.ErrNotFound) {
			t.Errorf("UserName of nobody = %v, want ErrNotFound", err)
		}
	}
	if _, err := e.client.UserName(ctx, tenantB, alice); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("UserName in another tenant = %v, want ErrNotFound", err)
	}
	if n := e.fake.Counts().GetUser; n != 3 {
		t.Errorf("Graph was asked %d times, want 3 (an unknown person is remembered)", n)
	}
	e.clock.Advance(61 * time.Minute)
	if _, err := e.client.UserName(ctx, tenantA, alice); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.Counts().GetUser; n != 4 {
		t.Errorf("after an hour the name was not asked again: %d requests", n)
	}
	if _, err := e.client.UserName(ctx, tenantA, "alice@contoso.com"); err == nil {
		t.Error("UserName of a name that is not an object id: no error")
	}
}
