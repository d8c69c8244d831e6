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
	"syscall"
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
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("teamsbot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: teamsbot [serve|config|version|manifest -o FILE ...]")
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

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by loadConfig
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
