package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"teamsbot/internal/netaddr"
	"teamsbot/manifest"
	"teamsbot/signin"
)

// manifestFlags are `teamsbot manifest`'s flags; the settings the package
// holds may be given as flags too, which win over the variables.
type manifestFlags struct {
	out                                  string
	botID, publicBaseURL, sandboxBaseURL string
	signInClientID                       string
	teamsTab                             string
	configPath                           string
	o                                    manifest.Options
}

// manifestSettings are the settings the package holds: `teamsbot
// manifest` reads these alone, so that neither the bot's credential nor
// its tenants (which a package does not hold) are needed to write one.
func manifestSettings() []string {
	return []string{"TICKETIQ_BOT_APP_ID", "TICKETIQ_PUBLIC_BASE_URL", "TICKETIQ_SANDBOX_BASE_URL", "TICKETIQ_OIDC_CLIENT_ID", "TICKETIQ_TEAMS_TAB", "TICKETIQ_CONFIG"}
}

// exampleGUID stands for an id in the examples of mistakes.
const exampleGUID = "00000000-0000-0000-0000-000000000000"

// manifestFixes says, for each input of the package, how to give it.
func manifestFixes() map[string]string {
	return map[string]string{
		"BotID":            "set TICKETIQ_BOT_APP_ID=" + exampleGUID + " or pass --bot-id " + exampleGUID,
		"PublicBaseURL":    "set TICKETIQ_PUBLIC_BASE_URL=https://bot.example.com or pass --public-base-url https://bot.example.com",
		"SandboxBaseURL":   "set TICKETIQ_SANDBOX_BASE_URL=https://sandbox.example.com or pass --sandbox-base-url https://sandbox.example.com, or leave both unset",
		"SignInClientID":   "set TICKETIQ_OIDC_CLIENT_ID=" + exampleGUID + " or pass --sign-in-client-id " + exampleGUID,
		"SignInResource":   "set TICKETIQ_PUBLIC_BASE_URL to the host of the application ID URI",
		"AppID":            "pass --app-id " + exampleGUID + ", or leave it out to derive it from the bot's app id",
		"Version":          "pass --version 1.0.1",
		"Developer":        `pass --developer "Contoso IT"`,
		"WebsiteURL":       "pass --website https://www.contoso.example",
		"PrivacyURL":       "pass --privacy https://www.contoso.example/privacy",
		"TermsURL":         "pass --terms https://www.contoso.example/terms",
		"ShortName":        "pass --name Assistant",
		"FullName":         `pass --full-name "Contoso Assistant"`,
		"ShortDescription": `pass --description "Answers with your organisation's tools"`,
		"FullDescription":  `pass --full-description "..."`,
		"AccentColor":      "pass --accent '#3A5BA0'",
		"Prompts":          "edit the prompts of the first agent in TICKETIQ_CONFIG",
	}
}

