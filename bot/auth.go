package bot

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/lestrrat-go/jwx/jwk"
	"golang.org/x/sync/singleflight"
)

// Inbound authentication, as "Authenticate requests from the Bot Connector
// service to your bot" (Bot Framework REST API documentation) describes it.
const (
	// DefaultOpenIDMetadataURL is the Bot Framework OpenID metadata
	// document of the public cloud.
	DefaultOpenIDMetadataURL = "https://login.botframework.com/v1/.well-known/openidconfiguration"

	// clockSkew is the leeway the documentation allows on nbf and exp.
	clockSkew = 5 * time.Minute
	// keysMaxAge is how long fetched keys are used before a refresh: the
	// documentation asks for at least daily.
	keysMaxAge = 24 * time.Hour
	// unknownKeyRefreshEvery bounds refreshes caused by an unknown key id,
	// so forged tokens with random kids cannot make us hammer the endpoint.
	unknownKeyRefreshEvery = time.Hour
	// keyFetchTimeout bounds one metadata + JWKS fetch.
	keyFetchTimeout = 10 * time.Second
	// maxKeyDocBytes bounds the metadata and JWKS documents.
	maxKeyDocBytes = 1 << 20
	// keyRetryAfterFailure keeps a failed fetch from being repeated on every
	// request while the metadata endpoint is down.
	keyRetryAfterFailure = 10 * time.Second
	// maxTokenCache bounds the cache of tokens already verified.
	maxTokenCache = 4096
)

// Reasons an inbound request is refused; they label the auth failure metric
// (teamsbot_bot_auth_failures_total) and the log line.
const (
	// ReasonMissingToken is a request without a bearer token.
	ReasonMissingToken = "missing_token"
	// ReasonMalformed is a token that is not a JWT, or has claims of the
	// wrong JSON type.
	ReasonMalformed = "malformed"
	// ReasonAlgorithm is a token signed with anything but RS256.
	ReasonAlgorithm = "algorithm"
	// ReasonUnknownKey is a token without a kid, or with a kid the OpenID
	// keys do not hold.
	ReasonUnknownKey = "unknown_key"
	// ReasonSignature is a signature that does not verify with the key.
	ReasonSignature = "signature"
	// ReasonIssuer is an iss other than the cloud's Bot Connector issuer.
	ReasonIssuer = "issuer"
	// ReasonAudience is an aud that does not hold the bot's app id.
	ReasonAudience = "audience"
	// ReasonExpired is an exp more than 5 minutes past.
	ReasonExpired = "expired"
	// ReasonNotYetValid is an nbf more than 5 minutes ahead.
	ReasonNotYetValid = "not_yet_valid"
	// ReasonMissingExpiry is a token without exp.
	ReasonMissingExpiry = "missing_exp"
	// ReasonServiceURL is a serviceurl claim that is missing or is not the
	// activity's serviceUrl.
	ReasonServiceURL = "service_url"
	// ReasonEndorsement is a signing key not endorsed for the activity's
	// channelId (403).
	ReasonEndorsement = "endorsement"
	// ReasonKeysUnusable is OpenID metadata or keys that could not be
	// fetched (503: the caller is not at fault).
	ReasonKeysUnusable = "keys_unavailable"
	// ReasonNotLoopback is a caller not on loopback in local mode (403).
	ReasonNotLoopback = "not_loopback"
)

// ErrUnauthorized is wrapped by every AuthError.
var ErrUnauthorized = errors.New("bot: unauthorized")

// AuthError says why an inbound request was refused. Status is the HTTP
// status to answer with.
type AuthError struct {
	// Reason is one of the Reason constants.
	Reason string
	// Status is 401, 403 or 503.
	Status int
	// Detail says what exactly was wrong, for the log; it never holds the
	// token.
	Detail string
}

// Error says why the request was refused.
func (e *AuthError) Error() string {
	return "bot: unauthorized: " + e.Reason + ": " + e.Detail
}

// Unwrap lets errors.Is(err, ErrUnauthorized) hold.
func (e *AuthError) Unwrap() error { return ErrUnauthorized }

func authErr(reason, format string, args ...any) *AuthError {
	status := http.StatusUnauthorized
	switch reason {
	case ReasonEndorsement, ReasonNotLoopback:
		status = http.StatusForbidden
	case ReasonKeysUnusable:
		status = http.StatusServiceUnavailable
	}
	return &AuthError{Reason: reason, Status: status, Detail: fmt.Sprintf(format, args...)}
}

// signingKey is one key of the JWKS with the channels it is endorsed for.
type signingKey struct {
	pub          *rsa.PublicKey
	endorsements []string
}

func (k *signingKey) endorses(channelID string) bool {
	for _, e := range k.endorsements {
		if e == channelID {
			return true
		}
	}
	return false
}

