// Package manifest writes the Teams app package that a tenant admin
// uploads to the organisation's app catalog: a flat zip of manifest.json
// (Teams app manifest schema 1.29), color.png (192×192, full color) and
// outline.png (32×32, white on transparent), following Microsoft's "Teams
// app manifest schema reference" (v1.29) and "Create app icons".
//
// The bot's commands are its suggested prompts when it has any (Teams'
// "Create prompt suggestions"), and the same bot may answer in Microsoft
// 365 Copilot as a custom engine agent ("Convert your declarative agent to
// a custom engine agent", Microsoft 365 Copilot extensibility docs).
//
// It only builds the package from what it is given; reading settings and
// writing the file are the command line's.
package manifest

import (
	"archive/zip"
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"teamsbot/internal/guid"
	"time"
	"unicode/utf8"
)

// SchemaURL and Version are the manifest schema the package follows.
const (
	SchemaURL       = "https://developer.microsoft.com/json-schemas/teams/v1.29/MicrosoftTeams.schema.json"
	ManifestVersion = "1.29"
)

// Command is one bot command Teams offers in its command menu.
type Command struct {
	Title, Description string
	// Prompt, when set, makes the command a prompt (type prompt): Teams
	// puts this text, rather than the title, in the compose box.
	Prompt string
}

// The commands the bot keeps in its list beside the prompts: the one that
// lists the agent's tools, and the one that starts the conversation
// afresh. A chat with a bot is one thread for ever in Teams, with no
// gesture of its own for a new conversation, so /new is offered in the
// command menu where people look for one.
const (
	ToolsTitle       = "/tools"
	toolsDescription = "List the tools I can use"
	NewTitle         = "/new"
	newDescription   = "Start a new conversation: I forget the earlier messages"
)

// DefaultCommands are the bot's commands when Options names neither
// commands nor prompts.
var DefaultCommands = []Command{
	{Title: ToolsTitle, Description: toolsDescription},
	{Title: NewTitle, Description: newDescription},
	{Title: "help", Description: "What I do and how to ask"},
}

// Prompt is one suggested prompt (a prompt starter): Teams shows the title
// and, when the person picks it, puts the text in the compose box.
type Prompt struct {
	Title, Text string
}

// The limits of a command, hence of a prompt: Teams takes a title of at
// most 32 characters and a description (a prompt's text) of at most 128
// ("Create prompt suggestions": the command list holds up to 10 commands).
// The 1.29 schema itself allows 12 commands, titles of 128 and texts of
// 4000; Teams' own limits are the ones kept.
const (
	MaxCommands           = 10
	MaxCommandTitle       = 32
	MaxCommandDescription = 128
	// MaxPrompts leaves the list's last two places to /new and /tools.
	MaxPrompts = MaxCommands - 2
)

// Options are the package's inputs. Empty optional fields get defaults.
type Options struct {
	// AppID is the app's GUID; empty derives a stable one from BotID.
	AppID string
	// Version is the app's semantic version; empty is "1.0.0".
	Version string
	// Developer is who publishes the app; WebsiteURL, PrivacyURL and
	// TermsURL are its https pages.
	Developer                        string
	WebsiteURL, PrivacyURL, TermsURL string
	// ShortName (at most 30 characters) and FullName (100); empty full
	// name is the short one.
	ShortName, FullName string
	// ShortDescription (80) and FullDescription (4000).
	ShortDescription, FullDescription string
	// AccentColor is #RRGGBB; empty is DefaultAccentColor.
	AccentColor string
	// BotID is TICKETIQ_BOT_APP_ID. Required.
	BotID string
	// PublicBaseURL and SandboxBaseURL (optional) are https origins;
	// their hosts are the app's valid domains.
	PublicBaseURL, SandboxBaseURL string
	// SignInClientID and SignInResource are webApplicationInfo's id and
	// resource (for example api://host/<client id>); both or neither.
	SignInClientID, SignInResource string
	// Commands are the bot's commands; nil is the prompts and /tools
	// when there are prompts, DefaultCommands otherwise.
	Commands []Command
	// Prompts are the agent's suggested prompts (at most MaxPrompts),
	// offered in every scope of the bot: Teams shows them as prompt
	// starters and in the command menu.
	Prompts []Prompt
	// Copilot makes the bot a custom engine agent of Microsoft 365
	// Copilot too: copilotAgents.customEngineAgents names it (type bot,
	// its id), and the bot and its personal command list gain the copilot
	// scope. The bot has the personal scope that Copilot requires.
	Copilot bool
	// TeamsTab says the cards open views inside Teams (Stage View from an
	// Adaptive Card, TICKETIQ_TEAMS_TAB): the page's domain must then be a
	// valid domain (it always is here) and Teams single sign-on needs
	// webApplicationInfo, whose resource names that domain ("Update app
	// manifest for SSO").
	TeamsTab bool
}

// DefaultAccentColor is the app's accent color when none is given.
const DefaultAccentColor = "#3A5BA0"

