package bot

import (
	"fmt"
	"net/url"
	"strings"
)

// Cloud is one of Microsoft's clouds for a Teams bot: whom inbound tokens
// come from, where the bot gets its own token and for which scope, and
// where Microsoft Graph answers. The values are Microsoft's, as the Teams
// SDK lists them (microsoft/teams.ts, packages/api/src/auth
// cloud-environment.ts) and Bot Service's "Configure Bot Framework bots for
// US Government customers" describes them; GCC (moderate) uses the public
// cloud.
type Cloud struct {
	// Name is how TICKETIQ_BOT_CLOUD names it.
	Name string
	// Issuer is the iss of every token the Bot Connector signs.
	Issuer string
	// OpenIDMetadataURL lists the Bot Connector's signing keys.
	OpenIDMetadataURL string
	// LoginEndpoint is Entra ID's token host of the cloud.
	LoginEndpoint string
	// LoginTenant is the token tenant of a bot registered without one.
	LoginTenant string
	// Scope is what the bot's client-credentials token is asked for.
	Scope string
	// GraphBaseURL is Microsoft Graph's service root in the cloud.
	GraphBaseURL string
}

// The clouds, by TICKETIQ_BOT_CLOUD name.
const (
	CloudPublic   = "public"
	CloudUSGov    = "usgov"    // GCC High
	CloudUSGovDoD = "usgovdod" // DoD
	CloudChina    = "china"    // operated by 21Vianet
)

// CloudNames are the names CloudNamed takes.
var CloudNames = []string{CloudPublic, CloudUSGov, CloudUSGovDoD, CloudChina}

// CloudNamed returns the cloud of a TICKETIQ_BOT_CLOUD value (any case);
// empty is the public cloud.
func CloudNamed(name string) (Cloud, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", CloudPublic:
		return Cloud{
			Name: CloudPublic, Issuer: "https://api.botframework.com",
			OpenIDMetadataURL: "https://login.botframework.com/v1/.well-known/openidconfiguration",
			LoginEndpoint:     "https://login.microsoftonline.com", LoginTenant: "botframework.com",
			Scope: "https://api.botframework.com/.default", GraphBaseURL: "https://graph.microsoft.com/v1.0",
		}, nil
	case CloudUSGov:
		return Cloud{
			Name: CloudUSGov, Issuer: "https://api.botframework.us",
			OpenIDMetadataURL: "https://login.botframework.azure.us/v1/.well-known/openidconfiguration",
			LoginEndpoint:     "https://login.microsoftonline.us", LoginTenant: "MicrosoftServices.onmicrosoft.us",
			Scope: "https://api.botframework.us/.default", GraphBaseURL: "https://graph.microsoft.us/v1.0",
		}, nil
	case CloudUSGovDoD:
		return Cloud{
			Name: CloudUSGovDoD, Issuer: "https://api.botframework.us",
			OpenIDMetadataURL: "https://login.botframework.azure.us/v1/.well-known/openidconfiguration",
			LoginEndpoint:     "https://login.microsoftonline.us", LoginTenant: "MicrosoftServices.onmicrosoft.us",
			Scope: "https://api.botframework.us/.default", GraphBaseURL: "https://dod-graph.microsoft.us/v1.0",
		}, nil
	case CloudChina:
		return Cloud{
			Name: CloudChina, Issuer: "https://api.botframework.azure.cn",
			OpenIDMetadataURL: "https://login.botframework.azure.cn/v1/.well-known/openidconfiguration",
			LoginEndpoint:     "https://login.partner.microsoftonline.cn", LoginTenant: "microsoftservices.partner.onmschina.cn",
			Scope: "https://api.botframework.azure.cn/.default", GraphBaseURL: "https://microsoftgraph.chinacloudapi.cn/v1.0",
		}, nil
	}
	return Cloud{}, fmt.Errorf("%q is not a cloud: use %s", name, strings.Join(CloudNames, ", "))
}

// TokenURL is the client-credentials token endpoint of the bot's tenant:
// the single-tenant endpoint of tenantID, or the cloud's own tenant for a
// bot registered without one when tenantID is empty.
func (c Cloud) TokenURL(tenantID string) string {
	if tenantID == "" {
		tenantID = c.LoginTenant
	}
	return c.LoginEndpoint + "/" + url.PathEscape(tenantID) + "/oauth2/v2.0/token"
}

// GraphTokenURL is the cloud's token endpoint with "{tenant}" where the
// tenant goes, as access/graph takes it.
func (c Cloud) GraphTokenURL() string {
	return c.LoginEndpoint + "/{tenant}/oauth2/v2.0/token"
}

// publicCloud is the cloud of a bot that names none.
func publicCloud() Cloud {
	c, _ := CloudNamed(CloudPublic)
	return c
}
