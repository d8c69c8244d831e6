// Command teamsbot is the Microsoft Teams side of the agent platform: a Bot
// Framework endpoint that runs the agent for the person who wrote, answers
// with Adaptive Cards that name each MCP App view, and the web page that
// signs the person in and shows the view in two nested sandboxed frames.
//
// Usage:
//
//	teamsbot [serve]    run the service (the default)
//	teamsbot config     print the effective settings, secrets redacted
//	teamsbot manifest   write the Teams app package for the bot
//	teamsbot keys       make, rotate and retire the key files every replica must share
//	teamsbot migrate    copy the bbolt file into TICKETIQ_DATABASE_URL's database
//	teamsbot version    print the version
//	teamsbot help [command]
//
// Every setting comes from TICKETIQ_* environment variables; `teamsbot
// help config` and docs/configuration.md list them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/suggest"
	"teamsbot/internal/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, environFrom(os.Environ()), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "teamsbot:", err)
		os.Exit(1)
	}
}

// run is the whole program; main only hands it the process's surroundings so
// tests can start the real service in-process.
func run(ctx context.Context, args []string, env environment, stdout, stderr io.Writer) (err error) {
	// Whatever went wrong, a URL's user info an operator typed anywhere is
	// not printed: a mistake may quote the value whole.
	defer func() { err = redactedError(err) }()
	rest := args[1:]
	name := "serve"
	switch {
	case len(rest) > 0 && isHelp(rest[0]):
		return writeUsage(stdout)
	case len(rest) > 0 && !strings.HasPrefix(rest[0], "-"):
		name, rest = rest[0], rest[1:]
	}
	cmd, err := commandNamed(name)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("teamsbot "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var flags any
	if cmd.flags != nil {
		flags = cmd.flags(fs, env)
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return writeHelp(stdout, cmd)
		}
		return flagError(cmd, fs, err)
	}
	if fs.NArg() > 0 && !cmd.takesArgs {
		return fmt.Errorf("`teamsbot %s` takes no arguments, and got %q. Run `teamsbot help %s`", cmd.name, fs.Args(), cmd.name)
	}
	return cmd.run(ctx, invocation{env: env, stdout: stdout, stderr: stderr, args: fs.Args(), flags: flags})
}

// isHelp reports whether an argument asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}

// invocation is what a command runs with.
type invocation struct {
	env            environment
	stdout, stderr io.Writer
	args           []string
	// flags is what the command's flags function returned, parsed.
	flags any
}

// command is one subcommand of teamsbot.
type command struct {
	name string
	// usage is the command line, summary one line for the list of
	// commands, help the rest of its page, with an example.
	usage, summary, help string
	takesArgs            bool
	// flags, when set, defines the command's flags on fs and returns
	// where they are parsed to.
	flags func(fs *flag.FlagSet, env environment) any
	run   func(ctx context.Context, in invocation) error
}

