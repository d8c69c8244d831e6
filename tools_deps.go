//go:build tools

// Package teamsbot is never built: this file keeps the chosen modules that no
// package imports yet (cedar-go, for the access rules to come) pinned in
// go.mod, so that go mod tidy does not drop them.
package teamsbot

import (
	_ "github.com/cedar-policy/cedar-go"
	_ "github.com/chromedp/chromedp"
	_ "github.com/coreos/go-oidc/v3/oidc"
	_ "github.com/golang-jwt/jwt/v4"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/infracloudio/msbotbuilder-go/core"
	_ "github.com/infracloudio/msbotbuilder-go/core/activity"
	_ "github.com/infracloudio/msbotbuilder-go/schema"
	_ "github.com/labstack/echo/v4"
	_ "github.com/labstack/echo/v4/middleware"
	_ "github.com/lestrrat-go/jwx/jwk"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/oauth2-proxy/mockoidc"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "go.etcd.io/bbolt"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/oauth2"
)
