// Command teamsbot is the Microsoft Teams side of the agent platform: a Bot
// Framework endpoint that runs the agent for the person who wrote, answers
// with Adaptive Cards that name each MCP App view, and the web page that
// signs the person in and shows the view in two nested sandboxed frames.
//
// Usage:
//
//	teamsbot [serve]   run the service (the default)
//	teamsbot config    print the effective configuration, secrets redacted
//	teamsbot version   print the version
//	teamsbot keys      make the key files every replica must share
//	teamsbot migrate   copy the bbolt file into TICKETIQ_DATABASE_URL's database
//
// Every setting comes from TICKETIQ_* environment variables; README lists them.
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
	"strings"
	"syscall"

	"teamsbot/internal/netaddr"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "teamsbot:", err)
		os.Exit(1)
	}
}

// run is the whole program; main only hands it the process's surroundings so
// tests can start the real service in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	// Whatever went wrong, a URL's user info an operator typed anywhere is
	// not printed: a mistake may quote the value whole.
	defer func() { err = redactedError(err) }()
	fs := flag.NewFlagSet("teamsbot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: teamsbot [serve|config|version|keys|migrate|manifest -o FILE ...]")
		fmt.Fprintln(stderr, "Settings come from TICKETIQ_* environment variables (see README).")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cmd := "serve"
	if fs.NArg() > 0 {
		cmd = fs.Arg(0)
	}
	if cmd == "manifest" {
		return writeManifest(fs.Args()[1:], getenv, stdout, stderr)
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments after %q: %q", cmd, fs.Args()[1:])
	}

	switch cmd {
	case "version":
		_, err := fmt.Fprintln(stdout, "teamsbot", version)
		return err
	case "config":
		cfg, err := loadConfig(getenv)
		if err != nil {
			return err
		}
		return cfg.write(stdout, getenv)
	case "keys":
		cfg, err := loadConfig(getenv)
		if err != nil {
			return err
		}
		return makeKeys(cfg, stdout)
	case "migrate":
		cfg, err := loadConfig(getenv)
		if err != nil {
			return err
		}
		return migrate(ctx, cfg, stdout, newLogger(stderr, cfg.LogLevel))
	case "serve":
		cfg, err := loadConfig(getenv)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, getenv, newLogger(stderr, cfg.LogLevel))
	default:
		fs.Usage()
		return errors.New("unknown command " + fmt.Sprintf("%q", cmd))
	}
}

// newLogger writes JSON lines. Every string and error attribute has the
// user info of any URL in it hidden: an error from a server's transport
// or a configuration value may quote one.
func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by loadConfig
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l, ReplaceAttr: redactAttr}))
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
