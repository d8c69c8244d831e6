package main

import (
	"teamsbot/signin"
	"teamsbot/viewpage"
)

// teamsSignIn is Teams single sign-on when views open inside Teams: the
// token comes from Entra ID of the bot's cloud, for the OIDC sign-in's app
// registration; nil otherwise.
func teamsSignIn(cfg config) *signin.TeamsOptions {
	if !cfg.TeamsTab {
		return nil
	}
	return &signin.TeamsOptions{Authority: cfg.BotCloud.LoginEndpoint, HostOrigins: viewpage.TeamsHosts}
}

// teamsPage lets the view page open inside Teams (the documented Teams and
// Microsoft 365 hosts) when views open inside Teams; nil otherwise.
func teamsPage(cfg config) *viewpage.TeamsOptions {
	if !cfg.TeamsTab {
		return nil
	}
	return &viewpage.TeamsOptions{}
}
