// Package graph answers, through Microsoft Graph, which of a set of Entra ID
// groups a user is a transitive member of, and what a group is called, for
// the access-control layer and the admin console.
//
// It owns a bounded cache of membership answers, the coalescing of
// identical concurrent lookups, and the handling of Graph throttling (429,
// 503 and 504 with Retry-After, retried within the caller's deadline by
// package internal/retry). Its app-only access tokens come from package
// internal/clientcred (OAuth 2.0 client credentials, proved with a secret,
// a certificate or a federated token; one token per tenant, cached until
// shortly before it expires, and asked for without following redirects).
//
// It does not decide who may do what: that is the access policy's job, and
// the policy must treat every error from this package as "not a member"
// (fail closed). It
// stores nothing on disk, and it is the only package in the module that
// imports the Microsoft Graph SDK, because the SDK takes minutes and
// gigabytes to compile; only the sub-packages it needs (users, models,
// models/odataerrors, and msgraph-sdk-go-core for the request adapter) are
// imported, never the SDK's root package, which pulls in every Graph
// resource.
package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/guid"
	"teamsbot/internal/retry"
	"time"

	abs "github.com/microsoft/kiota-abstractions-go"
	"github.com/microsoft/kiota-abstractions-go/authentication"
	khttp "github.com/microsoft/kiota-http-go"
	jsonserialization "github.com/microsoft/kiota-serialization-json-go"
	msgraphcore "github.com/microsoftgraph/msgraph-sdk-go-core"
	"github.com/microsoftgraph/msgraph-sdk-go/models"
	"github.com/microsoftgraph/msgraph-sdk-go/models/odataerrors"
	"github.com/microsoftgraph/msgraph-sdk-go/users"
	"golang.org/x/sync/singleflight"
)

// ErrUnavailable means Graph could not answer: it is down, it kept failing
// or throttling past the caller's deadline, or the token endpoint refused or
// failed. Callers must fail closed.
var ErrUnavailable = errors.New("graph: unavailable")

// ErrNotFound means the user or group does not exist in the tenant (Graph
// answered 404).
var ErrNotFound = errors.New("graph: not found")

// Defaults for the zero values of [Options].
const (
	defaultBaseURL      = "https://graph.microsoft.com/v1.0"
	defaultTokenURL     = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
	defaultCacheTTL     = 5 * time.Minute
	defaultCacheEntries = 10000
)

// maxCheckIDs is how many group ids Graph takes in one checkMemberGroups
// call.
const maxCheckIDs = 20

// Options configure a [Client]. Zero values get defaults.
type Options struct {
	// BaseURL is Graph's service root; default
	// "https://graph.microsoft.com/v1.0".
	BaseURL string
	// TokenURL is the token endpoint, with "{tenant}" where the tenant id
	// goes; default
	// "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token".
	TokenURL string
	// ClientID is the bot's app registration, which gets app-only tokens
	// with the client credentials grant. Required.
	ClientID string
	// Credential proves the app registration to the token endpoint: a
	// client secret, a certificate or a federated token file. Required;
	// never logged.
	Credential clientcred.Credential
	// Scope is the scope asked of the token endpoint; default BaseURL's
	// origin followed by "/.default".
	Scope string
	// HTTPClient sends both token and Graph requests. Nil means a client
	// with timeouts that follows no redirect to another host.
	HTTPClient *http.Client
	// CacheTTL is how long a membership answer is reused; default 5
	// minutes.
	CacheTTL time.Duration
	// CacheEntries bounds the cached answers, one per tenant, user and set
	// of groups asked about; the oldest goes first. Default 10000.
	CacheEntries int
	// Now is the clock for cache and token expiry, and for the times a
	// certificate's assertion carries; default time.Now.
	// Retry waits and deadlines always use real time.
	Now func() time.Time
	// Logger gets one line per failure; nil discards.
	Logger *slog.Logger
}

// Client asks Graph about group membership. It is safe for concurrent use.
type Client struct {
	baseURL string
	graph   *http.Client // Graph requests, through the SDK's request adapter
	hosts   authentication.AllowedHostsValidator
	tokens  *clientcred.Tenants
	log     *slog.Logger
	retry   retry.Policy

	answers *answerCache
	lookups singleflight.Group // of lookup, by tenant, user and set of groups
	// names keeps people's display names (a one-element answer; none
	// for a user Graph does not know), for the admin console.
	names *answerCache
}