// commands are teamsbot's subcommands, in the order help lists them.
func commands() []command {
	return []command{
		{name: "serve", usage: "teamsbot [serve]", summary: "run the service (the default)",
			help: `Runs the service: the bot's endpoint (/api/messages), the view page, the sign-in,
the admin console, /healthz and /readyz. It listens at once; MCP servers start
after, and /readyz answers 503 until they are up. In local mode (no
TICKETIQ_BOT_APP_ID, a loopback TICKETIQ_ADDR) it prints where the playground is.

Examples:
  ./run.sh                                   # local mode on http://127.0.0.1:3978
  TICKETIQ_ADDR=127.0.0.1:3978 teamsbot serve
  TICKETIQ_CONFIG=agents.yaml teamsbot       # agents and MCP servers from a file`,
			run: func(ctx context.Context, in invocation) error {
				cfg, err := loadConfig(in.env)
				if err != nil {
					return err
				}
				return serve(ctx, cfg, in.env, in.stdout, newLogger(in.stderr, cfg.LogLevel))
			}},
		{name: "config", usage: "teamsbot config", summary: "print the effective settings, secrets redacted",
			help: `Prints every setting with its value and where it came from (set, default, the
cloud's), secrets as [redacted]. It refuses exactly what serve refuses, with the
same words: every mistake at once, including a TICKETIQ_ variable that is no
setting (a misspelt one would otherwise be ignored) and every mistake of the
TICKETIQ_CONFIG file with its line and column.

Example:
  TICKETIQ_PUBLIC_BASE_URL=https://bot.example.com teamsbot config`,
			run: func(_ context.Context, in invocation) error {
				cfg, err := loadConfig(in.env)
				if err != nil {
					return err
				}
				return cfg.write(in.stdout, in.env)
			}},
		manifestCommand(),
		{name: "keys", usage: "teamsbot keys [rotate | retire ID...]", summary: "make, rotate and retire the key files every replica must share", takesArgs: true,
			help: `Without arguments, makes the frame-token keys and the cookie keys in
TICKETIQ_DATA when they are missing, keeps those that exist, and lists each
file's keys: its id, when it was made, and whether it signs (the newest) or only
verifies. Several replicas on PostgreSQL must all have the same copies.

  rotate       adds a new key to each file; it signs from the next start of the
               service, and the older keys still verify what they signed
  retire ID... removes those keys; what they signed is refused from the next
               start (the newest key of a file, which signs, cannot be retired)

Rotating: run ` + "`teamsbot keys rotate`" + `, give every replica the new files and
restart them; once what the old keys signed has expired (frame URLs: 10
minutes; sessions: their lifetime), run ` + "`teamsbot keys retire`" + ` with the old
ids, give out the files again and restart.

Examples:
  TICKETIQ_DATA=/var/lib/teamsbot teamsbot keys
  TICKETIQ_DATA=/var/lib/teamsbot teamsbot keys rotate
  TICKETIQ_DATA=/var/lib/teamsbot teamsbot keys retire 3f9a1c2e 0b7d44e1`,
			run: func(_ context.Context, in invocation) error {
				cfg, err := loadConfig(in.env)
				if err != nil {
					return err
				}
				if len(in.args) == 0 {
					return makeKeys(cfg, in.stdout)
				}
				switch in.args[0] {
				case "rotate":
					if len(in.args) > 1 {
						return fmt.Errorf("`teamsbot keys rotate` takes no arguments, and got %q. Run `teamsbot help keys`", in.args[1:])
					}
					return rotateKeys(cfg, time.Now(), in.stdout)
				case "retire":
					return retireKeys(cfg, in.args[1:], in.stdout)
				}
				if meant, ok := suggest.Closest(in.args[0], []string{"rotate", "retire"}); ok {
					return fmt.Errorf("`teamsbot keys` has no `%s`; did you mean `%s`? Run `teamsbot help keys`", in.args[0], meant)
				}
				return fmt.Errorf("`teamsbot keys` has no `%s`: it takes rotate or retire. Run `teamsbot help keys`", in.args[0])
			}},
		{name: "migrate", usage: "teamsbot migrate", summary: "copy the bbolt file into TICKETIQ_DATABASE_URL's database",
			help: `Copies the bbolt file in TICKETIQ_DATA into the PostgreSQL database of
TICKETIQ_DATABASE_URL and prints what it copied. Stop the service first; running
it again copies nothing twice.

Example:
  TICKETIQ_DATA=./data TICKETIQ_DATABASE_URL='postgres://teamsbot@db.example.com/teamsbot?sslmode=require' teamsbot migrate`,
			run: func(ctx context.Context, in invocation) error {
				cfg, err := loadConfig(in.env)
				if err != nil {
					return err
				}
				return migrate(ctx, cfg, in.stdout, newLogger(in.stderr, cfg.LogLevel))
			}},
		{name: "version", usage: "teamsbot version", summary: "print the version",
			help: "Example:\n  teamsbot version",
			run: func(_ context.Context, in invocation) error {
				_, err := fmt.Fprintln(in.stdout, "teamsbot", version)
				return err
			}},
		{name: "help", usage: "teamsbot help [command]", summary: "show this, or a command's page", takesArgs: true,
			help: "Examples:\n  teamsbot help\n  teamsbot help manifest\n  teamsbot manifest --help",
			run: func(_ context.Context, in invocation) error {
				switch len(in.args) {
				case 0:
					return writeUsage(in.stdout)
				case 1:
					cmd, err := commandNamed(in.args[0])
					if err != nil {
						return err
					}
					return writeHelp(in.stdout, cmd)
				}
				return fmt.Errorf("`teamsbot help` takes one command, and got %q", in.args)
			}},
	}
}

// commandNamed finds a command, or says which was meant.
func commandNamed(name string) (command, error) {
	cmds := commands()
	names := make([]string, len(cmds))
	for i, c := range cmds {
		if c.name == name {
			return c, nil
		}
		names[i] = c.name
	}
	shown := netaddr.RedactUserinfo(name)
	if meant, ok := suggest.Closest(name, names); ok {
		return command{}, fmt.Errorf("unknown command `%s`; did you mean `%s`? Run `teamsbot help`", shown, meant)
	}
	return command{}, fmt.Errorf("unknown command `%s`. Run `teamsbot help` for the list of commands", shown)
}

