package signin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// ErrNoSession is returned when a request carries no valid session.
var ErrNoSession = errors.New("signin: no session")

// Session is the signed-in person, as kept in the session cookie.
type Session struct {
	TenantID string    `json:"tid"`
	UserID   string    `json:"oid"`
	Name     string    `json:"name,omitempty"`
	Username string    `json:"upn,omitempty"`
	Roles    []string  `json:"roles,omitempty"`
	Expires  time.Time `json:"exp"`
	// Local is true for the local development sign-in.
	Local bool `json:"local,omitempty"`
}

// Options configures New.
type Options struct {
	Issuer, ClientID, ClientSecret string // empty Issuer: local development sign-in
	PublicBaseURL                  string
	DataDir                        string // where the session key is kept
	Loopback                       bool   // the service listens on loopback only
	AllowedTenants                 []string
	SessionLifetime                time.Duration
	HTTPClient                     *http.Client
	Logger                         *slog.Logger
	Now                            func() time.Time
}

// Service signs people in.
type Service struct{}

// New prepares sign-in (OIDC discovery when an issuer is set).
func New(ctx context.Context, opts Options) (*Service, error) { panic("unimplemented") }

// Register adds /signin, /signin/callback, POST /signout (and the local sign-in) to e.
func (s *Service) Register(e *echo.Echo) { panic("unimplemented") }

// Session returns the session of a request, or ErrNoSession.
func (s *Service) Session(r *http.Request) (Session, error) { panic("unimplemented") }

// SignInURL is where to send a person who must sign in to reach returnPath.
func (s *Service) SignInURL(returnPath string) string { panic("unimplemented") }