// keySet is an immutable snapshot of the fetched keys.
type keySet struct {
	keys      map[string]*signingKey
	fetchedAt time.Time
}

// verifiedToken is what is remembered of a token whose signature, issuer
// and audience were checked, so the next activity carrying the same token
// (the Bot Connector reuses one for about an hour) skips the RSA work. The
// time and per-activity checks are done again every time.
type verifiedToken struct {
	exp, nbf   time.Time
	hasNbf     bool
	serviceURL string
	key        *signingKey
}

// Validator checks the Bot Connector's bearer tokens. It stands in for
// msbotbuilder-go's own validator, which fetches the metadata on every
// request, never refreshes keys on rollover, races on its cache, panics on
// a token without serviceurl or with an array aud, and accepts tokens
// without exp.
type Validator struct {
	appID       string
	issuer      string
	metadataURL string
	client      *http.Client
	now         func() time.Time
	logger      *slog.Logger
	parser      *jwt.Parser

	keys atomic.Pointer[keySet]

	// flight runs one fetch for all concurrent callers; what is kept
	// between fetches (the keys, the last failure, the hourly allowance)
	// is below, under mu.
	flight singleflight.Group

	mu          sync.Mutex
	fetching    bool      // a fetch is under way
	forUnknown  bool      // an unknown key id asks for the next fetch, using the hourly allowance
	prevUnknown time.Time // the allowance's previous start, given back when that fetch fails
	lastUnknown time.Time // last refresh caused by an unknown kid
	failedAt    time.Time // last failed fetch
	failErr     error     // its error
	fetches     int       // number of completed fetches, for tests and logs
	waiting     int       // callers waiting for a fetch to finish

	tokMu  sync.Mutex
	tokens map[string]verifiedToken
}