// New returns a client for the app registration in opts. It makes no
// request.
func New(opts Options) (*Client, error) {
	var errs []error
	if opts.BaseURL == "" {
		opts.BaseURL = defaultBaseURL
	}
	if opts.TokenURL == "" {
		opts.TokenURL = defaultTokenURL
	}
	base, err := url.Parse(opts.BaseURL)
	if err != nil || base.Scheme != "https" || base.Host == "" || base.RawQuery != "" || base.Fragment != "" {
		errs = append(errs, fmt.Errorf("graph: BaseURL %q is not an https URL without query", opts.BaseURL))
	}
	if tu, err := url.Parse(strings.ReplaceAll(opts.TokenURL, "{tenant}", "t")); err != nil || tu.Scheme != "https" || tu.Host == "" {
		errs = append(errs, fmt.Errorf("graph: TokenURL %q is not an https URL", opts.TokenURL))
	} else if !strings.Contains(opts.TokenURL, "{tenant}") {
		errs = append(errs, fmt.Errorf("graph: TokenURL %q has no {tenant}", opts.TokenURL))
	}
	if opts.ClientID == "" {
		errs = append(errs, errors.New("graph: ClientID is required"))
	}
	if opts.Credential.IsZero() {
		errs = append(errs, errors.New("graph: Credential is required"))
	}
	if opts.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("graph: CacheTTL %v is negative", opts.CacheTTL))
	}
	if opts.CacheEntries < 0 {
		errs = append(errs, fmt.Errorf("graph: CacheEntries %d is negative", opts.CacheEntries))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if opts.Scope == "" {
		opts.Scope = base.Scheme + "://" + base.Host + "/.default"
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = defaultCacheTTL
	}
	if opts.CacheEntries == 0 {
		opts.CacheEntries = defaultCacheEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = defaultHTTPClient()
	}
	transport := opts.HTTPClient.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	c := &Client{
		baseURL: strings.TrimSuffix(opts.BaseURL, "/"),
		// The SDK's default middleware is left out on purpose: its retry
		// handler waits out any Retry-After (up to 180 s in all) even when
		// the caller's deadline comes first, its handlers run in an order
		// drawn from a map, different for every client, and its
		// compression gzips every body. Only the decoding of "%24select"
		// back to "$select", which the default also does, is kept;
		// retries are withRetries' job.
		graph: &http.Client{
			Transport:     khttp.NewCustomTransportWithParentTransport(recorder{transport}, khttp.NewParametersNameDecodingHandler()),
			CheckRedirect: opts.HTTPClient.CheckRedirect,
			Timeout:       opts.HTTPClient.Timeout,
		},
		// The validator compares host names without port.
		hosts:   authentication.NewAllowedHostsValidator([]string{base.Hostname()}),
		log:     opts.Logger,
		answers: newAnswerCache(opts.CacheTTL, opts.CacheEntries, opts.Now),
		names:   newAnswerCache(nameTTL, opts.CacheEntries, opts.Now),
		retry:   graphRetry(),
	}
	// One token per tenant, kept until five minutes (at most half its
	// life) before it expires; the token requests follow no redirect.
	if c.tokens, err = clientcred.NewTenants(clientcred.SourceOptions{
		TokenURL: opts.TokenURL, ClientID: opts.ClientID, Credential: opts.Credential,
		Scope: opts.Scope, HTTPClient: opts.HTTPClient, Now: opts.Now,
	}); err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	return c, nil
}