func manifestCommand() command {
	return command{name: "manifest", usage: "teamsbot manifest -o FILE [flags]", summary: "write the Teams app package for the bot",
		help: `Writes the Teams app package a Teams administrator uploads: a zip of
manifest.json (schema 1.29), color.png and outline.png. It needs only what the
package holds: the bot's app id, the public base URL (https), the developer's
name and pages, and with TICKETIQ_TEAMS_TAB=true the sign-in's client id. The
bot's credential and tenants are not needed. With TICKETIQ_CONFIG (or
--config), the first agent's prompts become the bot's suggested prompts, with
/tools after them. With --copilot the bot answers in Microsoft 365 Copilot
chat too, as a custom engine agent. Every missing or wrong input is named,
with the flag or variable that gives it, and nothing is written then.

Example:
  TICKETIQ_BOT_APP_ID=` + exampleGUID + ` TICKETIQ_PUBLIC_BASE_URL=https://bot.contoso.example \
    teamsbot manifest -o teamsbot.zip --developer "Contoso IT" \
    --website https://www.contoso.example --privacy https://www.contoso.example/privacy \
    --terms https://www.contoso.example/terms`,
		flags: func(fs *flag.FlagSet, _ environment) any {
			f := &manifestFlags{}
			fs.StringVar(&f.out, "o", "", "the package to write (`FILE`.zip); - writes to standard output")
			fs.StringVar(&f.botID, "bot-id", "", "the bot's app id (`GUID`; default TICKETIQ_BOT_APP_ID)")
			fs.StringVar(&f.publicBaseURL, "public-base-url", "", "where people reach the service, https (`URL`; default TICKETIQ_PUBLIC_BASE_URL)")
			fs.StringVar(&f.sandboxBaseURL, "sandbox-base-url", "", "the separate sandbox origin, if any (`URL`; default TICKETIQ_SANDBOX_BASE_URL)")
			fs.StringVar(&f.signInClientID, "sign-in-client-id", "", "the sign-in's app registration, for webApplicationInfo (`GUID`; default TICKETIQ_OIDC_CLIENT_ID)")
			fs.StringVar(&f.teamsTab, "teams-tab", "", "views open inside Teams: `true` or false (default TICKETIQ_TEAMS_TAB)")
			fs.StringVar(&f.configPath, "config", "", "the configuration file whose first agent's prompts the bot suggests (`FILE`; default TICKETIQ_CONFIG)")
			fs.BoolVar(&f.o.Copilot, "copilot", false, "the bot answers in Microsoft 365 Copilot chat too, as a custom engine agent")
			fs.StringVar(&f.o.AppID, "app-id", "", "the Teams app's own `GUID` (default: derived from the bot's app id, the same for every build)")
			fs.StringVar(&f.o.Version, "version", "1.0.0", "the app's semantic `VERSION`; raise it for every upload")
			fs.StringVar(&f.o.Developer, "developer", "", "who publishes the app (`NAME`, at most 32 characters)")
			fs.StringVar(&f.o.WebsiteURL, "website", "", "the developer's https website (`URL`)")
			fs.StringVar(&f.o.PrivacyURL, "privacy", "", "the https privacy statement (`URL`)")
			fs.StringVar(&f.o.TermsURL, "terms", "", "the https terms of use (`URL`)")
			fs.StringVar(&f.o.ShortName, "name", "Assistant", "the app's short `NAME` (at most 30 characters)")
			fs.StringVar(&f.o.FullName, "full-name", "", "the app's full `NAME` (at most 100 characters; default the short name)")
			fs.StringVar(&f.o.ShortDescription, "description", "Answers with your organisation's tools, and opens their views", "the short description (`TEXT`, at most 80 characters)")
			fs.StringVar(&f.o.FullDescription, "full-description", "Ask a question in a chat or a channel. The answer comes as a card that names each interactive view a tool made, with a button that opens it after you sign in.", "the full description (`TEXT`, at most 4000 characters)")
			fs.StringVar(&f.o.AccentColor, "accent", manifest.DefaultAccentColor, "the accent color, `#RRGGBB`")
			return f
		},
		run: func(_ context.Context, in invocation) error {
			return writeManifest(in.flags.(*manifestFlags), in.env, in.stdout)
		},
	}
}