// ValidatorOptions configures NewValidator.
type ValidatorOptions struct {
	// AppID is the bot's app id, the audience tokens must name. Required.
	AppID string
	// MetadataURL is the OpenID metadata; empty means DefaultOpenIDMetadataURL.
	MetadataURL string
	// Issuer is the iss tokens must carry; empty means the public cloud's
	// Bot Connector, https://api.botframework.com.
	Issuer string
	// HTTPClient fetches the metadata and keys; nil means a client with
	// timeouts.
	HTTPClient *http.Client
	// Now is the clock for exp, nbf and key ages; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// NewValidator returns a validator for tokens addressed to opts.AppID. It
// does no I/O: keys are fetched on first use.
func NewValidator(opts ValidatorOptions) (*Validator, error) {
	if opts.AppID == "" {
		return nil, errors.New("bot: validator needs an app id")
	}
	if opts.MetadataURL == "" {
		opts.MetadataURL = DefaultOpenIDMetadataURL
	}
	if opts.Issuer == "" {
		opts.Issuer = publicCloud().Issuer
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = newHTTPClient()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Validator{
		appID:       opts.AppID,
		issuer:      opts.Issuer,
		metadataURL: opts.MetadataURL,
		client:      opts.HTTPClient,
		now:         opts.Now,
		logger:      opts.Logger,
		// RS256 only, whatever the token's header says: no "none", no
		// HMAC keyed with the public key.
		parser: jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation()),
		tokens: make(map[string]verifiedToken),
	}, nil
}

// botClaims are the claims the Bot Connector puts in its tokens. Time
// claims are checked by Validate with the injected clock, not by jwt.
type botClaims struct {
	Issuer     string           `json:"iss"`
	Audience   jwt.ClaimStrings `json:"aud"`
	ExpiresAt  *jwt.NumericDate `json:"exp"`
	NotBefore  *jwt.NumericDate `json:"nbf"`
	ServiceURL string           `json:"serviceurl"`
}

// Valid is checked by Validator itself with its clock.
func (botClaims) Valid() error { return nil }

// Validate checks the Authorization header of an activity whose
// serviceUrl and channelId are given, and returns the verified serviceurl
// claim. Every failure is an *AuthError.
func (v *Validator) Validate(ctx context.Context, authHeader, serviceURL, channelID string) (string, error) {
	if authHeader == "" {
		return "", authErr(ReasonMissingToken, "no Authorization header")
	}
	h := strings.TrimSpace(authHeader)
	scheme, raw, _ := strings.Cut(h, " ")
	raw = strings.TrimSpace(raw)
	if !strings.EqualFold(scheme, "Bearer") || raw == "" {
		return "", authErr(ReasonMissingToken, "Authorization header is not a bearer token")
	}

	vt, err := v.verify(ctx, raw)
	if err != nil {
		return "", err
	}
	now := v.now()
	if now.After(vt.exp.Add(clockSkew)) {
		return "", authErr(ReasonExpired, "token expired at %s", vt.exp.UTC().Format(time.RFC3339))
	}
	if vt.hasNbf && now.Add(clockSkew).Before(vt.nbf) {
		return "", authErr(ReasonNotYetValid, "token not valid before %s", vt.nbf.UTC().Format(time.RFC3339))
	}
	if vt.serviceURL == "" {
		return "", authErr(ReasonServiceURL, "token has no serviceurl claim")
	}
	if vt.serviceURL != serviceURL {
		return "", authErr(ReasonServiceURL, "serviceurl claim does not match the activity's serviceUrl")
	}
	if channelID == "" || !vt.key.endorses(channelID) {
		return "", authErr(ReasonEndorsement, "signing key is not endorsed for channel %q", channelID)
	}
	return vt.serviceURL, nil
}

// verify checks signature, algorithm, issuer, audience and the presence of
// exp, remembering the outcome for tokens that pass.
func (v *Validator) verify(ctx context.Context, raw string) (verifiedToken, error) {
	v.tokMu.Lock()
	vt, ok := v.tokens[raw]
	v.tokMu.Unlock()
	if ok {
		return vt, nil
	}

	var claims botClaims
	var key *signingKey
	_, err := v.parser.ParseWithClaims(raw, &claims, func(t *jwt.Token) (interface{}, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, authErr(ReasonUnknownKey, "token header has no kid")
		}
		k, err := v.key(ctx, kid)
		if err != nil {
			return nil, err
		}
		key = k
		return k.pub, nil
	})
	if err != nil {
		var ae *AuthError
		if errors.As(err, &ae) {
			return verifiedToken{}, ae
		}
		var ve *jwt.ValidationError
		if errors.As(err, &ve) {
			switch {
			case ve.Errors&jwt.ValidationErrorMalformed != 0:
				return verifiedToken{}, authErr(ReasonMalformed, "%v", err)
			case ve.Errors&jwt.ValidationErrorUnverifiable != 0:
				return verifiedToken{}, authErr(ReasonAlgorithm, "%v", err)
			case key == nil:
				// The method check fails before the key is looked up.
				return verifiedToken{}, authErr(ReasonAlgorithm, "%v", err)
			}
		}
		return verifiedToken{}, authErr(ReasonSignature, "%v", err)
	}
	if claims.Issuer != v.issuer {
		return verifiedToken{}, authErr(ReasonIssuer, "issuer %q is not %s", claims.Issuer, v.issuer)
	}
	audOK := false
	for _, a := range claims.Audience {
		if a == v.appID {
			audOK = true
			break
		}
	}
	if !audOK {
		return verifiedToken{}, authErr(ReasonAudience, "audience does not include this bot's app id")
	}
	if claims.ExpiresAt == nil {
		return verifiedToken{}, authErr(ReasonMissingExpiry, "token has no exp claim")
	}
	vt = verifiedToken{exp: claims.ExpiresAt.Time, serviceURL: claims.ServiceURL, key: key}
	if claims.NotBefore != nil {
		vt.nbf, vt.hasNbf = claims.NotBefore.Time, true
	}

	v.tokMu.Lock()
	if len(v.tokens) >= maxTokenCache {
		now := v.now()
		for k, t := range v.tokens {
			if now.After(t.exp.Add(clockSkew)) {
				delete(v.tokens, k)
			}
		}
		if len(v.tokens) >= maxTokenCache {
			clear(v.tokens)
		}
	}
	v.tokens[raw] = vt
	v.tokMu.Unlock()
	return vt, nil
}

// key returns the signing key with the given id, fetching the keys when
// none are cached or they are older than a day, and once more (at most
// hourly) when the id is unknown, which is how a key rollover shows.
func (v *Validator) key(ctx context.Context, kid string) (*signingKey, error) {
	ks := v.keys.Load()
	if ks == nil || v.now().Sub(ks.fetchedAt) > keysMaxAge {
		if err := v.refresh(ctx, false); err != nil {
			if ks == nil {
				var ae *AuthError
				if !errors.As(err, &ae) {
					// The request ended while it waited for the keys.
					err = authErr(ReasonKeysUnusable, "waiting for signing keys: %v", err)
				}
				return nil, err
			}
			// Keep using day-old keys rather than refusing every request
			// while the metadata endpoint is down.
			v.logger.Warn("refreshing Bot Framework signing keys failed; using the cached ones", "err", err)
		}
		ks = v.keys.Load()
	}
	if k, ok := ks.keys[kid]; ok {
		return k, nil
	}
	if err := v.refresh(ctx, true); err != nil {
		var ae *AuthError
		switch {
		case errors.Is(err, errRefreshTooSoon):
			return nil, authErr(ReasonUnknownKey, "unknown key id %q", kid)
		case errors.As(err, &ae):
			return nil, err
		default:
			return nil, authErr(ReasonKeysUnusable, "waiting for signing keys: %v", err)
		}
	}
	if k, ok := v.keys.Load().keys[kid]; ok {
		return k, nil
	}
	return nil, authErr(ReasonUnknownKey, "unknown key id %q", kid)
}