// defaultHTTPClient has timeouts on every step and follows redirects only
// within one host, so that no request, and no token, goes elsewhere.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ResponseHeaderTimeout = 30 * time.Second
	t.MaxIdleConnsPerHost = 16
	return &http.Client{
		Transport: t,
		Timeout:   60 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 || req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

// adapter returns the SDK's request adapter for one tenant: its token
// provider gets that tenant's tokens. Adapters are cheap and hold no
// connection, so one is made per call rather than kept per tenant.
func (c *Client) adapter(tenantID string) (*msgraphcore.GraphRequestAdapterBase, error) {
	auth := authentication.NewBaseBearerTokenAuthenticationProvider(&tenantTokens{c: c, tenant: tenantID})
	a, err := msgraphcore.NewGraphRequestAdapterBaseWithParseNodeFactoryAndSerializationWriterFactoryAndHttpClient(
		auth, msgraphcore.GraphClientOptions{},
		jsonserialization.NewJsonParseNodeFactory(), jsonserialization.NewJsonSerializationWriterFactory(),
		c.graph)
	if err != nil {
		return nil, fmt.Errorf("graph: request adapter: %w", err)
	}
	a.SetBaseUrl(c.baseURL)
	return a, nil
}

// MemberGroups returns the subset of groupIDs that user userID of tenant
// tenantID is a transitive member of (Graph POST
// /users/{id}/checkMemberGroups, 20 ids per call), in the order and spelling
// of groupIDs, without duplicates; empty, not nil, when the user is in none.
//
// Answers are cached per tenant, user and set of groups for the CacheTTL,
// and identical concurrent lookups share one set of Graph calls. Every id
// must be a GUID; a malformed one is an error naming it, and no request is
// made. Throttled calls are retried as Retry-After asks, but never past
// ctx's deadline (30 s of waiting when ctx has none): the error then wraps
// ErrUnavailable at once. A user unknown to the tenant is ErrNotFound.
func (c *Client) MemberGroups(ctx context.Context, tenantID, userID string, groupIDs []string) ([]string, error) {
	if err := checkIDs(tenantID, userID, groupIDs); err != nil {
		return nil, err
	}
	tenant, user := strings.ToLower(tenantID), strings.ToLower(userID)
	set := make([]string, 0, len(groupIDs))
	for _, g := range groupIDs {
		set = append(set, strings.ToLower(g))
	}
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) == 0 {
		return []string{}, nil
	}
	// The answer in the caller's order and spelling.
	result := func(members []string) []string {
		out := []string{}
		for _, g := range groupIDs {
			if slices.Contains(members, strings.ToLower(g)) && !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, g) }) {
				out = append(out, g)
			}
		}
		return out
	}
	key := tenant + "/" + user + "/" + strings.Join(set, ",")
	if members, ok := c.answers.get(key); ok {
		return result(members), nil
	}
	members, err := c.shared(ctx, key, func(ctx context.Context) ([]string, error) {
		// Another caller may have stored the answer while this one waited
		// to lead.
		if members, ok := c.answers.get(key); ok {
			return members, nil
		}
		members, err := c.checkMemberGroups(ctx, tenant, user, set)
		if err != nil {
			return nil, err
		}
		c.answers.put(key, members)
		return members, nil
	})
	if err != nil {
		return nil, err
	}
	return result(members), nil
}

