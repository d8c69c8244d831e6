package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"teamsbot/manifest"
	"teamsbot/signin"
)

// writeManifest is `teamsbot manifest`: the Teams app package for this
// service's bot, from its settings and the flags. Nothing is written unless
// every input is valid.
func writeManifest(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("teamsbot manifest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := manifest.Options{
		BotID: cfg.BotAppID, PublicBaseURL: cfg.PublicBaseURL.String(), SandboxBaseURL: cfg.SandboxBaseURL.String(),
		SignInClientID: cfg.OIDCClientID,
	}
	if cfg.OIDCClientID != "" {
		// "Enable SSO for tab app": api://{host}/{client id}, the same
		// the service takes Teams tokens for.
		o.SignInResource = signin.ApplicationIDURI(cfg.PublicBaseURL.Hostname(), cfg.OIDCClientID)
	}
	o.TeamsTab = cfg.TeamsTab
	out := fs.String("o", "", "the package to write (`FILE`.zip); - writes to standard output")
	fs.StringVar(&o.AppID, "app-id", "", "the app's GUID (default: derived from the bot id, the same for every build)")
	fs.StringVar(&o.Version, "version", "1.0.0", "the app's semantic version; raise it for every upload")
	fs.StringVar(&o.Developer, "developer", "", "who publishes the app (at most 32 characters)")
	fs.StringVar(&o.WebsiteURL, "website", "", "the developer's https website")
	fs.StringVar(&o.PrivacyURL, "privacy", "", "the https privacy statement")
	fs.StringVar(&o.TermsURL, "terms", "", "the https terms of use")
	fs.StringVar(&o.ShortName, "name", "Assistant", "the app's short name (at most 30 characters)")
	fs.StringVar(&o.FullName, "full-name", "", "the app's full name (at most 100 characters; default the short name)")
	fs.StringVar(&o.ShortDescription, "description", "Answers with your organisation's tools, and opens their views", "the short description (at most 80 characters)")
	fs.StringVar(&o.FullDescription, "full-description", "Ask a question in a chat or a channel. The answer comes as a card that names each interactive view a tool made, with a button that opens it after you sign in.", "the full description (at most 4000 characters)")
	fs.StringVar(&o.AccentColor, "accent", manifest.DefaultAccentColor, "the accent color, #RRGGBB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("manifest: unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return errors.New("manifest: -o FILE is required (- for standard output)")
	}
	pkg, err := manifest.Build(o)
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err = io.Copy(stdout, bytes.NewReader(pkg))
		return err
	}
	if err := os.WriteFile(*out, pkg, 0o644); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "wrote %s (app id %s, version %s)\n", *out, manifestID(o), o.Version)
	return err
}

// manifestID is the app id the package carries.
func manifestID(o manifest.Options) string {
	if o.AppID != "" {
		return o.AppID
	}
	return manifest.AppIDFor(o.BotID)
}