// writeUsage prints the list of commands.
func writeUsage(w io.Writer) error {
	var b strings.Builder
	b.WriteString("teamsbot is the Microsoft Teams side of the agent platform.\n\nUsage:\n")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.usage))
	}
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.usage, c.summary)
	}
	b.WriteString(`
Every setting is a TICKETIQ_* environment variable: ` + "`teamsbot help config`" + ` lists them.
Each command takes -h or --help.

Examples:
  ./run.sh                   # build, then run in local mode: open http://127.0.0.1:3978/playground
  teamsbot config            # check the settings and print them
  teamsbot help manifest     # how to make the Teams app package
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHelp prints a command's page: its usage, its flags, what it does,
// an example; config's page also lists every setting.
func writeHelp(w io.Writer, cmd command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n%s.\n", cmd.usage, strings.ToUpper(cmd.summary[:1])+cmd.summary[1:])
	if cmd.flags != nil {
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.flags(fs, environment{})
		b.WriteString("\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			arg, usage := flag.UnquoteUsage(f)
			line := "  --" + f.Name
			if len(f.Name) == 1 {
				line = "  -" + f.Name
			}
			if arg != "" {
				line += " " + arg
			}
			fmt.Fprintf(&b, "%-30s %s", line, usage)
			if f.DefValue != "" && f.DefValue != "false" {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			}
			b.WriteString("\n")
		})
	}
	fmt.Fprintf(&b, "\n%s\n", cmd.help)
	if cmd.name == "config" {
		b.WriteString("\nSettings (the table in docs/configuration.md says more):\n")
		for _, s := range settings() {
			def := s.def
			switch {
			case def != "":
				def = "default " + def
			case s.unset != "":
				def = "unset: " + strings.Trim(s.unset, "`")
			default:
				def = "unset: empty"
			}
			fmt.Fprintf(&b, "  %s (%s; %s)\n      %s\n", s.name, s.kind, def, s.help)
		}
		b.WriteString("\nOpenTelemetry's standard variables, for traces (off unless an endpoint is set):\n")
		for _, v := range telemetry.Variables() {
			def := "unset: empty"
			switch {
			case v.Default != "":
				def = "default " + v.Default
			case v.Unset != "":
				def = "unset: " + strings.TrimPrefix(v.Unset, "empty: ")
			}
			fmt.Fprintf(&b, "  %s (%s)\n      %s\n", v.Name(), def, v.Help)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// flagError says what was wrong with a command's flags, and the flag
// meant when one is near.
func flagError(cmd command, fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		slices.Sort(names)
		name = strings.TrimLeft(name, "-")
		if meant, ok := suggest.Closest(name, names); ok {
			return fmt.Errorf("`teamsbot %s` has no flag --%s; did you mean --%s? Run `teamsbot help %s`", cmd.name, name, meant, cmd.name)
		}
		if len(names) == 0 {
			return fmt.Errorf("`teamsbot %s` takes no flags, and got --%s. Run `teamsbot help %s`", cmd.name, name, cmd.name)
		}
		return fmt.Errorf("`teamsbot %s` has no flag --%s. Run `teamsbot help %s`", cmd.name, name, cmd.name)
	}
	return fmt.Errorf("teamsbot %s: %s. Run `teamsbot help %s`", cmd.name, msg, cmd.name)
}

// newLogger writes JSON lines, with trace_id and span_id on those logged
// with the context of a span. Every string and error attribute has the
// user info of any URL in it hidden: an error from a server's transport
// or a configuration value may quote one.
func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by loadConfig
	// A line logged in a turn or a request names its trace and span.
	return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l, ReplaceAttr: redactAttr})))
}

func redactAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); strings.Contains(s, "@") {
			a.Value = slog.StringValue(netaddr.RedactUserinfo(s))
		}
	case slog.KindAny:
		if e, ok := a.Value.Any().(error); ok {
			if s := e.Error(); strings.Contains(s, "@") {
				a.Value = slog.StringValue(netaddr.RedactUserinfo(s))
			}
		}
	}
	return a
}

// redactedError is err with the user info of any URL in its text hidden;
// it still wraps err.
func redactedError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if shown := netaddr.RedactUserinfo(msg); shown != msg {
		return &shownError{msg: shown, err: err}
	}
	return err
}

// shownError is an error whose text was made fit to print.
type shownError struct {
	msg string
	err error
}

func (e *shownError) Error() string { return e.msg }
func (e *shownError) Unwrap() error { return e.err }