// checkMemberGroups asks Graph, in chunks of maxCheckIDs, which of the
// sorted, lower-case set the user is in.
func (c *Client) checkMemberGroups(ctx context.Context, tenant, user string, set []string) ([]string, error) {
	a, err := c.adapter(tenant)
	if err != nil {
		return nil, err
	}
	check := users.NewItemCheckMemberGroupsRequestBuilderInternal(map[string]string{
		"baseurl":   a.GetBaseUrl(),
		"user%2Did": user,
	}, a)
	members := []string{}
	for chunk := range slices.Chunk(set, maxCheckIDs) {
		body := users.NewItemCheckMemberGroupsPostRequestBody()
		body.SetGroupIds(chunk)
		var resp users.ItemCheckMemberGroupsPostResponseable
		err := c.withRetries(ctx, tenant, "checkMemberGroups", func(ctx context.Context) error {
			var err error
			resp, err = check.PostAsCheckMemberGroupsPostResponse(ctx, body, nil)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("graph: checkMemberGroups for user %s of tenant %s: %w", user, tenant, err)
		}
		for _, g := range resp.GetValue() {
			g = strings.ToLower(g)
			// Keep only what was asked: an answer is never wider than
			// the question.
			if slices.Contains(chunk, g) {
				members = append(members, g)
			}
		}
	}
	return members, nil
}

// GroupName returns the displayName of group groupID of tenant tenantID
// (Graph GET /groups/{id}?$select=displayName), for the admin console. It
// is not cached. A group unknown to the tenant is ErrNotFound.
func (c *Client) GroupName(ctx context.Context, tenantID, groupID string) (string, error) {
	if err := checkIDs(tenantID, "", []string{groupID}); err != nil {
		return "", err
	}
	tenant, group := strings.ToLower(tenantID), strings.ToLower(groupID)
	a, err := c.adapter(tenant)
	if err != nil {
		return "", err
	}
	var name string
	err = c.withRetries(ctx, tenant, "getGroup", func(ctx context.Context) error {
		// What the SDK's groups.GroupItemRequestBuilder.Get builds, made
		// here so that the groups package, two minutes of compiling, is
		// not needed for one GET.
		ri := abs.NewRequestInformationWithMethodAndUrlTemplateAndPathParameters(abs.GET,
			"{+baseurl}/groups/{group%2Did}{?%24select}",
			map[string]string{"baseurl": a.GetBaseUrl(), "group%2Did": group})
		ri.AddQueryParameters(groupQuery{Select: []string{"displayName"}})
		ri.Headers.TryAdd("Accept", "application/json")
		res, err := a.Send(ctx, ri, models.CreateGroupFromDiscriminatorValue, errorMapping)
		if err != nil {
			return err
		}
		g, ok := res.(models.Groupable)
		if !ok || g.GetDisplayName() == nil {
			return errors.New("graph answered no displayName")
		}
		name = *g.GetDisplayName()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("graph: group %s of tenant %s: %w", group, tenant, err)
	}
	return name, nil
}

// nameTTL is how long a person's display name is reused: names change
// rarely, and a console page names up to a few dozen people.
const nameTTL = time.Hour

// UserName returns the displayName of user userID of tenant tenantID
// (Graph GET /users/{id}?$select=displayName, which needs the
// User.Read.All application permission), for the admin console, which
// shows people by name. Answers are cached for an hour, the names of
// unknown users too (as ErrNotFound), at most Options.CacheEntries of
// them, the oldest going first; concurrent lookups of one person are
// made once.
func (c *Client) UserName(ctx context.Context, tenantID, userID string) (string, error) {
	if err := checkIDs(tenantID, userID, nil); err != nil {
		return "", err
	}
	tenant, user := strings.ToLower(tenantID), strings.ToLower(userID)
	key := "name\x00" + tenant + "\x00" + user
	answer, ok := c.names.get(key)
	if !ok {
		var err error
		answer, err = c.shared(ctx, key, func(ctx context.Context) ([]string, error) {
			name, err := c.userName(ctx, tenant, user)
			switch {
			case errors.Is(err, ErrNotFound):
				c.names.put(key, []string{})
				return []string{}, nil
			case err != nil:
				return nil, err
			}
			c.names.put(key, []string{name})
			return []string{name}, nil
		})
		if err != nil {
			return "", err
		}
	}
	if len(answer) == 0 {
		return "", fmt.Errorf("graph: user %s of tenant %s: %w", user, tenant, ErrNotFound)
	}
	return answer[0], nil
}

// userName asks Graph for a user's displayName.
func (c *Client) userName(ctx context.Context, tenant, user string) (string, error) {
	a, err := c.adapter(tenant)
	if err != nil {
		return "", err
	}
	var name string
	err = c.withRetries(ctx, tenant, "getUser", func(ctx context.Context) error {
		// What the SDK's users.UserItemRequestBuilder.Get builds.
		ri := abs.NewRequestInformationWithMethodAndUrlTemplateAndPathParameters(abs.GET,
			"{+baseurl}/users/{user%2Did}{?%24select}",
			map[string]string{"baseurl": a.GetBaseUrl(), "user%2Did": user})
		ri.AddQueryParameters(groupQuery{Select: []string{"displayName"}})
		ri.Headers.TryAdd("Accept", "application/json")
		res, err := a.Send(ctx, ri, models.CreateUserFromDiscriminatorValue, errorMapping)
		if err != nil {
			return err
		}
		u, ok := res.(models.Userable)
		if !ok || u.GetDisplayName() == nil {
			return errors.New("graph answered no displayName")
		}
		name = *u.GetDisplayName()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("graph: user %s of tenant %s: %w", user, tenant, err)
	}
	return name, nil
}

// groupQuery holds the OData query options of GET /groups/{id}, tagged as
// the SDK tags them.
type groupQuery struct {
	Select []string `uriparametername:"%24select"`
}

// errorMapping decodes every Graph error body, as the SDK's request
// builders do.
var errorMapping = abs.ErrorMappings{"XXX": odataerrors.CreateODataErrorFromDiscriminatorValue}

// checkIDs checks that the tenant, the user (unless empty) and every group
// id have the shape of a GUID, and names every one that does not.
func checkIDs(tenantID, userID string, groupIDs []string) error {
	var errs []error
	if !guid.Valid(tenantID) {
		errs = append(errs, fmt.Errorf("graph: tenant id %q is not a GUID", tenantID))
	}
	if userID != "" && !guid.Valid(userID) {
		errs = append(errs, fmt.Errorf("graph: user id %q is not a GUID", userID))
	}
	for _, g := range groupIDs {
		if !guid.Valid(g) {
			errs = append(errs, fmt.Errorf("graph: group id %q is not a GUID", g))
		}
	}
	return errors.Join(errs...)
}