// writeManifest is `teamsbot manifest`: the Teams app package for this
// service's bot, from the settings it holds and the flags. Nothing is
// written unless every input is valid.
func writeManifest(f *manifestFlags, env environment, stdout io.Writer) error {
	// A flag wins over its variable: the variables are read with the
	// flags in their place.
	env = envWith(env, map[string]string{
		"TICKETIQ_BOT_APP_ID": f.botID, "TICKETIQ_PUBLIC_BASE_URL": f.publicBaseURL, "TICKETIQ_SANDBOX_BASE_URL": f.sandboxBaseURL,
		"TICKETIQ_OIDC_CLIENT_ID": f.signInClientID, "TICKETIQ_TEAMS_TAB": f.teamsTab, "TICKETIQ_CONFIG": f.configPath,
	})
	cfg, errs := loadSettings(env, manifestSettings()...)
	o := f.o
	o.BotID, o.SandboxBaseURL, o.SignInClientID, o.TeamsTab = cfg.BotAppID, cfg.SandboxBaseURL.String(), cfg.OIDCClientID, cfg.TeamsTab
	if strings.TrimSpace(env.get("TICKETIQ_PUBLIC_BASE_URL")) != "" {
		// Unset, the service's default (a loopback http address) is no
		// address for a package: the package says it is missing.
		o.PublicBaseURL = cfg.PublicBaseURL.String()
	}
	if cfg.OIDCClientID != "" && !cfg.PublicBaseURL.IsZero() {
		// "Enable SSO for tab app": api://{host}/{client id}, the same
		// the service takes Teams tokens for.
		o.SignInResource = signin.ApplicationIDURI(cfg.PublicBaseURL.Hostname(), cfg.OIDCClientID)
	}
	if cfg.ConfigPath != "" {
		// The bot serves the first agent: its prompts are the bot's.
		if data, err := os.ReadFile(cfg.ConfigPath); err != nil {
			errs = append(errs, fmt.Errorf("TICKETIQ_CONFIG: %w", err))
		} else if agents, err := readConfigFile(data, env); err != nil {
			errs = append(errs, configFileMistakes(cfg.ConfigPath, err)...)
		} else {
			for _, p := range agents.Agents[0].Prompts {
				o.Prompts = append(o.Prompts, manifest.Prompt{Title: p.Title, Text: p.Text})
			}
		}
	}
	if f.out == "" {
		errs = append(errs, errors.New("the file to write is missing: pass -o teamsbot.zip (or -o - for standard output)"))
	}
	pkg, err := manifest.Build(o)
	fixes := manifestFixes()
	for _, e := range inputErrors(err) {
		if fix := fixes[e.Input]; fix != "" {
			errs = append(errs, fmt.Errorf("%w: %s", e, fix))
		} else {
			errs = append(errs, e)
		}
	}
	if err != nil && len(inputErrors(err)) == 0 {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return packageMistakes(errs)
	}
	if f.out == "-" {
		_, err = io.Copy(stdout, bytes.NewReader(pkg))
		return err
	}
	if err := os.WriteFile(f.out, pkg, 0o644); err != nil {
		return fmt.Errorf("the package could not be written: %w", err)
	}
	var reach []string
	switch n := len(o.Prompts); n {
	case 0:
	case 1:
		reach = append(reach, "1 suggested prompt")
	default:
		reach = append(reach, fmt.Sprintf("%d suggested prompts", n))
	}
	if o.Copilot {
		reach = append(reach, "in Microsoft 365 Copilot too")
	}
	more := ""
	if len(reach) > 0 {
		more = "; " + strings.Join(reach, ", ")
	}
	_, err = fmt.Fprintf(stdout, "wrote %s (app id %s, version %s, bot %s, for %s%s)\n", f.out, manifestID(o), o.Version, o.BotID, netaddr.Redact(o.PublicBaseURL), more)
	return err
}

// packageMistakes are the mistakes that kept the package from being
// written, one a line.
type packageMistakes []error

func (m packageMistakes) Error() string {
	var b strings.Builder
	b.WriteString("the package was not written:")
	for _, e := range m {
		b.WriteString("\n  - ")
		b.WriteString(e.Error())
	}
	return b.String()
}

func (m packageMistakes) Unwrap() []error { return m }

// inputErrors are the package's mistakes, each naming its input.
func inputErrors(err error) []*manifest.InputError {
	var out []*manifest.InputError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *manifest.InputError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// envWith is env with the non-empty values of set in place of its own.
func envWith(env environment, set map[string]string) environment {
	out := make(environment, len(env)+len(set))
	for k, v := range env {
		out[k] = v
	}
	for k, v := range set {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// manifestID is the app id the package carries.
func manifestID(o manifest.Options) string {
	if o.AppID != "" {
		return o.AppID
	}
	return manifest.AppIDFor(o.BotID)
}