var errRefreshTooSoon = errors.New("bot: key refresh for unknown kid happened less than an hour ago")

// refresh fetches the keys once for all concurrent callers. forUnknownKid
// refreshes are rate limited to one an hour; a failed fetch answers every
// caller for keyRetryAfterFailure.
func (v *Validator) refresh(ctx context.Context, forUnknownKid bool) error {
	v.mu.Lock()
	if !v.fetching && !v.failedAt.IsZero() && v.now().Sub(v.failedAt) < keyRetryAfterFailure {
		err := v.failErr
		v.mu.Unlock()
		return err
	}
	// An unknown key id uses the hourly allowance unless a fetch is under
	// way or about to start for another one: it then waits for that.
	if forUnknownKid && !v.fetching && !v.forUnknown && v.keys.Load() != nil {
		now := v.now()
		if !v.lastUnknown.IsZero() && now.Sub(v.lastUnknown) < unknownKeyRefreshEvery {
			v.mu.Unlock()
			return errRefreshTooSoon
		}
		v.forUnknown, v.prevUnknown, v.lastUnknown = true, v.lastUnknown, now
	}
	// DoChan starts the fetch, or joins the one under way, without
	// blocking; the fetch outlives the request that started it, as other
	// requests wait for it too.
	ch := v.flight.DoChan("keys", func() (any, error) {
		v.mu.Lock()
		v.fetching = true
		forUnknown, prevUnknown := v.forUnknown, v.prevUnknown
		v.forUnknown = false
		v.mu.Unlock()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyFetchTimeout)
		defer cancel()
		ks, err := v.fetch(fctx)
		v.mu.Lock()
		defer v.mu.Unlock()
		if err == nil {
			v.keys.Store(ks)
			v.failedAt, v.failErr = time.Time{}, nil
		} else {
			v.failedAt, v.failErr = v.now(), err
			if forUnknown {
				// A failed fetch found no key: the next unknown key id
				// may try again once the failure backoff ends.
				v.lastUnknown = prevUnknown
			}
			v.logger.Error("fetching Bot Framework signing keys failed", "metadata", v.metadataURL, "err", err)
		}
		v.fetches++
		v.fetching = false
		return nil, err
	})
	v.waiting++
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.waiting--
		v.mu.Unlock()
	}()
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fetches returns how many key fetches completed, for tests and logs.
func (v *Validator) Fetches() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.fetches
}

// fetch reads the OpenID metadata and the JWKS it points to.
func (v *Validator) fetch(ctx context.Context) (*keySet, error) {
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	body, err := v.get(ctx, v.metadataURL)
	if err != nil {
		return nil, authErr(ReasonKeysUnusable, "OpenID metadata: %v", err)
	}
	if err := json.Unmarshal(body, &meta); err != nil || meta.JWKSURI == "" {
		return nil, authErr(ReasonKeysUnusable, "OpenID metadata %s has no jwks_uri (%v)", v.metadataURL, err)
	}
	body, err = v.get(ctx, meta.JWKSURI)
	if err != nil {
		return nil, authErr(ReasonKeysUnusable, "JWKS: %v", err)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, authErr(ReasonKeysUnusable, "JWKS %s: %v", meta.JWKSURI, err)
	}
	ks := &keySet{keys: make(map[string]*signingKey, set.Len()), fetchedAt: v.now()}
	for i := 0; i < set.Len(); i++ {
		k, _ := set.Get(i)
		var pub rsa.PublicKey
		if k.KeyID() == "" || k.Raw(&pub) != nil {
			continue // not an RSA key with an id: cannot sign our tokens
		}
		sk := &signingKey{pub: &pub}
		if e, ok := k.Get("endorsements"); ok {
			if list, ok := e.([]interface{}); ok {
				for _, s := range list {
					if s, ok := s.(string); ok {
						sk.endorsements = append(sk.endorsements, s)
					}
				}
			}
		}
		ks.keys[k.KeyID()] = sk
	}
	if len(ks.keys) == 0 {
		return nil, authErr(ReasonKeysUnusable, "JWKS %s has no RSA keys", meta.JWKSURI)
	}
	v.logger.Info("fetched Bot Framework signing keys", "keys", len(ks.keys))
	return ks, nil
}

func (v *Validator) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeyDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(b) > maxKeyDocBytes {
		return nil, fmt.Errorf("GET %s: document larger than %d bytes", url, maxKeyDocBytes)
	}
	return b, nil
}