var (
	semverRE  = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	hexRE     = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)
	errLayout = errors.New("manifest")
)

// AppIDFor derives the app id from a bot id: a name-based GUID (SHA-1,
// version 5 layout), so every package built for one bot has the same id
// and an upload replaces the previous version.
func AppIDFor(botID string) string {
	sum := sha1.Sum([]byte("teamsbot app package\x00" + strings.ToLower(botID)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// InputError is a missing or invalid input of Options.
type InputError struct {
	// Input is the field of Options: "Developer", "WebsiteURL"...; a
	// command's title and description are "Commands", a prompt's
	// "Prompts".
	Input string
	Err   error
}

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// check applies the defaults and names every missing or invalid input,
// each an *InputError.
func (o *Options) check() error {
	var errs []error
	bad := func(input, format string, args ...any) {
		errs = append(errs, &InputError{Input: input, Err: fmt.Errorf(format, args...)})
	}
	switch {
	case o.BotID == "":
		bad("BotID", "the bot's app id is required")
	case !guid.Valid(o.BotID):
		bad("BotID", "bot id %q: want the bot's app id, a GUID (TICKETIQ_BOT_APP_ID)", o.BotID)
	}
	if o.AppID == "" && guid.Valid(o.BotID) {
		o.AppID = AppIDFor(o.BotID)
	} else if o.AppID != "" && !guid.Valid(o.AppID) {
		bad("AppID", "app id %q: want a GUID", o.AppID)
	}
	if o.Version == "" {
		o.Version = "1.0.0"
	}
	if !semverRE.MatchString(o.Version) {
		bad("Version", "version %q: want a semantic version such as 1.2.0", o.Version)
	}
	text := func(input, what, v string, max int, required bool) {
		switch n := utf8.RuneCountInString(v); {
		case n == 0 && required:
			bad(input, "%s is required", what)
		case n > max:
			bad(input, "%s has %d characters, at most %d", what, n, max)
		}
	}
	text("Developer", "developer name", o.Developer, 32, true)
	text("ShortName", "short name", o.ShortName, 30, true)
	if o.FullName == "" {
		o.FullName = o.ShortName
	}
	text("FullName", "full name", o.FullName, 100, true)
	text("ShortDescription", "short description", o.ShortDescription, 80, true)
	text("FullDescription", "full description", o.FullDescription, 4000, true)
	for _, u := range []struct{ input, what, v string }{
		{"WebsiteURL", "website URL", o.WebsiteURL}, {"PrivacyURL", "privacy URL", o.PrivacyURL}, {"TermsURL", "terms of use URL", o.TermsURL},
	} {
		if err := httpsURL(u.v); err != nil {
			bad(u.input, "%s: %v", u.what, err)
		}
	}
	if o.AccentColor == "" {
		o.AccentColor = DefaultAccentColor
	}
	if !hexRE.MatchString(o.AccentColor) {
		bad("AccentColor", "accent color %q: want #RRGGBB", o.AccentColor)
	}
	if err := httpsURL(o.PublicBaseURL); err != nil {
		bad("PublicBaseURL", "public base URL: %v", err)
	}
	if o.SandboxBaseURL != "" {
		if err := httpsURL(o.SandboxBaseURL); err != nil {
			bad("SandboxBaseURL", "sandbox base URL: %v", err)
		}
	}
	switch {
	case o.SignInClientID == "" && o.SignInResource == "":
	case !guid.Valid(o.SignInClientID):
		bad("SignInClientID", "sign-in client id %q: want the sign-in app registration's id, a GUID", o.SignInClientID)
	case o.SignInResource == "":
		bad("SignInResource", "sign-in resource is required with a sign-in client id (such as api://host/<client id>)")
	}
	if o.TeamsTab {
		if o.SignInClientID == "" {
			bad("SignInClientID", "opening views inside Teams needs webApplicationInfo: set the sign-in client id (TICKETIQ_OIDC_CLIENT_ID) for Teams single sign-on")
		} else if want := "api://" + strings.ToLower(hostname(o.PublicBaseURL)) + "/"; !strings.HasPrefix(o.SignInResource, want) {
			bad("SignInResource", "sign-in resource %q: inside Teams it must be the application ID URI on the public host, %s<client id>", o.SignInResource, want)
		}
	}
	if len(o.Prompts) > MaxPrompts {
		bad("Prompts", "%d prompts, at most %d (Teams lists at most %d commands, and two of them are %s and %s)", len(o.Prompts), MaxPrompts, MaxCommands, NewTitle, ToolsTitle)
	}
	for i, p := range o.Prompts {
		text("Prompts", fmt.Sprintf("prompt %d title", i+1), p.Title, MaxCommandTitle, true)
		text("Prompts", fmt.Sprintf("prompt %d text", i+1), p.Text, MaxCommandDescription, true)
	}
	switch {
	case o.Commands != nil:
	case len(o.Prompts) > 0:
		// A prompt's text is its description too: Teams shows it beside
		// the title, and a client that knows no prompt type puts the
		// title in the compose box.
		for _, p := range o.Prompts {
			o.Commands = append(o.Commands, Command{Title: p.Title, Description: p.Text, Prompt: p.Text})
		}
		o.Commands = append(o.Commands, Command{Title: NewTitle, Description: newDescription}, Command{Title: ToolsTitle, Description: toolsDescription})
	default:
		o.Commands = DefaultCommands
	}
	if len(o.Commands) > MaxCommands {
		bad("Commands", "%d commands, at most %d", len(o.Commands), MaxCommands)
	}
	for i, c := range o.Commands {
		text("Commands", fmt.Sprintf("command %d title", i+1), c.Title, MaxCommandTitle, true)
		text("Commands", fmt.Sprintf("command %d description", i+1), c.Description, MaxCommandDescription, true)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", errLayout, err)
	}
	return nil
}

func httpsURL(s string) error {
	if s == "" {
		return errors.New("required")
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil {
		return fmt.Errorf("%q: want an https:// address", s)
	}
	return nil
}

func host(s string) string {
	u, _ := url.Parse(s)
	return u.Host
}

func hostname(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// JSON builds manifest.json.
func JSON(opts Options) ([]byte, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return manifestJSON(opts)
}

func manifestJSON(o Options) ([]byte, error) {
	cmds := make([]map[string]string, 0, len(o.Commands))
	for _, c := range o.Commands {
		cmd := map[string]string{"title": c.Title, "description": c.Description}
		if c.Prompt != "" {
			cmd["type"], cmd["prompt"] = "prompt", c.Prompt
		}
		cmds = append(cmds, cmd)
	}
	scopes := []string{"personal", "team", "groupChat"}
	var lists []map[string]any
	for _, s := range scopes {
		listScopes := []string{s}
		if o.Copilot && s == "personal" {
			// One list per scope, at most three lists: Copilot's chat
			// is one person's, and shares the personal list.
			listScopes = append(listScopes, "copilot")
		}
		lists = append(lists, map[string]any{"scopes": listScopes, "commands": cmds})
	}
	botScopes := scopes
	if o.Copilot {
		botScopes = append(slices.Clip(scopes), "copilot")
	}
	domains := []string{host(o.PublicBaseURL)}
	if o.SandboxBaseURL != "" && !slices.Contains(domains, host(o.SandboxBaseURL)) {
		domains = append(domains, host(o.SandboxBaseURL))
	}
	m := map[string]any{
		"$schema":         SchemaURL,
		"manifestVersion": ManifestVersion,
		"version":         o.Version,
		"id":              o.AppID,
		"developer": map[string]string{
			"name": o.Developer, "websiteUrl": o.WebsiteURL, "privacyUrl": o.PrivacyURL, "termsOfUseUrl": o.TermsURL,
		},
		"name":        map[string]string{"short": o.ShortName, "full": o.FullName},
		"description": map[string]string{"short": o.ShortDescription, "full": o.FullDescription},
		"icons":       map[string]string{"color": "color.png", "outline": "outline.png"},
		"accentColor": o.AccentColor,
		"bots": []map[string]any{{
			"botId": o.BotID, "scopes": botScopes, "supportsFiles": false, "isNotificationOnly": false, "commandLists": lists,
		}},
		"validDomains": domains,
	}
	if o.Copilot {
		// "Convert your declarative agent to a custom engine agent": the
		// agent is the bot (type bot, the bot's id; manifest 1.21 or
		// later), which must have the personal scope, and the app its
		// short name and short description.
		m["copilotAgents"] = map[string]any{"customEngineAgents": []map[string]string{{"type": "bot", "id": o.BotID}}}
	}
	if o.SignInClientID != "" {
		m["webApplicationInfo"] = map[string]string{"id": o.SignInClientID, "resource": o.SignInResource}
	}
	return json.MarshalIndent(m, "", "  ")
}

// Build returns the app package zip.
func Build(opts Options) ([]byte, error) {
	var b bytes.Buffer
	if err := Write(&b, opts); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes the app package zip to w. Every missing or invalid input
// is named in one error, and then nothing is written.
func Write(w io.Writer, opts Options) error {
	if err := opts.check(); err != nil {
		return err
	}
	mj, err := manifestJSON(opts)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	color, err := ColorIcon(opts.AccentColor)
	if err != nil {
		return err
	}
	outline, err := OutlineIcon()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	// A fixed time, so that one input gives the same bytes.
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []struct {
		name string
		data []byte
	}{{"manifest.json", mj}, {"color.png", color}, {"outline.png", outline}} {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: when})
		if err != nil {
			return fmt.Errorf("manifest: %w", err)
		}
		if _, err := fw.Write(f.data); err != nil {
			return fmt.Errorf("manifest: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	_, err = w.Write(b.Bytes())
	return err
}
